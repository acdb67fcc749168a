"""When a job writes its periodic checkpoints: fixed, or Young/Daly ``auto`` (stdlib only).

The rule lives here, beside the policies, because both sides need it: the job model
(:mod:`elasim.jobmodel`) writes checkpoints by it, and a deadline policy that plans to
the minute must know how the interval will grow on nodes that are never preempted
(:meth:`CheckpointSchedule.run_time_s`), not assume today's interval for the rest of
the run.  One rule, read by both, so the plan and the replay cannot drift apart.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PRIOR_MTBF_S",
    "MIN_AUTO_INTERVAL_S",
    "CheckpointSchedule",
    "young_daly_interval_s",
]

#: Checkpoint cycles :meth:`CheckpointSchedule.run_time_s` follows one by one; past
#: them the last cycle's training share is kept (the share only grows without
#: preemptions, so that overestimates the time: a bound, cheaply).
PROJECTED_CYCLES = 256

#: ``auto`` never checkpoints more often than once a minute of trace time (a free
#: checkpoint would otherwise be taken continuously).
MIN_AUTO_INTERVAL_S = 60.0
#: Mean time between failures assumed for a source that gives no prior (a day).
DEFAULT_PRIOR_MTBF_S = 86400.0


def young_daly_interval_s(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Daly's (2006) higher-order refinement of Young's optimal checkpoint interval.

    ``sqrt(2 C M) * (1 + sqrt(C / 2M) / 3 + C / 18M) - C`` for ``C < 2M``, else ``M``.
    A zero-cost checkpoint would be taken continuously; we floor the interval at 1 s.
    """
    cost, mtbf = checkpoint_cost_s, mtbf_s
    if cost <= 0:
        return 1.0
    if cost >= 2 * mtbf:
        return max(mtbf, 1.0)
    root = math.sqrt(2 * cost * mtbf)
    return max(root * (1 + math.sqrt(cost / (2 * mtbf)) / 3 + cost / (18 * mtbf)) - cost, 1.0)


@dataclass(frozen=True)
class CheckpointSchedule:
    """Running time between periodic checkpoints, fixed or Young/Daly ``auto``.

    ``auto`` re-estimates the mean time between failures after every checkpoint and
    every preemption: the trace's mean time between drops counts as one
    pseudo-observation (a prior), the preemptions seen so far that were not warned in
    time (or lost work all the same) as the others.  A leave warned in time (a notice
    that covers it) loses nothing, so it does not count: with AWS's two-minute notice
    every drop is one, and counting them made the job write more often for no loss,
    and the offline optimum's replay fall behind its plan (one 16-node window at a
    1.1x deadline paid 3.1x its cost without notice, on on-demand nodes).

    Attributes:
        interval_s: fixed trace seconds of running time, None for ``auto``,
            ``math.inf`` for ``off``.
        prior_mtbf_s: the capacity source's mean time between drops (``inf``: none).
        scale: divides the constants (the floor, the default prior), which are in the
            trace's own seconds, when the clock runs on a compressed trace.
    """

    interval_s: float | None
    prior_mtbf_s: float = math.inf
    scale: float = 1.0

    def __post_init__(self) -> None:
        # the constants of ``auto``, computed once (this runs after every checkpoint)
        prior = self.prior_mtbf_s
        if math.isinf(prior):
            prior = DEFAULT_PRIOR_MTBF_S / self.scale
        object.__setattr__(self, "_prior_s", prior)
        object.__setattr__(self, "_floor_s", MIN_AUTO_INTERVAL_S / self.scale)

    @property
    def auto(self) -> bool:
        """Whether the interval follows Young/Daly."""
        return self.interval_s is None

    def current_interval_s(self, checkpoint_cost_s: float, now_s: float, preemptions: int) -> float:
        """The interval to use from now on (trace seconds; ``inf``: never)."""
        if self.interval_s is not None:
            return self.interval_s
        mtbf = (self._prior_s + now_s) / (1 + preemptions)  # type: ignore[attr-defined]
        return max(young_daly_interval_s(checkpoint_cost_s, mtbf), self._floor_s)  # type: ignore[attr-defined]

    def run_time_s(
        self,
        train_s: float,
        checkpoint_cost_s: float,
        start_s: float,
        preemptions: int,
        first_interval_s: float | None = None,
    ) -> float:
        """Seconds to train ``train_s`` from ``start_s`` on nodes never preempted.

        The training share ``interval / (interval + write)`` of today's interval is a
        bound that loosens as a run goes on: without preemptions ``auto``'s estimate
        of the time between failures grows with the clock, and so does the interval
        (on a trace whose spot drops every hour, from 98 s to 170 s over a two-hour
        run).  A policy that priced its on-demand plan with today's share bought one
        node more than the plan replayed needs (16-node windows at a 1.1x deadline).
        This follows the schedule cycle by cycle, each interval taken where its
        checkpoint's write begins (as the job model re-estimates it), the last
        cycle's share kept past :data:`PROJECTED_CYCLES` (an overestimate: the share
        only grows, but for Daly's formula where the write takes about twice the
        estimated time between failures, far from the bundled jobs' 1.6 s writes).
        No checkpoint is written after the last sample.

        Args:
            train_s: seconds of training to do (samples over the goodput).
            checkpoint_cost_s: what one checkpoint write takes.
            start_s: the job's clock when training starts.
            preemptions: preemptions seen so far (none come on on-demand nodes).
            first_interval_s: the interval in force at ``start_s`` (default: the
                schedule's there; the job's own may be shorter, set at its last
                checkpoint).
        """
        cost = checkpoint_cost_s
        interval = first_interval_s
        if interval is None:
            interval = self.current_interval_s(cost, start_s, preemptions)
        if train_s <= 0.0:
            return 0.0
        if math.isinf(interval) or cost <= 0.0:
            return train_s
        if self.interval_s is not None:  # fixed: the share is the same all along
            return train_s * (interval + cost) / interval
        if train_s <= interval:
            return train_s  # done before the first checkpoint
        walk = _walk(self, cost, start_s, preemptions, interval)
        trained, walls = walk.upto(train_s)
        k = bisect.bisect_left(trained, train_s)  # >= 1: more than the first interval
        if k < len(trained):  # done in cycle k, after k writes
            return walls[k - 1] + train_s - trained[k - 1]
        last = walk.interval
        return walls[-1] + (train_s - trained[-1]) * (last + cost) / last


