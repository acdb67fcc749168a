"""``optimus``: elastic; each GPU goes where it cuts remaining time most (EuroSys'18)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..registry import register_cluster
from ._greedy import greedy_counts, shape_nodes
from .base import ClusterDecision, ClusterJobView, ClusterObservation, ClusterPolicyBase
from .place import place

__all__ = ["OptimusPolicy"]


@register_cluster
class OptimusPolicy(ClusterPolicyBase):
    """Elastic at the requested batch: each GPU goes where it shortens remaining time most.

    Optimus's marginal-gain allocation with an oracle speed model (Pollux's
    "Optimus+Oracle"): every job first gets one GPU (oldest first while they last),
    then each further GPU goes to the job whose estimated remaining time
    ``remaining / goodput(n)`` it reduces most.  Jobs keep the batch size they ask
    for (no batch adaptation, Pollux's "tuned jobs"), so a job stops growing where
    one more GPU no longer shortens it: once its batch spread over the GPUs falls
    below the smallest measured per-GPU batch, more GPUs only add synchronisation.
    """

    name: ClassVar[str] = "optimus"

    @dataclass(frozen=True)
    class Config:
        """Options of ``optimus``.

        Attributes:
            interval_s: how often to re-optimise.
            max_gpus: most GPUs per job (0: the cluster).
        """

        interval_s: float = 60.0
        max_gpus: int = 0

        def __post_init__(self) -> None:
            if not self.interval_s > 0 or self.max_gpus < 0:
                raise ValueError("interval_s must be > 0 and max_gpus >= 0")

    def decide(self, obs: ClusterObservation) -> ClusterDecision:
        """One GPU each, then marginal remaining-time reduction."""
        gpn = obs.gpus_per_node
        total = obs.total_gpus
        jobs = list(obs.jobs)  # by (arrival, name) already
        cap_all = self.config.max_gpus or total
        caps = {j.name: min(cap_all, total, max(j.max_gpus, 1)) for j in jobs}

        def time_left(job: ClusterJobView, n: int) -> float:
            if n <= 0 or job.speed is None:
                return math.inf
            rate = job.speed.goodput(shape_nodes(n, gpn), n, job.requested_batch_size)
            return job.remaining / rate if rate > 0 else math.inf

        last: dict[str, tuple[int, float]] = {}  # the greedy asks n, then n + 1, ...

        def gain(job: ClusterJobView, n: int) -> float:
            if n == 0:
                return math.inf
            known = last.get(job.name)
            before = known[1] if known is not None and known[0] == n else time_left(job, n)
            after = time_left(job, n + 1)
            last[job.name] = (n + 1, after)
            return before - after

        start = {j.name: 1 for j in jobs[:total]}
        counts = greedy_counts(jobs, total, gain, caps, start)
        allocations = place(obs.jobs, counts, obs.usable_nodes, gpn)
        return ClusterDecision.of(allocations, wake_after_s=self.config.interval_s)
