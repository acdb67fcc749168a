"""``elasim cluster run`` on real CPU gloo workers: a small workload finishes, no hang.

Three short jobs of a measured synthetic application (``tests/data/cluster_apps``,
written by ``elasim cluster calibrate`` on the project's 2-core CI host) share four
worker slots under ``fifo``: two start at once, the third waits for a slot, and each
must reach its target steps.  Short collective timeouts, forked workers, and a hard
bound on the whole test: a worker that hangs fails it instead of hanging the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from elasim.executor.cluster import ClusterRunConfig, run_cluster  # noqa: E402

pytestmark = [pytest.mark.executor, pytest.mark.slow]

DATA = Path(__file__).parent / "data"
APPS = DATA / "cluster_apps"
WORKLOAD = DATA / "cluster_small.csv"


@pytest.mark.timeout(150)
def test_a_small_workload_finishes_on_four_slots_each_job_at_its_target():
    config = ClusterRunConfig(
        workload=str(WORKLOAD),
        policy="fifo",
        applications=str(APPS),
        slots=4,
        sample_delay_real_s=0.0005,
        job_options={"train_size": 4096},
        collective_timeout_real_s=5.0,
        max_wall_real_s=120.0,
    )
    run = run_cluster(config)
    assert not run.gave_up
    rows = {r.name: r for r in run.result.jobs}
    assert set(rows) == {"a", "b", "c"}
    for name, row in rows.items():
        assert row.finish_s is not None and row.jct_s > 0, name
        assert run.steps[name] == 40, (name, run.steps)
    # fifo on 4 slots: a (2) and b (2) hold every slot, so c (1) starts after one ends
    assert rows["c"].start_s >= min(rows["a"].finish_s, rows["b"].finish_s) - 1e-6
    # the decision log names only jobs that were active, and never more than 4 slots
    for record in run.decisions:
        used = sum(g for _, placement in record.decision.allocations for _, g in placement)
        assert used <= 4


@pytest.mark.timeout(240)
def test_bad_cluster_run_input_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("name,time,application,num_replicas,batch_size\na,zero,synth-40,1,128\n")
    odd = tmp_path / "odd.csv"
    odd.write_text("name,time,application,num_replicas,batch_size\na,0,synth-40,1,64\n")
    cases = [
        (["--workload", str(bad), "--applications", str(APPS)], "bad.csv:2"),
        (["--workload", str(odd), "--applications", str(APPS)], "batch_size 64"),
        (["--workload", str(WORKLOAD), "--slots", "0"], "--slots"),
        (["--workload", str(WORKLOAD), "--applications", str(APPS), "-p", "nope"], "nope"),
        (["--workload", str(WORKLOAD), "--launcher", "ray", "--agent-port", "0"], "--launcher"),
        (["--workload", str(WORKLOAD), "--address", "127.0.0.1:6379"], "--launcher ray"),
        (
            ["--workload", str(WORKLOAD), "--applications", str(APPS), "--capacity", "no.csv"],
            "no.csv",
        ),
    ]
    for args, expected in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "elasim.cli", "cluster", "run", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
        assert expected in lines[0], (expected, lines[0])
        assert "Traceback" not in proc.stderr


@pytest.mark.timeout(240)
def test_pollux_grows_a_job_into_idle_slots_on_real_workers():
    # the README's example under pollux: examples/cluster_small.csv on 4 slots, with
    # profiles measured at 2 ms per sample (tests/data/cluster_apps_2ms), where a job's
    # steps speed up with workers (258, 132, 91, 72 ms on 1..4), so growing pays off.
    # The simulator gives j3 two GPUs once j1 is done; the real run must do the same
    # (a real job's copy of reallocate had dropped peak_gpus and kept every job at 1).
    config = ClusterRunConfig(
        workload=str(Path(__file__).parents[1] / "examples" / "cluster_small.csv"),
        policy="pollux",
        applications=str(DATA / "cluster_apps_2ms"),
        slots=4,
        sample_delay_real_s=0.002,
        job_options={"train_size": 4096},
        collective_timeout_real_s=5.0,
        max_wall_real_s=200.0,
    )
    run = run_cluster(config)
    assert not run.gave_up
    most = {}
    for record in run.decisions:
        for name, placement in record.decision.allocations:
            most[name] = max(most.get(name, 0), sum(g for _, g in placement))
    assert max(most.values()) > 1, most
    for row in run.result.jobs:
        assert run.steps[row.name] in (40, 160), (row.name, run.steps)


@pytest.mark.timeout(200)
def test_a_capacity_drop_preempts_real_workers_and_a_rise_gives_the_slots_back(tmp_path):
    """``cluster run --capacity``: the one node is gone from 2 s to 5 s of the workload.

    The drop preempts every running job (its workers are SIGKILLed, no notice); no
    decision places a job while the node is gone; after the rise every job is started
    again and reaches its target steps.
    """
    trace = tmp_path / "gone.csv"
    trace.write_text("# duration_s: 100000\ntime_s,available\n0,1\n2,0\n5,1\n")
    config = ClusterRunConfig(
        workload=str(WORKLOAD),
        policy="fifo",
        applications=str(APPS),
        slots=4,
        sample_delay_real_s=0.0005,
        job_options={"train_size": 4096},
        collective_timeout_real_s=5.0,
        max_wall_real_s=150.0,
        capacity=str(trace),
    )
    run = run_cluster(config)
    assert not run.gave_up
    rows = {r.name: r for r in run.result.jobs}
    assert all(run.steps[name] == 40 for name in rows), run.steps
    # nothing finishes while the node is gone, and no decision places a job then
    assert all(not 2.0 <= r.finish_s < 5.0 for r in rows.values()), rows
    for record in run.decisions:
        if 2.0 <= record.time_s < 5.0:
            assert not record.decision.allocations, record
    assert any(r.finish_s > 5.0 for r in rows.values()), rows
    # a job whose workers trained before the drop was preempted by it (on a loaded host
    # the workers may still be starting at 2 s: they are killed then, with no event)
    events = [e for evs in run.events.values() for e in evs]
    joined = [e for e in events if e.kind.value in ("scale_up", "resume") and e.time_s < 2.0]
    preempted = [e for e in events if e.kind.value == "preempt"]
    assert all(2.0 <= e.time_s < 5.0 for e in preempted), preempted
    if joined:
        assert preempted and sum(r.preemptions for r in rows.values()) >= 1, rows
