"""The fast offline optimum against references: the old all-states pass and brute force.

Random small problems (a few nodes, a few hours, random availability, prices and
notice) are built exactly as the planner builds them; then

* the feasible-states pass (:mod:`elasim.optimal.forward`) must give, for any
  ``lam``, the same best value, work, cost and schedule as the all-states pass it
  replaces (``tests/optimal_reference.py``);
* the solver's cost may not be below the cheapest schedule found by enumerating
  every schedule, nor its lower bound above it;
* a deadline past the trace's end is capped as :mod:`elasim.optimal.horizon` says.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math

import numpy as np
import optimal_reference as ref
import pytest
from conftest import capacity
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasim.job import load_job
from elasim.jobmodel import CapacityReplay, JobSpec, RescaleMode
from elasim.optimal import plan_optimal
from elasim.optimal.forward import Kernel, drops_of
from elasim.optimal.horizon import universal_bound
from elasim.optimal.problem import build_problem
from elasim.optimal.solve import _evaluate, _tables, solve

HOUR = 3600.0


def small_job(nodes: int, hours_on_one: float):
    spec = load_job("resnet50_v100").with_nodes(1, nodes)
    return dataclasses.replace(spec, target_samples=1200.0 * HOUR * hours_on_one)


@st.composite
def problems(draw, max_nodes: int = 3, max_rows: int = 6, on_demand: bool = True):
    """A planning problem as the planner builds one, from a random trace and job."""
    nodes = draw(st.integers(1, max_nodes))
    rows = draw(st.integers(1, max_rows))
    gaps = draw(st.lists(st.integers(1, 12), min_size=rows, max_size=rows))
    times = np.cumsum([0] + gaps[:-1]) * 600.0
    available = draw(st.lists(st.integers(0, nodes + 1), min_size=rows, max_size=rows))
    prices = draw(st.lists(st.sampled_from([0.5, 0.9, 1.4]), min_size=rows, max_size=rows))
    job = small_job(nodes, draw(st.sampled_from([0.5, 1.0, 2.0])))
    replay = CapacityReplay(
        times,
        available,
        prices,
        duration_s=float(times[-1] + 3600.0),
        notice_s=draw(st.sampled_from([0.0, 30.0, 120.0])),
        cap_nodes=nodes,
    )
    return build_problem(
        replay,
        job,
        mode=draw(st.sampled_from(list(RescaleMode))),
        notice_s=replay.notice_s,
        horizon_s=draw(st.sampled_from([1.0, 2.0, 3.0])) * HOUR,
        step_s=draw(st.sampled_from([600.0, 900.0, 1800.0])),
        on_demand_price_per_hour=draw(st.sampled_from([2.0, 3.06])) if on_demand else None,
        checkpoint_interval_s=None,
        checkpoint_cost_s=None,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(), lam_scale=st.floats(1e-3, 1e3))
def test_the_feasible_states_pass_is_the_all_states_pass(problem, lam_scale: float) -> None:
    lam = lam_scale * 1e-7
    kernel = Kernel(problem, drops_of(problem))
    value, work, cost, choices, sources = kernel.run(lam, keep=True)
    old_value, old_work, old_cost, old_choices, old_sources = ref._forward(
        problem, np.asarray([lam]), ref._drops(problem), keep=True
    )
    best = int(value.argmax())
    assert best == int(old_value[0].argmax())
    assert value[best] == old_value[0, best]  # bit for bit
    assert (work[best], cost[best]) == (old_work[0, best], old_cost[0, best])
    reachable = np.isfinite(old_value[0])
    assert np.array_equal(np.isfinite(value), reachable)
    assert np.array_equal(value[reachable], old_value[0, reachable])
    assert np.array_equal(work[reachable], old_work[0, reachable])
    assert np.array_equal(cost[reachable], old_cost[0, reachable])
    path = ref._backtrack(best, choices, sources)
    assert np.array_equal(path, ref._backtrack(best, old_choices, old_sources))


def brute_force_usd(problem) -> tuple[float, float]:
    """The cheapest schedules on the grid that do the work, by enumeration (inf: none).

    ``(as replayed, whole segments)``: the replay stops paying when the work is done;
    the program's schedules (and so its lower bound) pay for every segment they hold.
    """
    tables = _tables(problem)
    allowed = [
        np.flatnonzero(problem.configs[:, 0] <= problem.available[k])
        for k in range(problem.segments)
    ]
    replayed = whole = math.inf
    ks = np.arange(problem.segments)
    for path in itertools.product(*allowed):
        reached, usd, _ = _evaluate(problem, tables, np.asarray(path))
        if reached:
            replayed = min(replayed, usd)
            paid = tables.usd_per_s[ks, np.asarray(path)] * problem.length_s
            whole = min(whole, float(paid.sum()))
    return replayed, whole


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.filterwarnings("error::RuntimeWarning")  # no on-demand: inf x 0 nodes, no NaN warning
@given(problem=problems(max_nodes=2, max_rows=4, on_demand=False))
def test_the_solver_is_bracketed_by_brute_force(problem) -> None:
    if len(problem.configs) ** problem.segments > 20_000:
        return  # too many schedules to enumerate
    replayed, whole = brute_force_usd(problem)
    solution = solve(problem)
    assert solution.feasible == math.isfinite(replayed)
    if solution.feasible:
        assert solution.lower_bound_usd <= whole * (1 + 1e-9) + 1e-12
        assert solution.cost_usd >= replayed * (1 - 1e-9) - 1e-12


def test_a_deadline_past_the_trace_is_capped_where_no_longer_one_costs_less(caplog) -> None:
    """Spot always there at one price: one run on one node meets the bound for any horizon."""
    job = small_job(4, 6.0)
    trace = capacity([0.0, 20 * HOUR], [4, 2], [0.9, 0.9], duration_s=48 * HOUR, od_price=3.06)
    caplog.set_level(logging.WARNING, logger="elasim.optimal")
    plans = {}
    for deadline_h in (400.0, 4000.0):
        spec = JobSpec(deadline_s=deadline_h * HOUR, start_offset_s=0.0)
        plans[deadline_h] = plan_optimal(trace, job, spec)
    (plan, report), (plan_far, report_far) = plans[400.0], plans[4000.0]
    assert report.horizon_s < 48 * HOUR  # capped within the first period
    assert report_far == report and plan_far == plan  # the cost does not grow
    lines = [r.getMessage() for r in caplog.records if "past the trace's end" in r.getMessage()]
    assert len(lines) == 2 and "within 1e-04" in lines[0]  # one line per case
    assert report.lower_bound_usd <= report.model_cost_usd * (1 + 1e-9)
    assert report.model_cost_usd <= report.lower_bound_usd * (1 + 1e-4)


def test_a_slow_cheap_run_that_outlasts_two_periods_is_found(caplog) -> None:
    """One spot node always there on a 5 h trace: the cheapest run (one node, 12.5 h of
    work at its speed) outlasts two periods, and a 40 h deadline lets it finish.

    Capping the horizon at one period (as an earlier version did without a one-run
    schedule in two periods) planned four nodes at several times the cost.
    """
    job = small_job(4, 12.0)
    trace = capacity([0.0], [4], [0.9], duration_s=5 * HOUR, od_price=3.06)
    caplog.set_level(logging.WARNING, logger="elasim.optimal")
    plan, report = plan_optimal(trace, job, JobSpec(deadline_s=40 * HOUR, start_offset_s=0.0))
    assert report.horizon_s > 10 * HOUR  # past two periods: the one-node run fits
    assert report.model_cost_usd <= report.lower_bound_usd * (1 + 1e-4)
    assert any("within 1e-04" in r.getMessage() for r in caplog.records)


def test_without_a_run_that_meets_the_bound_the_horizon_is_as_long_as_one_needs(
    caplog,
) -> None:
    """Spot in short bursts: no one-run schedule; plan for as long as a run at the
    cheapest price needs (half the time usable: twice its work, plus one period),
    report the bound."""
    job = small_job(2, 6.0)
    times = [i * HOUR for i in range(12)]
    trace = capacity(times, [2, 0] * 6, [0.9] * 12, duration_s=12 * HOUR, od_price=3.06)
    caplog.set_level(logging.WARNING, logger="elasim.optimal")
    spec = JobSpec(deadline_s=200 * HOUR, start_offset_s=0.0)
    plan, report = plan_optimal(trace, job, spec)
    assert 24 * HOUR <= report.horizon_s < 200 * HOUR
    assert any("at least two periods" in r.getMessage() for r in caplog.records)
    replay = CapacityReplay.from_trace(trace, start_offset_s=0.0, cap_nodes=2)
    problem = build_problem(
        replay,
        job,
        mode=RescaleMode.INPLACE,
        notice_s=0.0,
        horizon_s=24 * HOUR,
        step_s=300.0,
        on_demand_price_per_hour=3.06,
        checkpoint_interval_s=None,
        checkpoint_cost_s=None,
    )
    assert report.lower_bound_usd == pytest.approx(universal_bound(problem)[0])
    assert report.feasible and report.lower_bound_usd <= report.model_cost_usd
