"""``goodput``: Pollux-style choice of the node count by goodput (per dollar)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from ._common import (
    HOLD_NOTHING,
    cheapest_mix,
    check_bool,
    check_choice,
    check_float,
    cost_per_hour,
    usable_spot,
)
from .base import Decision, Observation, PolicyBase
from .registry import register

OBJECTIVES = ("goodput_per_usd", "goodput")


def _ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator`` where x/0 is +inf for x > 0 and 1 for x == 0."""
    if denominator > 0.0:
        return numerator / denominator
    return math.inf if numerator > 0.0 else 1.0


@register
class GoodputPolicy(PolicyBase):
    """Pick the node count with the best goodput per dollar (or the best goodput).

    Pollux (Qiao et al., OSDI'21) schedules deep-learning jobs by *goodput*: system
    throughput times statistical efficiency, i.e. the rate of progress that actually
    counts towards convergence.  A larger global batch processes more samples per
    second but each sample is worth less (the gradient-noise-scale model of
    McCandlish et al., 2018); ``obs.statistical_efficiency`` carries that factor,
    so ``obs.goodput(n)`` is Pollux's goodput on ``n`` nodes.

    This policy applies the idea to one job on spot capacity.  Among the node counts
    it can hold now (``min_nodes`` up to the usable spot nodes, or up to
    ``max_nodes`` with ``allow_on_demand``, filled from the cheaper market first) it
    picks the one maximising the objective:

    * ``goodput_per_usd``: effective samples per dollar, ``goodput(n) / cost_per_hour(n)``.
      With sub-linear scaling and one price this is usually the smallest count that
      runs: the cheapest samples, not the fastest run.
    * ``goodput``: effective samples per second, the fastest run.

    Ties go to fewer nodes.  A change of configuration costs a rescale pause
    (``obs.rescale_cost_s``), so the policy compares the two ways of finishing the
    remaining work, ``R = obs.remaining_samples``: staying (``R / g_c`` seconds
    at ``cost_c`` per hour) or switching (a pause plus ``R / g_t`` seconds at
    ``cost_t``).  It switches only if that improves the time (objective
    ``goodput``) or the money (``goodput_per_usd``) by a factor of at least
    ``1 + min_speedup``.  A configuration that can no longer be held (preempted
    nodes, or too few to run) is always replaced.  When both ways cost nothing (spot
    on a trace without prices), the time decides.  Stateless.
    """

    name: ClassVar[str] = "goodput"

    @dataclass(frozen=True)
    class Config:
        """Options of the ``goodput`` policy.

        Attributes:
            objective: ``goodput_per_usd`` (cheapest effective samples) or
                ``goodput`` (fastest progress).
            allow_on_demand: also consider on-demand nodes, up to ``max_nodes``.
            min_speedup: smallest relative improvement of the objective over the
                remaining work, pause included, that justifies a rescale.
        """

        objective: Literal["goodput_per_usd", "goodput"] = "goodput_per_usd"
        allow_on_demand: bool = False
        min_speedup: float = 0.05

        def __post_init__(self) -> None:
            check_choice("objective", self.objective, OBJECTIVES)
            check_bool("allow_on_demand", self.allow_on_demand)
            check_float("min_speedup", self.min_speedup)

    config: Config

    def score(self, obs: Observation, spot: int, on_demand: int) -> float:
        """The objective of holding (``spot``, ``on_demand``) nodes; higher is better."""
        g = obs.goodput(spot + on_demand)
        if self.config.objective == "goodput":
            return g
        return _ratio(g, cost_per_hour(obs, spot, on_demand))

    def best_configuration(self, obs: Observation) -> tuple[int, int] | None:
        """The (spot, on-demand) pair with the best score, or None if none can run."""
        spot_limit = usable_spot(obs)
        high = obs.max_nodes if self.config.allow_on_demand else spot_limit
        best: tuple[int, int] | None = None
        best_key = (-math.inf, -math.inf)
        for n in range(obs.min_nodes, high + 1):
            if self.config.allow_on_demand:
                spot, on_demand = cheapest_mix(obs, n, spot_limit)
            else:
                spot, on_demand = n, 0
            if not math.isfinite(cost_per_hour(obs, spot, on_demand)):
                continue  # a market priced at infinity is closed (on-demand disabled)
            key = (self.score(obs, spot, on_demand), obs.goodput(n))
            if key > best_key:  # strict: ties keep the smaller count
                best, best_key = (spot, on_demand), key
        return best

    def improvement(
        self, obs: Observation, current: tuple[int, int], target: tuple[int, int]
    ) -> float:
        """Factor by which switching improves finishing the remaining work (>1: better)."""
        remaining = max(obs.remaining_samples, 0.0)
        g_c = obs.goodput(sum(current))
        g_t = obs.goodput(sum(target))
        time_c = _ratio(remaining, g_c)
        time_t = obs.rescale_cost_s + _ratio(remaining, g_t)
        if self.config.objective == "goodput":
            return _ratio(time_c, time_t)
        usd_c = cost_per_hour(obs, *current) * time_c
        usd_t = cost_per_hour(obs, *target) * time_t
        if usd_c == 0.0 and usd_t == 0.0:
            # free nodes (a trace without prices): money cannot tell the two apart, so
            # time does; without this, a job cut down by a preemption never grew back
            return _ratio(time_c, time_t)
        return _ratio(usd_c, usd_t)

    def decide(self, obs: Observation) -> Decision:
        """Best configuration, unless staying put is within ``min_speedup`` of it."""
        target = self.best_configuration(obs)
        if target is None:
            return HOLD_NOTHING
        current = (obs.spot_held, obs.on_demand_held)
        if current != target and self._can_keep(obs, current):
            gain = self.improvement(obs, current, target)
            if not gain >= 1.0 + self.config.min_speedup:  # NaN keeps the current one
                return Decision(current[0], current[1], None)
        return Decision(target[0], target[1], None)

    def _can_keep(self, obs: Observation, current: tuple[int, int]) -> bool:
        """Whether the configuration held now is still legal and runs."""
        spot, on_demand = current
        total = spot + on_demand
        return (
            spot <= usable_spot(obs)
            and obs.min_nodes <= total <= obs.max_nodes
            and (on_demand == 0 or self.config.allow_on_demand)
            and obs.goodput(total) > 0.0
        )
