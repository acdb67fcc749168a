"""Profiles: file round trip, one-line errors, and what the simulator takes from them."""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path

import pytest
from conftest import ScriptedPolicy, capacity, greedy_fn

from elasim.jobmodel import JobSpec
from elasim.policies import EventKind, PauseComponents
from elasim.profile import (
    PROFILE_VERSION,
    MeasuredPause,
    Profile,
    ProfileError,
    apply_profile,
    cold_start_alone_s,
    cold_starts_from_workers,
    describe_profile,
    load_profile,
    save_profile,
    starting_weight,
    step_times_from_steps,
)
from elasim.sim import RescaleMode, simulate


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
        cold_start_s=((1, (3.0,)), (2, (3.1, 3.3)), (4, (6.0, 6.2, 6.4, 6.8))),
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
    config = JobSpec(checkpoint_interval_s=math.inf, rescale=RescaleMode.INPLACE)
    result = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=job)
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


def test_version_1_profiles_still_load(tmp_path: Path):
    import json

    data = make_profile().to_json()
    data["elasim_profile_version"] = 1
    del data["cold_start_s"]
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(data))
    old = load_profile(path)
    assert old.version == 1 and old.cold_start_s == ()
    # without measured batches every replacement takes the flat worker start time
    assert apply_profile(old).rescale.cold_start_offsets_s(3) == (2.5, 2.5, 2.5)


def test_bad_cold_start_batches_are_rejected(tmp_path: Path):
    import json

    data = make_profile().to_json()
    data["cold_start_s"] = {"2": [1.0]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=r"bad\.json: cold start batch 2 needs 2 offsets"):
        load_profile(path)


def test_cold_starts_are_split_into_batches_by_spawn_time():
    import pandas as pd

    workers = pd.DataFrame(
        {
            "wid": [0, 1, 2, 3, 4, 5, 6, 7],
            # four standbys at the start, two replacements at 10 s, one at 20 s that
            # never became ready (left out), one at 30 s
            "spawn_s": [-5.0, -4.99, -4.98, -4.97, 10.0, 10.01, 20.0, 30.0],
            "ready_s": [1.0, 0.5, 1.5, 0.9, 13.5, 13.2, math.nan, 33.0],
        }
    )
    # two workers trained from 1 s to 13 s
    steps = pd.DataFrame(
        {
            "time_s": [1 + 0.5 * i for i in range(25)],
            "step": range(1, 26),
            "world_size": [2] * 25,
            "gen": [0] * 25,
        }
    )
    batches = cold_starts_from_workers(workers, steps)
    assert [len(b.offsets_s) for b in batches] == [4, 2, 1]
    assert batches[0].offsets_s == pytest.approx((5.49, 5.87, 6.0, 6.48))
    assert batches[1].offsets_s == pytest.approx((3.19, 3.5))
    assert batches[2].offsets_s == pytest.approx((3.0,))
    # the first batch started before training, the second while two workers trained
    # (their 0.5 s steps until the first replacement was ready at 13.19 s)
    assert [b.trainers for b in batches] == [0, 2, 0]
    assert [b.trainer_step_s for b in batches] == [None, pytest.approx(0.5), None]
    # alone on 2 cores: 4 starters had half a core each, 2 starters + 2 trainers too
    alone = cold_start_alone_s(batches, cores=2)
    assert alone == pytest.approx(statistics.median([2.745, 2.935, 3.0, 3.24, 1.595, 1.75, 3.0]))


def test_cold_start_offsets_for_unmeasured_batch_sizes():
    rescale = apply_profile(make_profile()).rescale
    assert rescale.cold_start_offsets_s(4) == (6.0, 6.2, 6.4, 6.8)
    assert rescale.cold_start_offsets_s(1) == (3.0,)
    # 3 together: the 2-batch stretched by 3/2, its last offset repeated
    assert rescale.cold_start_offsets_s(3) == pytest.approx((4.65, 4.95, 4.95))
    # 8 together: the 4-batch stretched by 2
    assert rescale.cold_start_offsets_s(8)[:4] == pytest.approx((12.0, 12.4, 12.8, 13.6))
    assert rescale.cold_start_offsets_s(0) == ()


