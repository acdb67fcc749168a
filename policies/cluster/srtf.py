"""``srtf``: ours -- shortest remaining time first, each job at its efficient scale."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..registry import register_cluster
from ._greedy import keyed_table, shape_nodes
from .base import (
    ClusterDecision,
    ClusterJobView,
    ClusterObservation,
    ClusterPolicyBase,
    JobSpeed,
)
from .place import place
from .pollux import ADAPTIVE

__all__ = ["SrtfPolicy"]


@register_cluster
class SrtfPolicy(ClusterPolicyBase):
    """Shortest remaining time first, each job grown while its GPUs stay efficient.

    Ours, aimed at average JCT.  Pollux's p-mean spreads GPUs so that every job gets
    some; for the mean completion time it is better to finish short jobs first
    (SRPT), and an elastic job should grow only while a GPU still pays.  So: jobs in
    order of their remaining time at one GPU (goodput with the best batch, the same
    speed model Pollux uses); each in turn gets GPUs, one at a time, while the next
    GPU adds at least ``efficiency`` of what the first one gave (and within Pollux's
    exploration limit), until the cluster is full.  A running job whose new count is
    a shrink to within ``keep_ratio`` of its current one keeps it (a reallocation
    costs a pause; growing is never held back, or the exploration limit would pin
    every job at its first count).
    Jobs adapt their batch like Pollux's.  Long jobs can wait while short ones keep
    arriving (the usual SRPT trade: better mean, worse tail).
    """

    name: ClassVar[str] = "srtf"
    adaptive_batches: ClassVar[bool] = True

    @dataclass(frozen=True)
    class Config:
        """Options of ``srtf``.

        Attributes:
            efficiency: least gain of the next GPU relative to the first (0..1).
            keep_ratio: keep a running job's count rather than shrink it by less than this factor.
            interval_s: how often to re-optimise.
            explore_factor: most GPUs as a multiple of the most a job has held (0: off).
            max_gpus: most GPUs per job (0: the cluster).
        """

        efficiency: float = 0.05
        keep_ratio: float = 2.0
        interval_s: float = 60.0
        explore_factor: float = 2.0
        max_gpus: int = 64

        def __post_init__(self) -> None:
            if not 0 <= self.efficiency <= 1:
                raise ValueError("efficiency must be within [0, 1]")
            if self.keep_ratio < 1 or not self.interval_s > 0:
                raise ValueError("keep_ratio must be >= 1 and interval_s > 0")
            if self.explore_factor < 0 or self.max_gpus < 0:
                raise ValueError("explore_factor and max_gpus must be >= 0")

    def _cap(self, job: ClusterJobView, total: int) -> int:
        cap = min(self.config.max_gpus or total, total, max(job.max_gpus, 1))
        if self.config.explore_factor > 0:
            cap = min(cap, max(int(self.config.explore_factor * job.peak_gpus), 1))
        return cap

    def _climb(self, speed: JobSpeed, gpn: int) -> list:
        """How far a job of ``speed`` climbed so far: ``[gpus, goodput, stopped, first]``.

        Why kept: the climb depends on the speed model and the node size only (the
        bound ``min(cap, free)`` merely cuts it short), and ``srtf`` sizes every job it
        starts at every decision, asking the same goodputs again; the climb goes on
        from where it got, with the same comparisons (see :func:`keyed_table`).
        """
        store = self.__dict__.setdefault("_climbs", {})
        return keyed_table(store, (speed, gpn), _start, speed)[0]

    def _want(self, job: ClusterJobView, gpn: int, cap: int, free: int) -> int:
        """GPUs the job uses efficiently (at most ``cap`` and ``free``)."""
        speed = job.speed
        if speed is None:
            return min(1, free)
        climb = self._climb(speed, gpn)
        n, rate, stopped, first = climb
        most = min(cap, free)
        if not stopped and n < most:
            least_gain = self.config.efficiency * first
            while n < most:
                nxt = speed.goodput(shape_nodes(n + 1, gpn), n + 1)
                if nxt - rate < least_gain:
                    stopped = True
                    break
                n, rate = n + 1, nxt
            climb[:3] = n, rate, stopped
        return n if n < most else max(most, 1)

    def decide(self, obs: ClusterObservation) -> ClusterDecision:
        """Fill the cluster in order of remaining time."""
        gpn = obs.gpus_per_node
        total = obs.total_gpus

        def time_left(job: ClusterJobView) -> float:
            rate = self._climb(job.speed, gpn)[3] if job.speed is not None else 0.0
            return job.remaining / rate if rate > 0 else math.inf

        order = sorted(obs.jobs, key=lambda j: (time_left(j), j.arrival_s, j.name))
        free = total
        counts: dict[str, int] = {}
        for job in order:
            if free <= 0:
                break
            want = self._want(job, gpn, self._cap(job, total), free)
            held = job.gpus
            ratio = self.config.keep_ratio
            if held and want < held <= min(want * ratio, free):
                want = held
            counts[job.name] = want
            free -= want
        allocations = place(obs.jobs, counts, obs.usable_nodes, gpn)
        batches = {name: ADAPTIVE for name in allocations}
        return ClusterDecision.of(allocations, batches, self.config.interval_s)


def _start(speed: JobSpeed) -> list:
    """A climb not begun: one GPU, its goodput, not stopped, the goodput of one GPU."""
    first = speed.goodput(1, 1)
    return [1, first, False, first]
