"""The on-demand plan's time follows the job's own checkpoint schedule (issue 25).

Without preemptions ``auto``'s checkpoint interval grows with the clock; a plan that
assumed today's interval for the whole run overestimated its time by up to 170 s on
a six-hour job, and ``deadline`` bought a node more than the plan replayed needs.
These drive the real job model (an ``on_demand`` run) and check the policies'
estimate against it: never below (the deadline guarantee needs that), and above by no
more than the start pause (which the estimate takes for ``max_nodes`` nodes) and one
checkpoint write.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spot_windows import benchmark_window

from elasim.job import load_job
from elasim.jobmodel import JobSpec
from elasim.policies import GreedyPolicy, OnDemandPolicy, OptimalPolicy
from elasim.policies._ondemand import on_demand_time_s, start_pause_s
from elasim.policies.checkpoints import CheckpointSchedule
from elasim.sim import simulate
from elasim.traces import load_trace


class _Recording:
    """Mixed in before a policy: it keeps the observations it was given."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list = []

    def decide(self, obs):
        self.seen.append(obs)
        return super().decide(obs)


class _Recorder(_Recording, OnDemandPolicy):
    """``on_demand`` that keeps the observations it was given."""


@pytest.mark.parametrize("trace_name", ["spot_p3_bamboo.csv", "spot_us_east.csv"])
@pytest.mark.parametrize("nodes", [1, 4, 14])
def test_plan_time_bounds_the_replay_closely(trace_name: str, nodes: int) -> None:
    trace = load_trace(trace_name)
    job = dataclasses.replace(
        load_job("resnet50_v100").with_nodes(1, 16), target_samples=1200.0 * 3600 * 6
    )
    spec = JobSpec(start_offset_s=0.3 * float(trace.duration_s), on_demand_price_per_hour=3.06)
    policy = _Recorder(OnDemandPolicy.Config(nodes))
    run = simulate(spec, trace=trace, policy=policy, job=job)
    replay_s = run.completion_time_h * 3600.0
    states = run.timeline.state
    started_s = run.timeline.time_s[states.index("running")]  # the replay's own start
    obs = policy.seen[0]
    pause = start_pause_s(obs)
    estimate = on_demand_time_s(obs, nodes, obs.remaining_samples, pause, from_start=True)
    today = pause + obs.remaining_samples / (obs.goodput(nodes) * obs.training_share)
    assert pause >= started_s and replay_s <= estimate
    # the training and its checkpoints to one write: only the start pause differs more
    over_s = (estimate - pause) - (replay_s - started_s)
    assert -0.01 <= over_s <= obs.checkpoint_write_s + 0.5
    assert estimate < today  # today's interval for the whole run overestimates


def test_fixed_interval_keeps_its_share() -> None:
    fixed = CheckpointSchedule(600.0)
    assert fixed.run_time_s(6000.0, 60.0, 0.0, 0) == pytest.approx(6600.0)
    assert CheckpointSchedule(math.inf).run_time_s(6000.0, 60.0, 0.0, 0) == 6000.0


def test_auto_interval_grows_and_a_preemption_shortens_it() -> None:
    auto = CheckpointSchedule(None, prior_mtbf_s=3600.0)
    train_s, write_s = 8 * 3600.0, 30.0
    today = auto.current_interval_s(write_s, 0.0, 0)
    at_today = train_s * (today + write_s) / today
    projected = auto.run_time_s(train_s, write_s, 0.0, 0)
    assert train_s < projected < at_today
    assert auto.run_time_s(train_s, write_s, 0.0, 1) > projected  # shorter intervals
    # a short run ends before its first checkpoint: no write is counted
    assert auto.run_time_s(today / 2, write_s, 0.0, 0) == today / 2