def test_replacements_started_together_join_at_their_measured_ready_times():
    job = apply_profile(make_profile(), target_samples=6400 * 1000)
    # every node lost at 10 s, capacity back at 12 s: the four replacements (spawned
    # at 10 s) join one by one at 16.0, 16.2, 16.4 and 16.8 s
    trace = capacity([0.0, 10.0, 12.0], [4, 0, 4], [1.0] * 3, duration_s=10_000.0)
    config = JobSpec(checkpoint_interval_s=math.inf, rescale=RescaleMode.INPLACE)
    result = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=job)
    joins = [
        (e.time_s, e.nodes_before, e.nodes_after)
        for e in result.events
        if e.kind in (EventKind.RESUME, EventKind.SCALE_UP) and e.time_s > 10
    ]
    assert [t for t, _, _ in joins] == pytest.approx([16.0, 16.2, 16.4, 16.8])
    assert [(b, a) for _, b, a in joins] == [(0, 1), (1, 2), (2, 3), (3, 4)]


def test_shared_host_cold_starts_compete_with_training():
    # measured on one 2-core host: a worker alone starts in 3 s
    profile = dataclasses.replace(make_profile(), shared_host_cores=2, cold_start_alone_s=3.0)
    rescale = apply_profile(profile).rescale
    assert rescale.shared_host_cores == 2 and rescale.cold_start_s == 3.0
    # 4 starting alone share 2 cores: 6 s each; 1 starting next to 1 trainer: 3 s
    assert rescale.cold_start_offsets_s(4) == (6.0,) * 4
    assert rescale.cold_start_offsets_s(1, trainers=1) == (3.0,)
    assert rescale.cold_start_offsets_s(2, trainers=2) == (6.0, 6.0)
    # 2 trainers slow to half speed while 2 replacements start
    assert rescale.training_rate(2, 2) == pytest.approx(0.5)
    assert rescale.training_rate(1, 1) == 1.0 and rescale.training_rate(4, 0) == 1.0

    job = apply_profile(profile, target_samples=6400 * 100)
    # 2 of 4 workers are killed at 10 s and capacity comes back at once: the two
    # replacements start next to the 2 survivors (6 s), who train at half speed
    trace = capacity([0.0, 10.0, 10.5], [4, 2, 4], [1.0] * 3, duration_s=10_000.0)
    config = JobSpec(checkpoint_interval_s=math.inf, rescale=RescaleMode.INPLACE)
    shared = simulate(config, trace=trace, policy=ScriptedPolicy(greedy_fn), job=job)
    joins = [e for e in shared.events if e.kind is EventKind.SCALE_UP and e.time_s > 10]
    assert joins and joins[0].time_s == pytest.approx(16.0)
    # the same profile off a shared host: replacements start in 3 s, nobody slows
    apart = dataclasses.replace(profile, shared_host_cores=0)
    alone = simulate(
        config,
        trace=trace,
        policy=ScriptedPolicy(greedy_fn),
        job=apply_profile(apart, target_samples=6400 * 100),
    )
    joins_apart = [e for e in alone.events if e.kind is EventKind.SCALE_UP and e.time_s > 10]
    assert joins_apart[0].time_s < 16.0
    # 2 and 4 workers train equally fast here (8000 samples/s), so the only
    # difference is the slowdown, 6 s at half speed = 3 s of work, less the 0.11 s of
    # pauses the separate run spends joining its two replacements one at a time
    # (2->3 and 3->4, analytical) instead of together (2->4, measured: 0.05 s)
    extra_s = (shared.completion_time_h - alone.completion_time_h) * 3600
    assert extra_s == pytest.approx(3.0 - 0.11, abs=0.01)


