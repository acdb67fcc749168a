"""The one job model: what both shells share, checked once (no SimPy, no torch needed).

Golden numbers are worked out by hand on synthetic traces (labelled as such).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import pytest
from conftest import capacity

from elasim.executor.actuator import GroupActuator
from elasim.executor.controller import Controller, ControllerConfig, FakeClock
from elasim.executor.fakes import FakeWorkerGroup
from elasim.jobmodel import (
    CheckpointSchedule,
    JobRules,
    JobSpec,
    JobStateMachine,
    PolicyError,
    RescaleMode,
    leave_lead_s,
    parse_checkpoint_interval,
    young_daly_interval_s,
)
from elasim.policies import Decision, EventKind, EventRecord, JobState, Observation, PolicyBase

H = 3600.0


@dataclass(frozen=True)
class _NoOptions:
    pass


class Greedy(PolicyBase):
    """Every spot node available."""

    name: ClassVar[str] = "greedy-test"
    Config = _NoOptions

    def decide(self, obs: Observation) -> Decision:
        return Decision(min(obs.spot_available, obs.max_nodes))


def _spec(**fields) -> JobSpec:
    """A resolved spec of up to 4 nodes at the trace's start."""
    return JobSpec(min_nodes=1, max_nodes=4, start_offset_s=0.0, **fields)


def _controller(trace, *, max_steps: int, step_s: float = 1.0, **spec) -> tuple:
    clock = FakeClock()
    group = FakeWorkerGroup(clock, step_time_s=step_s, max_steps=max_steps)
    config = ControllerConfig(
        time_scale=10.0,
        max_steps=max_steps,
        max_nodes=4,
        graceful_margin_real_s=0.0,
        idle_poll_real_s=1e9,
    )
    return Controller(_spec(**spec), trace, Greedy(), clock, config, group=group), group


# -- checkpoints --------------------------------------------------------------------------


def test_the_interval_vocabulary():
    assert parse_checkpoint_interval("auto") is None
    assert parse_checkpoint_interval(None) is None
    assert parse_checkpoint_interval("off") == math.inf
    assert parse_checkpoint_interval("600") == 600.0
    with pytest.raises(ValueError, match="--checkpoint-interval-s"):
        parse_checkpoint_interval("-5")
    with pytest.raises(ValueError, match="'auto', 'off' or seconds"):
        parse_checkpoint_interval("sometimes")


def test_auto_is_young_daly_refined_by_the_preemptions_seen():
    schedule = CheckpointSchedule(None, prior_mtbf_s=10_000.0)
    assert schedule.current_interval_s(50.0, 0.0, 0) == young_daly_interval_s(50.0, 10_000.0)
    # after 4 preemptions in 30,000 s the mean time between failures is 8,000 s
    assert schedule.current_interval_s(50.0, 30_000.0, 4) == young_daly_interval_s(50.0, 8_000.0)
    # never more often than once a minute of trace time (a compressed trace: scaled)
    assert schedule.current_interval_s(0.01, 0.0, 0) == 60.0
    scaled = CheckpointSchedule(None, 10_000.0, scale=300).current_interval_s(0.01, 0.0, 0)
    assert scaled == young_daly_interval_s(0.01, 10_000.0) < 60.0
    assert CheckpointSchedule(math.inf).current_interval_s(50.0, 0.0, 0) == math.inf


def test_the_executor_checkpoints_on_the_young_daly_schedule_by_default():
    # synthetic: 4 nodes, all lost at 5,000 s, back at 6,000 s; steps of 10 trace s
    trace = capacity([0.0, 5000.0, 6000.0], [4, 0, 4], [1.0] * 3, duration_s=100 * H)
    ctl, _ = _controller(trace, max_steps=2_000)
    result = ctl.run()
    checkpoints = [e for e in result.events if e.kind is EventKind.CHECKPOINT]
    assert ctl.loop.schedule.auto and checkpoints  # auto, without being asked
    # the first interval is Young/Daly from the trace's prior (one drop per 100 h) and
    # the prior write time (0.05 real s x 10): sqrt(2 x 0.5 x 360,000) ~ 600 s
    expected = young_daly_interval_s(0.5, 100 * H)
    assert checkpoints[0].time_s == pytest.approx(expected, abs=10.0)
    assert result.summary["checkpoints"] == len(checkpoints)  # the summary counts the rows


def test_a_total_loss_loses_at_most_the_work_since_the_last_checkpoint():
    trace = capacity([0.0, 5000.0, 6000.0], [4, 0, 4], [1.0] * 3, duration_s=100 * H)
    ctl, group = _controller(trace, max_steps=2_000)
    result = ctl.run()
    loss = next(e for e in result.events if e.kind is EventKind.PREEMPT and e.nodes_after == 0)
    saved = [e.time_s for e in result.events if e.kind is EventKind.CHECKPOINT]
    last = max(t for t in saved if t < 5000)
    # steps of 10 trace s: the steps since the last checkpoint, plus the one in flight
    assert loss.lost_steps <= math.floor((5000.0 - last) / 10.0) + 1
    assert loss.lost_steps < 50
    off, _ = _controller(trace, max_steps=2_000, checkpoint_interval_s=math.inf)
    lost_off = next(e for e in off.run().events if e.kind is EventKind.PREEMPT).lost_steps
    assert lost_off == 501  # with checkpoints off, every step of the first 5,000 s


