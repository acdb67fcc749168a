"""The executor's controller on a fake clock with a fake worker group (no torch).

The controller is the simulator's job loop (:mod:`elasim.jobmodel`) with a real (here
fake) clock and a worker group as actuator; these tests check what the executor adds
around it: trace time from real time, measured throughput, victims, graceful leaves,
``auto`` checkpoints and the books.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from elasim.executor.controller import Controller, ControllerConfig, FakeClock
from elasim.executor.fakes import FakeWorkerGroup
from elasim.jobmodel import CapacityReplay, JobSpec
from elasim.policies import Decision, EventKind, Observation, PolicyBase
from elasim.traces import CapacityTrace, TraceMetadata


def synthetic_trace(rows: list[tuple[float, int]], duration_s: float) -> CapacityTrace:
    """A tiny *synthetic* capacity trace (labelled as such) for hand-computed tests."""
    return CapacityTrace(
        name="synthetic",
        time_s=np.array([r[0] for r in rows], dtype=float),
        available=np.array([r[1] for r in rows], dtype=np.int64),
        price_per_hour=np.full(len(rows), 1.0),
        metadata=TraceMetadata(source="unit test", synthetic=True, on_demand_price_per_hour=3.0),
        duration_s=duration_s,
    )


def test_trace_replay_caps_capacity_and_gives_notices():
    trace = synthetic_trace([(0, 2), (100, 6), (200, 5), (300, 1)], duration_s=400)
    replay = CapacityReplay.from_trace(trace, notice_s=30, cap_nodes=4)
    assert replay.initial == (2, 1.0)
    items = replay.pop_due(1000)
    kinds = [("notice" if i.notice else "capacity", i.time_s, i.available) for i in items]
    # 6 -> 5 is above the cap: neither a change nor a notice; the drop to 1 is noticed
    assert kinds[:3] == [("capacity", 100, 4), ("notice", 270, 1), ("capacity", 300, 1)]
    # the trace repeats: at t=400 it is back to 2 (a rise, no notice)
    assert ("capacity", 400, 2) in kinds


@dataclass(frozen=True)
class _Script:
    pass


class ScriptedPolicy(PolicyBase):
    """Holds ``min(available, cap)`` spot nodes and records what it saw."""

    name: ClassVar[str] = "scripted-test"
    Config = _Script

    def __init__(self, cap: int = 8, wake_after_s: float | None = None) -> None:
        super().__init__(_Script())
        self.cap = cap
        self.wake = wake_after_s
        self.seen: list[Observation] = []

    def decide(self, obs: Observation) -> Decision:
        self.seen.append(obs)
        return Decision(min(obs.spot_available, self.cap), 0, self.wake)


def _spec(**fields) -> JobSpec:
    """A resolved spec of up to 4 nodes at the trace's start (checkpoints off unless given)."""
    fields.setdefault("checkpoint_interval_s", math.inf)
    return JobSpec(min_nodes=1, max_nodes=4, start_offset_s=0.0, **fields)


def _run(trace, policy, *, notice_s=0.0, max_steps=1000, step_s=1.0, **spec):
    clock = FakeClock()
    group = FakeWorkerGroup(clock, step_time_s=step_s, max_steps=max_steps)
    config = ControllerConfig(
        time_scale=10.0,
        max_steps=max_steps,
        max_nodes=4,
        graceful_margin_real_s=0.0,
        prior_step_real_s=1e-3,
        idle_poll_real_s=1e9,
    )
    job = _spec(notice_s=notice_s, **spec)
    return Controller(job, trace, policy, clock, config, group=group).run(), group


@pytest.mark.timeout(30)
def test_controller_decides_at_trace_changes_and_preempts_newest_without_notice():
    trace = synthetic_trace([(0, 2), (100, 4), (200, 1), (300, 3)], duration_s=400)
    policy = ScriptedPolicy()
    result, group = _run(trace, policy, max_steps=60, step_s=1.0)
    times = [d.time_s for d in result.decisions]
    assert times[:4] == [0.0, 100.0, 200.0, 300.0]  # exact: the fake clock snaps to rows
    assert [d.decision.spot_nodes for d in result.decisions[:4]] == [2, 4, 1, 3]
    assert ("preempt", 3, 0) in group.calls  # 4 held, 1 available: three SIGKILLs
    kinds = [e.kind for e in result.events]
    assert EventKind.PREEMPT in kinds and kinds[-1] is EventKind.DONE
    preempt = next(e for e in result.events if e.kind is EventKind.PREEMPT)
    assert preempt.time_s == 200.0 and preempt.lost_steps == 1
    # the policy saw the preemption, and trace-time throughput (samples / trace second)
    after = policy.seen[2]
    kinds_seen = [e.kind for e in after.recent_events]
    # the previous decision's scale-up, then what the preemption did
    assert kinds_seen == [EventKind.SCALE_UP, EventKind.PREEMPT, EventKind.SCALE_DOWN]
    # measured on 1 node: 64 samples per real second = 6.4 per trace second; other sizes
    # are extrapolated linearly (documented)
    assert after.throughput_samples_per_s[1] == pytest.approx(64 / 1.0 / 10.0)
    assert after.throughput_samples_per_s[4] == pytest.approx(4 * 6.4)
    assert result.completed


