"""``optimus``: elastic; each GPU goes where it cuts remaining time most (EuroSys'18)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..registry import register_cluster
from ._greedy import climb_with, greedy_counts, job_cap, keyed_table, rising_run, shape_nodes
from .base import ClusterDecision, ClusterJobView, ClusterObservation, ClusterPolicyBase
from .place import place

__all__ = ["OptimusPolicy"]

#: The remaining work for which ``remaining / goodput`` stays a normal float for every
#: goodput :func:`rising_run` vouches for, so that a clear rise surely cuts the time left.
_REMAINING = (1e-200, 1e200)


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
        top = min(cap_all, total)
        caps = {j.name: job_cap(j, top) for j in jobs}

        store = self.__dict__.setdefault("_rate_tables", {})
        kept = {j.name: _rates(store, j.speed, gpn, j.requested_batch_size) for j in jobs}

        def rate(job: ClusterJobView, table: dict[int, float], n: int) -> float:
            batch = job.requested_batch_size
            out = table[n] = job.speed.goodput(shape_nodes(n, gpn), n, batch)  # type: ignore[union-attr]
            return out

        def gain(job: ClusterJobView, n: int) -> float:
            """Time left at ``n`` GPUs less time left at ``n + 1``."""
            if n == 0:
                return math.inf
            if job.speed is None:
                return math.inf - math.inf  # no speed: no time left to cut (NaN)
            table = kept[job.name][0]
            lo = table.get(n)
            if lo is None:
                lo = rate(job, table, n)
            hi = table.get(n + 1)
            if hi is None:
                hi = rate(job, table, n + 1)
            remaining = job.remaining
            return (remaining / lo if lo > 0 else math.inf) - (
                remaining / hi if hi > 0 else math.inf
            )

        def climb(job: ClusterJobView, n: int, cap: int) -> int | None:
            """A job's lone climb from ``n`` (see :func:`greedy_counts`).

            Where the goodput rises clearly (:func:`rising_run`), ``remaining / goodput``
            falls by far more than its rounding (a remaining time within ``_REMAINING``
            keeps the quotients normal), so the gain is positive; where it falls, the
            gain is not.  The other steps are asked of ``gain``.
            """
            remaining = job.remaining
            if job.speed is None or not _REMAINING[0] < remaining < _REMAINING[1]:
                return None
            table, runs = kept[job.name]

            def value(k: int) -> float:
                return rate(job, table, k)

            def skip(k: int) -> tuple[int, bool] | None:
                return rising_run(table, runs, k, cap, value) if k >= 1 else None

            return climb_with(gain, job, n, cap, skip)

        start = {j.name: 1 for j in jobs[:total]}
        counts = greedy_counts(jobs, total, gain, caps, start, climb)
        allocations = place(obs.jobs, counts, obs.usable_nodes, gpn)
        return ClusterDecision.of(allocations, wake_after_s=self.config.interval_s)


def _rates(
    store: dict, speed: object, gpn: int, batch_size: int
) -> tuple[dict[int, float], dict[int, tuple[int, int]]]:
    """Goodput of ``speed`` at ``batch_size`` by GPUs and its runs' memo (:func:`rising_run`).

    Kept by (speed, GPUs per node, batch).
    Why: ``optimus`` weighs every GPU it hands out, a goodput each; the model's answers
    do not change, so they are read from a table (see :func:`keyed_table`).
    """
    return keyed_table(store, (speed, gpn, batch_size), _new_rates)[0]


def _new_rates() -> tuple[dict[int, float], dict[int, tuple[int, int]]]:
    """An empty table of goodputs and an empty memo of its runs."""
    return {}, {}
