"""``on_demand``: the plan a user can buy without any policy, as a policy."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ._common import HOLD_NOTHING, check_int
from ._ondemand import fastest_count, job_plan
from .base import Decision, Observation, PolicyBase
from .registry import register


@register
class OnDemandPolicy(PolicyBase):
    """On-demand nodes only, run straight: the yardstick of ``cost_vs_on_demand``.

    On-demand nodes are never preempted, so this is the one plan whose cost is
    known before the run.  By default it holds the node count of the cheapest pure
    on-demand plan that meets the deadline (``k0`` of
    :func:`~elasim.policies._ondemand.job_plan`); without a deadline, the count
    with the cheapest samples; when no count meets the deadline, the fastest one.
    The reports simulate it at ``k0`` and its neighbours and keep the cheapest run
    that met the deadline (:mod:`elasim.yardstick`).  Without on-demand nodes
    (no on-demand price) it holds nothing.
    """

    name: ClassVar[str] = "on_demand"

    @dataclass(frozen=True)
    class Config:
        """Options of the ``on_demand`` policy.

        Attributes:
            n_nodes: on-demand nodes to hold; None means the cheapest plan's count.
        """

        n_nodes: int | None = None

        def __post_init__(self) -> None:
            check_int("n_nodes", self.n_nodes, minimum=1, optional=True)

    config: Config

    def nodes(self, obs: Observation) -> int:
        """The on-demand node count this policy holds for ``obs``'s job."""
        if self.config.n_nodes is not None:
            return min(max(self.config.n_nodes, obs.min_nodes), obs.max_nodes)
        counts = range(obs.min_nodes, obs.max_nodes + 1)
        if obs.deadline_s is not None:
            plan = job_plan(obs)
            if plan is not None:
                return plan.nodes
            return fastest_count(obs)
        # cheapest samples: least nodes per goodput (ties: fewer nodes)
        return min(counts, key=lambda n: (n / obs.goodput(n) if obs.goodput(n) else math.inf, n))

    def decide(self, obs: Observation) -> Decision:
        """The same on-demand nodes from start to end."""
        if not math.isfinite(obs.on_demand_price_per_hour) or obs.remaining_samples <= 0.0:
            return HOLD_NOTHING
        return Decision(0, self.nodes(obs), None)
