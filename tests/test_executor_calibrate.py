"""`elasim calibrate` on real gloo workers (short schedule), and its profile in the simulator."""

from __future__ import annotations

import json
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
