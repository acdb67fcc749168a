"""``pollux``: goodput with batch-size co-adaptation (Pollux, OSDI'21), our own optimiser."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from ..registry import register_cluster
from ._greedy import (
    climb_with,
    greedy_counts,
    job_cap,
    keyed_table,
    rising_run,
    shape_nodes,
)
from .base import ClusterDecision, ClusterJobView, ClusterObservation, ClusterPolicyBase
from .place import place

__all__ = ["PolluxPolicy", "speedup_fn"]

#: A batch size of 0 in a decision: the job adapts its own batch (``elasim.cluster.ADAPTIVE``).
ADAPTIVE = 0
#: Speedups below this count as none (``s ** p`` with ``p < 0`` would overflow).
_TINY = 1e-9
#: The exponents for which a clear rise of the speedup (:func:`rising_run`) surely
#: lowers ``s ** p``: ``(1 + 1e-6) ** p`` is at least 1e-9 below 1, and speedups in
#: ``(_TINY, _HIGH)`` keep ``s ** p`` far from overflow and underflow.
_CLIMB_P = (-8.0, -1e-3)
_HIGH = 1e30


def speedup_fn(
    obs: ClusterObservation,
    job: ClusterJobView,
    fair: int,
    delay_s: float,
    tables: dict | None = None,
    batch_size: int | None = None,
):
    """Pollux's speedup of a job: goodput over its goodput at a fair share of the cluster.

    ``batch_size`` None: at the best batch of each allocation (co-adaptation); otherwise
    at that global batch, for a job that keeps its batch.

    A count other than the current one is discounted by the restart factor
    ``max(age - restarts * delay, 0) / (age + delay)``: a job that has spent a large
    part of its life restarting is moved less.

    ``tables`` (optional) keeps the undiscounted speedups by ``(speed, fair, GPUs per
    node, batch)`` across calls and decisions.  Why: a speed model answers for one epoch and
    its answers do not change, and ``pollux`` re-optimises every minute, asking the
    same few speedups of every job (most of its decision time on the Philly trace);
    the division is the same, so the speedups are bit for bit those computed afresh.
    """
    return _Speedups(obs, job, fair, delay_s, tables, batch_size).at


class _Speedups:
    """One job's speedups in one decision: its table, restart factor and held count.

    Attributes:
        table: the undiscounted speedups by GPUs (key 0: the base goodput), shared by
            every job of the same speed model, fair share and batch.
        runs: that table's memo of :func:`rising_run`.
        factor: the restart factor of every count but the held one.
        held: GPUs the job holds now.
        usable: whether it has a speed model and a positive base goodput (else every
            speedup is 0).
    """

    __slots__ = ("_batch", "_gpn", "_speed", "factor", "held", "runs", "table", "usable")

    def __init__(
        self,
        obs: ClusterObservation,
        job: ClusterJobView,
        fair: int,
        delay_s: float,
        tables: dict | None,
        batch_size: int | None,
    ) -> None:
        gpn = self._gpn = obs.gpus_per_node
        speed = self._speed = job.speed
        self._batch = batch_size
        self.table, self.runs = _table(tables, speed, fair, gpn, batch_size)
        age = max(obs.now_s - job.arrival_s, 0.0)
        self.factor = (
            max(age - job.restarts * delay_s, 0.0) / (age + delay_s) if delay_s > 0 else 1.0
        )
        self.held = job.gpus
        self.usable = speed is not None and self.table.get(0, 0.0) > 0

    def undiscounted(self, n: int) -> float:
        """The speedup at ``n >= 1`` GPUs without the restart factor (kept in the table)."""
        table = self.table
        hit = table.get(n)
        if hit is None:
            hit = table[n] = (
                self._speed.goodput(shape_nodes(n, self._gpn), n, self._batch) / table[0]  # type: ignore[union-attr]
            )
        return hit

    def at(self, n: int) -> float:
        """The speedup at ``n`` GPUs."""
        if n <= 0 or not self.usable:
            return 0.0
        hit = self.table.get(n)
        if hit is None:
            hit = self.undiscounted(n)
        return hit if n == self.held else hit * self.factor


def _climb(
    sp: _Speedups,
    gain: Callable[[ClusterJobView, int], float],
    job: ClusterJobView,
    n: int,
    cap: int,
) -> int | None:
    """A job's lone climb from ``n`` (see :func:`greedy_counts`), with speedups ``sp``.

    A step from a count other than the held one compares two speedups with the same
    factor (<= 1), or a discounted one with the held one: where the table rises
    clearly (:func:`rising_run`) and the speedups lie well above ``_TINY``, ``s ** p``
    falls by far more than its rounding (``p`` within ``_CLIMB_P``), so the gain is
    positive; where it falls between two discounted speedups, or both are 0 (a factor
    of 0, no speed model), the gain is not.  The other steps are asked of ``gain``.
    """
    factor, held = sp.factor, sp.held
    if not sp.usable:
        return n  # every speedup 0: no gain
    # an undiscounted speedup above this is above _TINY once discounted
    least = 2 * _TINY / factor if factor > 0 else math.inf
    table, runs, undiscounted = sp.table, sp.runs, sp.undiscounted

    def skip(k: int) -> tuple[int, bool] | None:
        if factor == 0 and k != held and k + 1 != held:
            return k, True  # both speedups 0: no gain
        if k >= 1 and k != held and undiscounted(k) > least:
            # below the held count the factor (<= 1) only lowers the lower speedup
            most = held if k < held else cap
            m, falls = rising_run(table, runs, k, min(most, cap), undiscounted, _HIGH)
            return m, falls and m + 1 != held  # a fall counts between discounted ones
        return None

    return climb_with(gain, job, n, cap, skip)


def _table(
    tables: dict | None, speed: object, fair: int, gpn: int, batch_size: int | None
) -> tuple[dict[int, float], dict[int, tuple[int, int]]]:
    """The speedups of ``speed`` at ``fair`` by GPUs (key 0: the base goodput), its runs' memo."""
    key = (speed, fair, gpn, batch_size)
    kept, _ = keyed_table(tables, key, _base, speed, fair, gpn, batch_size)
    return kept


