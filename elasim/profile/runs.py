"""A profile derived from executor runs: step times, pauses, checkpoints, cold starts.

:func:`profile_from_runs` reads ``elasim run --out`` directories (``summary.json`` and
the parquet files), pools what each run measured and reduces it to a
:class:`~.schema.Profile`.  The cold-start model it uses is
:mod:`elasim.profile_coldstart`, the noise scale :mod:`elasim.noise_scale`.  Pure
Python plus pandas for reading runs; no simpy, no torch.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasim.noise_scale import PooledNoiseScale, noise_scale_of_steps
from elasim.policies import PAUSE_COMPONENTS, PauseComponents
from elasim.profile_coldstart import (
    ColdStartBatch,
    cold_start_alone_s,
    cold_start_table,
    cold_starts_from_workers,
    starting_weight,
    step_samples,
)

from .schema import PROFILE_VERSION, MeasuredPause, Profile, ProfileError
from .stats import finite_median

__all__ = ["pauses_from_events", "profile_from_runs", "step_times_from_steps"]

_CHANGE_KINDS = ("scale_up", "scale_down", "resume")


def step_times_from_steps(steps: Any, busy: Iterable[tuple[float, float]] = ()) -> dict[int, float]:
    """Mean step time per world size from a run's ``steps.parquet`` frame.

    The *mean*, not the median: the simulator turns it into throughput, and a run's
    time is the sum of its steps.  Step times on a loaded host have a heavy tail
    (on our 2-core machine the mean of 4-worker steps is 10 % above the median, and
    of steps slowed by a starting worker up to twice the median), so a median makes
    the simulated job too fast.

    Only consecutive steps of one generation count (the first step after a change
    carries the warm-up, which the pause already includes).  Steps overlapping a
    ``busy`` interval (a worker starting on the same host, a checkpoint being
    written) are left out when the world size has other steps: they measure the
    contention, not the step.
    """
    return _mean_step_times(*step_samples(steps, busy))


def _mean_step_times(
    clean: Mapping[int, Sequence[float]], slowed: Mapping[int, Sequence[float]]
) -> dict[int, float]:
    """Mean of the quiet steps per world size; of the slowed ones where that is all."""
    pooled = {w: v for w, v in slowed.items() if v} | {w: v for w, v in clean.items() if v}
    return {w: statistics.fmean(v) for w, v in sorted(pooled.items())}


def pauses_from_events(events: Any, mechanism: str) -> list[MeasuredPause]:
    """Median pause components per transition from a run's ``events.parquet`` frame."""
    groups: dict[tuple[str, int, int, bool], list[PauseComponents]] = {}
    for row in events.to_dict(orient="records"):
        if row["kind"] not in _CHANGE_KINDS or int(row["nodes_after"]) == 0:
            continue
        if not math.isfinite(float(row["pause_s"])):
            continue
        components = PauseComponents(**{k: max(float(row[k]), 0.0) for k in PAUSE_COMPONENTS})
        failure = components.detect_s > 0
        key = (mechanism, int(row["nodes_before"]), int(row["nodes_after"]), failure)
        groups.setdefault(key, []).append(components)
    out = []
    for key, items in sorted(groups.items()):
        median = PauseComponents(
            **{k: statistics.median(getattr(c, k) for c in items) for k in PAUSE_COMPONENTS}
        )
        out.append(MeasuredPause(key[0], key[1], key[2], key[3], len(items), median))
    return out


