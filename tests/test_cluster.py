"""Cluster mode: parser, application model, loop, fifo, CLI (fast tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_scripts import load_script
from typer.testing import CliRunner

from elasim.cli import app
from elasim.cluster import Application, ClusterSetup, build_loop
from elasim.policies.cluster import ClusterDecision
from elasim.sim.cluster import run_cluster_loop, simulate_cluster
from elasim.traces import TraceError
from elasim.traces.cluster import (
    bundled_application_names,
    bundled_workload_names,
    load_application,
    resolve_workload,
)
from elasim.traces.workloads import load_workload

runner = CliRunner()


def test_bundled_data_is_there() -> None:
    assert bundled_workload_names() == [f"pollux-workload-{i}" for i in range(1, 9)]
    assert bundled_application_names() == [
        "bert",
        "cifar10",
        "deepspeech2",
        "imagenet",
        "ncf",
        "yolov3",
    ]
    jobs = load_workload("pollux-workload-1")
    assert len(jobs) == 160
    assert jobs == sorted(jobs, key=lambda j: (j.arrival_s, j.name))


def test_workload_errors_name_file_line_column(tmp_path: Path) -> None:
    bad = tmp_path / "w.csv"
    bad.write_text("name,time,application,num_replicas,batch_size\na,1,cifar10,x,128\n")
    with pytest.raises(TraceError) as err:
        load_workload(bad)
    assert str(err.value).startswith(f"{bad}:2:4: num_replicas")
    bad.write_text("name,time,application,num_replicas,batch_size\na,1,resnet,1,128\n")
    with pytest.raises(TraceError, match=r":2:3: application: unknown 'resnet'"):
        load_workload(bad, {"cifar10"})


def test_application_model_matches_the_profile() -> None:
    app_ = Application(load_application("cifar10"))
    assert app_.init_batch == 128 and app_.max_batch == 4096
    assert app_.max_epochs == 100
    # a measured placement and batch is looked up exactly
    row = next(r for r in app_.profile.placements if r.placement == (1,) and r.local_bsz == 64)
    assert app_.step_time((1,), 64) == (row.step_s, row.sync_s)
    # a step at the initial batch is one unit of progress; a larger batch's step is
    # worth more, but less than its size ratio (statistical efficiency below 1)
    assert app_.gain(128, 0) == pytest.approx(1.0)
    assert 1 < app_.gain(4096, 5) < 4096 / 128
    # a multi-node placement is looked up as measured, whatever the node order
    row = next(r for r in app_.profile.placements if r.placement == (4, 4) and r.local_bsz == 129)
    assert app_.step_time((4, 4), 129) == (row.step_s, row.sync_s)
    # an unmeasured shape lies between the measured shapes around it
    six = app_.step_time((1,) * 6, 64)[0]
    eight = app_.step_time((1,) * 8, 64)[0]
    seven = app_.step_time((1,) * 7, 64)[0]
    assert min(six, eight) <= seven <= max(six, eight)


def test_fifo_runs_a_workload_to_the_end_deterministically() -> None:
    setup = ClusterSetup("pollux-workload-1", "fifo")
    one = build_loop(setup)
    run_cluster_loop(one)
    two = build_loop(setup)
    two.run_to_end()
    assert one.decisions == two.decisions  # SimPy's clock or a plain one: same log
    result = one.result()
    assert result.summary.jobs_completed == 160
    assert result.summary.rescales == 0  # fifo never moves a job
    assert all(r.jct_s is not None and r.jct_s > 0 for r in result.jobs)
    assert result.summary.avg_jct_s > 0


def test_a_bad_decision_names_the_policy() -> None:
    class Greedy:
        name = "greedy-bad"

        def decide(self, obs):
            return ClusterDecision.of({job.name: ((0, 99),) for job in obs.jobs})

    loop = build_loop(ClusterSetup("pollux-workload-1", "fifo"))
    loop.policy = Greedy()
    with pytest.raises(ValueError, match="policy 'greedy-bad'.*node 0 given 99 GPUs"):
        loop.run_to_end()


def test_cli_json_and_bad_input() -> None:
    res = runner.invoke(
        app,
        ["cluster", "simulate", "--workload", "pollux-workload-1", "--policy", "fifo", "--json"],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    for key in (
        "avg_jct_s",
        "p50_jct_s",
        "p99_jct_s",
        "makespan_s",
        "jobs",
        "jobs_completed",
        "gpu_utilization",
        "rescales",
        "wall_time_s",
    ):
        assert key in data
    assert data["jobs"] == 160
    bad = runner.invoke(app, ["cluster", "simulate", "-w", "nope", "-p", "fifo"])
    assert bad.exit_code == 2 and "no such workload" in bad.output
    bad = runner.invoke(app, ["cluster", "simulate", "-w", "pollux-workload-1", "-p", "nope"])
    assert bad.exit_code == 2 and "unknown cluster policy 'nope'" in bad.output
    bad = runner.invoke(app, ["cluster", "simulate", "-w", "pollux-workload-1", "--nodes", "0"])
    assert bad.exit_code == 2 and "--nodes" in bad.output


def test_simulate_cluster_reports_wall_time() -> None:
    result = simulate_cluster(ClusterSetup("pollux-workload-2", "fifo", num_nodes=4))
    assert result.summary.wall_time_s > 0
    assert result.summary.jobs_completed == 160


def test_published_ordering_on_one_workload() -> None:
    """Pollux < Tiresias < Optimus in average JCT (the full check: bench_cluster.py)."""
    avg = {
        policy: simulate_cluster(
            ClusterSetup("pollux-workload-3", policy), record_timeline=False
        ).summary.avg_jct_s
        for policy in ("pollux", "tiresias", "optimus")
    }
    assert avg["pollux"] < avg["tiresias"] < avg["optimus"], avg


def test_pollux_decision_log_is_bit_identical_across_runs_and_clocks(tmp_path: Path) -> None:
    lines = Path(resolve_workload("pollux-workload-5")).read_text().splitlines()
    small = tmp_path / "small.csv"
    small.write_text("\n".join(lines[:41]) + "\n")  # the first 40 jobs
    setup = ClusterSetup(str(small), "pollux", num_nodes=4)
    one = build_loop(setup)
    run_cluster_loop(one)
    changes: list[tuple] = []
    two = build_loop(setup, on_change=lambda *row: changes.append(row))
    two.run_to_end()  # a plain (fake) clock, as the executor side can use
    assert [c[:2] for c in changes] == [t[:2] for t in two.timeline] != []
    assert one.decisions == two.decisions
    assert repr(one.decisions) == repr(two.decisions)
    assert one.timeline == two.timeline
    assert repr(one.decision_log()) == repr(two.decision_log())
    assert one.result() == two.result()
    # pollux moves jobs and lets them adapt their batch
    assert one.result().summary.rescales > 0
    assert any(name for d in one.decisions for name, batch in d.decision.batch_sizes if batch == 0)


def test_reallocation_pauses_come_from_the_job_model() -> None:
    from elasim.policies import EventKind

    loop = build_loop(ClusterSetup("pollux-workload-1", "pollux"))
    loop.run_to_end(horizon_s=3600.0)
    pauses = {
        job.app.name: event.pause_s
        for job in loop.jobs
        for event in job.events
        if event.kind is EventKind.SCALE_UP and event.pause_s > 0
    }
    assert pauses, "no reallocation in the first hour"
    # not a flat constant: the checkpoint size (hence restore/write) differs by model
    assert len(set(round(p, 3) for p in pauses.values())) > 1


def test_bundled_cluster_data_equals_a_fresh_build(tmp_path: Path) -> None:

    repo = Path(__file__).resolve().parents[1]
    real = repo.parent / "shared" / "traces-real"
    if not (real / "pollux-philly").is_dir():
        pytest.skip("the shared real traces are not on this machine")
    module = load_script(repo / "scripts" / "build_bundled_traces.py")
    written = module.build_cluster(real, tmp_path)
    assert len(written) == 8 + sum(
        len(list((real / "pollux-philly" / "applications" / a).glob("*.csv")))
        for a in bundled_application_names()
    )
    committed = repo / "traces" / "data"
    for path in written:
        rel = path.relative_to(tmp_path)
        assert (committed / rel).read_bytes() == path.read_bytes(), rel


@pytest.mark.parametrize("policy", ["pollux", "tiresias"])
def test_a_capacity_drop_preempts_and_loses_work(policy: str, tmp_path: Path) -> None:
    lines = Path(resolve_workload("pollux-workload-4")).read_text().splitlines()
    small = tmp_path / "small.csv"
    small.write_text("\n".join(lines[:31]) + "\n")
    capacity = ((0.0, 16), (1800.0, 2), (5400.0, 16))
    loop = build_loop(ClusterSetup(str(small), policy), capacity=capacity)
    run_cluster_loop(loop)
    result = loop.result()
    assert result.summary.jobs_completed == 30
    assert result.summary.preemptions > 0
    assert result.summary.lost_work_h > 0
    # nobody ran on the lost nodes while they were gone
    for record in loop.decisions:
        if 1800.0 <= record.time_s < 5400.0:
            for _, placement in record.decision.allocations:
                assert all(node < 2 for node, _ in placement)


def test_cli_capacity_trace() -> None:
    args = ["cluster", "simulate", "-w", "pollux-workload-1", "-p", "tiresias", "--json"]
    res = runner.invoke(app, [*args, "--capacity", "spot_us_east.csv"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["jobs_completed"] == 160 and data["preemptions"] > 0
    bad = runner.invoke(app, [*args, "--capacity", "nope.csv"])
    assert bad.exit_code == 2 and "no such trace" in bad.output


def test_a_policy_that_never_allocates_does_not_hang_the_loop(tmp_path: Path) -> None:
    class Idle:
        name = "idle"

        def decide(self, obs):
            return ClusterDecision(wake_after_s=60.0)

    lines = Path(resolve_workload("pollux-workload-1")).read_text().splitlines()
    small = tmp_path / "small.csv"
    small.write_text("\n".join(lines[:11]) + "\n")
    loop = build_loop(ClusterSetup(str(small), "fifo"))
    loop.policy = Idle()
    run_cluster_loop(loop)
    assert loop.stalled
    assert loop.result().summary.jobs_completed == 0
