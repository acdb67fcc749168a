"""``quick_init``: the frozen dataclasses the simulator makes by the thousand build as before."""

from __future__ import annotations

import dataclasses
import inspect
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasim.policies import base
from elasim.policies._quick import quick_init

QUICK = (
    base.PauseComponents,
    base.ObservedEvent,
    base.Observation,
    base.Decision,
    base.DecisionRecord,
    base.EventRecord,
)


def _twin(cls: type) -> type:
    """The same fields as a frozen dataclass with dataclasses' own ``__init__``."""
    spec = [
        (f.name, f.type, dataclasses.field(default=f.default))
        if f.default is not dataclasses.MISSING
        else (f.name, f.type)
        for f in dataclasses.fields(cls)
    ]
    return dataclasses.make_dataclass(cls.__name__, spec, frozen=True)


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_same_signature_and_fields_as_dataclasses_own(cls: type) -> None:
    assert "<string>" in cls.__init__.__code__.co_filename  # replaced, not the original
    assert "_d = self.__dict__" in inspect.getsource(quick_init)
    mine = inspect.signature(cls.__init__).parameters
    theirs = inspect.signature(_twin(cls).__init__).parameters
    assert [(p.name, p.default, p.kind) for p in mine.values()] == [
        (p.name, p.default, p.kind) for p in theirs.values()
    ]


def test_objects_are_the_same_and_stay_frozen() -> None:
    pause = base.PauseComponents(0.5, state_s=1.5)
    event = base.EventRecord(3.0, base.EventKind.CHECKPOINT, 2, 2, pause)
    assert event == base.EventRecord(
        time_s=3.0, kind=base.EventKind.CHECKPOINT, nodes_before=2, nodes_after=2, pause=pause
    )
    assert list(vars(event)) == [f.name for f in dataclasses.fields(event)]
    assert event.lost_steps == 0 and event.pause.pause_s == 2.0
    assert hash(base.Decision(3)) == hash(base.Decision(3, 0, None))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.time_s = 4.0  # type: ignore[misc]
    # the checks still run, with their own words
    with pytest.raises(ValueError, match="detect_s must be a finite number >= 0, got -1"):
        base.PauseComponents(-1)
    with pytest.raises(ValueError, match="node counts must be >= 0"):
        base.Decision(-1)


_VALUES = st.sampled_from([0.0, -0.0, 1, 2.5, -1e-300, -3, math.inf, -math.inf, math.nan, 1e308])


@given(st.lists(_VALUES, min_size=5, max_size=5))
def test_pause_check_accepts_and_words_as_the_loop(values: list[float]) -> None:
    """The chained test in front of the loop changes nothing the loop decides."""
    expected = None
    for name, value in zip(base.PAUSE_COMPONENTS, values, strict=True):
        if not (math.isfinite(value) and value >= 0.0):
            expected = f"{name} must be a finite number >= 0, got {value!r}"
            break
    try:
        base.PauseComponents(*values)
    except ValueError as exc:
        assert str(exc) == expected
    else:
        assert expected is None


def test_refuses_what_it_cannot_build_the_same() -> None:
    @dataclasses.dataclass(frozen=True)
    class WithFactory:
        items: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True)
    class WithInitVar:
        a: int
        b: dataclasses.InitVar[int] = 0

    @dataclasses.dataclass
    class NotFrozen:
        a: int

    for cls in (WithFactory, WithInitVar, NotFrozen):
        with pytest.raises(TypeError, match="quick_init takes"):
            quick_init(cls)


_NUMBER = st.sampled_from([0, 1, 2, 3, -1, 0.5, -0.0, 1.5, math.inf, -math.inf, math.nan])
_VALID = {
    "spot_available": 2,
    "spot_held": 1,
    "on_demand_held": 0,
    "spot_price_per_hour": 0.9,
    "on_demand_price_per_hour": math.inf,
    "progress": 0.5,
    "rescale_cost_s": 30.0,
    "min_nodes": 1,
    "max_nodes": 2,
    "resume_cost_s": None,
    "spent_usd": 3.0,
    "checkpoint_interval_s": 600.0,
    "checkpoint_write_s": 1.5,
}


@given(
    st.lists(st.tuples(st.sampled_from(sorted(_VALID)), st.none() | _NUMBER), max_size=2),
    st.integers(1, 4),
)
def test_observation_check_accepts_and_words_as_one_by_one(
    changes: list[tuple[str, float | None]], width: int
) -> None:
    """The chained test in front of the rules accepts nothing that one of them refuses."""
    values = dict(_VALID, now_s=0.0, remaining_samples=1.0, deadline_s=None)
    values.update((k, v) for k, v in changes if v is not None or k == "resume_cost_s")
    values["throughput_samples_per_s"] = values["statistical_efficiency"] = (1.0,) * width
    twin = object.__new__(base.Observation)
    vars(twin).update(values)  # the same fields, no check run yet
    try:
        twin._check_one_by_one()
        expected = None
    except ValueError as exc:
        expected = str(exc)
    try:
        base.Observation(**values)
    except ValueError as exc:
        assert str(exc) == expected
    else:
        assert expected is None