def profile_from_runs(
    run_dirs: Iterable[str | Path],
    *,
    hardware: Mapping[str, Any] | None = None,
    torch_version: str = "",
    backend: str = "",
    model: Mapping[str, Any] | None = None,
    worker_start_s: float | None = None,
    source: str = "",
    shared_host_cores: int = 0,
) -> Profile:
    """Build a profile from executor run directories (``summary.json``, parquet files).

    Step times are the mean over all runs' quiet steps (see
    :func:`step_times_from_steps`); pauses are keyed by each run's mechanism;
    checkpoint save time is the median ``state_s`` of ``checkpoint`` events; load time
    the median ``state_s`` of restart-mode group formations (which load a checkpoint);
    cold starts come from ``workers.parquet`` (runs of version 2); the gradient noise
    scale from the ``gns_*`` columns of ``steps.parquet``, each run's averaged over its
    progress and the runs pooled by progress (:mod:`elasim.noise_scale`).

    Args:
        run_dirs: ``elasim run --out`` directories.
        hardware: machine description to record.
        torch_version: torch the runs used.
        backend: ``gloo`` or ``nccl``.
        model: model description to record.
        worker_start_s: time a fresh interpreter takes to import torch.
        source: what produced the profile.
        shared_host_cores: every worker ran on this one host with this many cores (0:
            workers on several hosts); enables the shared-host cold-start model.
    """
    pooled = _measure_runs(run_dirs, shared_host_cores)
    model_info = dict(model or {})
    if pooled.runs:
        model_info.setdefault("name", pooled.job_name)
    step_table = pooled.step_times()
    alone_s, weight = _shared_host_model(pooled.cold_batches, step_table, shared_host_cores)
    b_noise = pooled.noise_scale.b_noise_samples
    return Profile(
        version=PROFILE_VERSION,
        hardware=tuple((hardware or {}).items()),
        torch_version=torch_version,
        backend=backend,
        model=tuple(model_info.items()),
        global_batch=max(pooled.global_batch, 1),
        step_time_s=tuple(step_table.items()),
        pauses=pooled.pauses,
        checkpoint_size_bytes=float(model_info.get("checkpoint_bytes", 0.0)),
        checkpoint_save_s=finite_median(pooled.saves),
        checkpoint_load_s=finite_median(pooled.loads),
        worker_start_s=float(worker_start_s or 0.0),
        detect_s=finite_median(pooled.detects),
        source=source,
        cold_start_s=cold_start_table(pooled.cold_batches),
        shared_host_cores=shared_host_cores,
        cold_start_alone_s=alone_s,
        starting_weight=weight,
        gradient_noise_scale=b_noise if math.isfinite(b_noise) else None,
    )


def _measure_runs(run_dirs: Iterable[str | Path], shared_host_cores: int) -> _Measurements:
    """Every run's measurements, pooled in the order given (the first names the job)."""
    pooled = _Measurements()
    for run_dir in run_dirs:
        pooled = pooled.plus(_measure_run(Path(run_dir), shared_host_cores))
    return pooled


def _shared_host_model(
    batches: Sequence[ColdStartBatch], step_table: Mapping[int, float], shared_host_cores: int
) -> tuple[float, float]:
    """The shared-host model's two figures: ``(cold_start_alone_s, starting_weight)``.

    Only runs whose workers all shared one host measure how starting workers and
    trainers compete for its cores; otherwise the model is off: ``(0.0, 1.0)``, the
    profile's defaults.
    """
    if not shared_host_cores:
        return 0.0, 1.0
    return (
        cold_start_alone_s(batches, shared_host_cores),
        starting_weight(batches, step_table, shared_host_cores),
    )


