"""`elasim calibrate` on real gloo workers (short schedule), and its profile in the simulator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from elasim.cli import app  # noqa: E402
from elasim.profile import apply_profile, load_profile  # noqa: E402

pytestmark = [pytest.mark.executor, pytest.mark.slow]


@pytest.mark.timeout(330)
def test_calibrate_writes_a_profile_the_simulator_uses(tmp_path: Path):
    out = tmp_path / "profile.json"
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "calibrate",
            "--out",
            str(out),
            "--segment-s",
            "2.5",
            "--workers-max",
            "2",
            "--rescale",
            "inplace",
        ],
    )
    assert result.exit_code == 0, result.output
    profile = load_profile(out)
    assert profile.backend == "gloo" and profile.torch_version
    worlds = dict(profile.step_time_s)
    assert set(worlds) == {1, 2} and all(t > 0 for t in worlds.values())
    kinds = {(p.nodes_before, p.nodes_after, p.failure) for p in profile.pauses}
    assert (1, 2, False) in kinds  # a planned scale-up was measured
    assert (2, 1, True) in kinds  # and a SIGKILLed worker
    assert (0, 2, False) in kinds  # the start-up run from warm standbys
    assert profile.worker_start_s > 0
    # cold starts: the standbys of each run, the replacement of the killed worker
    sizes = dict(profile.cold_start_s)
    assert 1 in sizes and 2 in sizes and all(o > 0 for o in sizes[2])
    assert profile.shared_host_cores >= 1 and profile.cold_start_alone_s > 0
    job = apply_profile(profile, target_samples=1e5)
    assert job.nodes.max == 2 and job.measured_pause("inplace", 1, 2, False) is not None
    sim = runner.invoke(
        app, ["simulate", "-t", "spot_us_east.csv", "--profile", str(out), "--json"]
    )
    assert sim.exit_code == 0, sim.output
    assert json.loads(sim.stdout)["completed"] is True

    # and `elasim compare --trace` runs the executor and the simulation, then compares
    cmp = tmp_path / "cmp"
    compared = runner.invoke(
        app,
        [
            "compare",
            "--trace",
            "spot_us_east.csv",
            "--profile",
            str(out),
            "--time-scale",
            "1000",
            "--trace-start-s",
            "127500",
            "--workers-max",
            "2",
            "--max-steps",
            "300",
            "--out",
            str(cmp),
            "--json",
        ],
    )
    assert compared.exit_code == 0, compared.output
    report = json.loads(compared.stdout)
    assert report == json.loads((cmp / "compare.json").read_text())
    assert report["events_matched"] >= 1 and report["real_completion_s"] > 0
    assert report["completion_time_rel_error"] is not None
    assert (cmp / "compare.png").stat().st_size > 0
    assert (cmp / "real" / "workers.parquet").is_file() and (cmp / "sim" / "summary.json").is_file()


# -- a slow or busy machine (issue 11) ---------------------------------------------------------


def test_budgets_scale_with_the_measured_start_and_keep_their_floors():
    from elasim.executor.calibrate import Budgets

    idle, busy = Budgets.of(1.0, 2), Budgets.of(40.0, 2)
    assert (idle.ready_s, idle.change_s, idle.startup_wall_s) == (120.0, 60.0, 30.0)
    assert busy.ready_s >= 8 * 40.0 and busy.change_s >= 4 * 40.0
    assert busy.startup_wall_s >= 4 * 40.0
    assert Budgets.of(40.0, 8).ready_s >= busy.ready_s  # more workers starting at once


def test_a_failed_calibration_run_is_one_line_naming_the_run(monkeypatch, tmp_path):
    """It used to end on a misleading 'worker 1 exited unexpectedly (code 0)'."""
    from elasim.executor import calibrate as cal
    from elasim.executor.records import ExecutorError

    def fails(run):  # noqa: ANN001, ANN202
        raise ExecutorError("could not form a group after 4 attempts\nmore detail")

    monkeypatch.setattr(cal, "measure_worker_start_s", lambda starts=3: 2.0)
    monkeypatch.setattr(cal, "run_trace", fails)
    result = CliRunner().invoke(
        app, ["calibrate", "--out", str(tmp_path / "p.json"), "--rescale", "inplace"]
    )
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert lines == [
        "error: calibration run 'inplace' (inplace, workers "
        "1-2-3-4-3-3-2-2-1-1-3-1-1-4-2-2-4-1-1-2) failed: could not form a group after 4 attempts"
    ]
    assert not (tmp_path / "p.json").exists()


@pytest.mark.timeout(900)
def test_calibrate_succeeds_while_another_process_keeps_a_core_busy(tmp_path: Path):
    """Issue 11: it failed twice out of two on the 2-core machine next to a busy process."""
    out = tmp_path / "profile.json"
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "elasim.cli", "calibrate", "--out", str(out),
             "--segment-s", "1.5", "--max-nodes", "2", "--rescale", "inplace"],
            capture_output=True, text=True, timeout=880,
        )  # fmt: skip
    finally:
        busy.kill()
        busy.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    profile = load_profile(out)
    assert set(dict(profile.step_time_s)) == {1, 2}
    kinds = {(p.nodes_before, p.nodes_after, p.failure) for p in profile.pauses}
    assert (0, 2, False) in kinds  # the start-up run, now bounded by steps, not 1.5 s
