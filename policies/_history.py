"""What ``receding`` has seen of spot: time at each availability level, and the outages.

State derived from observations only, so the policy stays pure: two fresh histories
fed the same observations agree.
"""

from __future__ import annotations

import math

__all__ = ["AvailabilityHistory"]


class AvailabilityHistory:
    """How long each spot availability (capped at ``max_nodes``) was seen, plus a prior.

    Fed by every observation in order: the time since the previous one is counted
    to the availability seen then.  The prior spreads ``prior_s`` seconds evenly over
    ``0..max_nodes`` (nothing known: every level alike), so the first decisions do
    not bet on the first few minutes seen.  Two fresh histories fed the same
    observations agree (the policy stays pure).
    """

    def __init__(self, prior_s: float) -> None:
        self.prior_s = prior_s
        self.seconds: dict[int, float] = {}
        self.last: tuple[float, int] | None = None
        self.changes = 0
        self.seen_s = 0.0
        self.outages = 0
        self.drops = 0  # changes to less spot: losses of spot nodes

    def observe(self, now_s: float, available: int) -> None:
        """Count the time since the last observation to the availability seen then."""
        if self.last is not None:
            then, was = self.last
            elapsed = now_s - then
            if elapsed > 0.0:
                self.seconds[was] = self.seconds.get(was, 0.0) + elapsed
                self.seen_s += elapsed
            if available != was:
                self.changes += 1
                self.drops += available < was
                if was == 0:
                    self.outages += 1
            if elapsed < 0.0:  # a clock that went back (a fresh run): keep the later time
                now_s = then
        self.last = (now_s, available)

    def shares(self, max_nodes: int) -> list[tuple[int, float]]:
        """``(available, share of time)`` for every level with any weight, summing to 1."""
        prior = self.prior_s / (max_nodes + 1)
        weights = {level: prior for level in range(max_nodes + 1)}
        for level, seconds in self.seconds.items():
            level = min(level, max_nodes)
            weights[level] = weights.get(level, 0.0) + seconds
        total = sum(weights.values())
        if total <= 0.0:
            return [(max_nodes, 1.0)]
        return [(level, w / total) for level, w in sorted(weights.items()) if w > 0.0]

    def outage_left_s(self, prior_s: float) -> float:
        """Expected time until spot returns, from the outages seen (memoryless).

        The mean outage is the time seen without spot (the current outage's too) over
        the outages ended, with one prior outage of ``prior_s``: an outage at the very
        start reads as "outages last this long so far", not "spot never comes", and
        the estimate grows with the current outage's age.
        """
        return (prior_s + self.seconds.get(0, 0.0)) / (1 + self.outages)

    def most_seen(self) -> int:
        """The most spot nodes seen available at once so far (the current level too)."""
        levels = [level for level, seconds in self.seconds.items() if seconds > 0.0]
        if self.last is not None:
            levels.append(self.last[1])
        return max(levels, default=0)

    def drops_per_s(self, prior_s: float) -> float:
        """Losses of spot per second seen, with one prior loss over ``prior_s``.

        The prior keeps a window that has not lost spot yet from reading "never".
        """
        return (1 + self.drops) / (prior_s + self.seen_s)

    def dwell_s(self) -> float:
        """Mean time between changes of availability seen so far (inf: none seen)."""
        if self.changes == 0:
            return math.inf
        return self.seen_s / self.changes
