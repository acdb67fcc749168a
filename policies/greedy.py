"""``greedy``: take every spot node that is offered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ._common import HOLD_NOTHING, check_bool, usable_spot
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
    """

    name: ClassVar[str] = "greedy"

    @dataclass(frozen=True)
    class Config:
        """Options of the ``greedy`` policy.

        Attributes:
            fill_with_on_demand: when fewer than ``min_nodes`` spot nodes are
                available, add on-demand nodes up to ``min_nodes`` instead of waiting.
        """

        fill_with_on_demand: bool = False

        def __post_init__(self) -> None:
            check_bool("fill_with_on_demand", self.fill_with_on_demand)

    config: Config

    def decide(self, obs: Observation) -> Decision:
        """All usable spot nodes; too few to run means nothing (or on-demand top-up)."""
        spot = usable_spot(obs)
        if spot >= obs.min_nodes:
            return Decision(spot, 0, None)
        if self.config.fill_with_on_demand:
            return Decision(spot, obs.min_nodes - spot, None)
        return HOLD_NOTHING
