"""Yardsticks for a policy's cost: the obvious plans, the naive baseline, the offline optimum.

A cost alone says little: 80 USD is good if running on on-demand nodes costs 120 and
bad if the best possible plan for that trace costs 30.  Every report with a deadline
and an on-demand price therefore puts each run next to three reference runs of the
*same* job, trace window, notice and mechanism, all measured by :func:`simulate`:

* **on-demand plan**: the cheapest pure on-demand plan that meets the deadline
  (``on_demand`` at its own node count and the neighbouring ones; the cheapest run
  that met the deadline);
* **greedy with fallback**: ``greedy --set deadline_fallback=true``, Can't Be Late's
  "Greedy" in N-node form: every usable spot node until the last safe moment, then
  on-demand nodes (at least the on-demand plan's count) until done;
* **plain greedy**: ``greedy`` as it comes, every usable spot node and never an
  on-demand one; it may miss the deadline (``greedy_met`` says);
* **optimal**: the offline optimum (:mod:`elasim.optimal`), replayed.

and reports two ratios, as Can't Be Late does:

* ``cost_vs_on_demand = cost / on-demand plan cost``;
* ``gap_closed = (greedy-with-fallback cost - cost) / (greedy-with-fallback cost -
  optimal cost)``: 0 is no better than the naive baseline, 1 is as good as the
  optimum.  None when the run missed its deadline (cheap because late is not
  better), or when the baseline is within 1 % of the on-demand plan's cost of the
  optimum (the planner's own precision: no gap to speak of).

and two plain ratios beside them:

* ``cost_vs_greedy = cost / plain greedy cost``.  Why: greedy with fallback pays for
  on-demand nodes it may not need, so a policy can close most of its gap and still
  cost more than plain greedy, which met the same deadline (issue 24: ``deadline`` at
  122.9 USD, plain greedy 111.4 USD, greedy with fallback 255.5 USD);
* ``cost_vs_optimal = cost / optimal cost``: how far from the best possible plan,
  without the baseline's help (the optimum's replay can be a little dearer than a
  lucky run, so slightly under 1 happens).

Plain greedy is one ordinary simulation more: the yardstick's time is the optimum's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["GREEDY_FALLBACK", "Yardstick", "compute_yardstick", "on_demand_baseline"]

#: The naive baseline of ``gap_closed``: a policy spec and its options.
GREEDY_FALLBACK: tuple[str, dict[str, str]] = ("greedy", {"deadline_fallback": "true"})
#: A gap smaller than this share of the on-demand plan's cost is no gap: the optimum's
#: replay is only this close to the true optimum (README, benchmarks/bench_policies.py).
_MIN_GAP = 0.01


@dataclass(frozen=True)
class Yardstick:
    """The reference costs of one job on one trace window (USD; None: not available).

    Attributes:
        on_demand_cost_usd: the cheapest pure on-demand plan that met the deadline.
        on_demand_nodes: its node count.
        greedy_fallback_cost_usd: greedy with fallback's cost.
        greedy_fallback_met: whether it met the deadline.
        optimal_cost_usd: the replayed offline optimum's cost.
        optimal_met: whether it met the deadline.
        optimal_lower_bound_usd: the planner's lower bound on its grid.
        greedy_cost_usd: plain greedy's cost (None if it did not finish).
        greedy_met: whether plain greedy met the deadline.
    """

    on_demand_cost_usd: float | None
    on_demand_nodes: int | None
    greedy_fallback_cost_usd: float | None
    greedy_fallback_met: bool | None
    optimal_cost_usd: float | None
    optimal_met: bool | None
    optimal_lower_bound_usd: float | None = None
    greedy_cost_usd: float | None = None
    greedy_met: bool | None = None

    def cost_vs_on_demand(self, cost_usd: float) -> float | None:
        """``cost / on-demand plan cost`` (None without an on-demand plan)."""
        base = self.on_demand_cost_usd
        return None if not base else cost_usd / base

    def cost_vs_greedy(self, cost_usd: float) -> float | None:
        """``cost / plain greedy cost`` (None when greedy did not finish or cost nothing)."""
        base = self.greedy_cost_usd
        return None if not base else cost_usd / base

    def cost_vs_optimal(self, cost_usd: float) -> float | None:
        """``cost / optimal cost`` (None when the optimum did not finish or cost nothing)."""
        base = self.optimal_cost_usd
        return None if not base else cost_usd / base

    def gap_closed(self, cost_usd: float, deadline_met: bool | None) -> float | None:
        """Share of the greedy-with-fallback to optimal gap that a run closes."""
        greedy, best = self.greedy_fallback_cost_usd, self.optimal_cost_usd
        if greedy is None or best is None or not deadline_met:
            return None
        scale = self.on_demand_cost_usd or greedy
        if greedy - best <= _MIN_GAP * scale:
            return None
        return (greedy - cost_usd) / (greedy - best)

    def columns(self, cost_usd: float, deadline_met: bool | None) -> dict[str, Any]:
        """The report's columns for one run.

        The first five are as they were before issue 24; then plain greedy's and the
        optimum's ratios, plain greedy's cost and whether it met the deadline.
        """
        return {
            "cost_vs_on_demand": self.cost_vs_on_demand(cost_usd),
            "gap_closed": self.gap_closed(cost_usd, deadline_met),
            "on_demand_plan_usd": self.on_demand_cost_usd,
            "greedy_fallback_usd": self.greedy_fallback_cost_usd,
            "optimal_usd": self.optimal_cost_usd,
            "cost_vs_greedy": self.cost_vs_greedy(cost_usd),
            "cost_vs_optimal": self.cost_vs_optimal(cost_usd),
            "greedy_usd": self.greedy_cost_usd,
            "greedy_met": self.greedy_met,
        }


def _run(trace: Any, policy: Any, job: Any, spec: Any, config: Any) -> Any:
    """``policy`` in place of the spec's, on the same job, window and mechanism."""
    from elasim.sim import simulate

    reference = spec.replace(policy=None, policy_options=())
    config = replace(config, record_timeline=False)
    return simulate(reference, config, trace=trace, policy=policy, job=job)


