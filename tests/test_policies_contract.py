"""The contract every registered policy must keep, checked on generated observations.

Parametrized over ``policy_names()``, so a newly registered policy is covered without
touching this file.  The contract:

* ``decide`` returns a :class:`Decision` that ``clamp`` leaves unchanged: never more
  spot nodes than available, never more than ``max_nodes`` in total, and either
  nothing or at least ``min_nodes`` (the policy, not ``clamp``, decides what happens
  when capacity is short);
* it is deterministic: two fresh instances fed the same observations answer the same;
* it leaves the observation untouched;
* its ``Config`` constructs with defaults, is a frozen dataclass documented field by
  field, and rejects wrong types, negative numbers, NaN and infinities.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasim.policies import (
    Decision,
    EventKind,
    Observation,
    ObservedEvent,
    clamp,
    describe_policies,
    get_policy_class,
    make_policy,
    policy_names,
)

POLICIES = policy_names()
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------- strategies


@st.composite
def job_tables(draw: st.DrawFn, max_nodes: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Monotone-ish throughput (may dip or stay flat) and decreasing efficiency in (0, 1]."""
    per_node = draw(st.floats(0.0, 1e4))
    steps = draw(st.lists(st.floats(-0.3, 1.0), min_size=max_nodes, max_size=max_nodes))
    throughput = [0.0]
    for step in steps:
        throughput.append(max(0.0, throughput[-1] + per_node * step))
    drops = draw(st.lists(st.floats(0.0, 0.2), min_size=max_nodes, max_size=max_nodes))
    efficiency = [1.0]
    for drop in drops:
        efficiency.append(max(efficiency[-1] * (1.0 - drop), 1e-3))
    return tuple(throughput), tuple(efficiency)


def events(now_s: float) -> st.SearchStrategy[ObservedEvent]:
    """Random recent events, at or before ``now_s``."""
    return st.builds(
        ObservedEvent,
        time_s=st.floats(0.0, now_s) if now_s > 0 else st.just(0.0),
        kind=st.sampled_from(list(EventKind)),
        nodes_before=st.integers(0, 64),
        nodes_after=st.integers(0, 64),
        deadline_s=st.none() | st.floats(now_s, now_s + 300.0),
    )


@st.composite
def observations(draw: st.DrawFn) -> Observation:
    """Any valid observation: bounds 1..64, optional deadline, random recent events."""
    max_nodes = draw(st.integers(1, 64))
    min_nodes = draw(st.integers(1, max_nodes))
    throughput, efficiency = draw(job_tables(max_nodes))
    spot_held = draw(st.integers(0, max_nodes))
    now_s = draw(st.floats(0.0, 1e7))
    progress = draw(st.floats(0.0, 1.0))
    total_samples = draw(st.floats(1.0, 1e12))
    return Observation(
        now_s=now_s,
        spot_available=draw(st.integers(0, 80)),
        spot_held=spot_held,
        on_demand_held=draw(st.integers(0, max_nodes - spot_held)),
        spot_price_per_hour=draw(st.floats(0.0, 50.0)),
        # Infinite: how the simulator says that on-demand nodes are disabled.
        on_demand_price_per_hour=draw(st.floats(0.01, 50.0) | st.just(math.inf)),
        progress=progress,
        remaining_samples=total_samples * (1.0 - progress),
        throughput_samples_per_s=throughput,
        statistical_efficiency=efficiency,
        rescale_cost_s=draw(st.floats(0.0, 3600.0)),
        deadline_s=draw(st.none() | st.floats(0.0, 2e7)),
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        recent_events=tuple(draw(st.lists(events(now_s), max_size=4))),
    )


@dataclass(frozen=True)
class Step:
    dt_s: float
    spot_available: int
    spot_price_per_hour: float
    events: tuple[ObservedEvent, ...]


@dataclass(frozen=True)
class Scenario:
    """One job on a random capacity series; the loop feeds decisions back as holdings."""

    min_nodes: int
    max_nodes: int
    throughput: tuple[float, ...]
    efficiency: tuple[float, ...]
    on_demand_price_per_hour: float
    rescale_cost_s: float
    total_samples: float
    deadline_s: float | None
    steps: tuple[Step, ...]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    max_nodes = draw(st.integers(1, 32))
    throughput, efficiency = draw(job_tables(max_nodes))
    step = st.builds(
        Step,
        dt_s=st.floats(1.0, 5000.0),
        spot_available=st.integers(0, max_nodes + 4),
        spot_price_per_hour=st.floats(0.0, 10.0),
        events=st.lists(events(0.0), max_size=2).map(tuple),
    )
    return Scenario(
        min_nodes=draw(st.integers(1, max_nodes)),
        max_nodes=max_nodes,
        throughput=throughput,
        efficiency=efficiency,
        on_demand_price_per_hour=draw(st.floats(0.01, 10.0) | st.just(math.inf)),
        rescale_cost_s=draw(st.floats(0.0, 600.0)),
        total_samples=draw(st.floats(1e3, 1e9)),
        deadline_s=draw(st.none() | st.floats(1.0, 1e5)),
        steps=tuple(draw(st.lists(step, min_size=1, max_size=12))),
    )


