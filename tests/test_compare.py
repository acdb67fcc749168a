"""Event matching between a measured run and a simulation (hand-made event tables)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import capacity

from elasim.compare import CompareResult, compare_frames, scale_trace
from elasim.policies import EVENT_COLUMNS


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