def _base(
    speed: object, fair: int, gpn: int, batch_size: int | None
) -> tuple[dict[int, float], dict[int, tuple[int, int]]]:
    """A new table of speedups: only the base goodput (at key 0) so far; no runs yet."""
    base = 0.0
    if speed is not None:
        base = speed.goodput(shape_nodes(fair, gpn), fair, batch_size)  # type: ignore[attr-defined]
    return {0: base}, {}


@register_cluster
class PolluxPolicy(ClusterPolicyBase):
    """Maximise the p-mean of goodput speedups over fair share; jobs adapt their batch.

    Pollux's objective (``p = -1`` by default: the harmonic mean, which strongly favours
    giving every job something) with its restart penalty and its exploration limit (a
    job grows to at most ``explore_factor`` times the most GPUs it has run on, as
    Pollux's learned throughput model does).  Instead of Pollux's genetic algorithm, a
    greedy marginal optimiser: one GPU per job in order of attained service while they
    last, then each GPU to the job whose term of the p-mean it raises most.  Every job
    trains with the batch of highest goodput for its allocation (AdaptDL's
    co-adaptation), re-chosen at every epoch; ``adapt_batch=false`` is the ablation
    without it (Pollux's "fixed batch" baseline): every job keeps its requested batch
    and the optimiser weighs goodput at that batch.
    """

    name: ClassVar[str] = "pollux"
    adaptive_batches: ClassVar[bool] = True

    @dataclass(frozen=True)
    class Config:
        """Options of ``pollux``.

        Attributes:
            p: the exponent of the p-mean (``-1`` harmonic; ``1`` total speedup).
            interval_s: how often to re-optimise (Pollux: 60 s).
            explore_factor: most GPUs as a multiple of the most a job has held (0: off).
            max_gpus: most GPUs per job (0: the cluster; Pollux's simulator: 64).
            restart_delay_s: the restart penalty's delay (0: the observed rescale cost).
            adapt_batch: co-adapt every job's batch (False: each keeps its requested
                batch, to measure what co-adaptation is worth).
        """

        p: float = -1.0
        interval_s: float = 60.0
        explore_factor: float = 2.0
        max_gpus: int = 64
        restart_delay_s: float = 30.0
        adapt_batch: bool = True

        def __post_init__(self) -> None:
            if self.p == 0 or not math.isfinite(self.p):
                raise ValueError("p must be finite and non-zero")
            if not self.interval_s > 0 or self.explore_factor < 0 or self.max_gpus < 0:
                raise ValueError("interval_s must be > 0, explore_factor and max_gpus >= 0")

    def caps(self, obs: ClusterObservation) -> dict[str, int]:
        """Most GPUs per job: application limit, ``max_gpus``, exploration limit."""
        total = obs.total_gpus
        top = min(self.config.max_gpus or total, total)
        explore = self.config.explore_factor
        return {job.name: job_cap(job, top, explore) for job in obs.jobs}

    def decide(self, obs: ClusterObservation) -> ClusterDecision:
        """Greedy maximisation of the p-mean of speedups."""
        if not obs.jobs:
            return ClusterDecision(wake_after_s=self.config.interval_s)
        total = obs.total_gpus
        fair = max(math.ceil(total / len(obs.jobs)), 1)
        delay = self.config.restart_delay_s or obs.rescale_cost_s
        jobs = sorted(obs.jobs, key=lambda j: (j.attained_gpu_s, j.arrival_s, j.name))
        tables = self.__dict__.setdefault("_speedup_tables", {})
        adapt = self.config.adapt_batch
        parts: dict[str, _Speedups] = {}  # by name, made when the greedy first asks

        def part(job: ClusterJobView) -> _Speedups:
            batch = None if adapt else job.requested_batch_size
            made = parts[job.name] = _Speedups(obs, job, fair, delay, tables, batch)
            return made

        def speedup(job: ClusterJobView):
            return (parts.get(job.name) or part(job)).at

        p = self.config.p

        last: dict[str, tuple[int, float]] = {}  # the greedy asks n, then n + 1, ...

        def gain(job: ClusterJobView, n: int) -> float:
            s = speedup(job)
            if p < 0:
                # maximising -sum s^p (p < 0): a job at zero speedup is infinitely bad
                known = last.get(job.name)
                if known is not None and known[0] == n:
                    before = known[1]
                else:
                    lo = s(n)
                    before = math.inf if lo <= _TINY else lo**p
                hi = s(n + 1)
                after = math.inf if hi <= _TINY else hi**p
                last[job.name] = (n + 1, after)
                if before == math.inf:
                    return math.inf if after < math.inf else 0.0
                return before - after
            lo, hi = s(n), s(n + 1)
            try:
                return hi**p - lo**p
            except OverflowError:  # astronomically large speedups with p > 1
                return math.inf

        def climb(job: ClusterJobView, n: int, cap: int) -> int | None:
            return _climb(parts.get(job.name) or part(job), gain, job, n, cap)

        start = {j.name: 1 for j in jobs[:total]}
        fast = _CLIMB_P[0] <= p <= _CLIMB_P[1]
        counts = greedy_counts(jobs, total, gain, self.caps(obs), start, climb if fast else None)
        allocations = place(obs.jobs, counts, obs.usable_nodes, obs.gpus_per_node)
        # a job missing from the batches trains with its requested batch
        batches = {name: ADAPTIVE for name in allocations} if adapt else {}
        return ClusterDecision.of(allocations, batches, self.config.interval_s)