def on_demand_baseline(trace: Any, job: Any, spec: Any, config: Any) -> tuple[float, int] | None:
    """``(cost, nodes)`` of the cheapest pure on-demand run that met the deadline.

    Starts from the ``on_demand`` policy's own count and walks down while a smaller
    count still meets the deadline (cheaper samples), or up until one does.  None
    without a deadline, without on-demand nodes, or when no count meets it.
    """
    from elasim.policies import OnDemandPolicy

    if spec.deadline_s is None:
        return None
    first = _run(trace, OnDemandPolicy(), job, spec, config)
    if not first.decisions or first.decisions[0].decision.on_demand_nodes == 0:
        return None
    start = first.decisions[0].decision.on_demand_nodes
    runs = {start: first}

    def run(nodes: int) -> Any:
        if nodes not in runs:
            policy = OnDemandPolicy(OnDemandPolicy.Config(nodes))
            runs[nodes] = _run(trace, policy, job, spec, config)
        return runs[nodes]

    nodes = start
    if run(nodes).deadline_met:
        while nodes > job.nodes.min and run(nodes - 1).deadline_met:
            nodes -= 1
    else:
        while nodes < job.nodes.max and not run(nodes).deadline_met:
            nodes += 1
    met = [(r.cost_usd, n) for n, r in runs.items() if r.deadline_met]
    return min(met) if met else None


def compute_yardstick(
    trace: Any, job: Any, spec: Any, config: Any, *, own: tuple[Any, Any] | None = None
) -> Yardstick | None:
    """The four reference runs of ``spec`` (see the module), ``config`` the simulator's.

    ``own``: the caller's run of this very ``spec``, ``(policy as given, result)``.
    When that policy is the optimum's as the yardstick runs it (``-p optimal``
    without options), its result is the optimum's reference run: the same problem
    is not planned twice (issue 23: a whole ``elasim simulate`` in <= 2 s).
    None without a deadline or on-demand nodes, or on a shared-cluster job trace.
    """
    from elasim.policies import OptimalPolicy, make_policy
    from elasim.traces.model import CapacityTrace

    if spec.deadline_s is None or not isinstance(trace, CapacityTrace):
        return None
    if spec.on_demand_price_per_hour is None and trace.metadata.on_demand_price_per_hour is None:
        return None
    from elasim.progress import report

    report("deadline yardstick", 0, 4)
    baseline = on_demand_baseline(trace, job, spec, config)
    report("deadline yardstick", 1, 4)
    name, options = GREEDY_FALLBACK
    greedy = _run(trace, make_policy(name, options), job, spec, config)
    report("deadline yardstick", 2, 4)
    plain = _run(trace, make_policy(name), job, spec, config)
    report("deadline yardstick", 3, 4)
    best = _same_optimum(own) or _run(trace, OptimalPolicy(), job, spec, config)
    report("deadline yardstick", 4, 4)
    bound = dict(best.simulator).get("oracle_plan", {}).get("lower_bound_usd")
    return Yardstick(
        on_demand_cost_usd=None if baseline is None else baseline[0],
        on_demand_nodes=None if baseline is None else baseline[1],
        greedy_fallback_cost_usd=greedy.cost_usd if greedy.completed else None,
        greedy_fallback_met=greedy.deadline_met,
        optimal_cost_usd=best.cost_usd if best.completed else None,
        optimal_met=best.deadline_met,
        optimal_lower_bound_usd=bound
        if isinstance(bound, float) and math.isfinite(bound)
        else None,
        greedy_cost_usd=plain.cost_usd if plain.completed else None,
        greedy_met=plain.deadline_met,
    )


def _same_optimum(own: tuple[Any, Any] | None) -> Any:
    """``own``'s result when its policy is the yardstick's optimum, unplanned; else None.

    The replay is the one the yardstick would make: the same spec, trace, job and
    oracle options, and a plan that depends on nothing else (the timeline the
    caller recorded changes no figure).
    """
    from elasim.policies import OptimalPolicy

    if own is None:
        return None
    policy, result = own
    same = type(policy) is OptimalPolicy and policy.plan is None
    return result if same and policy.config == OptimalPolicy.Config() else None