# -- the graceful-leave rule ----------------------------------------------------------------


def test_one_leave_rule_for_both_sides():
    inplace = RescaleMode.INPLACE
    assert leave_lead_s(step_s=2.0, checkpoint_write_s=30.0, survivors=1, mode=inplace) == 4.0
    alone = leave_lead_s(step_s=2.0, checkpoint_write_s=30.0, survivors=0, mode=inplace)
    assert alone == 34.0  # and a checkpoint when nobody survives
    restart = leave_lead_s(
        step_s=2.0, checkpoint_write_s=30.0, survivors=3, mode=RescaleMode.RESTART, margin_s=1.0
    )
    assert restart == 35.0  # restart mode always writes one; plus the controller's latency


# -- the decision step ------------------------------------------------------------------------


class Broken(PolicyBase):
    name: ClassVar[str] = "broken-test"
    Config = _NoOptions

    def decide(self, obs: Observation) -> Decision:
        raise ZeroDivisionError("my bug")


class Chatty(PolicyBase):
    name: ClassVar[str] = "chatty-test"
    Config = _NoOptions

    def decide(self, obs: Observation):  # type: ignore[override]
        return "four nodes please"


@pytest.mark.parametrize(
    ("policy", "words"),
    [(Broken(), "raised ZeroDivisionError: my bug"), (Chatty(), "returned str 'four nodes")],
)
def test_a_policy_error_is_one_line_naming_the_policy_and_its_file(policy, words):
    from elasim.job import load_job
    from elasim.sim import simulate

    trace = capacity([0.0], [2], [1.0], duration_s=H)
    with pytest.raises(PolicyError) as info:
        simulate(JobSpec(), trace=trace, policy=policy, job=load_job("resnet50_v100"))
    message = str(info.value)
    assert "\n" not in message and words in message
    assert policy.name in message and "test_jobmodel.py:" in message


# -- the books and the life cycle -------------------------------------------------------------


def test_the_state_machine_is_enforced_on_the_executor_side_too():
    clock = FakeClock()
    group = FakeWorkerGroup(clock)
    actuator = GroupActuator(group, ControllerConfig(), lambda: 0.0)
    first = EventRecord(0.0, EventKind.SCALE_UP, 0, 2)
    actuator._follow(first)  # noqa: SLF001
    assert actuator.state.value == "running"
    actuator._follow(EventRecord(1.0, EventKind.PAUSE, 2, 0))  # noqa: SLF001
    assert actuator.state.value == "waiting"
    with pytest.raises(RuntimeError, match="illegal job transition waiting -> done"):
        actuator._sm.to(actuator._sm.state.__class__("done"), 2.0)  # noqa: SLF001


def test_the_state_machine_keeps_a_final_writes_room():
    """Training's last stretch and the pause's start, kept where every change passes.

    A periodic write that ends in a re-formation must leave the stretch before the
    write, not stretch it to the pause (the bug of 574ae2f, once in each job model).
    """
    sm = JobStateMachine()
    sm.reform(10.0)
    sm.to(JobState.RUNNING, 30.0)
    sm.to(JobState.CHECKPOINTING, 100.0)
    sm.to(JobState.RUNNING, 100.0)  # a no-op would keep training's start at 30
    sm.to(JobState.CHECKPOINTING, 250.0)
    sm.reform(400.0)  # the group grows during the write
    assert (sm.running_since_s, sm.running_until_s, sm.pause_start_s) == (100.0, 250.0, 400.0)
    sm.reform(420.0)  # a re-formation that begins again
    assert sm.pause_start_s == 420.0 and sm.state is JobState.RESCALING
    assert not sm.to(JobState.RESCALING, 500.0)


def test_rules_validate_in_one_line():
    with pytest.raises(ValueError, match="min_nodes <= max_nodes"):
        JobRules(min_nodes=3, max_nodes=2)
    with pytest.raises(ValueError, match="deadline_s"):
        JobRules(deadline_s=-1.0)


def test_the_timeline_shows_trace_changes_at_their_times_while_the_controller_blocks():
    # a restart that takes 50 real s (x10 = 500 trace s) blocks the controller while the
    # trace changes twice: the rows still carry the trace's times and values
    trace = capacity([0.0, 100.0, 200.0], [1, 3, 2], [1.0] * 3, duration_s=100 * H)

    class SlowGroup(FakeWorkerGroup):
        def apply(self, spot, on_demand, *, wait_ready_s=None):
            if (spot, on_demand) != self.held():
                self.clock.advance(50.0)
            return super().apply(spot, on_demand, wait_ready_s=wait_ready_s)

    clock = FakeClock()
    group = SlowGroup(clock, step_time_s=1.0, max_steps=200)
    config = ControllerConfig(time_scale=10.0, max_steps=200, max_nodes=4, idle_poll_real_s=1e9)
    result = Controller(_spec(), trace, Greedy(), clock, config, group=group).run()
    rows = [(r.time_s, r.spot_available) for r in result.timeline]
    assert (100.0, 3) in rows and (200.0, 2) in rows
