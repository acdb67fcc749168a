"""``price``: spot only while it is cheap enough."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ._common import HOLD_NOTHING, all_usable_spot, check_float
from .base import Decision, Observation, PolicyBase
from .registry import register


@register
class PricePolicy(PolicyBase):
    """Spot under a price cap: like ``greedy`` while the spot price is at most the cap.

    Above the cap the job holds nothing and waits for the price to fall (the
    ``max-price`` bid of EC2 spot requests, and the "run when cheap" rule of many
    batch schedulers).  Waiting costs time, not money; compare it with ``greedy``
    on a trace with a real price column to see that trade-off.

    The cap is ``max_price_per_hour`` when set, otherwise ``cap_fraction_of_on_demand``
    times the on-demand price in the observation, so one config works across
    instance types.  A price exactly at the cap still runs.
    """

    name: ClassVar[str] = "price"

    @dataclass(frozen=True)
    class Config:
        """Options of the ``price`` policy.

        Attributes:
            max_price_per_hour: absolute cap in USD per node-hour; None means use
                ``cap_fraction_of_on_demand``.
            cap_fraction_of_on_demand: the cap as a fraction of the on-demand price,
                used when ``max_price_per_hour`` is None.
        """

        max_price_per_hour: float | None = None
        cap_fraction_of_on_demand: float = 0.5

        def __post_init__(self) -> None:
            check_float("max_price_per_hour", self.max_price_per_hour, strict=True, optional=True)
            check_float("cap_fraction_of_on_demand", self.cap_fraction_of_on_demand, strict=True)

    config: Config

    def price_cap_per_hour(self, obs: Observation) -> float:
        """The cap that applies to ``obs``, USD per node-hour."""
        if self.config.max_price_per_hour is not None:
            return self.config.max_price_per_hour
        return self.config.cap_fraction_of_on_demand * obs.on_demand_price_per_hour

    def decide(self, obs: Observation) -> Decision:
        """All usable spot nodes at or below the cap, nothing above it."""
        if obs.spot_price_per_hour > self.price_cap_per_hour(obs):
            return HOLD_NOTHING
        return all_usable_spot(obs)
