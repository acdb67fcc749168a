"""The cold-start model of a measured profile, read from a run's workers and steps.

Why a module of its own: how worker processes spawned together start, and how much
CPU a starting worker takes from the trainers on a shared host, is one model with
its own reasons to change; :mod:`elasim.profile` builds a profile from it (and
re-exports these names).  Pure Python; the frames are pandas ``DataFrame`` objects
the caller read.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ColdStartBatch",
    "cold_start_alone_s",
    "cold_start_table",
    "cold_starts_from_workers",
    "starting_weight",
    "step_samples",
]


def step_samples(
    steps: Any, busy: Iterable[tuple[float, float]] = ()
) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    """Step durations per world size: (taken while nobody started, taken while some did)."""
    frame = steps.sort_values("time_s", kind="stable")
    spans = sorted(busy)
    clean: dict[int, list[float]] = {}
    slowed: dict[int, list[float]] = {}
    previous = None
    for row in frame.itertuples(index=False):
        if previous is not None and row.gen == previous.gen and row.step == previous.step + 1:
            begin, end = float(previous.time_s), float(row.time_s)
            overlaps = any(a < end and b > begin for a, b in spans)
            target = slowed if overlaps else clean
            target.setdefault(int(row.world_size), []).append(end - begin)
        previous = row
    return clean, slowed


@dataclass(frozen=True)
class ColdStartBatch:
    """Worker processes spawned together, and how long each took to be ready.

    Attributes:
        spawn_s: when the batch was spawned (real seconds since the run's start).
        offsets_s: spawn-to-READY time of each, sorted.
        trainers: workers training meanwhile (competing for a shared host's cores).
        trainer_step_s: their mean step time until the first of the batch was ready
            (None: nobody trained).
    """

    spawn_s: float
    offsets_s: tuple[float, ...]
    trainers: int = 0
    trainer_step_s: float | None = None


def cold_starts_from_workers(
    workers: Any, steps: Any = None, gap_s: float = 0.25
) -> list[ColdStartBatch]:
    """The cold starts of one run, batch by batch, from its ``workers.parquet`` frame.

    Workers spawned within ``gap_s`` of the previous spawn belong to one batch (the
    group spawns a batch in one loop: standbys at the start, replacements for the
    workers one preemption killed, a restart's fresh group).  A batch with a worker
    that never became ready (killed while starting, or the run ended first) is left
    out.  With the run's ``steps.parquet`` frame, ``trainers`` is the median world
    size of the steps taken while the batch's first worker started.
    """
    frame = workers.sort_values("spawn_s", kind="stable")
    batches: list[list[tuple[float, float]]] = []
    last = -math.inf
    for row in frame.itertuples(index=False):
        spawn, ready = float(row.spawn_s), float(row.ready_s)
        if spawn - last > gap_s or not batches:
            batches.append([])
        batches[-1].append((spawn, ready))
        last = spawn
    out = []
    for batch in batches:
        if not all(math.isfinite(ready) for _, ready in batch):
            continue
        spawn = min(s for s, _ in batch)
        offsets = tuple(sorted(ready - s for s, ready in batch))
        trainers, step_s = 0, None
        if steps is not None and len(steps):
            during = steps[(steps["time_s"] > spawn) & (steps["time_s"] <= spawn + offsets[0])]
            if len(during):
                trainers = int(round(float(during["world_size"].median())))
                _, slowed = step_samples(during, [(spawn, spawn + offsets[0])])
                if slowed.get(trainers):
                    step_s = statistics.fmean(slowed[trainers])
        out.append(ColdStartBatch(spawn, offsets, trainers, step_s))
    return out


def starting_weight(
    batches: Iterable[ColdStartBatch], step_time_s: Mapping[int, float], cores: int
) -> float:
    """How many training workers' worth of CPU a starting worker takes (median).

    Under processor sharing with ``r`` runnable processes on ``cores`` cores, ``m``
    trainers slow by ``share(m + k w) / share(m)`` while ``k`` workers start; each
    batch that started next to trainers gives its measured slowdown (their step time
    then against the quiet ``step_time_s``), hence one ``w``.  A starting worker
    imports torch and builds the job on several threads, so ``w`` can exceed 1.

    Returns:
        The median ``w`` (1.0 when no batch started next to trainers).
    """
    weights = []
    for batch in batches:
        m, k = batch.trainers, len(batch.offsets_s)
        quiet = step_time_s.get(m)
        if m <= 0 or batch.trainer_step_s is None or not quiet or cores <= 0:
            continue
        share_m = min(1.0, cores / m)
        target = quiet / batch.trainer_step_s * share_m  # = share(m + k w)
        if target >= 1.0:
            weights.append(0.0)
            continue
        weights.append(max((cores / target - m) / k, 0.0))
    return statistics.median(weights) if weights else 1.0


def cold_start_alone_s(batches: Iterable[ColdStartBatch], cores: int) -> float:
    """Start time of one worker alone on a ``cores``-core host, from shared-host batches.

    Each start is scaled by the share of a core it had (processor sharing among the
    batch and the trainers); the median over every start is returned (0: none).
    """
    alone = []
    for batch in batches:
        runnable = len(batch.offsets_s) + batch.trainers
        share = min(1.0, cores / runnable) if cores > 0 else 1.0
        alone.extend(o * share for o in batch.offsets_s)
    return statistics.median(alone) if alone else 0.0


def cold_start_table(
    batches: Iterable[ColdStartBatch],
) -> tuple[tuple[int, tuple[float, ...]], ...]:
    """Median i-th offset per batch size."""
    by_size: dict[int, list[tuple[float, ...]]] = {}
    for batch in batches:
        by_size.setdefault(len(batch.offsets_s), []).append(batch.offsets_s)
    return tuple(
        (size, tuple(statistics.median(b[i] for b in items) for i in range(size)))
        for size, items in sorted(by_size.items())
    )