def test_step_times_leave_out_steps_slowed_by_a_starting_worker():
    import pandas as pd

    # one generation of 1 worker: 1 ms steps, except 3 ms while a worker started (2-4 s)
    times, t = [], 0.0
    while t < 6.0:
        t += 0.003 if 2.0 <= t < 4.0 else 0.001
        times.append(t)
    steps = pd.DataFrame(
        {
            "time_s": times,
            "step": range(1, len(times) + 1),
            "world_size": [1] * len(times),
            "gen": [0] * len(times),
        }
    )
    # the mean, not the median: a run's time is the sum of its steps
    everything = step_times_from_steps(steps)[1]
    assert everything == pytest.approx(6.0 / len(times), rel=1e-3)  # 1.29 ms, not 1 ms
    # steps taken while a worker started measure the contention: left out
    assert step_times_from_steps(steps, [(2.0, 4.0)])[1] == pytest.approx(0.001)
    # a world size measured only while someone started keeps those steps
    only_slow = steps[(steps["time_s"] > 2.1) & (steps["time_s"] < 3.9)]
    assert step_times_from_steps(only_slow, [(2.0, 4.0)])[1] == pytest.approx(0.003)


def test_step_time_tails_count():
    import pandas as pd

    # nine 1 ms steps and one 11 ms hiccup: median 1 ms, but 10 steps took 20 ms
    durations = [0.001] * 9 + [0.011]
    times = [sum(durations[: i + 1]) for i in range(len(durations))]
    steps = pd.DataFrame(
        {"time_s": [0.0, *times], "step": range(11), "world_size": [1] * 11, "gen": [0] * 11}
    )
    assert step_times_from_steps(steps)[1] == pytest.approx(0.002)


def test_starting_weight_is_fitted_on_the_trainers_slowdown():
    from elasim.profile import ColdStartBatch

    quiet = {1: 0.001, 2: 0.002}
    # 1 trainer, 3 starting, 2 cores: a 2.5x slower step means 1 + 3 w = 5, w = 4/3
    one = ColdStartBatch(0.0, (6.0, 6.0, 6.0), trainers=1, trainer_step_s=0.0025)
    assert starting_weight([one], quiet, cores=2) == pytest.approx(4 / 3)
    # 2 trainers (a full core each), 2 starting: 2x slower means 2 + 2 w = 4, w = 1
    two = ColdStartBatch(0.0, (6.0, 6.0), trainers=2, trainer_step_s=0.004)
    assert starting_weight([two], quiet, cores=2) == pytest.approx(1.0)
    # no slowdown at all: the starting worker took nothing from the trainers
    none = ColdStartBatch(0.0, (3.0,), trainers=1, trainer_step_s=0.001)
    assert starting_weight([none], quiet, cores=2) == 0.0
    # batches without trainers say nothing: the default is processor sharing, w = 1
    alone = ColdStartBatch(0.0, (3.0,), trainers=0)
    assert starting_weight([alone], quiet, cores=2) == 1.0
    assert starting_weight([one, two, none], quiet, cores=2) == pytest.approx(1.0)
    # the weight reaches the simulator: 1 trainer next to 3 starters at w = 4/3
    profile = dataclasses.replace(
        make_profile(), shared_host_cores=2, cold_start_alone_s=3.0, starting_weight=4 / 3
    )
    assert apply_profile(profile).rescale.training_rate(1, 3) == pytest.approx(0.4)


def test_describe_profile_lists_every_measurement():
    profile = dataclasses.replace(make_profile(), shared_host_cores=2, cold_start_alone_s=3.0)
    rows = dict(describe_profile(profile))
    assert rows["step time, 4 workers (s)"] == "0.0080"
    assert rows["pause inplace 2->1 (kill) (s)"] == "0.510 (detect 0.500, rendezvous 0.010)"
    # the scaling curve follows from the step times at a fixed global batch of 64
    assert rows["throughput, 2 workers (samples/s)"] == "8,000 (x1.25 of 1 worker)"
    assert rows["cold start, 4 spawned together (s)"] == "6.00 / 6.20 / 6.40 / 6.80"
    assert rows["cold start alone on the 2-core host (s)"] == "3.00"
