"""The cheapest pure on-demand plan that meets a deadline, from an observation (stdlib only).

Every deadline-aware policy needs the same yardstick: *what would it cost to run this
job on on-demand nodes only, started now (or at the start) and run straight?*  On-demand
nodes are never preempted, so that plan is deterministic: ``k`` nodes take one start
pause plus ``samples / goodput(k)`` seconds and cost ``k x price x time``.  The
cheapest ``k`` that still meets the deadline is the plan a user could have bought
without any policy at all; ``deadline`` promises never to cost more than it, and the
reports (``cost_vs_on_demand``) divide by it.

Three estimates enter, all from the observation:

* the start pause is ``obs.resume_cost_s`` (boot, group formation, checkpoint load,
  warm-up, for ``max_nodes`` nodes: an upper bound for fewer), or
  ``obs.rescale_cost_s`` when the environment gives none;
* the periodic checkpoints take ``1 - obs.training_share`` of the running time (the
  current interval and write time; ``auto`` only lengthens the interval later);
* ``overhead_fraction``, an option of the policies, is any further share of running
  time to assume lost (0 by default: the model has no other steady loss).

With these the plan's time is an upper bound of the simulated one, so the plan's
node count is the one a simulation of every count would pick, and a plan that fits
finishes in time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._common import usable_spot
from .base import Observation

__all__ = [
    "DEFAULT_OVERHEAD_FRACTION",
    "DEFAULT_SAFETY_MARGIN_S",
    "OnDemandPlan",
    "cheapest_on_demand",
    "cost_effective_spot",
    "deadline_feasible",
    "fastest_finish_s",
    "job_plan",
    "job_samples",
    "start_pause_s",
    "training_rate",
]

#: Share of running time assumed lost beyond the periodic checkpoints, for time estimates.
DEFAULT_OVERHEAD_FRACTION = 0.0
#: Seconds of slack kept before the deadline on top of one pause.
DEFAULT_SAFETY_MARGIN_S = 600.0


@dataclass(frozen=True)
class OnDemandPlan:
    """``nodes`` on-demand nodes run straight until the work is done.

    Attributes:
        nodes: on-demand nodes held for the whole plan.
        finish_s: seconds from the plan's start to done (start pause included).
        cost_usd: what the plan costs (nodes x price x ``finish_s``).
        usd_per_sample: USD per effective sample while it trains (checkpoints
            included, the start pause not): what a sample done elsewhere saves.
    """

    nodes: int
    finish_s: float
    cost_usd: float
    usd_per_sample: float


def job_samples(obs: Observation) -> float:
    """The job's whole target in effective samples (done plus remaining)."""
    if obs.progress <= 0.0:
        return obs.remaining_samples
    if obs.progress >= 1.0:
        return obs.remaining_samples
    return obs.remaining_samples / (1.0 - obs.progress)


def start_pause_s(obs: Observation) -> float:
    """Seconds from asking for nodes (holding none) to training on them."""
    return obs.rescale_cost_s if obs.resume_cost_s is None else obs.resume_cost_s


def training_rate(obs: Observation, nodes: int, overhead: float = 0.0) -> float:
    """Effective samples per second on ``nodes`` nodes, checkpoints and ``overhead`` taken off."""
    return obs.goodput(nodes) * obs.training_share * (1.0 - overhead)


def _time_s(obs: Observation, nodes: int, samples: float, overhead: float, pause_s: float) -> float:
    """``pause_s`` plus ``samples`` at :func:`training_rate`."""
    goodput = training_rate(obs, nodes, overhead)
    if goodput <= 0.0:
        return math.inf
    return pause_s + samples / goodput


def cheapest_on_demand(
    obs: Observation,
    samples: float,
    within_s: float,
    *,
    pause_s: float,
    overhead_fraction: float = DEFAULT_OVERHEAD_FRACTION,
) -> OnDemandPlan | None:
    """The cheapest on-demand node count that does ``samples`` within ``within_s``.

    Returns None when on-demand nodes are not offered or no count is fast enough.
    Ties go to fewer nodes.
    """
    price = obs.on_demand_price_per_hour
    if not math.isfinite(price):
        return None
    best: OnDemandPlan | None = None
    for nodes in range(obs.min_nodes, obs.max_nodes + 1):
        finish = _time_s(obs, nodes, samples, overhead_fraction, pause_s)
        if finish > within_s:
            continue
        cost = nodes * price * finish / 3600.0
        if best is None or cost < best.cost_usd * (1.0 - 1e-12):
            per_sample = nodes * price / 3600.0 / training_rate(obs, nodes, overhead_fraction)
            best = OnDemandPlan(nodes, finish, cost, per_sample)
    return best


def job_plan(
    obs: Observation, *, overhead_fraction: float = DEFAULT_OVERHEAD_FRACTION
) -> OnDemandPlan | None:
    """The cheapest pure on-demand plan for the *whole* job, started at time 0.

    It depends only on the job, the deadline and the prices, not on how far the job
    has got, so every decision of a run sees the same plan (the policies stay
    stateless).  No margin: the plan is what an on-demand user could buy, and a
    policy that commits to it in time pays no more.  None: no deadline, no
    on-demand nodes, or not even ``max_nodes`` nodes make it.
    """
    if obs.deadline_s is None:
        return None
    return cheapest_on_demand(
        obs,
        job_samples(obs),
        obs.deadline_s,
        pause_s=start_pause_s(obs),
        overhead_fraction=overhead_fraction,
    )


def fastest_finish_s(obs: Observation, samples: float, *, overhead_fraction: float = 0.0) -> float:
    """Seconds to do ``samples`` from a cold start on the fastest node count."""
    pause = start_pause_s(obs)
    return min(
        _time_s(obs, n, samples, overhead_fraction, pause)
        for n in range(obs.min_nodes, obs.max_nodes + 1)
    )


def deadline_feasible(obs: Observation) -> bool | None:
    """Whether the whole job could meet its deadline with ``max_nodes`` nodes from the start.

    Optimistic on purpose (no checkpoint overhead, no preemption, the best node count
    from time 0): when even this fails, no policy can meet the deadline, and the user
    should hear it before the run rather than read "deadline met: no" after it.
    None without a deadline.
    """
    if obs.deadline_s is None:
        return None
    return fastest_finish_s(obs, job_samples(obs)) <= obs.deadline_s


def cost_effective_spot(obs: Observation, on_demand: int, usd_per_sample: float) -> int:
    """The most spot nodes, beside ``on_demand`` ones, whose samples cost <= ``usd_per_sample``.

    Scaling is sub-linear, so each extra node adds less goodput for the same price:
    the marginal cost of the ``i``-th node, ``price / (g(i) - g(i - 1))``, grows with
    ``i``.  A node whose marginal samples cost more than the same samples on the
    on-demand plan would make the job dearer than that plan, so the count stops
    there (the first block, up to ``min_nodes``, is judged as a whole).  Returns 0
    when not even that block pays.
    """
    usable = min(usable_spot(obs), obs.max_nodes - on_demand)
    per_s = obs.spot_price_per_hour / 3600.0
    base = obs.goodput(on_demand)
    first = max(obs.min_nodes - on_demand, 1)
    if first > usable:
        return 0
    previous = obs.goodput(on_demand + first)
    if previous <= base or first * per_s > usd_per_sample * (previous - base):
        return 0
    spot = first
    while spot < usable:
        nxt = obs.goodput(on_demand + spot + 1)
        if nxt <= previous or per_s > usd_per_sample * (nxt - previous):
            break
        spot, previous = spot + 1, nxt
    return spot
