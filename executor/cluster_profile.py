"""Measure an executor job as a cluster *application profile* (Pollux's file format).

``elasim cluster simulate`` prices a job with an application profile: the step time
per placement and per-GPU batch (``placements.csv``) and, per epoch, the progress and
gradient statistics at each validated batch (``validation-<B>.csv``).  To compare a
``cluster run`` with a simulation of the same workload, the simulation needs the
profile of the job the executor really runs, measured on the same machine.
:func:`measure_application` does that with one run of the job on one worker group
that steps through 1, 2, ... ``slots`` workers:

* ``placements.csv``: one row per worker count ``n`` (one host: placement ``"n"``),
  ``local_bsz = ceil(B / n)`` for the job's fixed global batch ``B``, and the median
  measured step time at that size.  ``sync_time`` is **not measured** (the executor
  times whole steps); it is written as 0, and the model reads it only for gradient
  accumulation, which a fixed-batch executor job never does.
* with ``batches``, the same through 1..``slots`` workers at each further global
  batch (the group's batch set at a re-formation, as a cluster policy's is): rows of
  ``placements.csv`` at those per-GPU batches too, and one ``validation-<B>.csv``
  each, with the same progress per epoch (counted at the first batch) and gradient
  statistics, so that ``pollux`` can choose among them;
* ``validation-<B>.csv``: the job's own batch first, so a job's progress is its
  optimizer steps at that batch: ``epochs`` rows, one
  per ``steps / epochs`` steps, with the training loss of the run at that step as the
  metric and the run's gradient noise statistics (``grad_sqr = |G|^2``,
  ``grad_var = tr(Sigma)``, pooled from the steps on more than one worker).
* ``SOURCE.md``: what was run, on which host, and the above.
"""

from __future__ import annotations

import math
import platform
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from elasim.atomic import atomic_write_text
from elasim.cluster.pauses import PAUSES_FILE

from .controller import ControllerConfig
from .forkserver import ForkLauncher
from .protocol import WorkerSettings
from .records import ExecutorError, StepRecord, step_durations
from .slots import SlotPool

__all__ = [
    "MEASURE_ROUNDS",
    "ApplicationMeasurement",
    "measure_application",
    "size_rounds",
    "write_application",
]


@dataclass(frozen=True)
class ApplicationMeasurement:
    """What one measuring run found.

    Attributes:
        step_s: median step time (real s) per worker count.
        global_batch: the job's samples per step.
        steps: optimizer steps of the job (its work).
        epochs: validation rows.
        losses: training loss at the end of each epoch.
        grad_sqr: pooled ``|G|^2`` estimate (NaN: never more than one worker).
        grad_var: pooled ``tr(Sigma)`` estimate.
        worker: the settings every worker ran with.
        wall_s: real seconds the measurement took.
        host: where it ran.
        pauses: ``(before, after, {component: median real s})`` of every planned
            in-place transition measured (the starts ``0 -> n`` included).
        batch_step_s: per further global batch, its median step time per worker count.
    """

    step_s: dict[int, float]
    global_batch: int
    steps: int
    epochs: int
    losses: tuple[float, ...]
    grad_sqr: float
    grad_var: float
    worker: WorkerSettings
    wall_s: float
    host: dict[str, Any] = field(default_factory=dict)
    pauses: tuple[tuple[int, int, dict[str, float]], ...] = ()
    batch_step_s: dict[int, dict[int, float]] = field(default_factory=dict)


def _noise(steps: list[StepRecord]) -> tuple[float, float]:
    """Pooled (|G|^2, tr Sigma) over steps on more than one worker."""
    from elasim.noise_scale import two_batch_estimates

    pairs = [
        two_batch_estimates(r.grad_sq_local, r.grad_sq_global, r.local_batch, r.samples)
        for r in steps
        if r.world_size > 1
    ]
    pairs = [(g, s) for g, s in pairs if math.isfinite(g) and math.isfinite(s)]
    if not pairs:
        return math.nan, math.nan
    return statistics.fmean(g for g, _ in pairs), statistics.fmean(s for _, s in pairs)


