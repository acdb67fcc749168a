"""``fifo``: first come, first served, rigid (each job runs on the GPUs it asks for)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..registry import register_cluster
from .base import ClusterDecision, ClusterObservation, ClusterPolicyBase
from .place import place

__all__ = ["FifoPolicy"]


@register_cluster
class FifoPolicy(ClusterPolicyBase):
    """First come, first served with the requested GPUs; a running job is never moved.

    The baseline of every cluster-scheduling paper: jobs start in arrival order, each
    on exactly the GPUs the workload asks for (capped at the cluster), and keep them to
    the end.  Strict by default: when the oldest waiting job does not fit, nobody
    behind it starts (``backfill`` lets smaller jobs behind it start).
    """

    name: ClassVar[str] = "fifo"

    @dataclass(frozen=True)
    class Config:
        """Options of ``fifo``.

        Attributes:
            backfill: start later jobs that fit while the oldest waiting one does not.
        """

        backfill: bool = False

    def decide(self, obs: ClusterObservation) -> ClusterDecision:
        """Keep the running jobs; start waiting ones in arrival order while they fit."""
        free = obs.total_gpus
        counts: dict[str, int] = {}
        # Only the running jobs and those that start now are read (strict: the scan of
        # the queue stops at the first job that does not fit), so a decision costs
        # O(running jobs), not O(queue).  ``place`` sees just the jobs with GPUs: the
        # others would get none, and it keeps or places these exactly as in ``jobs``
        # order (kept placements never overlap; new ones are placed in a sorted order).
        chosen = list(obs.holding)
        for job in chosen:
            counts[job.name] = gpus = job.gpus
            free -= gpus
        for job in obs.jobs:
            if job.placement:  # held (a placement is never empty of GPUs)
                continue
            want = min(job.requested_gpus, obs.total_gpus)
            if want <= free:
                counts[job.name] = want
                free -= want
                chosen.append(job)
            elif not self.config.backfill:
                break
        return ClusterDecision.of(place(chosen, counts, obs.usable_nodes, obs.gpus_per_node))