def closed_loop(policy: object, scenario: Scenario) -> list[tuple[Observation, Decision]]:
    """Drive ``policy`` like the drivers do: observe, decide, clamp, apply, advance time.

    Holdings follow the previous decision, cut by capacity (a preemption); progress
    grows by the goodput of what was held.
    """
    spot_held, on_demand_held, done, now_s = 0, 0, 0.0, 0.0
    log = []
    for step in scenario.steps:
        nodes = spot_held + on_demand_held
        if scenario.min_nodes <= nodes <= scenario.max_nodes:
            goodput = scenario.throughput[nodes] * scenario.efficiency[nodes]
            done = min(scenario.total_samples, done + goodput * step.dt_s)
        now_s += step.dt_s
        spot_held = min(spot_held, step.spot_available)
        obs = Observation(
            now_s=now_s,
            spot_available=step.spot_available,
            spot_held=spot_held,
            on_demand_held=on_demand_held,
            spot_price_per_hour=step.spot_price_per_hour,
            on_demand_price_per_hour=scenario.on_demand_price_per_hour,
            progress=done / scenario.total_samples,
            remaining_samples=scenario.total_samples - done,
            throughput_samples_per_s=scenario.throughput,
            statistical_efficiency=scenario.efficiency,
            rescale_cost_s=scenario.rescale_cost_s,
            deadline_s=scenario.deadline_s,
            min_nodes=scenario.min_nodes,
            max_nodes=scenario.max_nodes,
            recent_events=step.events,
        )
        decision = policy.decide(obs)  # type: ignore[attr-defined]
        log.append((obs, decision))
        applied = clamp(decision, obs)
        spot_held, on_demand_held = applied.spot_nodes, applied.on_demand_nodes
    return log


def assert_legal(decision: object, obs: Observation) -> None:
    assert isinstance(decision, Decision)
    assert decision.spot_nodes <= obs.spot_available, "asked for more spot than available"
    assert decision.total_nodes <= obs.max_nodes
    assert decision.total_nodes == 0 or decision.total_nodes >= obs.min_nodes
    assert clamp(decision, obs) == decision
    if decision.wake_after_s is not None:
        assert math.isfinite(decision.wake_after_s) and decision.wake_after_s > 0


# ---------------------------------------------------------------------------- tests


def test_builtins_are_registered() -> None:
    assert {"fixed", "greedy", "hysteresis", "price", "deadline", "goodput"} <= set(POLICIES)


@pytest.mark.parametrize("name", POLICIES)
@SETTINGS
@given(obs=observations())
def test_decision_is_legal_and_observation_untouched(name: str, obs: Observation) -> None:
    policy = make_policy(name)
    before = copy.deepcopy(obs)
    decision = policy.decide(obs)
    assert_legal(decision, obs)
    assert obs == before


@pytest.mark.parametrize("name", POLICIES)
@settings(SETTINGS, max_examples=50)
@given(sequence=st.lists(observations(), min_size=1, max_size=4))
def test_deterministic_on_arbitrary_sequences(name: str, sequence: list[Observation]) -> None:
    # Sorted in time, as a driver would deliver them.
    sequence = sorted(sequence, key=lambda o: o.now_s)
    first, second = make_policy(name), make_policy(name)
    answers = [first.decide(obs) for obs in sequence]
    assert answers == [second.decide(obs) for obs in sequence]
    for obs, decision in zip(sequence, answers, strict=True):
        assert_legal(decision, obs)


@pytest.mark.parametrize("name", POLICIES)
@SETTINGS
@given(scenario=scenarios())
def test_closed_loop_is_legal_and_deterministic(name: str, scenario: Scenario) -> None:
    log_a = closed_loop(make_policy(name), scenario)
    log_b = closed_loop(make_policy(name), scenario)
    assert [d for _, d in log_a] == [d for _, d in log_b]
    for obs, decision in log_a:
        assert_legal(decision, obs)


@pytest.mark.parametrize("name", POLICIES)
def test_default_config_constructs(name: str) -> None:
    cls = get_policy_class(name)
    assert cls.name == name
    assert dataclasses.is_dataclass(cls.Config)
    assert cls.Config.__dataclass_params__.frozen  # type: ignore[attr-defined]
    policy = make_policy(name)
    assert isinstance(policy, cls)
    assert policy.config == cls.Config()  # type: ignore[attr-defined]
    for f in dataclasses.fields(cls.Config):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(policy.config, f.name, None)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", POLICIES)
def test_policy_and_options_are_documented(name: str) -> None:
    (info,) = [i for i in describe_policies() if i.name == name]
    assert info.summary
    cls = get_policy_class(name)
    assert [o.name for o in info.options] == [f.name for f in dataclasses.fields(cls.Config)]
    for option in info.options:
        assert option.doc, f"{name}.Config.{option.name} is missing from its Attributes: section"


def _bad_values(annotation: object) -> list[object]:
    """Values that no sensible field of this type accepts."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        (inner,) = [a for a in args if a is not type(None)]
        return [v for v in _bad_values(inner) if v is not None]
    if origin is typing.Literal:
        return ["definitely-not-a-choice", 3, None]
    if annotation is bool:
        return [1, "true", None]
    if annotation is int:
        return [-1, 1.5, "3", True, None]
    if annotation is float:
        return [-1.0, math.nan, math.inf, -math.inf, "0.5", True, None]
    if annotation is str:
        return [3, None]
    raise AssertionError(f"no bad values known for {annotation!r}; extend this test")


def _bad_field_cases() -> list[tuple[str, str, object]]:
    cases = []
    for name in POLICIES:
        config_cls = get_policy_class(name).Config
        hints = typing.get_type_hints(config_cls)
        for f in dataclasses.fields(config_cls):
            cases += [(name, f.name, bad) for bad in _bad_values(hints[f.name])]
    return cases


@pytest.mark.parametrize(("name", "field", "bad"), _bad_field_cases())
def test_config_rejects_bad_values(name: str, field: str, bad: object) -> None:
    config_cls = get_policy_class(name).Config
    with pytest.raises(ValueError) as excinfo:
        config_cls(**{field: bad})
    message = str(excinfo.value)
    assert field in message
    assert "\n" not in message