def measure_application(
    worker: WorkerSettings,
    *,
    slots: int = 4,
    epochs: int = 4,
    steps_per_size: int = 40,
    timeout_s: float = 300.0,
    batches: tuple[int, ...] = (),
) -> ApplicationMeasurement:
    """Time ``steps_per_size`` steps at each size (:func:`size_rounds`), and the whole run.

    The job's work is ``worker.max_steps``; the run goes on past it (at ``slots``
    workers) until every size has been timed, its losses at the epoch ends read from
    the steps up to it; then every change of size (:func:`tour`), each of ``batches``
    (``steps_per_size / 4`` per size), and each start ``0 -> n`` alone.

    Raises:
        ExecutorError: a size was not reached or timed within ``timeout_s``.
    """
    from .pooled import PooledJob

    steps = worker.max_steps
    if steps < epochs:
        raise ValueError(f"steps must be >= epochs, got {steps} < {epochs}")
    launcher = ForkLauncher(slots)
    launcher.warm()
    pool, t0 = SlotPool([launcher]), time.monotonic()
    run = replace(worker, max_steps=10**9)  # stopped here once measured
    config = ControllerConfig(time_scale=1.0, max_steps=run.max_steps, max_nodes=slots)
    job = PooledJob("measure", pool, run, config, lambda: t0)
    try:
        events = _step_through_sizes(
            job, t0, slots=slots, steps=steps, steps_per_size=steps_per_size, timeout_s=timeout_s
        )
        batch, records = int(job.group.global_batch or 0), job.group.step_records()
        table = _medians(records, batch)
        events += _tour_transitions(job, t0, slots=slots, timeout_s=timeout_s)
        extra = [b for b in batches if b != batch]
        by_batch = _time_batches(job, t0, extra, slots, max(steps_per_size // 4, 3), timeout_s)
        events += by_batch.pop(0)  # type: ignore[arg-type]
    finally:
        job.close()
        pool.close()
    losses = _epoch_losses(records, steps, epochs)
    grad_sqr, grad_var = _noise(list(records))
    events += _starts(run, config, slots=slots, timeout_s=timeout_s)
    return ApplicationMeasurement(
        step_s=dict(sorted(table.items())),
        global_batch=batch,
        steps=steps,
        epochs=epochs,
        losses=tuple(losses),
        grad_sqr=grad_sqr,
        grad_var=grad_var,
        worker=replace(worker, checkpoint_dir=None),
        wall_s=time.monotonic() - t0,
        host={"machine": platform.machine(), "python": platform.python_version()},
        pauses=_pause_table(events),
        batch_step_s=by_batch,
    )


def _starts(run: WorkerSettings, config: Any, *, slots: int, timeout_s: float) -> list[Any]:
    """Each start from nothing (``0 -> n`` for n in 1..``slots``), alone: the events."""
    events: list[Any] = []
    for n in range(1, slots + 1):
        events += _start(run, config, n, launcher_slots=slots, timeout_s=timeout_s)
    return events


def _time_batches(
    job: Any, t0: float, batches: list[int], slots: int, per_size: int, timeout_s: float
) -> dict[int, Any]:
    """Each of ``batches`` through 1..``slots`` workers: ``{batch: medians}``, events at 0.

    The group's batch changes at a re-formation only, so each starts from none.
    """
    out: dict[int, Any] = {0: []}
    for batch in batches:
        out[0] += job.apply(0, 0, time.monotonic() - t0, True)
        job.group.set_batch(batch, 1.0)
        out[0] += _step_through_sizes(
            job, t0, slots=slots, steps=0, steps_per_size=per_size, timeout_s=timeout_s,
            batch=batch,
        )  # fmt: skip
        out[batch] = _medians(job.group.step_records(), batch)
    return out


def _medians(records: tuple[StepRecord, ...], batch: int) -> dict[int, float]:
    """Median step time per worker count of the steps at ``batch`` (sorted by count)."""
    by: dict[int, list[float]] = {}
    for row, step_s in step_durations(records):
        if row.samples == batch:
            by.setdefault(row.world_size, []).append(step_s)
    return {n: statistics.median(v) for n, v in sorted(by.items())}


def _step_through_sizes(
    job: Any,
    t0: float,
    *,
    slots: int,
    steps: int,
    steps_per_size: int,
    timeout_s: float,
    batch: int | None = None,
) -> list[Any]:
    """Drive ``job`` through :func:`size_rounds`, then on until it has done ``steps``.

    Why: this is the measuring loop proper; each visit to a size is held until more
    than its share of ``steps_per_size`` steps were timed there, so every row of
    ``placements.csv`` has a median of enough steps.  Returns the group's events, for
    the pauses they measured.  ``batch``: count only the steps at that batch.

    Raises:
        ExecutorError: not done within ``timeout_s`` of ``t0`` (monotonic s).
    """
    per_visit = max(steps_per_size // MEASURE_ROUNDS, 3)
    return _visit_sizes(
        job, t0, size_rounds(slots), per_visit=per_visit, timeout_s=timeout_s, batch=batch,
        steps=steps, then=slots,
    )  # fmt: skip


def _visit_sizes(
    job: Any,
    t0: float,
    sizes: list[int],
    *,
    per_visit: int,
    timeout_s: float,
    batch: int | None = None,
    steps: int = 0,
    then: int = 0,
) -> list[Any]:
    """Hold ``job`` at each of ``sizes`` until over ``per_visit`` steps were timed there.

    The one loop of calibration that moves a group: timing the step rows (many steps
    per visit) and touring the transitions (one step per visit: the re-formation has
    ended and its pause is measured) differ only in how many steps a visit waits for.
    A visit's steps are counted from when the group first holds the size.  After the
    last visit the group stays at ``then`` workers until it has done ``steps``.
    Returns the group's events.

    Raises:
        ExecutorError: not done within ``timeout_s`` of ``t0`` (monotonic s).
    """
    events: list[Any] = []
    visit, base = 0, -1
    while visit < len(sizes) or job.group.progress().step < steps:
        if time.monotonic() - t0 > timeout_s:
            raise ExecutorError(f"measuring did not finish in {timeout_s:g} s")
        size = sizes[visit] if visit < len(sizes) else then
        now = time.monotonic() - t0
        events += job.apply(size, 0, now, True)
        events += job.poll(now)
        if visit < len(sizes) and sum(job.group.held()) == size:
            records = job.group.step_records()
            timed = sum(1 for r in records if r.world_size == size and batch in (None, r.samples))
            base = timed if base < 0 else base
            if timed - base > per_visit:
                visit, base = visit + 1, -1
        time.sleep(0.02)
    return events


#: passes through the sizes 1..slots when timing steps (see :func:`size_rounds`)
MEASURE_ROUNDS = 4


def size_rounds(slots: int, rounds: int = MEASURE_ROUNDS) -> list[int]:
    """Sizes in the order their steps are timed: ``1..slots``, ``rounds`` times over.

    Why not each size once: a shared host's speed moves with the other tenants' load
    over seconds.  Timed one after the other (1 worker for ten seconds, then 2, 3
    and 4 for a few each), a busy spell falls on one or two sizes and skews the rows
    against each other; interleaved, every row samples the same spells.  (One
    calibration taken in one pass predicted 57.8 s of training where its runs
    trained 52.6-53.1 s, on the allocations of ``fifo`` and ``tiresias``, while
    ``pollux``'s, mostly 1 worker, were off by half as much.)
    """
    return list(range(1, slots + 1)) * rounds


def tour(slots: int) -> list[int]:
    """Group sizes to visit so that every change ``a -> b`` of 1..``slots`` happens.

    Why: a cluster policy moves a job between any two sizes (optimus shrank one from
    4 to 3 and then to 1 in a run of the README's example), and a transition that was
    not measured was priced with the pause preset's figures (seconds of rendezvous and
    warm-up for a ResNet-50 on V100s, not the milliseconds measured here): the
    simulation's average JCT came out tens of percent long.
    """
    seq = [slots]
    for a in range(1, slots + 1):
        for b in range(a + 1, slots + 1):
            if seq[-1] != a:
                seq.append(a)
            seq += [b, a]
    return seq[1:]


def _tour_transitions(job: Any, t0: float, *, slots: int, timeout_s: float) -> list[Any]:
    """Drive ``job`` through :func:`tour`, one step at each size; the group's events.

    Raises:
        ExecutorError: not done within ``timeout_s`` of ``t0`` (monotonic s).
    """
    return _visit_sizes(job, t0, tour(slots), per_visit=0, timeout_s=timeout_s)


def _epoch_losses(records: tuple[StepRecord, ...], steps: int, epochs: int) -> list[float]:
    """The training loss at the end of each of ``epochs`` equal parts of ``steps``.

    Only steps up to ``steps`` count (the job's own work; the measuring run goes on
    past it); an epoch with no step yet is NaN.
    """
    lineage = [r for r in records if r.step <= steps]
    losses = []
    for e in range(1, epochs + 1):
        upto = [r for r in lineage if r.step <= round(e * steps / epochs)]
        losses.append(upto[-1].loss if upto else math.nan)
    return losses


def _start(
    worker: WorkerSettings,
    config: ControllerConfig,
    n: int,
    *,
    launcher_slots: int,
    timeout_s: float,
) -> list[Any]:
    """The events of one group started from nothing on ``n`` workers (forked)."""
    from .pooled import PooledJob

    launcher = ForkLauncher(launcher_slots)
    launcher.warm()
    pool = SlotPool([launcher])
    t0 = time.monotonic()
    job = PooledJob(f"start{n}", pool, worker, config, lambda: t0)
    events: list[Any] = []
    try:
        while sum(job.group.held()) < n:
            if time.monotonic() - t0 > timeout_s:
                raise ExecutorError(f"{n} workers did not start in {timeout_s:g} s")
            events += job.apply(n, 0, time.monotonic() - t0, True)
            time.sleep(0.02)
    finally:
        job.close()
        pool.close()
    return events + [_whole_start(events, n)] if n > 1 else events


def _whole_start(events: list[Any], n: int) -> Any:
    """One ``0 -> n`` start from what the group did to get there.

    Real workers start one by one: the first forms a group (``0 -> 1``), the others
    join it when ready (``1 -> n``, possibly in several changes).  The model starts a
    job on ``n`` GPUs in one pause, so the start is priced as all of it: the first
    worker's start, the wait for the others (``acquire_s``, when the one worker
    trained alone), and every re-formation until there were ``n``.
    """
    import dataclasses

    from elasim.policies import PAUSE_COMPONENTS, EventKind, PauseComponents

    changes = [e for e in events if e.kind in (EventKind.SCALE_UP, EventKind.RESUME)]
    first, last = changes[0], changes[-1]
    sums = {c: sum(getattr(e.pause, c) for e in changes) for c in PAUSE_COMPONENTS}
    began_s = first.time_s - first.pause_s
    sums["acquire_s"] += max((last.time_s - began_s) - sum(sums.values()), 0.0)
    return dataclasses.replace(
        last, kind=EventKind.SCALE_UP, nodes_before=0, nodes_after=n, pause=PauseComponents(**sums)
    )


def _pause_table(events: list[Any]) -> tuple[tuple[int, int, dict[str, float]], ...]:
    """Median pause components per planned transition ``(before, after)``."""
    from elasim.policies import PAUSE_COMPONENTS, EventKind

    kinds = (EventKind.SCALE_UP, EventKind.SCALE_DOWN, EventKind.RESUME)
    by: dict[tuple[int, int], list[Any]] = {}
    for e in events:
        if e.kind in kinds and e.nodes_after > 0:
            by.setdefault((e.nodes_before, e.nodes_after), []).append(e.pause)
    out = []
    for (before, after), pauses in sorted(by.items()):
        comps = {c: statistics.median(getattr(p, c) for p in pauses) for c in PAUSE_COMPONENTS}
        out.append((before, after, comps))
    return tuple(out)


def write_application(
    measured: ApplicationMeasurement, out_dir: str | Path, *, steps: int | None = None
) -> Path:
    """Write the profile folder (see the module docstring); ``steps``: the job's length.

    ``steps`` (default: the measured run's) sets how long a job of this application
    is: the same measured speed with fewer or more epochs, each of the measured
    epoch length.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = {measured.global_batch: measured.step_s, **measured.batch_step_s}
    rows = ["placement,local_bsz,step_time,sync_time"]
    for batch, table in sorted(tables.items()):
        for n, step_s in table.items():
            rows.append(f"{n},{math.ceil(batch / n)},{step_s!r},0.0")
    atomic_write_text(out / "placements.csv", "\n".join(rows) + "\n")
    per_epoch = measured.steps / measured.epochs
    total = measured.steps if steps is None else steps
    epochs = max(1, round(total / per_epoch))
    sqr = measured.grad_sqr if math.isfinite(measured.grad_sqr) else 0.0
    var = measured.grad_var if math.isfinite(measured.grad_var) else 0.0
    rows = ["progress,iteration,metric,grad_sqr,grad_var"]
    for e in range(1, epochs + 1):
        done = total if e == epochs else round(e * per_epoch)
        loss = measured.losses[min(e, measured.epochs) - 1]
        rows.append(f"{done},{done},{loss!r},{sqr!r},{var!r}")
    for batch in tables:  # one progress table, counted at the first batch
        atomic_write_text(out / f"validation-{batch}.csv", "\n".join(rows) + "\n")
    atomic_write_text(out / "SOURCE.md", _source(measured, total, epochs))
    if measured.pauses:
        import json

        rows = [
            {"mode": "inplace", "before": b, "after": a, "failure": False, **comps}
            for b, a, comps in measured.pauses
        ]
        atomic_write_text(out / PAUSES_FILE, json.dumps(rows, indent=1) + "\n")
    return out


def _source(measured: ApplicationMeasurement, steps: int, epochs: int) -> str:
    w = measured.worker
    sizes = ", ".join(f"{n}: {s * 1000:.2f} ms" for n, s in measured.step_s.items())
    return (
        "# Measured executor application profile\n\n"
        f"Job `{w.job}` with options `{dict(w.job_options)}`, global batch "
        f"{measured.global_batch}, `sample_delay_s={w.sample_delay_s}` (an emulated "
        f"accelerator per slot), gloo on this host ({measured.host}).\n"
        f"Measured by one run of {measured.steps} steps through 1..{max(measured.step_s)} "
        f"workers, {MEASURE_ROUNDS} times over ({measured.wall_s:.1f} s): median step time "
        f"per worker count: {sizes}.\n\n"
        "- `placements.csv`: those medians; `sync_time` is not measured (0): the "
        "executor keeps its global batch and never accumulates, the only use the model "
        "makes of it.\n"
        f"- `validation-{measured.global_batch}.csv`: {epochs} epochs, {steps} steps in "
        "all (progress = steps at this batch, the first validated one); metric = the "
        "measuring run's training loss at the epoch's end; `grad_sqr`/`grad_var` = its "
        "gradient noise statistics pooled over steps on more than one worker.\n"
        f"- `{PAUSES_FILE}`: the median measured pause components (real s) of each "
        "planned in-place change of that run, and of starts from nothing on 1.. workers "
        "(forked workers, `acquire_s` = spawn to ready); the pause model of every "
        "simulation with this profile (`cluster simulate --applications`, `cluster run` "
        "and its `--compare`).\n"
        + "".join(
            f"- batch {b}: median step time per worker count: "
            + ", ".join(f"{n}: {t * 1000:.2f} ms" for n, t in table.items())
            + " (its `validation` file repeats the progress and gradient statistics above)\n"
            for b, table in measured.batch_step_s.items()
        )
    )