class _Walk:
    """The cycles of :meth:`CheckpointSchedule.run_time_s` from one start, walked lazily.

    ``trained[k]`` and ``walls[k]``: training and wall seconds when cycle ``k + 1``
    starts training (after ``k + 1`` writes); ``interval``: the one in force after the
    last of them.  Why: a deadline policy asks the time of every node count (up to
    16) at every decision, and the cycles do not depend on the count: one walk serves
    them all, and it goes only as far as the longest ask (up to
    :data:`PROJECTED_CYCLES`), not always to the end.
    """

    def __init__(
        self, schedule: CheckpointSchedule, cost: float, start_s: float, lost: int, first: float
    ) -> None:
        self.schedule, self.cost, self.lost = schedule, cost, lost
        self.trained: list[float] = []
        self.walls: list[float] = []
        self.done, self.wall, self.now, self.interval = 0.0, 0.0, start_s, first

    def upto(self, train_s: float) -> tuple[list[float], list[float]]:
        """The cycles until ``train_s`` of training (or the last one walked)."""
        trained, walls = self.trained, self.walls
        if trained and trained[-1] >= train_s or len(trained) >= PROJECTED_CYCLES:
            return trained, walls
        schedule, cost, lost = self.schedule, self.cost, self.lost
        done, wall, now, interval = self.done, self.wall, self.now, self.interval
        while len(trained) < PROJECTED_CYCLES:
            done += interval
            wall += interval
            now += interval
            interval = schedule.current_interval_s(cost, now, lost)
            wall += cost
            now += cost
            trained.append(done)
            walls.append(wall)
            if done >= train_s:
                break
        self.done, self.wall, self.now, self.interval = done, wall, now, interval
        return trained, walls


@functools.lru_cache(maxsize=16)
def _walk(
    schedule: CheckpointSchedule, cost: float, start_s: float, lost: int, first: float
) -> _Walk:
    """The walk from one start, remembered.

    A pure function of its arguments (the walk only grows, and every answer is read
    off the same cycles), so what is kept changes no answer.  A decision's starts are
    few and the next decision's are new, so few are kept.
    """
    return _Walk(schedule, cost, start_s, lost, first)
