"""``elasim cluster simulate --out`` and ``elasim cluster sweep``: files, table, one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from elasim.cli import app
from elasim.cluster import ClusterSetup, build_loop
from elasim.cluster.output import ALLOCATION_COLUMNS, DECISION_COLUMNS, JOB_COLUMNS

runner = CliRunner()
SMALL = "philly:max_jobs=14"  # 14 jobs of the bundled Philly week: a run takes ~1 s

RAISING = """
from elasim.policies.cluster import ClusterPolicyBase


class Boom(ClusterPolicyBase):
    name = "boom"

    def decide(self, obs):
        raise ZeroDivisionError("no GPUs for you")
"""


def _one_line(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    text = result.stderr.strip()
    assert len(text.splitlines()) == 1, text
    for needle in needles:
        assert needle in text, text


@pytest.mark.timeout(120)
def test_simulate_out_writes_jobs_allocations_summary_and_plots(tmp_path: Path):
    out = tmp_path / "run"
    res = runner.invoke(
        app, ["cluster", "simulate", "-w", SMALL, "-p", "pollux", "--out", str(out), "--json"]
    )
    assert res.exit_code == 0, res.output
    printed = json.loads(res.stdout)
    names = {p.name for p in out.iterdir()}
    assert names == {
        "jobs.parquet",
        "allocations.parquet",
        "decisions.parquet",
        "summary.json",
        "jct_cdf.png",
        "gpus_per_job.png",
    }
    jobs = pd.read_parquet(out / "jobs.parquet")
    assert tuple(jobs.columns) == JOB_COLUMNS and len(jobs) == 14
    assert np.allclose(jobs["jct_s"], jobs["finish_s"] - jobs["arrival_s"])
    assert (jobs["start_s"] >= jobs["arrival_s"]).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inputs"]["workload"] == SMALL
    assert summary["avg_jct_s"] == pytest.approx(printed["avg_jct_s"])
    assert summary["avg_jct_s"] == pytest.approx(jobs["jct_s"].mean())
    # the timeline accounts for every GPU-second of every job (pauses included)
    alloc = pd.read_parquet(out / "allocations.parquet")
    assert tuple(alloc.columns) == ALLOCATION_COLUMNS
    for job in jobs.itertuples():
        rows = alloc[alloc["job"] == job.name].sort_values("time_s", kind="stable")
        assert rows["gpus"].iloc[-1] == 0 and rows["time_s"].iloc[-1] == pytest.approx(job.finish_s)
        held = float(np.sum(np.diff(rows["time_s"].to_numpy()) * rows["gpus"].to_numpy()[:-1]))
        assert held == pytest.approx(job.gpu_s, rel=1e-6)


def test_simulate_unwritable_out_fails_before_any_work(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = runner.invoke(app, ["cluster", "simulate", "-w", SMALL, "-p", "fifo", "-o", str(blocker)])
    _one_line(res, "--out", str(blocker))


@pytest.mark.timeout(180)
def test_sweep_compares_policies_in_one_table_and_writes_its_files(tmp_path: Path):
    out = tmp_path / "sweep"
    args = ["cluster", "sweep", "--workloads", f"{SMALL},philly:max_jobs=10:seed=1"]
    res = runner.invoke(
        app, [*args, "--policies", "fifo,tiresias", "--workers", "2", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    for needle in ("fifo", "tiresias", "mean", "24/24"):
        assert needle in res.stdout
    frame = pd.read_parquet(out / "sweep.parquet")
    assert list(zip(frame["workload"], frame["policy"], strict=True)) == [
        (SMALL, "fifo"),
        (SMALL, "tiresias"),
        ("philly:max_jobs=10:seed=1", "fifo"),
        ("philly:max_jobs=10:seed=1", "tiresias"),
    ]
    jobs = pd.read_parquet(out / "jobs.parquet")
    assert len(jobs) == 2 * (14 + 10)
    assert (out / "jct_cdf.png").stat().st_size > 0
    # one process or two: the same numbers (wall time aside)
    res = runner.invoke(app, [*args, "--policies", "fifo,tiresias", "--workers", "1", "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    assert [r["avg_jct_s"] for r in rows] == pytest.approx(frame["avg_jct_s"].tolist(), rel=0)


@pytest.mark.timeout(120)
def test_sweep_with_a_raising_policy_fails_in_one_line_and_writes_nothing(tmp_path: Path):
    plugin = tmp_path / "boom.py"
    plugin.write_text(RAISING)
    out = tmp_path / "sweep"
    res = runner.invoke(
        app,
        [
            "cluster",
            "sweep",
            "--workloads",
            SMALL,
            "--policies",
            f"fifo,{plugin}:Boom",
            "--workers",
            "2",
            "-o",
            str(out),
        ],
    )
    _one_line(res, "boom", "ZeroDivisionError")
    assert not out.exists() or not os.listdir(out)


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["--policies", "nope"], ("unknown cluster policy 'nope'",)),
        (["--workloads", "nope.csv"], ("nope.csv",)),
        (["--nodes", "0"], ("--nodes",)),
        (["--set", "bogus=1"], ("--set bogus",)),
        (["--backend", "slurm"], ("--backend",)),
        (["--workloads", "philly:hours=-1"], ("hours must be > 0",)),
        (["--capacity", "nope.csv"], ("nope.csv",)),
    ],
)
def test_sweep_bad_input_is_one_line(tmp_path: Path, extra: list[str], needles: tuple[str, ...]):
    base = {"--workloads": SMALL, "--policies": "fifo"}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        base[flag] = value
    args = [x for pair in base.items() for x in pair]
    res = runner.invoke(app, ["cluster", "sweep", *args, "-o", str(tmp_path / "o")])
    _one_line(res, *needles)
    assert not (tmp_path / "o").exists() or not os.listdir(tmp_path / "o")


def test_sweep_unwritable_out_is_one_line(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = runner.invoke(
        app, ["cluster", "sweep", "--workloads", SMALL, "--policies", "fifo", "-o", str(blocker)]
    )
    _one_line(res, "--out")


@pytest.mark.timeout(120)
def test_simulate_table_has_labels_with_units_and_out_lists_what_it_wrote(tmp_path: Path):
    """The table showed raw keys (``avg_jct_s``) and ``--out`` printed no "wrote" line."""
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        ["cluster", "simulate", "-w", SMALL, "-p", "fifo", "--out", str(out)],
        env={"COLUMNS": "100"},
    )
    assert res.exit_code == 0, res.output
    assert "avg_jct_s" not in res.stdout and "gpu_utilization" not in res.stdout
    assert "mean job completion time (s)" in res.stdout
    assert "GPU utilization" in res.stdout and "lost work (h)" in res.stdout
    wrote = [line for line in res.stdout.splitlines() if line.startswith("wrote ")]
    assert len(wrote) == 1, res.stdout
    for path in out.iterdir():  # every file written is named, from what was written
        assert path.name in wrote[0]


@pytest.mark.timeout(120)
def test_simulate_out_streams_the_decision_log_the_loop_keeps(tmp_path: Path, monkeypatch):
    """``decisions.parquet`` is written in row groups during the run, and holds the log
    a loop that keeps it in memory has, decision for decision."""
    import pyarrow.parquet as pq

    import elasim.cluster.output

    monkeypatch.setattr(elasim.cluster.output, "DECISIONS_PER_GROUP", 7)
    out = tmp_path / "run"
    args = ["-w", SMALL, "-p", "pollux", "--rescale", "restart", "-o", str(out)]
    res = runner.invoke(app, ["cluster", "simulate", *args])
    assert res.exit_code == 0, res.output
    loop = build_loop(ClusterSetup(SMALL, "pollux"))  # restart: the setup's default
    loop.run_to_end()
    log = loop.decision_log()
    frame = pd.read_parquet(out / "decisions.parquet")
    assert tuple(frame.columns) == DECISION_COLUMNS and len(frame) == len(log) > 7
    assert pq.ParquetFile(out / "decisions.parquet").num_row_groups == -(-len(log) // 7)
    for row, (time_s, active, allocations, batches, wake) in zip(
        frame.itertuples(index=False), log, strict=True
    ):
        assert (row.time_s, row.active_jobs, row.wake_after_s) == (time_s, active, wake)
        assert json.loads(row.allocations) == [[n, [list(c) for c in p]] for n, p in allocations]
        assert json.loads(row.batch_sizes) == [list(pair) for pair in batches]


def test_simulate_with_a_raising_policy_leaves_no_decision_log(tmp_path: Path):
    plugin = tmp_path / "boom.py"
    plugin.write_text(RAISING)
    out = tmp_path / "run"
    res = runner.invoke(
        app, ["cluster", "simulate", "-w", SMALL, "-p", f"{plugin}:Boom", "-o", str(out)]
    )
    _one_line(res, "boom", "ZeroDivisionError")
    assert not out.exists() or not os.listdir(out)
