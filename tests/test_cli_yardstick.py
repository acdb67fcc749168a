"""The yardstick a user reads: cost_vs_on_demand and gap_closed in simulate and sweep.

Also the issue's reports, replayed: the deadline policy on a trace without spot (no
flapping on-demand, no dearer than on-demand run straight), and an impossible deadline
that used to pass silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from elasim.cli import app
from elasim.sweep import YARDSTICK_COLUMNS, SweepSpec, run_sweep

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def no_spot_trace(tmp_path: Path) -> Path:
    path = tmp_path / "no_spot.csv"
    path.write_text(
        "# source: synthetic, no spot node ever (tests/test_cli_yardstick.py)\n"
        "# synthetic: true\n# duration_s: 172800\ntime_s,available,price_per_hour\n0,0,0.918\n"
    )
    return path


def test_simulate_reports_the_yardstick_with_a_deadline():
    result = invoke(
        "simulate", "-t", "spot_us_east.csv", "-p", "deadline", "--max-nodes", "4",
        "--deadline-h", "30", "--start-offset-s", "300000", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["deadline_met"] is True and summary["deadline_feasible"] is True
    assert 0 < summary["cost_vs_on_demand"] <= 1.005
    assert summary["optimal_usd"] <= summary["cost_usd"] * 1.02
    assert summary["gap_closed"] is None or summary["gap_closed"] <= 1.05
    table = invoke(
        "simulate", "-t", "spot_us_east.csv", "-p", "deadline", "--max-nodes", "4",
        "--deadline-h", "30", "--start-offset-s", "300000",
    )  # fmt: skip
    assert "cost / on-demand plan" in table.stdout and "offline optimum (USD)" in table.stdout


def test_the_yardstick_reports_against_plain_greedy_and_the_optimum():
    """Issue 24: gap_closed, measured against greedy with fallback (255.5 USD), hid that
    plain greedy (111.4 USD, deadline met) was cheaper than deadline (122.9 USD)."""
    args = ("simulate", "-t", "spot_us_east.csv", "-p", "deadline", "--deadline-h", "12")
    summary = json.loads(invoke(*args, "--json").stdout)
    cost = summary["cost_usd"]
    assert summary["greedy_usd"] == pytest.approx(111.365, abs=0.01)
    assert summary["greedy_met"] is True
    assert summary["cost_vs_greedy"] == pytest.approx(cost / summary["greedy_usd"])
    assert summary["cost_vs_greedy"] > 1.05  # said plainly: dearer than plain greedy
    assert summary["cost_vs_optimal"] == pytest.approx(cost / summary["optimal_usd"])
    # the existing columns keep their meaning
    fallback, best = summary["greedy_fallback_usd"], summary["optimal_usd"]
    assert fallback == pytest.approx(255.48, abs=0.01)  # 258.66 before its fallback's
    # time followed the checkpoint schedule
    assert summary["gap_closed"] == pytest.approx((fallback - cost) / (fallback - best))
    assert summary["cost_vs_on_demand"] == pytest.approx(cost / summary["on_demand_plan_usd"])
    table = invoke(*args).stdout
    for label in ("cost / plain greedy", "cost / offline optimum", "plain greedy (USD)"):
        assert label in table, table


def test_no_yardstick_without_a_deadline_or_when_asked():
    plain = json.loads(invoke("simulate", "-t", "spot_us_east.csv", "--json").stdout)
    assert "cost_vs_on_demand" not in plain and plain["deadline_feasible"] is None
    off = invoke(
        "simulate", "-t", "spot_us_east.csv", "--deadline-h", "30", "--no-yardstick", "--json"
    )
    assert "gap_closed" not in json.loads(off.stdout)


def test_an_impossible_deadline_is_said_in_one_line_before_the_run():
    result = invoke("simulate", "-t", "spot_us_east.csv", "-p", "deadline", "--deadline-h", "6")
    assert result.exit_code == 0
    warning = [line for line in result.stderr.splitlines() if "cannot be met" in line]
    assert len(warning) == 1 and "16 nodes" in warning[0] and "7.7 h" in warning[0]
    summary = json.loads(
        invoke(
            "simulate", "-t", "spot_us_east.csv", "-p", "deadline", "--deadline-h", "6",
            "--json", "--no-yardstick",
        ).stdout
    )  # fmt: skip
    assert summary["deadline_feasible"] is False and summary["deadline_met"] is False


def test_deadline_without_spot_runs_on_demand_once_and_no_dearer(tmp_path: Path):
    """Issue 10: 380 rescales and 119 USD against 98 USD for one on-demand node."""
    trace = str(no_spot_trace(tmp_path))
    common = ("--deadline-h", "40", "--max-nodes", "1", "--on-demand-price-per-hour", "3.67")
    ours = json.loads(invoke("simulate", "-t", trace, "-p", "deadline", *common, "--json").stdout)
    straight = json.loads(
        invoke(
            "simulate", "-t", trace, "-p", "fixed", "--set", "use_on_demand=true", *common,
            "--json", "--no-yardstick",
        ).stdout
    )  # fmt: skip
    assert ours["deadline_met"] and ours["rescales"] == 0
    assert ours["cost_usd"] <= straight["cost_usd"] * 1.001
    assert ours["cost_vs_on_demand"] <= 1.001
    assert ours["gap_closed"] is None  # greedy with fallback is already the optimum here


def test_sweep_adds_the_yardstick_columns_and_the_optimum(tmp_path: Path):
    out = tmp_path / "sweep"
    result = invoke(
        "sweep", "--traces", "spot_us_east.csv", "--policies", "all", "--seeds", "0-1",
        "--max-nodes", "4", "--deadline-h", "30", "--workers", "1", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out / "sweep.parquet")
    assert "optimal" in set(frame["policy"]) and "on_demand" in set(frame["policy"])
    assert set(YARDSTICK_COLUMNS) <= set(frame.columns)
    said = " ".join(result.stdout.split())  # the note wraps at 80 columns
    assert "gap_closed" in said and "greedy with fallback" in said
    met = frame[frame["deadline_met"].astype(bool)]
    best = frame[frame["policy"] == "optimal"].set_index("seed")["cost_usd"]
    for _, row in met.iterrows():
        assert best[row["seed"]] <= row["cost_usd"] * 1.02, row["policy"]
    mine = frame[frame["policy"] == "deadline"]
    assert (mine["cost_vs_on_demand"] <= 1.005).all()
    # plain greedy in the grid is the yardstick's plain greedy; the optimum is its own
    greedy = frame[frame["policy"] == "greedy"]
    assert greedy["cost_vs_greedy"].to_numpy() == pytest.approx(1.0)
    assert greedy["greedy_usd"].to_numpy() == pytest.approx(greedy["cost_usd"].to_numpy())
    oracle = frame[frame["policy"] == "optimal"]
    assert oracle["cost_vs_optimal"].to_numpy() == pytest.approx(1.0)
    assert "against the yardstick" in said and "cost_vs_greedy" in said
    assert (out / "pareto.png").stat().st_size > 0


def test_without_a_deadline_the_sweep_has_no_oracle_and_no_yardstick():
    spec = SweepSpec(traces=("spot_us_east.csv",), policies=("greedy",), seeds=(0,))
    assert not spec.yardstick and spec.total_points == spec.size
    frame = run_sweep(spec, workers=1)
    assert "gap_closed" not in frame


def test_the_tables_carry_plain_greedy_and_the_optimum():
    """The sweep's tables and ``yardstick_table`` show both new ratios, old ones kept."""
    from elasim.analysis.sweep_tables import job_sweep_tables
    from elasim.analysis.tables import yardstick_table

    frame = pd.DataFrame(
        {
            "trace": ["t", "t"], "policy": ["a", "b"], "seed": [0, 0],
            "completion_time_h": [1.0, 2.0], "cost_usd": [2.0, 1.0], "lost_work_h": [0.0, 0.0],
            "rescales": [0, 0], "completed": [True, True], "deadline_met": [True, False],
            "cost_vs_on_demand": [0.5, 0.25], "gap_closed": [0.1, None],
            "cost_vs_greedy": [2.0, 1.0], "cost_vs_optimal": [4.0, 2.0],
        }
    )  # fmt: skip
    first, second = job_sweep_tables(frame)
    assert "vs on-\ndemand" not in [c.header for c in first.columns]  # fits 80 columns
    assert second.title.endswith("against the yardstick")
    headers = [c.header.replace("\n", " ") for c in second.columns]
    assert headers == [
        "policy", "cost (USD)", "vs on- demand", "gap closed", "vs greedy", "vs optimal", "on time",
    ]  # fmt: skip
    assert second.rows == (
        ("a", "2.00", "0.50", "0.10", "2.00", "4.00", "1/1"),
        ("b", "1.00", "0.25", "-", "1.00", "2.00", "0/1"),
    )
    table = yardstick_table(frame).set_index("policy")
    assert table["cost_vs_greedy"].to_dict() == {"a": 2.0, "b": 1.0}
    assert table["cost_vs_optimal"].to_dict() == {"a": 4.0, "b": 2.0}
    assert table["gap_closed"]["a"] == 0.1 and table["cost_vs_on_demand"]["b"] == 0.25


