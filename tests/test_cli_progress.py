"""Progress of ``sweep`` and ``cluster sweep`` when stderr is not a terminal (issue 24).

A piped or CI run showed nothing for minutes: the rich bar draws only on a terminal.
Now such a run logs plain lines on stderr (done/total, elapsed, an estimate), every
:data:`elasim.cli.progress.LINE_EVERY_S` seconds; the tests set that to 0.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import elasim.cli.progress
from elasim.cli import app

runner = CliRunner()


@pytest.fixture
def every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line for every record (raising=False: before issue 24 there was no such knob)."""
    monkeypatch.setattr(elasim.cli.progress, "LINE_EVERY_S", 0.0, raising=False)


def progress_lines(stderr: str, what: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"{what}: ")]


def test_a_piped_sweep_logs_its_progress(tmp_path: Path, every_time: None):
    out = tmp_path / "out"
    args = ["sweep", "--traces", "spot_us_east.csv", "--policies", "greedy,price"]
    result = runner.invoke(app, [*args, "--seeds", "0-1", "--workers", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = progress_lines(result.stderr, "simulating")
    assert lines, result.stderr
    assert lines[-1].startswith("simulating: 4/4 done, elapsed ")
    assert all("elapsed" in line for line in lines)
    assert any("left" in line for line in lines[:-1])  # an estimate while it runs


def test_a_piped_json_sweep_logs_on_stderr_and_keeps_stdout_to_its_rows(
    tmp_path: Path, every_time: None
):
    args = ["sweep", "--traces", "spot_us_east.csv", "--policies", "greedy", "--seeds", "0-1"]
    result = runner.invoke(app, [*args, "--workers", "1", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["seed"] for line in result.stdout.splitlines()] == [0, 1]
    assert progress_lines(result.stderr, "simulating")[-1].startswith("simulating: 2/2 done")


def test_a_piped_cluster_sweep_logs_its_progress(tmp_path: Path, every_time: None):
    args = ["cluster", "sweep", "--workloads", "pollux-workload-1", "--policies", "fifo,srtf"]
    result = runner.invoke(app, [*args, "--workers", "1", "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    lines = progress_lines(result.stderr, "simulating")
    assert lines and lines[-1].startswith("simulating: 2/2 done"), result.stderr


def test_lines_come_at_most_every_interval_and_the_last_always():
    """With the default interval, a quick run says nothing; a long one says when it ends."""
    from elasim.cli.progress import counted_progress

    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    with counted_progress(console, "simulating", 3) as tick:
        for _ in range(3):
            tick()
    assert console.file.getvalue() == ""  # done within LINE_EVERY_S: no line
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    with counted_progress(console, "simulating", 3, every_s=0.0) as tick:
        tick()
    lines = console.file.getvalue().splitlines()
    assert lines[0].startswith("simulating: 0/3, elapsed ")
    assert lines[1].startswith("simulating: 1/3 done, elapsed ") and "left" in lines[1]
