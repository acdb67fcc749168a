"""Profiles: file round trip, one-line errors, and what the simulator takes from them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import ScriptedPolicy, capacity, greedy_fn

from elasim.policies import EventKind, PauseComponents
from elasim.profile import (
    PROFILE_VERSION,
    MeasuredPause,
    Profile,
    ProfileError,
    apply_profile,
    load_profile,
    save_profile,
)
from elasim.sim import RescaleMode, SimConfig, simulate


def make_profile() -> Profile:
    return Profile(
        version=PROFILE_VERSION,
        hardware=(("cpu", "test-cpu"), ("cores", 2)),
        torch_version="2.13.0",
        backend="gloo",
        model=(("name", "digits-mlp"), ("state_bytes", 1_000_000)),
        global_batch=64,
        step_time_s=((1, 0.010), (2, 0.008), (4, 0.008)),
        pauses=(
            MeasuredPause(
                "inplace", 1, 2, False, 3, PauseComponents(rendezvous_s=0.02, state_s=0.01)
            ),
            MeasuredPause(
                "inplace", 2, 4, False, 3, PauseComponents(rendezvous_s=0.04, state_s=0.01)
            ),
            MeasuredPause(
                "inplace", 2, 1, True, 2, PauseComponents(detect_s=0.5, rendezvous_s=0.01)
            ),
        ),
        checkpoint_size_bytes=2_000_000,
        checkpoint_save_s=0.02,
        checkpoint_load_s=0.01,
        worker_start_s=2.5,
        detect_s=0.5,
        source="test",
    )


def test_round_trip(tmp_path: Path):
    profile = make_profile()
    path = save_profile(profile, tmp_path / "p.json")
    assert load_profile(path) == profile


def test_bad_files_give_one_line_errors(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"elasim_profile_version": 1,\n "global_batch": }')
    with pytest.raises(ProfileError, match=r"bad\.json:2:\d+"):
        load_profile(bad)
    bad.write_text('{"elasim_profile_version": 99, "global_batch": 1, "step_time_s": {"1": 1}}')
    with pytest.raises(ProfileError, match="version 99"):
        load_profile(bad)
    bad.write_text('{"elasim_profile_version": 1, "step_time_s": {"1": 1}}')
    with pytest.raises(ProfileError, match="global_batch"):
        load_profile(bad)


def test_apply_profile_uses_measurements():
    job = apply_profile(make_profile(), target_samples=64_000)
    assert job.nodes.max == 4
    assert job.throughput_samples_per_s(1) == pytest.approx(6400)
    assert job.throughput_samples_per_s(2) == pytest.approx(8000)
    assert job.checkpoint.write_s == pytest.approx(0.02)
    assert job.checkpoint.read_s == pytest.approx(0.01)
    # warm standbys: a newcomer's acquisition is the measured in-place acquire_s (0 here),
    # not the 2.5 s cold start of an interpreter
    assert job.rescale.boot_s == 0.0 and job.rescale.detect_s == 0.5
    # rendezvous fitted on (2, .02), (4, .04), (1, .01): exactly 0.01 s per node
    assert job.rescale.rendezvous_per_node_s == pytest.approx(0.01)
    assert job.rescale.rendezvous_base_s == pytest.approx(0.0, abs=1e-12)
    assert job.measured_pause("inplace", 1, 2, False) == PauseComponents(
        rendezvous_s=0.02, state_s=0.01
    )


def test_simulator_uses_the_measured_pause_table():
    job = apply_profile(make_profile(), target_samples=6400 * 100)
    trace = capacity([0.0, 10.0], [1, 2], [1.0, 1.0], duration_s=1000.0)
    config = SimConfig(checkpoint_interval_s=math.inf, rescale=RescaleMode.INPLACE)
    result = simulate(trace, ScriptedPolicy(greedy_fn), job, config)
    (grow,) = [e for e in result.events if e.kind is EventKind.SCALE_UP and e.nodes_before == 1]
    assert grow.pause == PauseComponents(rendezvous_s=0.02, state_s=0.01)
    assert grow.time_s == pytest.approx(10.0)  # a warm standby joins at once


def test_cli_simulate_with_a_profile(tmp_path: Path):
    import json

    from typer.testing import CliRunner

    from elasim.cli import app

    path = save_profile(make_profile(), tmp_path / "profile.json")
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "simulate",
            "-t",
            "spot_p3_bamboo.csv",
            "--profile",
            str(path),
            "--target-samples",
            "1e7",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["completed"] and summary["inputs"]["max_nodes"] == 4
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    result = runner.invoke(app, ["simulate", "-t", "spot_p3_bamboo.csv", "--profile", str(broken)])
    assert result.exit_code == 2
    assert "broken.json:1:2" in result.stderr
