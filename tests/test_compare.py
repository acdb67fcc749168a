"""Event matching between a measured run and a simulation (hand-made event tables)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import capacity

from elasim.compare import CompareResult, compare_frames
from elasim.policies import EVENT_COLUMNS
from elasim.traces.model import scale_trace


def events(rows):
    frame = pd.DataFrame(
        [
            {
                "time_s": t,
                "kind": k,
                "nodes_before": b,
                "nodes_after": a,
                "pause_s": p,
                "lost_work_h": 0.0,
                "lost_samples": 0.0,
                "lost_steps": 0,
                "detect_s": 0.0,
                "acquire_s": 0.0,
                "rendezvous_s": p,
                "state_s": 0.0,
                "warmup_s": 0.0,
            }
            for t, k, b, a, p in rows
        ],
        columns=list(EVENT_COLUMNS),
    )
    return frame


def test_matching_by_kind_nodes_and_order():
    real = events(
        [
            (1.0, "scale_up", 0, 1, 0.5),
            (5.0, "scale_up", 1, 2, 0.10),
            (9.0, "checkpoint", 2, 2, 0.01),
            (12.0, "preempt", 2, 1, 0.2),
        ]
    )
    sim = events(
        [
            (1.2, "scale_up", 0, 1, 0.4),
            (5.5, "scale_up", 1, 2, 0.12),
            (12.1, "preempt", 2, 1, 0.3),
            (20.0, "scale_down", 1, 0, 0.0),
        ]
    )
    pairs = compare_frames(real, sim, real_time_column="time_s", window_s=2.0)
    result = CompareResult(tuple(pairs), 30.0, 33.0)
    assert result.events_matched == 3
    assert [p.matched for p in pairs] == [True, True, True, False]
    assert pairs[1].abs_error_s == pytest.approx(0.02)
    assert pairs[1].rel_error == pytest.approx(0.2)
    assert result.median_pause_rel_error == pytest.approx(0.2)  # errors 0.2, 0.2, 0.5
    assert result.completion_time_rel_error == pytest.approx(0.1)
    assert result.to_json()["events_matched"] == 3


def test_an_event_outside_the_window_is_unmatched():
    real = events([(1.0, "scale_up", 1, 2, 0.1)])
    sim = events([(100.0, "scale_up", 1, 2, 0.1)])
    pairs = compare_frames(real, sim, real_time_column="time_s", window_s=10.0)
    assert [p.matched for p in pairs] == [False, False]


def test_scale_trace_compresses_time_only():
    trace = capacity([0.0, 600.0], [1, 2], [1.0, 2.0], duration_s=1200.0)
    fast = scale_trace(trace, 60.0)
    assert list(fast.time_s) == [0.0, 10.0]
    assert fast.duration_s == pytest.approx(20.0)
    assert list(fast.available) == [1, 2]
    np.testing.assert_array_equal(fast.price_per_hour, trace.price_per_hour)
    with pytest.raises(ValueError):
        scale_trace(trace, math.nan)


def test_compare_command_on_two_directories(tmp_path):
    # a simulation compared with itself: every event matched, no error
    from typer.testing import CliRunner

    from elasim.cli import app

    runner = CliRunner()
    run = tmp_path / "sim"
    result = runner.invoke(app, ["simulate", "-t", "spot_us_east.csv", "--out", str(run)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["compare", str(run), str(run), "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    import json

    report = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert report["events_matched"] == report["events_real"] == report["events_sim"] > 0
    assert report["completion_time_rel_error"] == 0.0
    assert (tmp_path / "c" / "compare.png").stat().st_size > 0
    missing = runner.invoke(app, ["compare", str(tmp_path / "nope"), str(run)])
    assert missing.exit_code == 2 and "Traceback" not in missing.output


# -- only runs of the same job are compared ---------------------------------------------------


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    """The bundled measured run and its simulation (the pair the notebook compares)."""
    from elasim.compare import simulate_run
    from elasim.examples import sim_vs_real_dir, sim_vs_real_runs
    from elasim.profile import load_profile

    real = sim_vs_real_runs()[0]
    profile = load_profile(sim_vs_real_dir() / "profile.json")
    return real, simulate_run(real, profile, tmp_path_factory.mktemp("sim"))


def edited_copy(run, tmp_path, section="inputs", **values):
    """A copy of a run directory whose summary states other values in ``section``."""
    import json
    import shutil

    out = tmp_path / f"edited-{run.name}"
    shutil.copytree(run, out)
    summary = json.loads((out / "summary.json").read_text())
    summary.setdefault(section, {}).update(values)
    (out / "summary.json").write_text(json.dumps(summary))
    return out


def test_a_run_and_its_simulation_state_the_same_spec(bundled):
    """The simulation runs the run's own spec: the same keys, no translation."""
    import json

    from elasim.compare import check_same_run
    from elasim.jobmodel import JobSpec

    real, sim = bundled
    summaries = [json.loads((run / "summary.json").read_text()) for run in (real, sim)]
    specs = [JobSpec.from_inputs(s["inputs"]) for s in summaries]
    assert specs[0].trace == specs[1].trace == "spot_us_east.csv"
    assert specs[0].start_offset_s == specs[1].start_offset_s == 119000.0
    assert specs[0].policy == specs[1].policy == "greedy"
    assert set(summaries[1]["inputs"]) == set(JobSpec().as_inputs())
    check_same_run(*summaries)  # no exception


