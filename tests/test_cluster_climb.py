"""The elastic policies' fast climbs answer exactly as their gains do, step by step.

``pollux`` and ``optimus`` tell the greedy where a job's lone climb ends without asking
the gain of every GPU (:func:`~elasim.policies.cluster._greedy.rising_run`).  That is
only a speed-up if every decision stays bit for bit the same, so these tests compare
each policy with its fast climb against the same policy asking every step, over speed
tables built to sit on the edges the shortcut must respect: flat steps, steps a
rounding error up or down, zero and NaN goodputs, speedups near ``_TINY``, restart
factors of 0, and held counts anywhere in the climb.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasim.policies.cluster import ClusterJobView, ClusterObservation, _greedy, optimus, pollux
from elasim.policies.cluster._greedy import FALLS, OPEN, UNSURE, rising_run

GPN = 4
NODES = 96  # room for every job's climb: the greedy's lone-climb path
#: clusters where the climbs fit, may fit (the wishes do though the caps do not), or not
#: (the heap decides after a climb that gave up)
CLUSTERS = (3, 8, NODES)

#: how a table goes from one count to the next: times one of these (None: NaN); mostly
#: clearly up, as real speedups go, so that runs reach past the held count
RISES = (1.05, 1.3, 1.9) * 4
EDGES = (1.0, 1.0 + 2.0**-52, 1.0 - 2.0**-53, 1.0 + 1e-7, 1.0 + 1e-6, 0.7, 0.0, None)
STEPS = RISES + EDGES


class TableSpeed:
    """A speed model read from a table by GPUs (the last value past its end)."""

    def __init__(self, values: list[float]) -> None:
        self.values = values

    def goodput(self, nodes: int, gpus: int, batch_size: int | None = None) -> float:
        return self.values[min(gpus, len(self.values) - 1)]

    def best_batch(self, nodes: int, gpus: int) -> int:
        return 64


@st.composite
def tables(draw: st.DrawFn) -> list[float]:
    """Goodputs by GPUs from 0: a start, then steps of :data:`STEPS` or fresh values."""
    value = draw(st.sampled_from([1e-12, 3e-10, 1e-3, 1.0, 250.0, 1e35]))
    out = [0.0, value]
    for _ in range(draw(st.integers(1, 30))):
        step = draw(st.sampled_from(STEPS))
        if step is None:
            value = math.nan
        elif value != value or draw(st.integers(0, 19)) == 0:
            value = draw(st.sampled_from([0.0, 1e-11, 1.0, 2.0, 40.0]))
        else:
            value *= step
        out.append(value)
    return out


@st.composite
def observations(draw: st.DrawFn) -> ClusterObservation:
    """A few jobs with drawn speed tables, held counts, restarts and ages, on a cluster
    of 12 to 384 GPUs (a held placement past its nodes is placed afresh)."""
    now_s = draw(st.sampled_from([60.0, 600.0, 36_000.0]))
    jobs = []
    for i in range(draw(st.integers(1, 5))):
        held = draw(st.integers(0, 12))
        cells = tuple((16 * i + k, min(GPN, held - GPN * k)) for k in range(-(-held // GPN)))
        jobs.append(
            ClusterJobView(
                name=f"j{i}",
                application="app",
                arrival_s=now_s - draw(st.sampled_from([0.0, 20.0, 300.0, 30_000.0])),
                requested_gpus=1,
                requested_batch_size=draw(st.sampled_from([64, 128])),
                max_gpus=draw(st.integers(1, 40)),
                placement=cells,
                batch_size=64,
                attained_gpu_s=float(draw(st.integers(0, 5))),
                running_s=0.0,
                progress=0.5,
                remaining=draw(st.sampled_from([0.0, 1e-250, 1.0, 3e4, 1e250])),
                epoch=0,
                restarts=draw(st.integers(0, 12)),
                peak_gpus=max(held, draw(st.integers(0, 16))),
                speed=TableSpeed(draw(tables())),
            )
        )
    return ClusterObservation(now_s, draw(st.sampled_from(CLUSTERS)), GPN, tuple(jobs))


def _step_by_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn both policies' fast climbs off: every step asks the gain."""
    monkeypatch.setattr(pollux, "_CLIMB_P", (1.0, -1.0))  # no p lies within
    monkeypatch.setattr(optimus, "_REMAINING", (math.inf, -math.inf))


def _same_with_and_without(fast, slow, obs_list: list[ClusterObservation]) -> None:
    """Decision after decision (the runs' memo kept), ``fast`` as ``slow`` step by step."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        for obs in obs_list:
            answer = fast.decide(obs)
            _step_by_step(monkeypatch)
            expected = slow.decide(obs)
            monkeypatch.undo()
            assert answer == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(observations(), min_size=1, max_size=3),
    st.sampled_from([-1.0, -1.0, -0.5, -3.0, -8.0, -1e-3]),
)
def test_pollux_climbs_as_its_gains_do(obs_list: list[ClusterObservation], p: float) -> None:
    config = pollux.PolluxPolicy.Config(p=p)
    _same_with_and_without(pollux.PolluxPolicy(config), pollux.PolluxPolicy(config), obs_list)


@settings(max_examples=300, deadline=None)
@given(st.lists(observations(), min_size=1, max_size=3))
def test_optimus_climbs_as_its_gains_do(obs_list: list[ClusterObservation]) -> None:
    _same_with_and_without(optimus.OptimusPolicy(), optimus.OptimusPolicy(), obs_list)


def test_the_fast_climb_is_taken_on_a_cluster_with_room() -> None:
    """The comparison above means something only if the fast path runs: count its runs."""
    speed = TableSpeed([0.0, 1.0, 1.9, 2.7, 3.4, 3.4, 3.0])
    job = ClusterJobView("a", "app", 0.0, 1, 64, 8, ((0, 2),), 64, 0.0, 0.0, 0.5, 10.0, 0, 0, 8)
    obs = ClusterObservation(600.0, NODES, GPN, (dataclasses.replace(job, speed=speed),))
    policy = pollux.PolluxPolicy()
    calls = []
    real = _greedy.rising_run

    def counted(*args, **kwargs):
        calls.append(args[2:4])
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(pollux, "rising_run", counted)
        decision = policy.decide(obs)
    assert calls, "the fast climb never ran"
    # it climbs to 4 GPUs, where the speedup stops rising (the held count is 2)
    assert decision.allocation_map()["a"] and sum(g for _, g in decision.allocation_map()["a"]) == 4


def test_rising_run_stops_where_a_step_is_not_clearly_up() -> None:
    values = {1: 1.0, 2: 2.0, 3: 3.0, 4: 3.0 * (1 + 2**-52), 5: 1.0}
    runs: dict[int, tuple[int, int]] = {}

    def value(k: int) -> float:
        raise AssertionError("every value is in the table")

    assert rising_run(values, runs, 1, 5, value) == (3, False)  # 3 -> 4 rises by an ulp only
    assert runs[1] == (3, UNSURE)
    assert rising_run(values, runs, 4, 5, value) == (4, True)  # 4 -> 5 falls
    assert runs[4] == (4, FALLS)
    assert rising_run(values, runs, 1, 2, value) == (2, False)  # as far as asked: no stop
    fresh: dict[int, tuple[int, int]] = {}
    assert rising_run(values, fresh, 1, 2, value) == (2, False)
    assert fresh[1] == (2, OPEN)
    assert rising_run(values, fresh, 1, 5, value) == (3, False)  # goes on from the memo
    assert _greedy.RISE > 1.0
