"""Crash-proof under chaos: no orphans, resume after a dead controller, prompt exit.

Each test kills real processes (SIGKILL, as a crash or a preemption does) and has a
hard time bound; the lifeline tests need no torch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elasim.executor.lifeline import descendants, still_alive

REPO = Path(__file__).resolve().parents[1]
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")


def _wait_for(predicate, timeout_s: float, every_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return predicate()


# -- the lifeline (no torch) ----------------------------------------------------------------


_CHILD = (
    "import time; from elasim.executor.lifeline import hold_lifeline; "
    "hold_lifeline({parent}, interval_s=0.1, death_signal=False); time.sleep(120)"
)
_PARENT = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', sys.argv[1].format(parent=os.getpid())])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(120)\n"
)


@linux_only
@pytest.mark.timeout(60)
def test_the_watcher_alone_ends_a_worker_whose_parent_was_sigkilled():
    """Without PR_SET_PDEATHSIG, the watcher thread still notices the re-parenting."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, _CHILD], stdout=subprocess.PIPE, text=True
    )
    try:
        child_pid = int(parent.stdout.readline())
        child = {child_pid: descendants(parent.pid)[child_pid]}
        time.sleep(0.5)
        assert still_alive(child) == [child_pid]  # alive while its parent is
        parent.kill()
        parent.wait(timeout=10)
        assert _wait_for(lambda: not still_alive(child), 5.0), "the child outlived its parent"
    finally:
        parent.kill()
        for pid in still_alive(child) if "child" in locals() else []:
            os.kill(pid, signal.SIGKILL)


@linux_only
@pytest.mark.timeout(60)
def test_a_worker_started_after_its_parent_died_exits_at_once():
    """The race PR_SET_PDEATHSIG misses: the parent was gone before the call."""
    code = (
        "import os; from elasim.executor.lifeline import hold_lifeline; "
        "hold_lifeline(os.getppid() + 10**7, death_signal=False); print('still here')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 3 and "still here" not in proc.stdout


# -- a real run, its controller SIGKILLed ---------------------------------------------------

torch_cases = pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None, reason="needs torch (executor)"
)


def _journal_steps(out: Path) -> list[dict]:
    path = out / "steps.partial.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


@linux_only
@torch_cases
@pytest.mark.executor
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_killed_controller_leaves_no_orphan_and_resume_finishes_its_run(tmp_path):
    import pandas as pd
    import torch

    out = tmp_path / "out"
    args = [sys.executable, "-m", "elasim.cli", "run", "-t", "spot_us_east.csv",
            "--start-offset-s", "119000", "--time-scale", "300", "--max-steps", "500",
            "--max-nodes", "2", "--checkpoint-interval-steps", "40", "--collective-timeout-s", "2",
            "--json", "--no-plot"]  # fmt: skip
    proc = subprocess.Popen([*args, "--out", str(out)], stdout=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: len(_journal_steps(out)) >= 100, 240, 0.2), "never trained"
        workers = descendants(proc.pid)
        assert workers
        proc.kill()
        proc.wait(timeout=30)
        assert _wait_for(lambda: not still_alive(workers), 5.0), "workers outlived the controller"
    finally:
        proc.kill()
    before = _journal_steps(out)
    last = max(r["step"] for r in before)
    ckpt = torch.load(out / "checkpoints" / "checkpoint.pt", weights_only=True)["step"]
    # a checkpoint on its schedule.  The journal is flushed every quarter second, so a
    # checkpoint committed just before the kill can be ahead of it by what the workers
    # did in that time (tens of steps on an idle host, 71 once: those steps are not in
    # steps.parquet, a known gap, in the README); the resume below starts from it.
    assert ckpt > 0 and ckpt % 40 == 0

    resumed = subprocess.run(
        [sys.executable, "-m", "elasim.cli", "run", "--resume", str(out), "--json", "--no-plot"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["completed"] and summary["steps"] == 500
    first, second = summary["segments"]
    assert first["ended"] == "controller died" and second["ended"] == "completed"
    assert second["first_step"] == ckpt and second["start_trace_s"] >= first["start_trace_s"]
    assert summary["inputs"]["start_offset_s"] == 119000
    # the death is booked as a total loss: the steps after the checkpoint
    events = pd.read_parquet(out / "events.parquet")
    death = events[(events["kind"] == "preempt") & (events["nodes_after"] == 0)]
    assert (death["lost_steps"] == max(last - ckpt, 0)).any()
    assert summary["lost_steps"] == int(events["lost_steps"].sum())
    assert events["time_s"].is_monotonic_increasing
    # the steps of the first segment, then the resumed ones from the checkpoint on
    steps = pd.read_parquet(out / "steps.parquet")
    assert list(steps["step"][: len(before)]) == [r["step"] for r in before]
    assert steps["step"].iloc[len(before)] == ckpt + 1 and steps["step"].iloc[-1] == 500
    assert steps["trace_time_s"].is_monotonic_increasing
    timeline = pd.read_parquet(out / "timeline.parquet")
    assert timeline["time_s"].is_monotonic_increasing
    assert not list(out.glob("*.partial.*"))
    # a finished run is not resumed again
    again = subprocess.run(
        [sys.executable, "-m", "elasim.cli", "run", "--resume", str(out)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert again.returncode == 2 and "nothing to resume" in again.stderr


# -- the chaos benchmark, quick ---------------------------------------------------------------


@linux_only
@torch_cases
@pytest.mark.executor
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bench_chaos_quick_one_fault_of_each_kind(tmp_path):
    """Four faults (worker, checkpoint write, SIGSTOP, controller): no hang, orphan or
    unloadable checkpoint, the run completes, and the process exits right after its
    summary (it took 1-2.5 s of interpreter teardown before ``elasim.cli.main`` ended
    the process at once)."""
    out = tmp_path / "chaos.json"
    bench = REPO / "benchmarks" / "bench_chaos.py"
    proc = subprocess.run(
        [sys.executable, str(bench), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=580,
    )  # fmt: skip
    row = json.loads(out.read_text())
    assert proc.returncode == 0, (proc.stdout, row["failures"])
    assert row["faults"] >= 4 and row["faults: controller"] >= 1
    assert row["hangs"] == 0 and row["orphaned processes"] == 0
    assert row["unloadable checkpoints"] == 0 and row["checkpoints checked"] >= 1
    assert row["lost steps beyond the step in flight"] == 0
    assert row["survivors (completed)"] == row["runs"]
    assert row["summary-to-exit max s"] < 3.0  # a bound, not a timing: it was 1-2.5 s


@torch_cases
@pytest.mark.executor
@pytest.mark.timeout(120)
def test_resume_of_a_folder_without_a_run_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "elasim.cli", "run", "--resume", str(tmp_path)],
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "nothing to resume (no run.json" in lines[0]
