"""Greedy marginal allocation: the optimiser the elastic cluster policies share.

Each policy states what one more GPU is worth to a job (``gain(job, n)``: the value
of going from ``n`` to ``n + 1`` GPUs); the helper hands GPUs out one at a time to
the job where it is worth most, until none are left or no job gains.  With concave
speedups this is the optimum of a separable objective (the exchange argument of
Optimus's and Pollux's allocators); it is deterministic (ties go to the earlier job).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from .base import ClusterJobView

__all__ = ["greedy_counts", "keyed_table", "shape_nodes"]

#: Most tables a policy keeps in one store (see :func:`keyed_table`).
TABLES_MAX = 4096


def shape_nodes(gpus: int, gpus_per_node: int) -> int:
    """Nodes a packed placement of ``gpus`` spans."""
    return -(-gpus // gpus_per_node) if gpus > 0 else 0


def keyed_table(
    tables: dict | None, key: Hashable, make: Callable[..., Any], *args: Any
) -> tuple[Any, bool]:
    """The table of ``key`` in ``tables`` (``make(*args)`` when missing); whether it is kept.

    Why: a speed model answers for one epoch and its answers do not change, and the
    elastic policies re-optimise every minute, asking the same few values of every job
    (most of their decision time on the Philly trace).  A policy keeps what it derived
    from a speed model in a table under a key of everything that determines it (the
    model among them), so that the values are bit for bit those computed afresh.
    ``tables`` None or an unhashable key (a plugin's speed model): a fresh table, not
    kept.  The store is cleared when it holds :data:`TABLES_MAX` tables (a bound on
    memory: the tables are only a cache).
    """
    try:
        table = None if tables is None else tables.get(key)
    except TypeError:  # an unhashable key: no table kept
        return make(*args), False
    if table is None:
        table = make(*args)
        if tables is not None:
            if len(tables) >= TABLES_MAX:
                tables.clear()
            tables[key] = table
    return table, tables is not None


def greedy_counts(
    jobs: Sequence[ClusterJobView],
    total: int,
    gain: Callable[[ClusterJobView, int], float],
    caps: dict[str, int],
    start: dict[str, int] | None = None,
) -> dict[str, int]:
    """GPU counts per job, adding one GPU at a time where ``gain`` is largest.

    Args:
        jobs: the jobs, in tie-breaking order.
        total: GPUs to hand out (those of ``start`` included).
        gain: value of the ``n + 1``-th GPU to a job holding ``n``.
        caps: most GPUs per job.
        start: counts to begin from (e.g. one GPU each).
    """
    counts = {job.name: 0 for job in jobs}
    counts.update(start or {})
    left = total - sum(counts.values())
    if left <= 0:
        return counts  # nothing to hand out: the gains are not asked
    room = sum(caps.get(job.name, total) - counts[job.name] for job in jobs)
    if room <= left and _climb_alone(jobs, left, gain, caps, total, counts):
        return counts
    heap: list[tuple[float, int, int]] = []
    for i, job in enumerate(jobs):
        n = counts[job.name]
        if n < caps.get(job.name, total):
            heap.append((-gain(job, n), i, n))
    before = dict(counts)
    if not _grant(list(heap), jobs, left, gain, caps, total, counts, skip=True):
        counts.update(before)  # a NaN gain: the heap's own order, one pop per GPU
        _grant(heap, jobs, left, gain, caps, total, counts, skip=False)
    return counts


def _grant(
    heap: list[tuple[float, int, int]],
    jobs: Sequence[ClusterJobView],
    left: int,
    gain: Callable[[ClusterJobView, int], float],
    caps: dict[str, int],
    total: int,
    counts: dict[str, int],
    skip: bool,
) -> bool:
    """Hand ``left`` GPUs out from ``heap`` of ``(-gain, job index, count)``, largest first.

    With ``skip``, a job's next entry goes through one heap operation, not two: none
    while it stays on top (it takes its next GPU at once), one replace of the top
    otherwise.  Why: on a 1,024-GPU cluster a few jobs share hundreds of free GPUs,
    and the heap's pushes and pops were most of ``optimus``'s decision time.  The
    entries are distinct (one per job), so while no gain is NaN they are totally
    ordered and what is popped depends on the heap's contents only, not its layout.
    A NaN gain has no order: the answer is False (``counts`` half done) and the
    caller starts again without ``skip``, one push and one pop per GPU as the heap
    always did.  The gains are pure, so asking again is harmless.
    """
    heapq.heapify(heap)
    if not skip:
        while left > 0 and heap:
            neg, i, n = heapq.heappop(heap)
            if -neg <= 0:
                break
            job = jobs[i]
            counts[job.name] = n + 1
            left -= 1
            if n + 1 < caps.get(job.name, total):
                heapq.heappush(heap, (-gain(job, n + 1), i, n + 1))
        return True
    if any(neg != neg for neg, _, _ in heap):
        return False
    pop, replace = heapq.heappop, heapq.heapreplace
    if not heap:
        return True
    neg, i, n = pop(heap)
    while -neg > 0:
        job = jobs[i]
        name = job.name
        n += 1
        counts[name] = n
        left -= 1
        if left <= 0:
            break
        if n < caps.get(name, total):
            neg = -gain(job, n)
            if neg != neg:
                return False
            if heap and heap[0] < (neg, i, n):  # else it is the top: it goes on
                neg, i, n = replace(heap, (neg, i, n))
        elif heap:
            neg, i, n = pop(heap)
        else:
            break
    return True


def _climb_alone(
    jobs: Sequence[ClusterJobView],
    left: int,
    gain: Callable[[ClusterJobView, int], float],
    caps: dict[str, int],
    total: int,
    counts: dict[str, int],
) -> bool:
    """The greedy's answer when the GPUs outlast every job's wish; False if they do not.

    Why: a 1,024-GPU cluster is mostly not full, and then the heap's order does not
    matter.  Each job climbs alone, one GPU at a time, until its cap or a gain <= 0;
    if those climbs together take at most ``left`` GPUs, the heap would have granted
    every one of them (it pops gains largest first and stops at the first <= 0) and
    nothing more, so the counts are the same.  ``gain`` is asked the same ``n`` in
    the same order per job as the heap asks.  The caller climbs only when the caps
    fit in ``left`` (a climb that outgrew ``left`` would ask gains the heap never
    asks).  A NaN gain (the heap's order is then not a maximum's) gives up, leaving
    ``counts`` untouched, and the heap decides.
    """
    wanted: dict[str, int] = {}
    for job in jobs:
        name = job.name
        n = counts[name]
        cap = caps.get(name, total)
        while n < cap:
            g = gain(job, n)
            if g != g:  # NaN
                return False
            if g <= 0:
                break
            n += 1
            left -= 1
            if left < 0:
                return False
        wanted[name] = n
    counts.update(wanted)
    return True
