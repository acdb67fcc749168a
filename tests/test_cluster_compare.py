"""Cluster run vs simulation: the per-job join, the error summary, the measured pauses."""

from __future__ import annotations

import json
import math

import pytest

from elasim.cluster import ClusterSetup, build_loop
from elasim.cluster.compare import compare_jobs, jct_errors, measured_pause_job, simulate_like
from elasim.cluster.results import JobResult
from elasim.jobmodel import RescaleMode
from elasim.sim.cluster import run_cluster_loop

APPS = "tests/data/cluster_apps"


def _row(name: str, arrival: float, start: float | None, finish: float | None) -> JobResult:
    jct = None if finish is None else finish - arrival
    return JobResult(name, "app", arrival, start, finish, jct, 1.0, 0, 128, 1.0, 0.0)


def test_rows_are_joined_by_name_and_errors_are_relative_to_the_real_jct():
    real = [_row("a", 0, 0, 10), _row("b", 1, 2, 21), _row("c", 2, None, None)]
    sim = [_row("b", 1, 1, 16), _row("a", 0, 0, 12), _row("c", 2, 3, 9)]
    rows = {r.name: r for r in compare_jobs(real, sim)}
    assert rows["a"].error == pytest.approx(0.2) and rows["b"].error == pytest.approx(-0.25)
    assert rows["c"].error is None  # not finished on real workers
    summary = jct_errors(list(rows.values()))
    assert summary["jobs_compared"] == 2
    assert summary["real_avg_jct_s"] == pytest.approx(15.0)
    assert summary["sim_avg_jct_s"] == pytest.approx(13.5)
    assert summary["avg_jct_error"] == pytest.approx(-0.1)
    assert summary["median_abs_job_error"] == pytest.approx(0.225)
    assert summary["max_abs_job_error"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="different jobs"):
        compare_jobs(real, sim[:2])
    assert jct_errors([]) == {"jobs_compared": 0}


def test_measured_pauses_replace_the_preset_where_measured(tmp_path):
    job = measured_pause_job("resnet50_v100", APPS, ["synth-40"])
    start = job.measured_pause("inplace", 0, 1, False)
    rows = json.loads(open(f"{APPS}/synth-40/pauses.json").read())
    first = next(r for r in rows if (r["before"], r["after"]) == (0, 1))
    assert start is not None and start.acquire_s == first["acquire_s"] > 0
    assert job.measured_pause("inplace", 4, 1, False) is None  # not measured: the model
    assert measured_pause_job("resnet50_v100", None, ["x"]).pause_table == ()
    broken = tmp_path / "app"
    broken.mkdir()
    (broken / "pauses.json").write_text('[{"mode": "inplace"}]')
    with pytest.raises(ValueError, match="pauses.json: not a pause table"):
        measured_pause_job("resnet50_v100", tmp_path, ["app"])


def test_the_comparisons_simulation_is_the_simulators():
    """``simulate_like`` (a plain clock, no SimPy) gives the SimPy driver's rows."""
    kwargs = dict(
        workload="examples/cluster_small.csv",
        policy="fifo",
        options={},
        num_nodes=1,
        gpus_per_node=4,
        rescale=RescaleMode.INPLACE,
        pause_job="resnet50_v100",
        applications=APPS,
    )
    plain = simulate_like(**kwargs)
    setup = ClusterSetup(
        workload="examples/cluster_small.csv",
        policy="fifo",
        num_nodes=1,
        gpus_per_node=4,
        rescale=RescaleMode.INPLACE,
        pause_job=measured_pause_job("resnet50_v100", APPS, ["synth-160", "synth-40"]),
        applications=APPS,
    )
    loop = build_loop(setup)
    run_cluster_loop(loop)
    assert [r.jct_s for r in plain.jobs] == pytest.approx([r.jct_s for r in loop.result().jobs])
    assert all(r.jct_s is not None and math.isfinite(r.jct_s) for r in plain.jobs)


def test_the_comparisons_jobs_keep_their_batch_as_real_ones_do():
    kwargs = dict(
        workload="examples/cluster_small.csv",
        options={},
        num_nodes=1,
        gpus_per_node=4,
        rescale=RescaleMode.INPLACE,
        pause_job="resnet50_v100",
        applications=APPS,
    )
    for policy in ("pollux", "srtf"):  # both choose batch sizes
        result = simulate_like(policy=policy, **kwargs)
        assert [r.final_batch_size for r in result.jobs] == [128] * 4, policy
