"""``greedy``: take every spot node that is offered."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ._common import HOLD_NOTHING, TIME_EPS_S, check_bool, usable_spot, wake_after
from ._ondemand import DEFAULT_SAFETY_MARGIN_S, finish_on_demand_s, job_plan
from .base import Decision, Observation, PolicyBase
from .registry import register


@register
class GreedyPolicy(PolicyBase):
    """Elastic on spot: hold as many spot nodes as are available, up to ``max_nodes``.

    This is what TorchElastic, Horovod Elastic or Ray Train do out of the box: any
    membership change is accepted at once, both ways.  It maximises spot usage
    but pays a rescale for every blip of capacity, which ``hysteresis`` avoids.

    Below ``min_nodes`` spot nodes the job cannot run; by default it then holds
    nothing and waits.  With ``fill_with_on_demand`` it tops up to ``min_nodes`` with
    on-demand nodes and keeps making (slow) progress instead.

    With ``deadline_fallback`` it is *greedy with fallback*, Can't Be Late's
    "Greedy" baseline in N-node form and the reference point of ``gap_closed`` in
    every report: every usable spot node (idle without one) until the last safe
    moment, i.e. until the remaining work only just fits before the deadline on
    ``k0`` on-demand nodes with the ``deadline`` policy's default margin to spare,
    where ``k0`` is the count of the cheapest pure on-demand plan for the whole job
    (:func:`~elasim.policies._ondemand.job_plan`); from then on the fewest on-demand
    nodes (at least ``k0``) that finish in time, plus every usable spot node, until
    done.  It never releases on-demand nodes once it holds them.
    On a trace without spot it therefore runs the on-demand plan itself, only later.
    """

    name: ClassVar[str] = "greedy"

    @dataclass(frozen=True)
    class Config:
        """Options of the ``greedy`` policy.

        Attributes:
            fill_with_on_demand: when fewer than ``min_nodes`` spot nodes are
                available, add on-demand nodes up to ``min_nodes`` instead of waiting.
            deadline_fallback: with a deadline, switch to on-demand nodes at the last
                safe moment and keep them (greedy with fallback).
        """

        fill_with_on_demand: bool = False
        deadline_fallback: bool = False

        def __post_init__(self) -> None:
            check_bool("fill_with_on_demand", self.fill_with_on_demand)
            check_bool("deadline_fallback", self.deadline_fallback)

    config: Config

    def decide(self, obs: Observation) -> Decision:
        """All usable spot nodes; too few to run means nothing (or on-demand top-up)."""
        if (
            self.config.deadline_fallback
            and obs.deadline_s is not None
            and math.isfinite(obs.on_demand_price_per_hour)
            and obs.remaining_samples > 0.0
        ):
            return self._with_fallback(obs)
        spot = usable_spot(obs)
        if spot >= obs.min_nodes:
            return Decision(spot, 0, None)
        if self.config.fill_with_on_demand:
            return Decision(spot, obs.min_nodes - spot, None)
        return HOLD_NOTHING

    def _with_fallback(self, obs: Observation) -> Decision:
        """Greedy until the last safe moment for ``k0`` on-demand nodes, then on-demand too."""
        assert obs.deadline_s is not None
        spot = usable_spot(obs)
        plan = job_plan(obs)
        if plan is None:  # no on-demand count makes it: everything, now
            return Decision(spot, obs.max_nodes - spot, None)
        time_left = obs.deadline_s - obs.now_s

        finish_s = finish_on_demand_s(obs, plan.nodes)  # the deadline policies' estimate
        spare = time_left - finish_s - DEFAULT_SAFETY_MARGIN_S - obs.worst_pause_s
        if obs.on_demand_held == 0 and spare > TIME_EPS_S:
            running = spot if spot >= obs.min_nodes else 0
            fall = 1.0 - obs.goodput(running) / obs.goodput(plan.nodes)
            wake = wake_after(spare / fall) if fall > 0.0 else None
            return Decision(running, 0, wake)
        least = max(plan.nodes, obs.on_demand_held)
        for on_demand in range(least, obs.max_nodes + 1):
            if finish_on_demand_s(obs, on_demand) <= time_left:
                break
        # on-demand first: clamp() would cut on-demand nodes, not spot, above max_nodes
        return Decision(min(spot, obs.max_nodes - on_demand), on_demand, None)
