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

__all__ = ["climb_with", "greedy_counts", "job_cap", "keyed_table", "rising_run", "shape_nodes"]

#: Most tables a policy keeps in one store (see :func:`keyed_table`).
TABLES_MAX = 4096
#: A step of :func:`rising_run` rises "clearly": the next value exceeds this multiple of
#: the last, a margin millions of rounding errors wide.
RISE = 1.0 + 1e-6
#: The values :func:`rising_run` vouches for lie within ``(LOW, HIGH)``: far from
#: underflow and overflow in what a policy derives from them (quotients, powers).
LOW, HIGH = 1e-100, 1e100
#: How a run of :func:`rising_run` ends: not known yet, at a falling step, at a step
#: that neither rises clearly nor falls.
OPEN, FALLS, UNSURE = 0, 1, 2


def shape_nodes(gpus: int, gpus_per_node: int) -> int:
    """Nodes a packed placement of ``gpus`` spans."""
    return -(-gpus // gpus_per_node) if gpus > 0 else 0


def job_cap(job: ClusterJobView, top: int, explore_factor: float = 0.0) -> int:
    """Most GPUs ``job`` may get: its application's limit within ``top``, and exploration.

    The one cap rule of the elastic policies.  ``top`` is the policy's own limit
    already cut to the cluster; ``explore_factor > 0`` adds Pollux's exploration limit
    (at most that multiple of the most GPUs the job has held, and at least one GPU),
    since a throughput model learned on few GPUs says little about many.
    """
    cap = min(top, max(job.max_gpus, 1))
    if explore_factor > 0:
        cap = min(cap, max(int(explore_factor * job.peak_gpus), 1))
    return cap


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


def rising_run(
    values: dict[int, float],
    runs: dict[int, tuple[int, int]],
    n: int,
    most: int,
    value: Callable[[int], float],
    high: float = HIGH,
) -> tuple[int, bool]:
    """How far from ``n`` (at most ``most``) a table of values rises clearly at every step.

    The largest ``m <= most`` such that every step ``k -> k + 1`` with ``n <= k < m``
    has ``LOW < values[k]``, ``values[k] * RISE < values[k + 1] < high``; and whether
    the step from ``m`` (where ``m < most``) falls: ``LOW < values[m]`` and
    ``values[m + 1]`` equal to it or below ``values[m] / RISE``.  Why: the elastic
    policies' gains are differences of a monotone function of such values (a remaining
    time, a power of a speedup), so on a clearly rising step the gain is positive
    whatever the rounding, and on a flat or clearly falling one it is not (a step that
    falls by a rounding error might not: it is asked); a greedy climb may take those
    steps, or stop there, without asking the gain (see ``climb`` of :func:`greedy_counts`).

    Args:
        values: the table (``values[k]`` for ``k`` GPUs), filled by ``value(k)`` where
            missing, exactly as the caller's gain fills it.
        runs: this table's memo, by ``n``: ``(m, how)``, where ``how`` says whether the
            step from ``m`` falls (:data:`FALLS`), neither rises clearly nor falls
            (:data:`UNSURE`) or is not known yet (:data:`OPEN`: ``m`` is only as far as
            was asked).  The values never change, so neither do the runs.
        n: the count to start from (>= 1).
        most: the furthest count asked for.
        value: computes (and stores in ``values``) the value at a count.
        high: the bound above (a caller that raises the values to a power needs a
            lower one); one table's runs are for one ``high``.
    """
    known = runs.get(n)
    k = n
    if known is not None:
        k, how = known
        if how != OPEN or k >= most:
            return (k, how == FALLS) if k < most else (most, False)
    v = values.get(k)
    if v is None:
        v = value(k)
    while k < most:
        w = values.get(k + 1)
        if w is None:
            w = value(k + 1)
        if not (LOW < v and v * RISE < w < high):
            falls = LOW < v and (w == v or w * RISE < v)
            runs[n] = (k, FALLS if falls else UNSURE)
            return k, falls
        k += 1
        v = w
    runs[n] = (k, OPEN)
    return k, False


def climb_with(
    gain: Callable[[ClusterJobView, int], float],
    job: ClusterJobView,
    n: int,
    cap: int,
    skip: Callable[[int], tuple[int, bool] | None],
) -> int | None:
    """A job's lone climb from ``n`` to at most ``cap``, with the steps a policy can vouch for.

    ``skip(k)`` says what the policy knows of the steps from ``k``: ``(m, False)``,
    every step up to ``m`` has a positive gain; ``(m, True)``, and the one from ``m``
    has none (the climb ends at ``m``); None, nothing (``gain(job, k)`` is asked).  The
    answer is a ``climb`` for :func:`greedy_counts` (None: a NaN gain).
    """
    while n < cap:
        known = skip(n)
        if known is not None:
            m, stops = known
            if stops:
                return m
            if m > n:
                n = m
                continue
        g = gain(job, n)
        if g != g:  # NaN: the greedy's own steps decide
            return None
        if g <= 0:
            return n
        n += 1
    return n


def greedy_counts(
    jobs: Sequence[ClusterJobView],
    total: int,
    gain: Callable[[ClusterJobView, int], float],
    caps: dict[str, int],
    start: dict[str, int] | None = None,
    climb: Callable[[ClusterJobView, int, int], int | None] | None = None,
) -> dict[str, int]:
    """GPU counts per job, adding one GPU at a time where ``gain`` is largest.

    Args:
        jobs: the jobs, in tie-breaking order.
        total: GPUs to hand out (those of ``start`` included).
        gain: value of the ``n + 1``-th GPU to a job holding ``n``.
        caps: most GPUs per job.
        start: counts to begin from (e.g. one GPU each).
        climb: ``climb(job, n, cap)``, where a policy knows it faster than by asking
            ``gain`` at every step: the first count from ``n`` on whose gain is not
            positive, or ``cap`` (a job's lone climb); None where a gain on the way
            may be NaN or it cannot tell.  It must give exactly what the steps give:
            :func:`rising_run` finds the steps whose gain is surely positive.  Why: on
            a 1,024-GPU cluster that is mostly not full every job climbs alone at every
            decision, one gain per GPU, and those gains were most of the decision time
            of ``pollux`` and ``optimus`` on the Philly trace.  With ``climb`` the lone
            climbs are tried at every decision, not only where the caps fit in the
            free GPUs: where the jobs' wishes fit though their caps do not (a fifth of
            ``pollux``'s decisions on the full trace), the heap is not needed.
    """
    counts = {job.name: 0 for job in jobs}
    counts.update(start or {})
    left = total - sum(counts.values())
    if left <= 0:
        return counts  # nothing to hand out: the gains are not asked
    # without ``climb`` the lone climbs are tried only where the caps fit: one that
    # outgrew ``left`` would have asked, one by one, gains the heap never asks
    if climb is not None or sum(caps.get(j.name, total) - counts[j.name] for j in jobs) <= left:
        if _climb_alone(jobs, left, gain, caps, total, counts, climb):
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
    climb: Callable[[ClusterJobView, int, int], int | None] | None = None,
) -> bool:
    """The greedy's answer when the GPUs outlast every job's wish; False if they do not.

    Why: a 1,024-GPU cluster is mostly not full, and then the heap's order does not
    matter.  Each job climbs alone, one GPU at a time, until its cap or a gain <= 0;
    if those climbs together take at most ``left`` GPUs, the heap would have granted
    every one of them (it pops gains largest first and stops at the first <= 0) and
    nothing more, so the counts are the same.  ``gain`` is asked the same ``n`` in
    the same order per job as the heap asks.  Without ``climb`` the caller climbs only
    when the caps fit in ``left`` (a climb that outgrew ``left`` would ask gains the
    heap never asks: work for nothing, as the gains are pure).  A NaN gain (the
    heap's order is then not a maximum's) gives up, leaving ``counts`` untouched, and
    the heap decides.  ``climb`` (see :func:`greedy_counts`) gives a job's climb at
    once where it can.
    """
    wanted: dict[str, int] = {}
    for job in jobs:
        name = job.name
        n = counts[name]
        cap = caps.get(name, total)
        end = None if climb is None or n >= cap else climb(job, n, cap)
        if end is not None:
            left -= end - n
            if left < 0:
                return False
            wanted[name] = end
            continue
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
