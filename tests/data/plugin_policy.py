"""A user's own policy, loaded from this file by ``path.py:Class`` (tests only).

It reads most of the observation (progress, deadline, events, prices, costs) and
keeps state, so a parity test with it checks that both shells show a policy the
same world.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from elasim.policies import Decision, EventKind, Observation, PolicyBase


@dataclass(frozen=True)
class _Config:
    """Options.

    Attributes:
        patience_s: wait this long after a preemption before scaling up again.
    """

    patience_s: float = 900.0


class HalfPolicy(PolicyBase):
    """Half the spot capacity, on-demand when far behind, cautious after a preemption."""

    name: ClassVar[str] = "half-plugin"
    Config = _Config

    def __init__(self, config: _Config | None = None) -> None:
        super().__init__(config)
        self.hold_until_s = -1.0

    def decide(self, obs: Observation) -> Decision:
        if any(e.kind is EventKind.PREEMPT for e in obs.recent_events):
            self.hold_until_s = obs.now_s + self.config.patience_s
        spot = max(obs.spot_available // 2, obs.min_nodes if obs.spot_available else 0)
        if obs.now_s < self.hold_until_s:
            spot = min(spot, obs.spot_held)
            return Decision(spot, 0, self.hold_until_s - obs.now_s)
        behind = (
            obs.deadline_s is not None and obs.progress < 0.5 and obs.now_s > 0.5 * obs.deadline_s
        )
        on_demand = (
            1 if behind and obs.on_demand_price_per_hour < 10 * (obs.spot_price_per_hour + 1) else 0
        )
        return Decision(spot, on_demand, 3600.0)
