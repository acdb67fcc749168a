"""``benchmarks/receding_what_if.py`` replays the benchmark's windows as the benchmark ran them."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from repo_scripts import load_script

from elasim.policies import RecedingPolicy
from elasim.traces import load_trace

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def what_if():
    return load_script(REPO / "benchmarks" / "receding_what_if.py")


@pytest.fixture(scope="module")
def row(what_if) -> dict:
    """One row of ``bench_spot_policies``' sweep: a 4-node 1.5x window of spot_us_east."""
    args = argparse.Namespace(windows=1, workers=1, notice_s=0.0)
    frame = what_if.bench.sweep(["spot_us_east.csv"], ("receding",), 4, 1.5, args)
    return frame.to_dict("records")[0]


def test_as_run_is_the_benchmark_row(what_if, row) -> None:
    ratio, met, plan = what_if.replay(row, {})
    assert ratio == pytest.approx(row["cost_vs_optimal"], rel=1e-9)
    assert met and plan == pytest.approx(row["cost_vs_on_demand"], rel=1e-9)


def test_variants_keep_the_guarantees(what_if, row) -> None:
    for variant in ({"told": True}, {"past_h": 6.0}):
        ratio, met, plan = what_if.replay(row, {}, **variant)
        assert met, variant
        assert plan <= 1.05 + 1e-9, variant  # the plan plus receding's 5 % bet
        assert ratio >= 1.0 - 1e-6, variant  # never below the optimum (a 1-window gap)


def test_future_shares_are_the_window(what_if) -> None:
    trace = load_trace("spot_us_east.csv")
    shares = what_if.future_shares(trace, 0.0, 3600.0 * 10, 4)
    assert sum(s for _, s in shares) == pytest.approx(1.0)
    assert all(0 <= level <= 4 for level, _ in shares)
    first = min(trace.value_at(0.0)[0], 4)
    assert dict(shares)[first] > 0.0


def test_told_shares_delegates_the_rest(what_if) -> None:
    history = RecedingPolicy().history
    told = what_if.ToldShares(history, [(3, 1.0)])
    told.observe(0.0, 2)
    told.observe(60.0, 0)
    assert told.shares(4) == [(3, 1.0)]
    assert history.seen_s == 60.0 and told.outages == history.outages == 0
    assert told.drops == 1


@pytest.mark.parametrize(
    ("content", "args", "says"),
    [
        (None, [], "No such file or directory"),
        ("a,b\n1,2\n", [], "not a --out table of this benchmark (no trace, policy"),
        ("", [], "No columns to parse"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, content, args, says) -> None:
    rows = tmp_path / "rows.csv"
    if content is not None:
        rows.write_text(content)
    script = REPO / "benchmarks" / "receding_what_if.py"
    done = subprocess.run(
        [sys.executable, str(script), str(rows), *args], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and says in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_bad_hours_are_one_line_and_exit_2(tmp_path, row) -> None:
    rows = tmp_path / "rows.csv"
    pd.DataFrame([row]).to_csv(rows, index=False)
    script = REPO / "benchmarks" / "receding_what_if.py"
    done = subprocess.run(
        [sys.executable, str(script), str(rows), "--past-h", "12,x"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "--past-h '12,x'" in done.stderr and "Traceback" not in done.stderr