def test_a_loss_costs_its_shorter_intervals_in_time_and_money() -> None:
    from test_policies_builtin import deadline_obs

    from elasim.policies import RecedingPolicy
    from elasim.policies._ondemand import preemption_s, preemption_usd

    plain = deadline_obs(0.5, now_s=3600.0, checkpoint_write_s=30.0)
    auto = dataclasses.replace(
        plain, checkpoint_schedule=CheckpointSchedule(None, prior_mtbf_s=3600.0), preemptions=1
    )
    assert preemption_s(plain, 4) == 0.0 and preemption_usd(plain, 4, 1e-6) == 0.0
    extra_s = preemption_s(auto, 4)
    assert extra_s > 0.0 and preemption_usd(auto, 4, 1e-6) > 0.0
    # receding's loss of spot: the rescale, an interval rolled back, and these seconds
    policy = RecedingPolicy()
    assert policy.failure_s(auto, 4) - policy.failure_s(plain, 4) == pytest.approx(
        extra_s + auto.checkpoint_interval_s - plain.checkpoint_interval_s
    )


@settings(max_examples=200, deadline=None)
@given(
    prior_h=st.floats(0.05, 48.0),
    write_s=st.floats(0.5, 600.0),
    lost=st.integers(0, 6),
    progress=st.floats(0.0, 0.95),
    now_h=st.floats(0.0, 20.0),
    spare_s=st.floats(-600.0, 7200.0),
)
def test_the_shortcut_of_a_loss_never_changes_receding_s_answer(
    prior_h: float, write_s: float, lost: int, progress: float, now_h: float, spare_s: float
) -> None:
    """preemption_bound_s bounds preemption_s (large writes, Daly's C >= 2M corner and
    the floor included), so spot_safe's shortcut answers as the full count would."""
    from test_policies_builtin import deadline_obs

    from elasim.policies import RecedingPolicy
    from elasim.policies._ondemand import preemption_bound_s, preemption_s

    schedule = CheckpointSchedule(None, prior_mtbf_s=prior_h * 3600.0)
    now_s = now_h * 3600.0
    obs = deadline_obs(
        progress,
        now_s=now_s,
        deadline_s=now_s + 86400.0,
        checkpoint_write_s=write_s,
        checkpoint_schedule=schedule,
        preemptions=lost,
        checkpoint_interval_s=schedule.current_interval_s(write_s, now_s, lost),
    )
    policy = RecedingPolicy()
    for nodes in (1, 4, obs.max_nodes):
        assert preemption_s(obs, nodes) <= preemption_bound_s(obs, nodes) + 1e-9
        full = spare_s + policy.config.safety_margin_s >= policy.failure_s(obs, nodes)
        assert policy.spot_safe(obs, spare_s, nodes) == full


class _SpotRecorder(_Recording, GreedyPolicy):
    """``greedy`` that keeps the observations it was given."""


def _warned_run(notice_s: float) -> tuple[object, list]:
    policy = _SpotRecorder()
    spec = JobSpec(notice_s=notice_s, deadline_s=None, start_offset_s=0.0)
    result = simulate(spec, trace=load_trace("spot_us_east.csv"), policy=policy)
    return result, policy.seen


def test_a_leave_warned_in_time_does_not_shorten_the_interval() -> None:
    # Young/Daly's time between failures is about work lost: a drop warned in time
    # (AWS's two minutes) loses none, so it neither counts nor shortens ``auto``'s
    # interval; an unwarned one does both
    for notice_s, warned in ((120.0, True), (0.0, False)):
        result, seen = _warned_run(notice_s)
        assert result.preemptions > 0
        counted = [obs.preemptions for obs in seen]
        intervals = [obs.checkpoint_interval_s for obs in seen]
        if warned:
            assert result.lost_work_h == 0.0 and counted[-1] == 0
            assert intervals == sorted(intervals)  # only grows with the clock
        else:
            assert counted[-1] == result.preemptions
            assert any(b < a for a, b in zip(intervals, intervals[1:], strict=False))


def test_the_optimum_with_a_notice_costs_no_more_than_without() -> None:
    # a notice can only help an oracle that leaves before every drop; counting its
    # warned leaves as failures made the replay write more often than its plan,
    # fall behind it and finish on on-demand hours (49.29 -> 54.31 USD here; 3.1x on
    # a 16-node 1.1x window of SkyPilot's us-west-2c trace)
    cost = {}
    for notice_s in (0.0, 120.0):
        spec, job = benchmark_window(1, 1.5, 1143748.1540574362, notice_s=notice_s)
        trace = load_trace("spot_us_west.csv")
        cost[notice_s] = simulate(spec, trace=trace, policy=OptimalPolicy(), job=job).cost_usd
    assert cost[120.0] <= cost[0.0] * 1.001
