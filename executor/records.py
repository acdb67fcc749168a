"""What a worker group reports: events, step records, cold starts, progress.

These are the plain, frozen records that leave :class:`~.group.ProcessWorkerGroup`
(and :class:`~.fakes.FakeWorkerGroup`) for the controller and the run's tables.  They
live in their own module, below every part of the group (:mod:`.pool`,
:mod:`.reports`, :mod:`.pauses`, :mod:`.inplace`, :mod:`.restart`), because every
part produces some of them and none of them depends on how the group works;
:mod:`.group` re-exports them, so ``from elasim.executor.group import GroupEvent``
keeps working.  :class:`StepLog`, the one mutable thing here, is the run's list of
step records: whoever reads the reports appends to it and the pause accounting
reads it, so it sits below both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elasim.policies import EventKind, PauseComponents

__all__ = [
    "ExecutorError",
    "GroupEvent",
    "GroupProgress",
    "StepLog",
    "StepRecord",
    "WorkerStart",
    "split_preempt",
    "step_durations",
]


class ExecutorError(RuntimeError):
    """The executor cannot continue (workers keep failing, a timeout expired)."""


@dataclass(frozen=True)
class GroupEvent:
    """Something the group did, in real seconds (the controller converts to trace time).

    Attributes:
        kind: shared event vocabulary.
        real_s: when it started, on the controller's clock.
        nodes_before: members before.
        nodes_after: members after.
        pause: the survivors' pause, by component (real seconds).
        lost_steps: optimizer steps thrown away.
        lost_samples: samples thrown away.
        lost_real_s: training time thrown away (real seconds).
        interval_s: raw last-step-end-before -> first-step-end-after, when measured.
        detail: extra facts for logs (tuples so the record stays hashable).
    """

    kind: EventKind
    real_s: float
    nodes_before: int
    nodes_after: int
    pause: PauseComponents = PauseComponents()
    lost_steps: int = 0
    lost_samples: float = 0.0
    lost_real_s: float = 0.0
    interval_s: float | None = None
    detail: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class StepRecord:
    """One committed optimizer step, as rank 0 reported it.

    Attributes:
        real_s: step end on the controller's clock.
        step: step number after the step (1-based).
        world_size: members in the generation.
        loss: global mean training loss of the step.
        samples: samples in the global batch.
        gen: generation number.
        epoch: sampler epoch of the batch.
        samples_total: samples consumed by committed steps up to this one.
        grad_sq_local: mean over the workers that had samples of the squared norm of
            each one's own mean gradient (NaN: not measured).
        grad_sq_global: squared norm of the all-reduced mean gradient.
        local_batch: the workers' batch for the noise-scale estimator (harmonic mean
            of the non-empty shards, :func:`elasim.noise_scale.harmonic_batch`).
        progress: the job's progress after the step (steps at its first batch, each
            weighted by its AdaScale gain; NaN: not reported).
    """

    real_s: float
    step: int
    world_size: int
    loss: float
    samples: int
    gen: int
    epoch: int
    samples_total: int
    grad_sq_local: float = math.nan
    grad_sq_global: float = math.nan
    local_batch: float = math.nan
    progress: float = math.nan


@dataclass(frozen=True)
class WorkerStart:
    """One worker process's cold start: spawned, then READY (torch imported, job built).

    The simulator's cold-start model of a measured profile comes from these: when
    several workers start at once they share the host's cores, so the ready times of
    a batch are staggered, and a replacement for a killed node joins only when ready.

    Attributes:
        wid: worker id.
        spawn_s: when it was spawned, on the controller's clock.
        ready_s: when it reported READY (None: it never did).
    """

    wid: int
    spawn_s: float
    ready_s: float | None

    @property
    def start_s(self) -> float | None:
        """Spawn to READY (None: never ready)."""
        return None if self.ready_s is None else self.ready_s - self.spawn_s


@dataclass(frozen=True)
class GroupProgress:
    """Where training stands.

    Attributes:
        step: last committed step reported.
        samples: samples consumed by committed steps (up to ``step``).
        loss: loss of that step (NaN before the first).
        done: rank 0 reported that ``max_steps`` (or the target) was reached.
        metrics: final metrics from ``ElasticJob.evaluate`` (when done).
        progress: gain-weighted steps up to ``step`` (:attr:`StepRecord.progress`;
            ``step`` itself where the workers do not report it).
    """

    step: int = 0
    samples: int = 0
    loss: float = math.nan
    done: bool = False
    metrics: tuple[tuple[str, float], ...] = ()
    progress: float = 0.0


class StepLog:
    """The steps rank 0 reported in a run, each with the worker's ``time.time()`` of its end.

    Why an object shared by several parts: the part that reads the reports fills it
    (:mod:`.reports` from the store, :class:`~.script.ScriptWorkerGroup` from a
    script's step file) and :class:`~.pauses.PauseAccounting` reads it, so neither
    needs the other to reach the steps.

    Attributes:
        records: the step records, in the order they were read (a restarted run
            reports some step numbers twice).
    """

    def __init__(self) -> None:
        self.records: list[StepRecord] = []
        self._walls: list[float] = []

    def add(self, record: StepRecord, wall_s: float) -> None:
        """Append ``record``, whose step ended at ``wall_s`` (the worker's clock)."""
        self._walls.append(wall_s)
        self.records.append(record)

    def last_wall_s(self) -> float | None:
        """The latest step end, on the workers' clock (None before the first step)."""
        return max(self._walls) if self._walls else None

    def last_step(self) -> int:
        """The tip of the current lineage: the step of the latest record."""
        if not self.records:
            return 0
        return max(self.records, key=lambda r: r.real_s).step

    def in_order(self) -> tuple[StepRecord, ...]:
        """Every step, in order of completion."""
        return tuple(sorted(self.records, key=lambda r: r.real_s))

    def progress(self, done: bool, metrics: dict[str, float]) -> GroupProgress:
        """Where training stands: the latest step, ``done`` and the final ``metrics``."""
        if not self.records:
            return GroupProgress(done=done, metrics=tuple(metrics.items()))
        last = max(self.records, key=lambda r: (r.real_s, r.step))
        return GroupProgress(
            last.step,
            last.samples_total,
            last.loss,
            done,
            tuple(sorted(metrics.items())),
            last.progress if math.isfinite(last.progress) else float(last.step),
        )


def split_preempt(events: list[GroupEvent]) -> list[GroupEvent]:
    """Write a preemption with survivors as the simulator does: two events.

    ``PREEMPT`` carries the nodes taken and the work lost; the ``SCALE_DOWN`` that
    follows carries the survivors' pause (the simulator's ``_preempt`` then
    ``_begin_rescale``), so the two event tables join row by row.  A ``RESTORE``
    reported by the re-formation goes between the two.
    """
    out: list[GroupEvent] = []
    held: list[GroupEvent] = []
    for ev in events:
        if ev.kind is EventKind.RESTORE:
            held.append(ev)
            continue
        if ev.kind is not EventKind.PREEMPT or ev.nodes_after == 0:
            out += held + [ev]
            held = []
            continue
        out.append(
            GroupEvent(
                EventKind.PREEMPT,
                ev.real_s,
                ev.nodes_before,
                ev.nodes_after,
                lost_steps=ev.lost_steps,
                lost_samples=ev.lost_samples,
                lost_real_s=ev.lost_real_s,
                detail=ev.detail,
            )
        )
        out += held
        held = []
        out.append(
            GroupEvent(
                EventKind.SCALE_DOWN,
                ev.real_s,
                ev.nodes_before,
                ev.nodes_after,
                ev.pause,
                interval_s=ev.interval_s,
                detail=ev.detail,
            )
        )
    return out + held


def step_durations(records: Sequence[StepRecord]) -> list[tuple[StepRecord, float]]:
    """Each step timed by its predecessor in the same generation (real s), in order.

    A generation's first step holds the pause and is left out.  What a step-time
    table per world size (:class:`~.pauses.PauseAccounting`), a profile per batch
    (:mod:`.cluster_profile`) and the live speed fit (:mod:`.cluster`) read.
    """
    rows = sorted(records, key=lambda r: r.real_s)
    return [
        (row, row.real_s - prev.real_s)
        for prev, row in zip(rows, rows[1:], strict=False)
        if row.gen == prev.gen and row.step == prev.step + 1
    ]