@pytest.mark.parametrize(
    ("extra", "plans"),
    [((), 1), (("--set", "step_s=600"), 2), (("--no-yardstick",), 1)],
    ids=["default-oracle-once", "other-options-twice", "no-yardstick"],
)
def test_simulate_with_the_optimum_plans_each_problem_once(monkeypatch, extra, plans):
    """Issue 23: ``-p optimal`` planned the same problem twice, once as the policy and
    once for the yardstick; the yardstick now takes the run itself as its optimum."""
    import elasim.optimal

    calls = []
    plan_optimal = elasim.optimal.plan_optimal

    def counted(*args, **kwargs):
        calls.append(kwargs.get("step_s"))
        return plan_optimal(*args, **kwargs)

    monkeypatch.setattr(elasim.optimal, "plan_optimal", counted)
    args = ("simulate", "-t", "spot_p3_bamboo.csv", "-p", "optimal", "--deadline-h", "10.4")
    prices = ("--on-demand-price-per-hour", "3.06", "--spot-price-per-hour", "0.9")
    result = invoke(*args, *prices, *extra, "--json")
    assert result.exit_code == 0, result.output
    assert len(calls) == plans, calls
    summary = json.loads(result.stdout)
    if plans == 1 and not extra:
        assert summary["cost_vs_optimal"] == 1.0  # the run is its own optimum


