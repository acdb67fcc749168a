"""``tiresias``: two-dimensional least attained service, discretised (Tiresias, NSDI'19)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..registry import register_cluster
from .base import ClusterDecision, ClusterObservation, ClusterPolicyBase
from .place import place

__all__ = ["TiresiasPolicy"]


@register_cluster
class TiresiasPolicy(ClusterPolicyBase):
    """Rigid jobs in two priority queues by attained GPU-time; preemptive, backfilling.

    Tiresias's discretised 2D-LAS as Pollux's simulator configures it: a job is in the
    high-priority queue until it has held ``threshold_gpu_h`` GPU-hours, then in the
    low one; within a queue, first come first served.  Jobs are admitted in that order,
    each on the GPUs it asks for, skipping those that do not fit (backfilling); a
    running job that no longer makes the cut is preempted.  No starvation guard (as in
    Pollux's runs).  Stateless: the queue follows from the attained service.
    """

    name: ClassVar[str] = "tiresias"

    @dataclass(frozen=True)
    class Config:
        """Options of ``tiresias``.

        Attributes:
            threshold_gpu_h: GPU-hours after which a job drops to the low queue.
            interval_s: how often to look again (queues move with attained service).
        """

        threshold_gpu_h: float = 16.0
        interval_s: float = 60.0

        def __post_init__(self) -> None:
            if not self.threshold_gpu_h > 0 or not self.interval_s > 0:
                raise ValueError("threshold_gpu_h and interval_s must be > 0")

    def decide(self, obs: ClusterObservation) -> ClusterDecision:
        """Admit jobs by (queue, arrival) while they fit."""
        limit_s = self.config.threshold_gpu_h * 3600.0
        # the high queue, then the low one, each by (arrival, name): the order of
        # ``obs.jobs`` already, so a stable split, not a sort
        order = [j for j in obs.jobs if not j.attained_gpu_s >= limit_s]
        order += [j for j in obs.jobs if j.attained_gpu_s >= limit_s]
        free = total = obs.total_gpus
        counts: dict[str, int] = {}
        for job in order:
            want = min(job.requested_gpus, total)
            if want <= free:
                counts[job.name] = want
                free -= want
        allocations = place(obs.jobs, counts, obs.usable_nodes, obs.gpus_per_node)
        return ClusterDecision.of(allocations, wake_after_s=self.config.interval_s)
