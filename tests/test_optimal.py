"""The offline optimum: the planner (elasim.optimal) and its replay (the ``optimal`` oracle)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import capacity

from elasim.job import load_job
from elasim.jobmodel import JobSpec
from elasim.optimal import plan_optimal
from elasim.policies import (
    OptimalPolicy,
    Plan,
    describe_policies,
    is_oracle,
    make_policy,
    oracle_names,
    policy_names,
)
from elasim.sim import SimConfig, fastest_finish_h, simulate
from elasim.traces import load_trace
from elasim.yardstick import on_demand_baseline


def small_job(nodes: int = 4):
    spec = load_job("resnet50_v100").with_nodes(1, nodes)
    return dataclasses.replace(spec, target_samples=1200.0 * 3600 * 6)  # 6 h on one node


def config(job, offset_s: float = 0.0, slack: float = 1.5, **extra) -> SimConfig:
    deadline_h = slack * fastest_finish_h(job, JobSpec())
    return JobSpec(deadline_s=deadline_h * 3600, start_offset_s=offset_s, **extra)


def test_the_oracle_is_not_a_live_policy() -> None:
    assert "optimal" not in policy_names()
    assert "optimal" in policy_names(include_oracles=True) and oracle_names() == ["optimal"]
    assert is_oracle(make_policy("optimal")) and not is_oracle(make_policy("greedy"))
    (info,) = [i for i in describe_policies() if i.name == "optimal"]
    assert info.summary.startswith("Offline optimum (oracle)")


def test_without_a_plan_the_oracle_refuses_to_decide() -> None:
    policy = make_policy("optimal")
    with pytest.raises(ValueError, match="oracle"):
        policy.decide(None)  # type: ignore[arg-type]


def test_the_planner_needs_a_deadline_and_a_capacity_trace() -> None:
    job = small_job()
    with pytest.raises(ValueError, match="needs a deadline"):
        plan_optimal(load_trace("spot_us_east.csv"), job, JobSpec())
    with pytest.raises(ValueError, match="capacity"):
        plan_optimal(
            load_trace("philly_jobs.csv"),
            job,
            JobSpec(deadline_s=3600.0, start_offset_s=0.0, max_nodes=4),
        )


def test_plans_are_checked() -> None:
    with pytest.raises(ValueError, match="starting at 0"):
        Plan((5.0,), (1,), (0,))
    with pytest.raises(ValueError, match="increasing"):
        Plan((0.0, 10.0, 10.0), (1, 0, 1), (0, 0, 0))
    plan = Plan((0.0, 600.0), (2, 0), (0, 1), (0.0, 0.4))
    assert plan.row_at(599.9999999) == 1 and plan.row_at(10.0) == 0
    assert OptimalPolicy().with_plan(plan).expected_progress(300.0) == pytest.approx(0.2)


def test_without_spot_the_optimum_beats_any_one_on_demand_count() -> None:
    """Scaling is sub-linear: many nodes for a while, then one, beats k nodes throughout."""
    job = small_job(8)
    trace = capacity([0.0], [0], [0.9], duration_s=2 * 86400.0, od_price=3.06)
    cfg = config(job)
    best = simulate(cfg, trace=trace, policy=OptimalPolicy(), job=job)
    plan_usd, _ = on_demand_baseline(trace, job, cfg, SimConfig())
    assert best.deadline_met and best.spot_node_hours == 0.0
    assert best.cost_usd < 0.9 * plan_usd
    held = {n for n in best.timeline.on_demand_held if n}
    assert len(held) >= 2 and 1 in held  # two counts, ending on the cheapest


def test_with_spot_always_there_the_optimum_buys_no_on_demand() -> None:
    job = small_job(4)
    trace = capacity([0.0], [4], [0.9], duration_s=2 * 86400.0, od_price=3.06)
    best = simulate(config(job), trace=trace, policy=OptimalPolicy(), job=job)
    assert best.deadline_met and best.on_demand_node_hours == 0.0
    assert best.rescales == 0


@pytest.mark.parametrize("offset_s", [0.0, 200_000.0, 600_000.0])
def test_bound_model_and_replay_agree(offset_s: float) -> None:
    job = small_job(4)
    trace = load_trace("spot_us_east.csv")
    best = simulate(config(job, offset_s), trace=trace, policy=OptimalPolicy(), job=job)
    report = dict(best.simulator)["oracle_plan"]
    assert report["feasible"] and best.deadline_met
    assert report["lower_bound_usd"] <= report["model_cost_usd"] * (1 + 1e-9)
    # the replay costs what the plan says, up to how checkpoints and rollbacks land
    assert best.cost_usd == pytest.approx(report["model_cost_usd"], rel=0.05)


def test_a_finer_grid_is_no_dearer() -> None:
    job = small_job(4)
    trace = load_trace("spot_us_west.csv")
    cfg = config(job, 100_000.0)
    coarse = simulate(cfg, trace=trace, policy=OptimalPolicy(), job=job)
    fine = simulate(
        cfg, trace=trace, policy=OptimalPolicy(OptimalPolicy.Config(step_s=150.0)), job=job
    )
    assert fine.cost_usd <= coarse.cost_usd * 1.01


def test_an_impossible_deadline_runs_flat_out() -> None:
    job = small_job(4)
    trace = load_trace("spot_us_east.csv")
    cfg = config(job, slack=0.5, on_demand_price_per_hour=3.06)
    plan, report = plan_optimal(trace, job, cfg)
    assert not report.feasible and report.lower_bound_usd is None
    assert plan.start_s == (0.0,) and (plan.spot_nodes[0], plan.on_demand_nodes[0]) == (4, 4)
    result = simulate(cfg, trace=trace, policy=OptimalPolicy(), job=job)
    assert result.deadline_met is False and result.deadline_feasible is False


def test_the_replay_is_reproducible() -> None:
    job = small_job(4)
    trace = load_trace("spot_us_west.csv")
    cfg = config(job, 50_000.0)
    first = simulate(cfg, trace=trace, policy=OptimalPolicy(), job=job)
    again = simulate(cfg, trace=trace, policy=OptimalPolicy(), job=job)
    assert first.summary() == again.summary()
    assert np.array_equal(first.timeline.spot_held, again.timeline.spot_held)


def test_a_live_run_refuses_the_oracle_before_any_worker_starts() -> None:
    pytest.importorskip("torch")
    from elasim.executor.run import RunConfig, run_trace

    with pytest.raises(ValueError, match="is an oracle"):
        run_trace(RunConfig(spec=JobSpec(trace="spot_us_east.csv", policy="optimal")))
