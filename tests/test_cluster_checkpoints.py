"""Checkpoints and preemption notices in cluster mode cost what the single-job model says.

One job on a one-GPU cluster against a capacity trace, by hand: pauses free, a
checkpoint every 100 s of training that takes 10 s to write, the only GPU gone at
380 s.  Training runs 0-100, writes 100-110, runs 110-210, writes 210-220, runs
220-320, writes 320-330, runs 330-380:

* without notice the drop loses the 50 s since the last write ended, and the writes
  cost 30 s;
* with 60 s of notice (at 320 s, during the third write) the job leaves gracefully
  before the drop (the single-job rule: two steps and a write), writing a final
  checkpoint over its last 10 s of training: nothing is lost, the writes cost 40 s;
* with 5 s of notice, less than a write, there is no time to leave: as without notice.

The single-job simulator, given the same job, trace and rules, books the very same
figures; the cluster model reuses its rules rather than copying them, and these tests
fail if either drifts.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from elasim.cluster import ClusterSetup, build_loop
from elasim.cluster.setup import MODEL_PARAMS
from elasim.job import load_job
from elasim.jobmodel import CheckpointSchedule, JobSpec, RescaleMode, checkpoint_timer_after
from elasim.policies import EventKind
from elasim.sim import SimConfig, simulate
from elasim.traces import load_capacity_trace

DROP_S = 380.0
HORIZON_S = 390.0
WRITE_S = 10.0
INTERVAL_S = 100.0
#: (notice s) -> (lost training s, checkpoint writing s), by hand (module docstring)
BY_HAND = {0.0: (50.0, 30.0), 5.0: (50.0, 30.0), 60.0: (0.0, 40.0)}


def _pause_job():
    """Free pauses; a write of WRITE_S for cifar10's checkpoint (what cluster mode sizes)."""
    job = load_job("resnet50_v100")
    size = MODEL_PARAMS["cifar10"] * 12.0
    rescale = dataclasses.replace(
        job.rescale,
        detect_s=0.0,
        boot_s=0.0,
        rendezvous_base_s=0.0,
        rendezvous_per_node_s=0.0,
        warmup_s=0.0,
        cold_start_s=0.0,
    )
    checkpoint = dataclasses.replace(
        job.checkpoint,
        size_bytes=size,
        write_bandwidth_bytes_per_s=size / WRITE_S,
        read_bandwidth_bytes_per_s=1e30,
    )
    return dataclasses.replace(job, rescale=rescale, checkpoint=checkpoint)


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "one_gpu.csv"
    path.write_text(
        f"# duration_s: 100000\ntime_s,available,price_per_hour\n0,1,1.0\n{DROP_S:g},0,1.0\n"
    )
    return path


def _cluster(tmp_path: Path, notice_s: float) -> tuple[float, float]:
    workload = tmp_path / "one.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\nj1,0,cifar10,1,128\n")
    setup = ClusterSetup(
        workload=str(workload),
        policy="fifo",
        num_nodes=1,
        gpus_per_node=1,
        rescale=RescaleMode.INPLACE,
        pause_job=_pause_job(),  # type: ignore[arg-type]
        notice_s=notice_s,
        checkpoint_interval_s=INTERVAL_S,
    )
    trace = load_capacity_trace(str(_trace(tmp_path)))
    rows = tuple(zip(trace.time_s.tolist(), trace.available.tolist(), strict=True))
    loop = build_loop(setup, capacity=rows, capacity_period_s=float(trace.duration_s))
    loop.run_to_end(HORIZON_S)
    job = loop.jobs[0]
    job.advance(HORIZON_S)
    return job.books.lost_s, job.books.checkpoint_s


def _single(tmp_path: Path, notice_s: float) -> tuple[float, float]:
    spec = JobSpec(
        trace=str(_trace(tmp_path)),
        policy="greedy",
        min_nodes=1,
        max_nodes=1,
        rescale=RescaleMode.INPLACE,
        notice_s=notice_s,
        checkpoint_interval_s=INTERVAL_S,
        checkpoint_cost_s=WRITE_S,
    )
    result = simulate(spec, SimConfig(max_sim_time_s=HORIZON_S), job=_pause_job())
    return result.lost_work_h * 3600.0, result.checkpoint_overhead_h * 3600.0


@pytest.mark.parametrize("notice_s", sorted(BY_HAND))
def test_a_one_job_cluster_costs_what_the_single_job_model_says(
    tmp_path: Path, notice_s: float
) -> None:
    lost_s, written_s = BY_HAND[notice_s]
    cluster = _cluster(tmp_path, notice_s)
    single = _single(tmp_path, notice_s)
    assert cluster == pytest.approx((lost_s, written_s), abs=1e-6)
    assert single == pytest.approx((lost_s, written_s), abs=1e-6)


def test_checkpoints_are_off_by_default_and_auto_is_young_daly(tmp_path: Path) -> None:
    workload = tmp_path / "one.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\nj1,0,cifar10,1,128\n")
    base = ClusterSetup(str(workload), "fifo", num_nodes=1, gpus_per_node=1)
    loop = build_loop(base)
    assert loop.jobs[0].schedule is None and math.isinf(loop.jobs[0].checkpoint_interval_s)
    auto = build_loop(dataclasses.replace(base, checkpoint_interval_s=None))
    job = auto.jobs[0]
    from elasim.jobmodel import young_daly_interval_s
    from elasim.jobmodel.rules import DEFAULT_PRIOR_MTBF_S

    expected = young_daly_interval_s(job.checkpoint_write_s, DEFAULT_PRIOR_MTBF_S)
    assert job.checkpoint_interval_s == pytest.approx(max(expected, 60.0))


def test_cluster_simulate_takes_the_notice_and_the_interval() -> None:
    import json

    from typer.testing import CliRunner

    from elasim.cli import app

    args = ["cluster", "simulate", "-w", "pollux-workload-1", "-p", "pollux",
            "--capacity", "spot_us_east.csv", "--json"]  # fmt: skip
    runner = CliRunner()
    plain = json.loads(runner.invoke(app, args).stdout)
    warned = runner.invoke(app, [*args, "--notice-s", "120", "--checkpoint-interval-s", "auto"])
    assert warned.exit_code == 0, warned.output
    assert json.loads(warned.stdout)["lost_work_h"] < plain["lost_work_h"]
    bad = runner.invoke(app, [*args, "--checkpoint-interval-s", "0.1"])
    assert bad.exit_code == 2 and "--checkpoint-interval-s" in bad.output


def test_one_timer_rule_restarts_on_durable_state_and_re_estimates_on_losses() -> None:
    """The single job's loop and the cluster's jobs read one rule: what each event does.

    A checkpoint or a pause restarts the timer; a checkpoint or a preemption
    re-estimates ``auto``'s interval from the failures; nothing else touches either.
    """
    schedule = CheckpointSchedule(None, 86400.0)
    start = schedule.current_interval_s(WRITE_S, 0.0, 0)
    after = {
        kind: checkpoint_timer_after(
            kind, schedule, start, write_s=WRITE_S, elapsed_s=3600.0, failures=3
        )
        for kind in EventKind
    }
    shorter = schedule.current_interval_s(WRITE_S, 3600.0, 3)
    assert shorter < start
    assert after[EventKind.CHECKPOINT] == (True, shorter)
    assert after[EventKind.PREEMPT] == (False, shorter)
    assert after[EventKind.PAUSE] == (True, start)
    others = set(EventKind) - {EventKind.CHECKPOINT, EventKind.PREEMPT, EventKind.PAUSE}
    assert others and all(after[kind] == (False, start) for kind in others)
