"""``failover``: greedy in its zone, and a move to another zone when this one runs dry."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ._common import HOLD_NOTHING, TIME_EPS_S, check_float, usable_spot, wake_after
from ._zones import ZoneUptime
from .base import Decision, Observation, PolicyBase
from .registry import register

__all__ = ["FailoverPolicy"]


@register
class FailoverPolicy(PolicyBase):
    """SkyPilot's managed-job failover: every spot node in the current zone, else move.

    In its zone it is ``greedy``: every usable spot node, nothing when fewer than
    ``min_nodes`` are offered.  When the zone has run dry (too few spot nodes to run)
    for ``patience_s``, it looks at every other zone (:attr:`Observation.zones`) and
    moves to the one with the most usable spot nodes (the cheapest at a tie) if the
    move pays: over the next ``payback_s``, the goodput there, less the move's pause
    (the checkpoint's transfer, ``zone_move_s``, then a start from nothing,
    ``resume_cost_s``), beats the goodput here.  Dry here, that is: the pause is
    shorter than ``payback_s``.  The same test moves the job out of a zone that still
    runs, but on so few nodes that another zone pays back the move within
    ``payback_s``.

    It never buys on-demand nodes and promises nothing about a deadline (``deadline``
    does).  In a run with one zone it is ``greedy``, decision for decision.

    State: when the current zone was first seen dry, and how long each zone has
    offered spot (a pure function of the observations so far).
    """

    name: ClassVar[str] = "failover"
    moves_between_zones: ClassVar[bool] = True

    @dataclass(frozen=True)
    class Config:
        """Options of the ``failover`` policy.

        Attributes:
            payback_s: horizon over which a move must gain more work than its pause
                costs (seconds).
            patience_s: how long the current zone must stay dry before a move
                (seconds; 0: at once).
        """

        payback_s: float = 3600.0
        patience_s: float = 0.0

        def __post_init__(self) -> None:
            check_float("payback_s", self.payback_s, strict=True)
            check_float("patience_s", self.patience_s)

    config: Config

    def __init__(self, config: Config | None = None) -> None:
        super().__init__(config)
        self._dry_since_s: float | None = None
        self._zone = 0
        self._uptime = ZoneUptime()

    def decide(self, obs: Observation) -> Decision:
        """Greedy here; a move when this zone is dry (or poor) and another pays back."""
        spot = usable_spot(obs)
        here = spot if spot >= obs.min_nodes else 0
        if len(obs.zones) < 2:
            return Decision(here, 0, None) if here else HOLD_NOTHING
        self._uptime.update(obs)
        if here or obs.zone != self._zone:  # running, or dry since arriving
            self._dry_since_s = None if here else obs.now_s
            self._zone = obs.zone
        if self._dry_since_s is None and not here:
            self._dry_since_s = obs.now_s
        waited_s = 0.0 if here else obs.now_s - self._dry_since_s  # type: ignore[operator]
        if not here and waited_s < self.config.patience_s - TIME_EPS_S:
            return Decision(0, 0, wake_after(self.config.patience_s - waited_s))
        best = self._best_zone(obs)
        if best is not None and self._pays(obs, here, best):
            nodes = min(obs.zones[best].spot_available, obs.max_nodes)
            return Decision(nodes, 0, None, best)
        return Decision(here, 0, None) if here else HOLD_NOTHING

    def _best_zone(self, obs: Observation) -> int | None:
        """The other zone with the most usable spot nodes (None: none can run).

        At a tie the cheapest, then the one that has offered spot longest so far
        (:class:`._zones.ZoneUptime`).
        """
        best, key = None, (obs.min_nodes - 1, -math.inf, -math.inf)
        for index, zone in enumerate(obs.zones):
            if index == obs.zone:
                continue
            nodes = min(zone.spot_available, obs.max_nodes)
            candidate = (nodes, -zone.spot_price_per_hour, self._uptime.of(index))
            if candidate > key:
                best, key = index, candidate
        return best

    def _pays(self, obs: Observation, here: int, there: int) -> bool:
        """Whether ``payback_s`` of work there, less the move's pause, beats staying."""
        payback_s = self.config.payback_s
        pause_s = obs.zone_move_s + (
            obs.resume_cost_s if obs.resume_cost_s is not None else obs.rescale_cost_s
        )
        nodes = min(obs.zones[there].spot_available, obs.max_nodes)
        gain = obs.goodput(nodes) * max(payback_s - pause_s, 0.0)
        return gain > obs.goodput(here) * payback_s
