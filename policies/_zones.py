"""What a policy remembers of the zones it has seen (private; standard library only)."""

from __future__ import annotations

from .base import Observation

__all__ = ["ZoneUptime"]


class ZoneUptime:
    """How long each zone has offered enough spot to run, from the observations so far.

    Why: zones that offer the same nodes at the same price now differ in how long
    they keep them; the one that kept them longest so far is the better bet (a
    pure function of the observations: every capacity change of any zone is a
    decision point, so the policy sees each zone's every change).
    """

    def __init__(self) -> None:
        self._last_s: float | None = None
        self._running: list[bool] = []
        self.up_s: list[float] = []

    def update(self, obs: Observation) -> None:
        """Credit the time since the last observation to the zones that could run."""
        if self._last_s is not None and obs.now_s > self._last_s:
            elapsed = obs.now_s - self._last_s
            for index, running in enumerate(self._running):
                if running:
                    self.up_s[index] += elapsed
        if len(self.up_s) != len(obs.zones):
            self.up_s = [0.0] * len(obs.zones)
        self._running = [zone.spot_available >= obs.min_nodes for zone in obs.zones]
        self._last_s = obs.now_s

    def of(self, index: int) -> float:
        """Seconds zone ``index`` has been seen able to run (0 before any update)."""
        return self.up_s[index] if index < len(self.up_s) else 0.0