def test_a_deadline_policy_without_a_deadline_says_it_runs_as_greedy():
    """Without --deadline-h, `receding` holds every usable spot node (greedy's result):
    one warning line says so, so that the result is not read as the policy's own."""
    for policy in ("receding", "uniform_progress", "deadline"):
        out = invoke("simulate", "-t", "spot_us_east.csv", "-p", policy, "--json")
        assert out.exit_code == 0
        said = " ".join(out.stderr.split())
        assert f"warning: {policy} plans for a deadline; without --deadline-h" in said
    quiet = invoke("simulate", "-t", "spot_us_east.csv", "-p", "greedy", "--json")
    assert "plans for a deadline" not in quiet.stderr
    with_deadline = invoke(
        "simulate", "-t", "spot_us_east.csv", "-p", "receding", "--deadline-h", "20", "--json"
    )
    assert "plans for a deadline" not in with_deadline.stderr


def test_a_policy_that_does_not_move_given_several_zones_says_so():
    """`greedy` with two traces runs in the first all along: one warning line says so,
    and the table names both zones, the moves and the zone it ended in."""
    zones = ("-t", "spot_us_east.csv", "-t", "spot_us_west.csv")
    blind = invoke("simulate", *zones, "-p", "greedy")
    assert blind.exit_code == 0, blind.output
    said = " ".join(blind.stderr.split())
    assert "warning: greedy does not move between zones: it runs in the first" in said
    assert "failover" in said and "receding" in said
    moving = invoke("simulate", *zones, "-p", "failover")
    assert moving.exit_code == 0, moving.output
    assert "does not move" not in moving.stderr
    table = " ".join(moving.stdout.split())
    assert "spot_us_east.csv + spot_us_west.csv" in table
    assert "zone moves" in table and "final zone" in table
    one = invoke("simulate", "-t", "spot_us_east.csv", "-p", "greedy")
    assert "does not move" not in one.stderr and "zone moves" not in one.stdout
