"""Progress of ``sweep``, ``cluster sweep`` and ``simulate`` (issues 24 and 23).

A piped or CI run showed nothing for minutes: the rich bar draws only on a terminal.
Now such a run logs plain lines on stderr (done/total, elapsed, an estimate), every
:data:`elasim.cli.progress.LINE_EVERY_S` seconds; the tests set that to 0.  In
``simulate`` anything longer than :data:`elasim.cli.progress.QUIET_S` (2 s) shows:
its own steps, the optimum's passes and the yardstick's stages, on a terminal as a
bar, else as lines; a step still under way when the quiet time ends shows then.
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


# -- simulate (issue 23: anything longer than 2 s shows progress) ---------------------------


@pytest.fixture
def no_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress from the first record: every step of a quick test run shows."""
    monkeypatch.setattr(elasim.cli.progress, "QUIET_S", 0.0)


DEADLINE_RUN = ["simulate", "-t", "spot_p3_bamboo.csv", "-p", "greedy", "--deadline-h", "10.4"]
DEADLINE_RUN += ["--on-demand-price-per-hour", "3.06", "--json"]


def test_a_piped_simulate_logs_its_steps_the_optimum_and_the_yardstick(no_quiet: None):
    result = runner.invoke(app, DEADLINE_RUN)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["optimal_usd"] is not None  # stdout: its one object
    assert progress_lines(result.stderr, "simulating")[0].startswith("simulating: 0/1, elapsed")
    for what, last in (
        ("reading the inputs", "1/1 done"),
        ("simulating", "1/1 done"),
        ("deadline yardstick", "4/4 done"),
        ("offline optimum, forward passes", ""),
    ):
        lines = progress_lines(result.stderr, what)
        assert lines and lines[-1].startswith(f"{what}: {last}"), result.stderr
    passes = progress_lines(result.stderr, "offline optimum, forward passes")
    done = passes[-1].split(": ")[1].split(" ")[0]  # "9/9"
    assert done.split("/")[0] == done.split("/")[1], passes


def test_a_quick_simulate_shows_no_progress():
    result = runner.invoke(app, DEADLINE_RUN[:5] + ["--json"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def _handler(console: Console, terminal: bool, quiet_s: float):
    """A progress handler on the library's logger (removed by the caller)."""
    import logging

    from elasim.cli.progress import _Handler
    from elasim.progress import PROGRESS_LOGGER

    handler = _Handler(console, terminal, quiet_s=quiet_s)
    PROGRESS_LOGGER.addHandler(handler)
    PROGRESS_LOGGER.setLevel(logging.INFO)
    return handler


def _remove(handler) -> None:
    from elasim.progress import PROGRESS_LOGGER

    PROGRESS_LOGGER.removeHandler(handler)
    handler.close()


def test_a_step_still_under_way_when_the_quiet_time_ends_shows_then():
    """One long step that reports only at its start and end is not silent meanwhile."""
    import time

    from elasim.progress import report

    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    handler = _handler(console, terminal=False, quiet_s=0.2)
    try:
        report("quick", 0, 1)
        report("quick", 1, 1)
        report("long", 0, 1)
        assert console.file.getvalue() == ""  # still quiet
        waited = 0.0
        while not console.file.getvalue() and waited < 30.0:
            time.sleep(0.05)
            waited += 0.05
        assert console.file.getvalue().startswith("long: 0/1, elapsed ")
        report("long", 1, 1)
    finally:
        _remove(handler)
    lines = console.file.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == ["long", "long"]  # never "quick"
    assert lines[1].startswith("long: 1/1 done, elapsed ")


def test_each_step_is_timed_from_its_own_start(monkeypatch: pytest.MonkeyPatch):
    """The yardstick's optimum starts seconds into a run: its estimate is its own."""
    from elasim.progress import report

    clock = [100.0]
    monkeypatch.setattr(elasim.cli.progress, "time", type("T", (), {"monotonic": lambda: clock[0]}))
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    handler = _handler(console, terminal=False, quiet_s=0.0)
    try:
        report("simulating", 0, 1)
        clock[0] = 130.0
        report("optimum", 0, 4)
        clock[0] = 140.0
        report("optimum", 2, 4)
    finally:
        _remove(handler)
    last = console.file.getvalue().splitlines()[-1]
    assert last == "optimum: 2/4 done, elapsed 10 s, about 10 s left"


def test_on_a_terminal_progress_is_a_bar_that_goes_when_done():
    from elasim.progress import report

    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    handler = _handler(console, terminal=True, quiet_s=0.0)
    try:
        report("offline optimum, forward passes", 3, 10)
        assert handler.bar is not None
        report("offline optimum, forward passes", 10, 10)
        assert handler.bar is None  # transient: gone once done
    finally:
        _remove(handler)
    assert "offline optimum, forward passes" in console.file.getvalue()


# -- cluster simulate (issue 23: the full Philly trace takes minutes) ----------------------


def test_a_piped_cluster_simulate_logs_jobs_finished_and_keeps_stdout_to_its_json(
    no_quiet: None,
):
    args = ["cluster", "simulate", "-w", "pollux-workload-1", "-p", "fifo", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    jobs = json.loads(result.stdout)["jobs"]  # stdout: its one object
    lines = progress_lines(result.stderr, "simulating jobs")
    assert lines[0].startswith(f"simulating jobs: 0/{jobs}, elapsed"), result.stderr
    assert lines[-1].startswith(f"simulating jobs: {jobs}/{jobs} done"), result.stderr


def test_a_cluster_simulation_reports_a_bounded_count_of_rising_records(monkeypatch):
    """At most PROGRESS_STEPS (+ the first and last) records, rising, ending at all jobs."""
    import logging

    import elasim.sim.cluster
    from elasim.cluster import ClusterSetup, build_loop
    from elasim.progress import PROGRESS_LOGGER

    monkeypatch.setattr(elasim.sim.cluster, "PROGRESS_STEPS", 7)
    seen: list[tuple[int, int]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.progress)  # type: ignore[attr-defined]

    handler = Keep()
    PROGRESS_LOGGER.addHandler(handler)
    PROGRESS_LOGGER.setLevel(logging.INFO)
    try:
        loop = build_loop(ClusterSetup(workload="pollux-workload-1", policy="fifo"))
        elasim.sim.cluster.run_cluster_loop(loop)
    finally:
        PROGRESS_LOGGER.removeHandler(handler)
    total = len(loop.jobs)
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    done = [d for d, _ in seen]
    assert done == sorted(set(done)) and len(seen) <= 7 + 2, seen