@pytest.mark.parametrize(
    ("section", "values", "field", "shown"),
    [
        ("inputs", {"job": "resnet50_v100"}, "job", ("'digits-mlp256x2'", "'resnet50_v100'")),
        ("inputs", {"trace": "spot_us_west.csv"}, "trace",
         ("'spot_us_east.csv'", "'spot_us_west.csv'")),
        ("inputs", {"policy": "fixed"}, "policy", ("'greedy'", "'fixed'")),
        ("inputs", {"notice_s": 120.0}, "notice_s", ("0.0", "120.0")),
        ("inputs", {"rescale": "restart"}, "rescale", ("'inplace'", "'restart'")),
        ("inputs", {"start_offset_s": 119300.0}, "start_offset_s", ("119000.0", "119300.0")),
        ("simulator", {"time_scale": 600.0}, "time_scale", ("300.0", "600.0")),
        ("simulator", {"target_samples": 1.0}, "work", ("", "1 samples")),
    ],
)  # fmt: skip
def test_compare_refuses_a_simulation_of_another_run(
    bundled, tmp_path, section, values, field, shown
):
    from elasim.compare import SpecMismatchError, compare_runs

    real, sim = bundled
    other = edited_copy(sim, tmp_path, section, **values)
    with pytest.raises(SpecMismatchError) as caught:
        compare_runs(real, other)
    message = str(caught.value)
    assert "\n" not in message and isinstance(caught.value, ValueError)
    assert f"{field} differs ({real}: {shown[0]}" in message, message
    assert f"{other}: {shown[1]})" in message, message
    assert compare_runs(real, other, force=True).pairs  # the caller may insist


def test_comparing_unrelated_directories_fails_in_one_line(bundled, tmp_path, caplog):
    from typer.testing import CliRunner

    from elasim.cli import app
    from elasim.compare import SpecMismatchError, compare_runs

    real, _ = bundled
    runner = CliRunner()
    other = tmp_path / "resnet"  # the default job on the same trace: another job entirely
    result = runner.invoke(app, ["simulate", "-t", "spot_us_east.csv", "--out", str(other)])
    assert result.exit_code == 0, result.output
    with pytest.raises(SpecMismatchError, match="not the same run: job differs"):
        compare_runs(real, other)
    result = runner.invoke(app, ["compare", str(real), str(other), "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "job differs" in result.output and not (tmp_path / "c" / "compare.json").exists()
    # forced, the comparison runs, and says loudly that nothing matched
    with caplog.at_level("WARNING", logger="elasim.compare"):
        forced = compare_runs(real, other, force=True)
    assert forced.events_matched == 0
    assert any("0 events matched" in r.getMessage() for r in caplog.records)


def test_matching_warns_only_when_nothing_matched(caplog):
    real = events([(1.0, "scale_up", 0, 2, 0.5)])
    with caplog.at_level("WARNING", logger="elasim.compare"):
        compare_frames(real, events([(1.1, "scale_up", 0, 2, 0.4)]), real_time_column="time_s")
        assert not caplog.records
        compare_frames(real, events([(1.1, "scale_up", 0, 3, 0.4)]), real_time_column="time_s")
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "0 events matched (1 measured, 1 simulated)" in caplog.records[0].getMessage()


def test_run_to_run_errors_refuses_runs_that_are_not_repeats(bundled, tmp_path):
    from elasim.compare import SpecMismatchError, run_to_run_errors

    real, _ = bundled
    other = edited_copy(real, tmp_path, trace_start_s=26000.0)
    with pytest.raises(SpecMismatchError, match="start_offset_s differs"):
        run_to_run_errors([real, other])
    assert run_to_run_errors([real, other], force=True)["pairs of runs"] == 1


def test_zone_moves_match_by_their_zones_and_keep_an_order_of_their_own():
    """A move pairs with the simulated move between the same zones, whatever its nodes.

    The real run logs its move after the preemption that caused it, the simulation
    before it: each still finds its partner.  A move's transfer is no pause the model
    predicts, so it stays out of the median pause error.
    """
    from elasim.compare.runs import move_rows

    real = events([(1.0, "scale_up", 0, 2, 0.5), (3.0, "preempt", 2, 0, 0.0)])
    sim = events([(1.0, "scale_up", 0, 2, 0.4), (3.0, "preempt", 2, 0, 0.0)])
    real_moves = {"executor": {"moves": [[3.1, "a", "b"], [9.0, "b", "a"]]}}
    real_moves["executor"]["move_transfer_s"] = [1.2, None]
    sim_moves = {"simulator": {"moves": [[2.9, "a", "b"], [8.0, "b", "c"]]}}
    sim_moves["simulator"]["move_transfer_s"] = [1.0, 1.0]
    real = pd.concat([real, move_rows(real_moves, real)], ignore_index=True)
    sim = pd.concat([move_rows(sim_moves, sim), sim], ignore_index=True)  # moves first
    pairs = compare_frames(real, sim, real_time_column="time_s", window_s=2.0)
    shown = [(p.label, p.matched) for p in pairs]
    assert shown == [
        ("scale_up 0->2", True),
        ("preempt 2->0", True),
        ("move a->b", True),
        ("move b->a", False),  # the simulation went to c
        ("move b->c", False),
    ]
    move = pairs[2]
    assert move.nodes_before == 0 and move.real_pause_s == 1.2 and move.sim_pause_s == 1.0
    assert pairs[3].real_pause_s is None  # still on its way when the run ended
    result = CompareResult(tuple(pairs), 10.0, 10.0)
    assert result.median_pause_rel_error == pytest.approx(0.2)  # the scale-up's alone
    assert result.to_json()["moves_matched"] == 1
    assert move.as_record()["zone_from"] == "a" and move.as_record()["zone_to"] == "b"