@dataclass(frozen=True)
class _Measurements:
    """What :func:`profile_from_runs` reads from runs: one run's, or several pooled.

    Attributes:
        quiet_steps: step durations per world size while no worker was starting.
        slowed_steps: the same while a worker was starting or a checkpoint written.
        pauses: median pause components per transition (per run).
        saves: checkpoint write times (``state_s`` of ``checkpoint`` events).
        loads: checkpoint load times (``state_s`` of restart-mode group formations).
        detects: failure detection times of membership changes.
        cold_batches: workers spawned together, with their start times.
        global_batch: the typical step's samples (0: no steps yet).
        job_name: the job the first run trained, as its summary states it.
        runs: how many runs were pooled.
        noise_scale: the gradient noise scale, pooled by each run's progress.
    """

    quiet_steps: Mapping[int, tuple[float, ...]] = field(default_factory=dict)
    slowed_steps: Mapping[int, tuple[float, ...]] = field(default_factory=dict)
    pauses: tuple[MeasuredPause, ...] = ()
    saves: tuple[float, ...] = ()
    loads: tuple[float, ...] = ()
    detects: tuple[float, ...] = ()
    cold_batches: tuple[ColdStartBatch, ...] = ()
    global_batch: int = 0
    job_name: Any = None
    runs: int = 0
    noise_scale: PooledNoiseScale = PooledNoiseScale()

    def step_times(self) -> dict[int, float]:
        """Mean step time per world size (:func:`_mean_step_times`), the profile's core.

        Raises:
            ProfileError: no run held two consecutive steps, so nothing can be timed.
        """
        step_table = _mean_step_times(self.quiet_steps, self.slowed_steps)
        if not step_table:
            raise ProfileError("the runs contain no consecutive steps to time")
        return step_table

    def plus(self, later: _Measurements) -> _Measurements:
        """Pool with a later run's: lists concatenate, batch and name come from the first."""

        def pool(
            a: Mapping[int, tuple[float, ...]], b: Mapping[int, tuple[float, ...]]
        ) -> dict[int, tuple[float, ...]]:
            return {w: a.get(w, ()) + b.get(w, ()) for w in (*a, *(w for w in b if w not in a))}

        return _Measurements(
            quiet_steps=pool(self.quiet_steps, later.quiet_steps),
            slowed_steps=pool(self.slowed_steps, later.slowed_steps),
            pauses=self.pauses + later.pauses,
            saves=self.saves + later.saves,
            loads=self.loads + later.loads,
            detects=self.detects + later.detects,
            cold_batches=self.cold_batches + later.cold_batches,
            global_batch=self.global_batch or later.global_batch,
            job_name=self.job_name if self.runs else later.job_name,
            runs=self.runs + later.runs,
            noise_scale=self.noise_scale.plus(later.noise_scale),
        )


def _measure_run(run: Path, shared_host_cores: int) -> _Measurements:
    """One ``elasim run --out`` directory's measurements."""
    import pandas as pd

    summary = json.loads((run / "summary.json").read_text())
    mechanism = str(summary.get("inputs", {}).get("rescale", "inplace"))
    steps = pd.read_parquet(run / "steps.parquet")
    events = pd.read_parquet(run / "events.parquet")
    busy: list[tuple[float, float]] = []
    cold_batches: list[ColdStartBatch] = []
    if (run / "workers.parquet").exists():  # runs before version 2 lack it
        workers = pd.read_parquet(run / "workers.parquet")
        cold_batches = cold_starts_from_workers(workers, steps)
        if shared_host_cores:  # a starting worker slows the steps on its host
            busy = [
                (float(a), float(b) if math.isfinite(float(b)) else math.inf)
                for a, b in zip(workers["spawn_s"], workers["ready_s"], strict=True)
            ]
    if "real_time_s" in events:  # a step that waited for a checkpoint write
        writes = events[events["kind"] == "checkpoint"]
        busy += [
            (float(t), float(t) + float(w))
            for t, w in zip(writes["real_time_s"], writes["state_s"], strict=True)
        ]
    clean, slowed = step_samples(steps, busy)
    changes = events[events["kind"].isin(_CHANGE_KINDS) & (events["nodes_after"] > 0)]
    return _Measurements(
        quiet_steps={w: tuple(v) for w, v in clean.items()},
        slowed_steps={w: tuple(v) for w, v in slowed.items()},
        pauses=tuple(pauses_from_events(events, mechanism)),
        saves=tuple(events.loc[events["kind"] == "checkpoint", "state_s"].astype(float)),
        loads=tuple(changes["state_s"].astype(float)) if mechanism == "restart" else (),
        detects=tuple(float(v) for v in changes["detect_s"] if float(v) > 0),
        cold_batches=tuple(cold_batches),
        # the typical step (an epoch's last step may be shorter)
        global_batch=int(round(float(steps["samples"].median()))) if len(steps) else 0,
        job_name=summary.get("inputs", {}).get("job", "executor job"),
        runs=1,
        noise_scale=noise_scale_of_steps(steps),
    )