@pytest.mark.timeout(30)
def test_controller_leaves_gracefully_with_enough_notice():
    trace = synthetic_trace([(0, 4), (200, 1)], duration_s=10_000)
    result, group = _run(trace, ScriptedPolicy(), notice_s=60.0, max_steps=100, step_s=1.0)
    assert ("preempt_graceful", 3, 0) in group.calls
    assert not any(c[0] == "preempt" for c in group.calls)
    notice = next(e for e in result.events if e.kind is EventKind.PREEMPT_NOTICE)
    assert notice.time_s == 140.0 and (notice.nodes_before, notice.nodes_after) == (4, 1)
    preempt = next(e for e in result.events if e.kind is EventKind.PREEMPT)
    assert preempt.lost_steps == 0
    # a decision was taken at the notice, with the notice in recent_events
    at_notice = [d for d in result.decisions if d.time_s == 140.0]
    assert at_notice and at_notice[0].spot_held == 4


@pytest.mark.timeout(30)
def test_controller_honours_wake_after_and_checkpoint_interval():
    trace = synthetic_trace([(0, 2)], duration_s=100_000)
    result, group = _run(
        trace,
        ScriptedPolicy(wake_after_s=50.0),
        max_steps=30,
        step_s=1.0,
        checkpoint_interval_s=40.0,
    )
    times = [d.time_s for d in result.decisions]
    assert times[:4] == [0.0, 50.0, 100.0, 150.0]
    checkpoints = [e.time_s for e in result.events if e.kind is EventKind.CHECKPOINT]
    assert checkpoints[:3] == pytest.approx([40.0, 80.0, 120.0])
    # 30 steps at 1 real s each on 2 nodes = 300 trace seconds
    assert result.completion_time_s == pytest.approx(300.0)
    assert result.summary["spot_node_hours"] == pytest.approx(2 * 300.0 / 3600.0)
    assert result.summary["spot_cost_usd"] == pytest.approx(2 * 300.0 / 3600.0)
    assert result.summary["checkpoints"] == len(checkpoints)


@pytest.mark.timeout(30)
def test_controller_config_validates():
    with pytest.raises(ValueError, match="time_scale"):
        ControllerConfig(time_scale=0)
    with pytest.raises(ValueError, match="max_nodes"):
        ControllerConfig(max_nodes=0)
    with pytest.raises(ValueError, match="--min-nodes"):
        JobSpec(min_nodes=3, max_nodes=2)


def test_the_journal_appends_events_as_the_run_goes(tmp_path):
    from elasim.executor.journal import RunJournal

    trace = synthetic_trace([(0, 2), (100, 4), (200, 1)], duration_s=1000)
    journal = RunJournal(tmp_path, every_s=0.0)
    seen: list[int] = []

    def hook(controller):
        journal(controller)
        path = tmp_path / "events.partial.jsonl"
        seen.append(len(path.read_text().splitlines()) if path.exists() else 0)

    clock = FakeClock()
    group = FakeWorkerGroup(clock, step_time_s=1.0, max_steps=60)
    config = ControllerConfig(time_scale=10.0, max_steps=60, max_nodes=4, idle_poll_real_s=1e9)
    result = Controller(
        _spec(), trace, ScriptedPolicy(), clock, config, group=group, on_turn=hook
    ).run()
    assert seen == sorted(seen) and seen[0] < seen[-1]  # written turn by turn, not at the end
    lines = (tmp_path / "events.partial.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == [
        e.kind.value for e in result.events[: len(lines)]
    ]
    journal.remove()
    assert not (tmp_path / "events.partial.jsonl").exists()
