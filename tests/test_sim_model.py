"""Golden tests of the SimPy model on tiny traces whose results are computed by hand.

The tiny job (tests/data/tiny_job.toml) runs at exactly ``n`` samples/s on ``n``
nodes, needs 36,000 samples (10 node-hours), and has no rescale costs unless a test
adds them, so every expectation below is arithmetic.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from conftest import ScriptedPolicy, capacity, greedy_fn

from elasim.job import BatchSemantics
from elasim.jobmodel import JobSpec
from elasim.policies import Decision, EventKind
from elasim.sim import RescaleMode, SimConfig, pause_for, simulate, young_daly_interval_s

H = 3600.0


def kinds(result):
    return [e.kind for e in result.events]


def test_uninterrupted_run_takes_work_over_throughput(tiny_job):
    trace = capacity([0.0], [2], [1.5], duration_s=100 * H)
    result = simulate(
        JobSpec(checkpoint_interval_s=math.inf),
        trace=trace,
        policy=ScriptedPolicy(greedy_fn),
        job=tiny_job,
    )
    assert result.completed
    assert result.completion_time_h == pytest.approx(5.0)  # 36,000 samples at 2/s
    assert result.cost_usd == pytest.approx(2 * 5.0 * 1.5)
    assert result.spot_node_hours == pytest.approx(10.0)
    assert result.mean_nodes == pytest.approx(2.0)
    assert result.preemptions == 0 and result.rescales == 0
    assert kinds(result) == [EventKind.SCALE_UP, EventKind.DONE]


def test_restart_preemption_without_notice_loses_exactly_work_since_checkpoint(tiny_job):
    # 2 nodes until 3,600 s, then 1. Checkpoints are free, every 1,000 s of running:
    # the last one before the drop is at 3,000 s, so 600 s on 2 nodes are lost.
    trace = capacity([0.0, 3600.0], [2, 1], [1.0, 1.0], duration_s=100 * H)
    config = JobSpec(
        checkpoint_interval_s=1000.0, checkpoint_cost_s=0.0, rescale=RescaleMode.RESTART
    )
    result = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job)
    preempt = [e for e in result.events if e.kind is EventKind.PREEMPT]
    assert len(preempt) == 1
    assert preempt[0].lost_samples == pytest.approx(600 * 2)
    assert preempt[0].lost_work_h == pytest.approx(600 / H)
    assert result.lost_work_h == pytest.approx(600 / H)
    # 7,200 samples done by 3,600 s, 1,200 lost; the rest at 1/s (restore is free: 100 B / 10 B/s)
    restore_s = 10.0
    expected_s = 3600 + restore_s + (36000 - 7200 + 1200) / 1.0
    assert result.completion_time_h == pytest.approx(expected_s / H)


def test_inplace_preemption_without_notice_loses_only_the_step_in_flight(tiny_job):
    trace = capacity([0.0, 3600.0], [2, 1], [1.0, 1.0], duration_s=100 * H)
    config = JobSpec(checkpoint_interval_s=math.inf, rescale=RescaleMode.INPLACE)
    result = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job)
    (preempt,) = [e for e in result.events if e.kind is EventKind.PREEMPT]
    assert preempt.lost_samples == pytest.approx(1.0)  # one step = global batch of 1
    assert preempt.lost_steps == 1
    assert result.lost_work_h == pytest.approx(0.5 / H)  # one sample at 2 samples/s


@pytest.mark.parametrize("mode", [RescaleMode.INPLACE, RescaleMode.RESTART])
def test_enough_notice_loses_nothing(tiny_job, mode):
    trace = capacity([0.0, 3600.0, 7200.0], [2, 0, 2], [1.0, 1.0, 1.0], duration_s=100 * H)
    config = JobSpec(checkpoint_interval_s=math.inf, notice_s=120.0, rescale=mode)
    result = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job)
    assert result.lost_work_h == 0.0
    assert EventKind.PREEMPT_NOTICE in kinds(result)
    # losing every node needs a checkpoint written inside the notice (100 s here)
    assert result.checkpoint_overhead_h == pytest.approx(100 / H)


def test_losing_every_node_without_notice_rolls_back_to_checkpoint_even_inplace(tiny_job):
    trace = capacity([0.0, 3600.0, 7200.0], [1, 0, 1], [1.0, 1.0, 1.0], duration_s=100 * H)
    config = JobSpec(checkpoint_interval_s=1000.0, checkpoint_cost_s=0.0)
    result = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job)
    assert result.lost_work_h == pytest.approx(600 / H)
    assert EventKind.RESTORE in kinds(result)


def test_cost_integral_matches_price_series(tiny_job):
    times = [0.0, 1000.0, 2500.0, 4000.0]
    prices = [0.5, 2.0, 1.0, 3.0]
    trace = capacity(times, [1, 1, 1, 1], prices, duration_s=100 * H)
    result = simulate(
        JobSpec(checkpoint_interval_s=math.inf),
        trace=trace,
        policy=ScriptedPolicy(greedy_fn),
        job=tiny_job,
    )
    end = 36000.0
    expected = (1000 * 0.5 + 1500 * 2.0 + 1500 * 1.0 + (end - 4000) * 3.0) / H
    assert result.cost_usd == pytest.approx(expected)
    assert result.completion_time_h == pytest.approx(10.0)


def test_on_demand_nodes_are_charged_at_the_on_demand_price(tiny_job):
    trace = capacity([0.0], [0], [1.0], duration_s=100 * H, od_price=4.0)
    policy = ScriptedPolicy(lambda obs: Decision(0, 2))
    result = simulate(
        JobSpec(checkpoint_interval_s=math.inf), trace=trace, policy=policy, job=tiny_job
    )
    assert result.on_demand_node_hours == pytest.approx(10.0)
    assert result.cost_usd == pytest.approx(40.0)
    assert result.spot_node_hours == 0.0


def test_trace_repeats_when_the_job_outlasts_it(tiny_job):
    # 1 node for the first hour of every 2-hour cycle.  Warned an hour ahead, the node
    # leaves gracefully LEAVE_STEPS steps (2 x 1 s) before each drop, so a cycle trains
    # 3,598 samples: 10 cycles leave 20 samples for an 11th, done 20 s into it.
    # Checkpoints are free here (size 0), so every resume restores at no cost.
    spec = dataclasses.replace(
        tiny_job, checkpoint=dataclasses.replace(tiny_job.checkpoint, size_bytes=0.0)
    )
    trace = capacity([0.0, 3600.0], [1, 0], [1.0, 1.0], duration_s=2 * H)
    config = JobSpec(checkpoint_interval_s=math.inf, notice_s=3600.0)
    result = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=spec)
    assert result.completed
    assert result.completion_time_h == pytest.approx((20 * H + 20.0) / H)
    assert result.preemptions == 10
    assert result.lost_work_h == 0.0


def test_boot_delay_is_paid_and_counted_as_rescale_overhead(tiny_job):
    spec = dataclasses.replace(
        tiny_job, rescale=dataclasses.replace(tiny_job.rescale, boot_s=100.0, rendezvous_base_s=5.0)
    )
    trace = capacity([0.0], [1], [1.0], duration_s=100 * H)
    result = simulate(
        JobSpec(checkpoint_interval_s=math.inf),
        trace=trace,
        policy=ScriptedPolicy(greedy_fn),
        job=spec,
    )
    assert result.completion_time_h == pytest.approx((36000 + 105) / H)
    assert result.rescale_overhead_h == pytest.approx(105 / H)
    assert result.spot_node_hours == pytest.approx((36000 + 105) / H)


def test_pause_components_inplace_vs_restart(tiny_job):
    spec = dataclasses.replace(
        tiny_job,
        rescale=dataclasses.replace(
            tiny_job.rescale,
            detect_s=2.0,
            rendezvous_base_s=1.0,
            rendezvous_per_node_s=0.5,
            warmup_s=3.0,
            state_bandwidth_bytes_per_s=50.0,
        ),
    )
    inplace = pause_for(
        spec,
        RescaleMode.INPLACE,
        nodes_after=4,
        survivors=2,
        newcomers=2,
        failure=False,
        has_checkpoint=True,
        waited_boot=False,
    )
    assert inplace.as_dict() == {
        "detect_s": 0.0,
        "acquire_s": 0.0,
        "rendezvous_s": 3.0,
        "state_s": 2.0,
        "warmup_s": 3.0,
    }
    restart = pause_for(
        spec,
        RescaleMode.RESTART,
        nodes_after=4,
        survivors=2,
        newcomers=2,
        failure=True,
        has_checkpoint=True,
        waited_boot=False,
    )
    assert restart.detect_s == 2.0 and restart.state_s == 10.0  # checkpoint read 100 B at 10 B/s
    assert restart.pause_s == pytest.approx(2 + 3 + 10 + 3)


def test_scaled_batch_convergence_cost(tiny_job):
    spec = dataclasses.replace(
        tiny_job,
        batch=dataclasses.replace(
            tiny_job.batch,
            semantics=BatchSemantics.SCALED,
            reference_batch=1,
            gradient_noise_scale=1.0,
        ),
    )
    # two nodes: global batch 2, efficiency (1 + 1) / (1 + 2) = 2/3, goodput 4/3 samples/s
    assert spec.statistical_efficiency(2) == pytest.approx(2 / 3)
    trace = capacity([0.0], [2], [1.0], duration_s=1000 * H)
    result = simulate(
        JobSpec(checkpoint_interval_s=math.inf),
        trace=trace,
        policy=ScriptedPolicy(greedy_fn),
        job=spec,
    )
    run_s = 36000 / (4 / 3)
    assert result.completion_time_h == pytest.approx(run_s / H)
    assert result.convergence_cost_h == pytest.approx(run_s / 3 / H)
    assert result.convergence_cost_samples == pytest.approx(2 * run_s / 3)
    assert result.raw_samples == pytest.approx(2 * run_s)


def test_policy_asked_at_changes_and_wake_ups_only(tiny_job):
    trace = capacity([0.0, 5000.0], [1, 2], [1.0, 1.0], duration_s=100 * H)
    policy = ScriptedPolicy(lambda obs: Decision(1, 0, wake_after_s=2000.0))
    result = simulate(
        JobSpec(checkpoint_interval_s=math.inf), trace=trace, policy=policy, job=tiny_job
    )
    times = [record.time_s for record in result.decisions]
    assert times[:5] == [0.0, 2000.0, 4000.0, 5000.0, 7000.0]
    # observations never leak mutable state
    assert all(isinstance(o.recent_events, tuple) for o in policy.seen)


def test_checkpoint_interval_sweep_is_u_shaped(tiny_job):
    # One node, preempted without notice at exponential times (mean 2 h), back 30 s later.
    rng = np.random.default_rng(42)
    times, available, now = [], [], 0.0
    for gap in rng.exponential(7200.0, size=200):
        times += [now, now + gap]
        available += [1, 0]
        now += gap + 30.0
    trace = capacity(times, available, [1.0] * len(times), duration_s=now)
    cost_s = 60.0
    intervals = [30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0, 30000.0]
    completion = []
    for interval in intervals:
        config = JobSpec(checkpoint_interval_s=interval, checkpoint_cost_s=cost_s)
        completion.append(
            simulate(
                config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job
            ).completion_time_h
        )
    best = min(range(len(intervals)), key=completion.__getitem__)
    assert 0 < best < len(intervals) - 1, completion
    assert completion[0] > completion[best] and completion[-1] > completion[best]
    # and the Young/Daly optimum (MTBF 2 h) sits near the measured minimum
    assert 300.0 <= young_daly_interval_s(cost_s, 7200.0) <= 3000.0


def test_same_seed_same_summary_random_start(tiny_job):
    trace = capacity([0.0, 3600.0, 9000.0], [2, 1, 3], [1.0, 2.0, 0.7], duration_s=5 * H)
    config = JobSpec(seed=7, start_offset_s=None)
    first = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job).summary()
    second = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job).summary()
    other = simulate(
        dataclasses.replace(config, seed=8),
        trace=trace,
        policy=ScriptedPolicy(greedy_fn),
        job=tiny_job,
    ).summary()
    assert first == second
    assert first["inputs"]["start_offset_s"] != other["inputs"]["start_offset_s"]


def test_job_that_cannot_run_stops_at_the_horizon(tiny_job):
    trace = capacity([0.0], [0], [1.0], duration_s=10 * H)
    config = JobSpec(deadline_s=20 * H)
    horizon = SimConfig(max_sim_time_s=50 * H)
    result = simulate(config, horizon, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job)
    assert not result.completed
    assert result.completion_time_h is None
    assert result.deadline_met is False
    assert result.idle_h == pytest.approx(50.0)


def test_graceful_restart_with_survivors_writes_one_checkpoint(tiny_job):
    # restart mode, 2 -> 1 with a 120 s notice: one 100 s write inside the notice, then a
    # restart from it (10 s load); no work lost and no second write.
    trace = capacity([0.0, 3600.0], [2, 1], [1.0, 1.0], duration_s=100 * H)
    config = JobSpec(checkpoint_interval_s=math.inf, notice_s=120.0, rescale=RescaleMode.RESTART)
    result = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job)
    assert result.lost_work_h == 0.0
    assert result.checkpoints == 1
    assert result.checkpoint_overhead_h == pytest.approx(100 / H)
    (down,) = [e for e in result.events if e.kind is EventKind.SCALE_DOWN]
    assert down.pause.state_s == pytest.approx(10.0)  # the load only


def test_notice_during_a_periodic_write_makes_it_the_final_checkpoint(tiny_job):
    # checkpoints every 3,500 s of running take 100 s: the one starting at 3,500 s is in
    # progress when every node goes at 3,550 s. With a 120 s notice that write is the
    # final checkpoint, so nothing is lost; without notice the job rolls back to zero.
    trace = capacity([0.0, 3550.0, 7200.0], [1, 0, 1], [1.0] * 3, duration_s=100 * H)
    warned = JobSpec(checkpoint_interval_s=3500.0, notice_s=120.0)
    assert (
        simulate(warned, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job).lost_work_h
        == 0.0
    )
    unwarned = JobSpec(checkpoint_interval_s=3500.0)
    lost = simulate(
        unwarned, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job
    ).lost_work_h
    assert lost == pytest.approx(3500 / H)


def test_killed_worker_slots_need_a_cold_start_before_replacements_join(tiny_job):
    # a measured profile's executor: killed workers' slots need 7 s to start anew
    spec = dataclasses.replace(
        tiny_job, rescale=dataclasses.replace(tiny_job.rescale, cold_start_s=7.0)
    )
    trace = capacity([0.0, 10.0, 15.0], [4, 0, 4], [1.0] * 3, duration_s=100 * H)
    config = JobSpec(checkpoint_interval_s=math.inf)
    result = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=spec)
    (resume,) = [e for e in result.events if e.kind is EventKind.RESUME]
    assert resume.time_s == pytest.approx(17.0)  # killed at 10 s, ready 7 s later
    assert resume.pause.acquire_s == pytest.approx(2.0)  # waited from 15 s to 17 s
    # without cold starts the replacements join as soon as capacity returns
    plain = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=tiny_job)
    (resume,) = [e for e in plain.events if e.kind is EventKind.RESUME]
    assert resume.time_s == pytest.approx(15.0)


def test_releasing_every_node_while_the_group_reforms_keeps_the_work_with_a_notice():
    """``fixed`` gives up its survivors right after a warned leave, while they re-form.

    They hold the state in memory, so a final checkpoint saves it (the executor's group
    does the same when it stops); before, the unsaved work (all of it here: periodic
    checkpoints are off) was rolled back.
    """
    from elasim.job import load_job
    from elasim.policies import make_policy

    trace = capacity([0, 5000], [4, 3], [1.0, 1.0], duration_s=40000, od_price=3.0)
    job = load_job("resnet50_v100").with_nodes(1, 4)
    config = JobSpec(notice_s=120, checkpoint_interval_s=math.inf)
    horizon = SimConfig(max_sim_time_s=20000)
    result = simulate(config, horizon, trace=trace, policy=make_policy("fixed"), job=job)
    leave = next(e for e in result.events if e.kind is EventKind.SCALE_DOWN)
    pause = next(e for e in result.events if e.kind is EventKind.PAUSE)
    saved = next(e for e in result.events if e.kind is EventKind.CHECKPOINT)
    assert leave.time_s < pause.time_s == 5000.0  # released during the re-formation
    assert saved.time_s == pytest.approx(pause.time_s - saved.pause_s)
    assert pause.lost_work_h == 0.0 and result.lost_work_h == 0.0
    parts = result.running_h + result.rescale_overhead_h + result.checkpoint_overhead_h
    assert parts + result.idle_h == pytest.approx(result.sim_time_h)


@pytest.mark.timeout(60)
def test_a_cluster_whose_leftovers_never_change_does_not_hang():
    """448 GPUs for one week of Philly: the leftovers never drop below the job's 16 nodes.

    The cluster's stream used to search the forever-repeating trace for a change that
    never comes; now it wakes the loop once per trace period with nothing due.
    """
    from elasim.job import load_job
    from elasim.policies import make_policy
    from elasim.traces import load_trace

    trace, job = load_trace("philly_jobs.csv"), load_job("resnet50_v100")
    result = simulate(
        JobSpec(seed=0),
        SimConfig(cluster_gpus=448),
        trace=trace,
        policy=make_policy("greedy"),
        job=job,
    )
    assert result.completed and result.preemptions == 0
    assert result.completion_time_h == pytest.approx(7.75, abs=0.01)
