"""The answers under a sweep's table: cheapest, fastest, on time, identical policies."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasim.analysis.answers import (
    Answer,
    best_policies,
    cluster_answers,
    identical_classes,
    policy_labels,
    sweep_answers,
)
from elasim.analysis.sweep_tables import cell, cluster_sweep_tables, job_sweep_tables


def runs(rows: list[tuple]) -> pd.DataFrame:
    """(policy, seed, hours, usd, completed, deadline_met) rows as a sweep frame."""
    frame = pd.DataFrame(
        rows,
        columns=["policy", "seed", "completion_time_h", "cost_usd", "completed", "deadline_met"],
    )
    return frame.assign(
        trace="t.csv",
        notice_s=0.0,
        rescale="inplace",
        rescales=3,
        lost_work_h=0.0,
        spot_node_hours=1.0,
        on_demand_node_hours=0.0,
        preemptions=1,
    )


def lines(frame: pd.DataFrame, **kwargs) -> tuple[str, ...]:
    (group,) = sweep_answers(frame, **kwargs)
    return group.lines()


def test_cheapest_fastest_and_identical_policies_are_named():
    frame = runs(
        [
            ("greedy", 0, 9.0, 100.0, True, None),
            ("greedy", 1, 11.0, 120.0, True, None),
            ("price", 0, 9.0, 100.0, True, None),
            ("price", 1, 11.0, 120.0, True, None),
            ("cheap", 0, 30.0, 50.0, True, None),
            ("cheap", 1, 40.0, 60.0, True, None),
        ]
    )
    assert lines(frame) == (
        "cheapest: cheap, 55.00 USD",
        "fastest: greedy, price, 10.00 h (tie)",
        "greedy = price (identical runs)",
    )


def test_a_policy_with_an_unfinished_run_takes_no_part():
    frame = runs(
        [
            ("stops", 0, math.nan, 1.0, False, False),  # cheap because it stopped
            ("stops", 1, 5.0, 1.0, True, True),
            ("slow", 0, 20.0, 80.0, True, False),
            ("slow", 1, 20.0, 80.0, True, False),
        ]
    )
    assert lines(frame, deadline_h=10) == (
        "cheapest: slow, 80.00 USD",
        "fastest: slow, 20.00 h",
        "cheapest that meets the 10 h deadline: none met it on every run; most often: stops, 1/2",
        "left out (a run did not finish): stops",
    )


def test_cheapest_on_time_needs_every_run_on_time():
    frame = runs(
        [
            ("lucky", 0, 5.0, 10.0, True, True),
            ("lucky", 1, 50.0, 10.0, True, False),
            ("safe", 0, 8.0, 90.0, True, True),
            ("safe", 1, 8.0, 90.0, True, True),
        ]
    )
    answers = sweep_answers(frame, deadline_h=12)[0].answers
    on_time = answers[-1]
    assert on_time.policies == ("safe",) and on_time.median == 90.0
    assert on_time.line() == "cheapest that meets the 12 h deadline: safe, 90.00 USD (2/2 on time)"
    nobody = runs([("late", 0, 50.0, 1.0, True, False)])
    assert lines(nobody, deadline_h=1)[-1] == "cheapest that meets the 1 h deadline: none met it"


def test_oracles_are_left_out_and_groups_follow_the_notice():
    frame = pd.concat(
        [
            runs([("greedy", 0, 9.0, 100.0, True, None), ("optimal", 0, 1.0, 1.0, True, None)]),
            runs([("greedy", 0, 12.0, 90.0, True, None)]).assign(notice_s=120.0),
        ]
    )
    groups = sweep_answers(frame, by=("trace", "notice_s"), leave_out=["optimal"])
    assert [g.group for g in groups] == ["t.csv, notice 0 s", "t.csv, notice 120 s"]
    assert all("optimal" not in line for g in groups for line in g.lines())


def test_a_trace_without_a_price_is_answered_in_node_hours():
    frame = runs([("a", 0, 1.0, 0.0, True, None)]).assign(spot_node_hours=4.0)
    assert lines(frame)[0] == "cheapest: a, 4.00 node-h"


def test_cluster_answers_per_workload():
    frame = pd.DataFrame(
        {
            "workload": ["w1"] * 3,
            "policy": ["fifo", "srtf", "twin"],
            "avg_jct_s": [100.0, 50.0, 50.0],
            "p50_jct_s": [1.0, 1.0, 1.0],
            "p99_jct_s": [9.0, 9.0, 9.0],
            "makespan_s": [10.0, 10.0, 10.0],
            "jobs": [4, 4, 4],
            "jobs_completed": [4, 4, 4],
            "gpu_utilization": [0.5, 0.7, 0.7],
            "rescales": [0, 2, 2],
            "gpu_hours": [10.0, 12.0, 12.0],
        }
    )
    (group,) = cluster_answers(frame)
    assert group.lines() == (
        "cheapest: fifo, 10.0 GPU-h",
        "fastest: srtf, twin, 50 s mean JCT (tie)",
        "srtf = twin (identical runs)",
    )
    (table,) = cluster_sweep_tables(frame)
    assert table.rows[1] == ("srtf", "50", "1.00", "9", "12.0", "0.700", "2", "4/4")


def test_cells_print_whole_counts_without_decimals():
    assert cell(9.0, count=True) == "9" and cell(9.5, count=True) == "9.5"
    assert cell(1234.5678, 2) == "1,234.57" and cell(math.nan) == "-" and cell(None) == "-"
    frame = runs([("a", 0, 1.0, 2.0, True, None), ("a", 1, 3.0, 4.0, True, None)])
    (table,) = job_sweep_tables(frame)
    assert table.rows == (("a", "2.00", "3.00", "0.000", "3", "2/2"),)


def test_a_plugin_file_is_labelled_by_its_name():
    spec = "elasim/examples/my_policy.py:HalfPolicy"
    assert policy_labels(["greedy", spec]) == {"greedy": "greedy", spec: "half"}
    clash = policy_labels(["half", spec])  # two policies never share a label
    assert clash == {"half": "half", spec: spec}


# -- properties ---------------------------------------------------------------------------

figures = st.floats(min_value=0, max_value=1e6, allow_nan=False)
positive = st.floats(min_value=0.01, max_value=1e6)  # a priced trace: cost > 0
rows = st.lists(
    st.tuples(st.sampled_from("abcde"), st.integers(0, 2), positive, positive),
    min_size=1,
    max_size=15,
    unique_by=lambda r: (r[0], r[1]),
)


@settings(max_examples=60, deadline=None)
@given(rows)
def test_the_winners_are_never_beaten(data):
    frame = runs([(p, s, h, c, True, None) for p, s, h, c in data])
    cheapest, fastest = sweep_answers(frame)[0].answers
    cost = frame.groupby("policy")["cost_usd"].median()
    time = frame.groupby("policy")["completion_time_h"].median()
    assert all(cheapest.median <= v for v in cost) and set(cheapest.policies) <= set(cost.index)
    assert all(fastest.median <= v for v in time)
    assert all(math.isclose(cost[p], cheapest.median, rel_tol=1e-9) for p in cheapest.policies)
    assert all(math.isclose(time[p], fastest.median, rel_tol=1e-9) for p in fastest.policies)


@settings(max_examples=60, deadline=None)
@given(rows)
def test_identical_is_an_equivalence_relation(data):
    frame = runs([(p, s, h, c, True, None) for p, s, h, c in data])
    classes = identical_classes(frame, ["completion_time_h", "cost_usd"], ["seed"])
    members = [p for names in classes for p in names]
    assert sorted(members) == sorted(frame["policy"].unique())  # a partition: each once
    same = {(a, b) for names in classes for a in names for b in names}
    policies = set(members)
    assert all((p, p) in same for p in policies)  # reflexive
    assert all((b, a) in same for a, b in same)  # symmetric
    assert all((a, c) in same for a, b in same for b2, c in same if b == b2)  # transitive
    for a, b in same:  # in one class only when their runs are equal
        ra = frame[frame["policy"] == a].sort_values("seed")[["seed", "cost_usd"]].to_numpy()
        rb = frame[frame["policy"] == b].sort_values("seed")[["seed", "cost_usd"]].to_numpy()
        assert ra.shape == rb.shape and pytest.approx(ra, rel=1e-8) == rb


@given(st.dictionaries(st.sampled_from("abcdef"), figures | st.just(math.nan), min_size=1))
def test_best_policies_are_the_lowest_finite(medians):
    winners, value = best_policies(medians)
    finite = [v for v in medians.values() if not math.isnan(v)]
    assert (value is None) == (not finite)
    if finite:
        assert value == min(finite) and winners == tuple(sorted(winners))
        assert Answer("x", winners, value, "h").line().startswith("x: ")
