"""Measured profiles: what the executor measured on a machine, in a form the simulator uses.

A profile replaces a job preset's analytical figures with measurements taken on the
machine that will run the job (``elasim calibrate`` writes one; ``elasim run`` can
write one as a by-product).  It is versioned JSON and records what it was measured
with (hardware, torch version, backend, model), because a CPU profile predicts a CPU
run and nothing else.

What the simulator takes from it (:func:`apply_profile`):

* the step time per world size -> a measured ``[compute.table]`` (no all-reduce model);
* the median pause components per (mechanism, nodes before, nodes after, failure)
  -> an exact pause table that :func:`elasim.sim.pause_for` looks up first;
* a linear fit of rendezvous time on group size, the state broadcast bandwidth and the
  warm-up -> the analytical pause model for transitions that were not measured;
* checkpoint save and load times -> checkpoint bandwidths; failure detection time
  -> ``detect_s``;
* the measured cold starts of workers spawned together (version 2) -> the ready
  times of replacements for killed workers (a flat worker start time, version 1,
  is used when a profile has no batches).  When every worker ran on one host
  (``shared_host_cores``), the cold starts and the training steps compete for its
  cores, and the simulator models that sharing (:class:`elasim.job.RescaleSpec`),
  from the start time of a worker alone on the host (``cold_start_alone_s``,
  derived from every batch and the number of workers training meanwhile).
* the gradient noise scale the executor measured while training (optional: profiles
  written before it was measured lack it) -> ``B_noise`` of the convergence model.
  It costs nothing under the executor's fixed global batch; ``batch="scaled"``
  (``simulate --profile P --batch scaled``) lets each worker keep the profiled batch,
  so the global batch grows with the nodes and the measured noise scale prices it.

Pure Python plus pandas for reading runs; no simpy, no torch.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasim.job import (
    BatchSemantics,
    BatchSpec,
    CheckpointSpec,
    ComputeSpec,
    NetworkSpec,
    NodesSpec,
    RescaleSpec,
    TrainingJob,
)
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

__all__ = [
    "PROFILE_VERSION",
    "MeasuredPause",
    "Profile",
    "ProfileError",
    "apply_profile",
    "ColdStartBatch",
    "cold_start_alone_s",
    "cold_starts_from_workers",
    "load_profile",
    "pauses_from_events",
    "profile_from_runs",
    "save_profile",
    "starting_weight",
    "step_times_from_steps",
]

PROFILE_VERSION = 2
#: Versions this code reads (1 had no measured cold-start batches).
SUPPORTED_VERSIONS = (1, 2)


class ProfileError(ValueError):
    """A profile that cannot be used; ``str()`` is one line naming the file."""


@dataclass(frozen=True)
class MeasuredPause:
    """Median pause of one kind of transition.

    Attributes:
        mechanism: ``inplace`` or ``restart``.
        nodes_before: group size before.
        nodes_after: group size after.
        failure: the change followed an unannounced failure (a killed worker).
        samples: how many events the median is over.
        components: median of each pause component (seconds).
    """

    mechanism: str
    nodes_before: int
    nodes_after: int
    failure: bool
    samples: int
    components: PauseComponents

    @property
    def key(self) -> tuple[str, int, int, bool]:
        """The lookup key of the pause table."""
        return (self.mechanism, self.nodes_before, self.nodes_after, self.failure)


@dataclass(frozen=True)
class Profile:
    """Everything one calibration measured.

    Attributes:
        version: schema version (:data:`PROFILE_VERSION`).
        hardware: machine description (cpu, cores, gpu, ...).
        torch_version: torch the executor ran.
        backend: ``gloo`` or ``nccl``.
        model: model description (name, parameters, state bytes, global batch).
        global_batch: samples per optimizer step (the executor keeps it fixed).
        step_time_s: mean step time per world size (quiet steps only).
        pauses: measured transitions.
        checkpoint_size_bytes: size of one checkpoint file.
        checkpoint_save_s: median atomic save time.
        checkpoint_load_s: median load time.
        worker_start_s: median time for a fresh interpreter to start and import torch.
        cold_start_s: measured cold starts of worker processes spawned together:
            ``(k, offsets)``, for batches of ``k``, the median seconds from spawn to
            READY of the first, second, ... to be ready.
        shared_host_cores: every worker ran on one host with this many cores (0: not
            measured on a single host).
        cold_start_alone_s: start time of one worker alone on that host (each batch's
            times scaled by the share of a core its workers had).
        starting_weight: CPU a starting worker takes, in training workers (fitted on
            the slowdown of the trainers next to it, :func:`starting_weight`).
        detect_s: median time for survivors to notice a killed peer.
        source: what produced it (``calibrate`` or a run directory).
        gradient_noise_scale: ``B_noise`` (samples) measured while training, pooled
            over the runs (:mod:`elasim.noise_scale`); None: not measured.
    """

    version: int
    hardware: tuple[tuple[str, Any], ...]
    torch_version: str
    backend: str
    model: tuple[tuple[str, Any], ...]
    global_batch: int
    step_time_s: tuple[tuple[int, float], ...]
    pauses: tuple[MeasuredPause, ...] = ()
    checkpoint_size_bytes: float = 0.0
    checkpoint_save_s: float = 0.0
    checkpoint_load_s: float = 0.0
    worker_start_s: float = 0.0
    detect_s: float = 0.0
    source: str = ""
    cold_start_s: tuple[tuple[int, tuple[float, ...]], ...] = ()
    shared_host_cores: int = 0
    cold_start_alone_s: float = 0.0
    starting_weight: float = 1.0
    extra: tuple[tuple[str, Any], ...] = field(default=())
    gradient_noise_scale: float | None = None

    def __post_init__(self) -> None:
        for name in ("hardware", "model", "extra"):  # canonical order: equal files compare equal
            object.__setattr__(self, name, tuple(sorted(dict(getattr(self, name)).items())))
        if self.version not in SUPPORTED_VERSIONS:
            raise ProfileError(
                f"profile version {self.version} is not supported "
                f"(expected one of {', '.join(map(str, SUPPORTED_VERSIONS))})"
            )
        for count, offsets in self.cold_start_s:
            if count < 1 or len(offsets) != count:
                raise ProfileError(f"cold start batch {count} needs {count} offsets")
            if not all(math.isfinite(o) and o >= 0 for o in offsets):
                raise ProfileError(f"cold start offsets must be >= 0, got {list(offsets)}")
        if self.global_batch < 1:
            raise ProfileError("global_batch must be >= 1")
        gns = self.gradient_noise_scale
        if gns is not None and not (math.isfinite(gns) and gns >= 0):
            raise ProfileError(f"gradient_noise_scale must be >= 0, got {gns!r}")
        if not self.step_time_s:
            raise ProfileError("a profile needs at least one measured step time")
        for world, seconds in self.step_time_s:
            if world < 1 or not (math.isfinite(seconds) and seconds > 0):
                raise ProfileError(f"bad step time {seconds!r} for world size {world!r}")

    @property
    def max_world(self) -> int:
        """Largest world size measured."""
        return max(world for world, _ in self.step_time_s)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the file format; the noise scale only when measured)."""
        gns = self.gradient_noise_scale
        measured = {} if gns is None else {"gradient_noise_scale": gns}
        return {
            "elasim_profile_version": self.version,
            "source": self.source,
            "hardware": dict(self.hardware),
            "torch_version": self.torch_version,
            "backend": self.backend,
            "model": dict(self.model),
            "global_batch": self.global_batch,
            "step_time_s": {str(w): t for w, t in self.step_time_s},
            "pauses": [
                {
                    "mechanism": p.mechanism,
                    "nodes_before": p.nodes_before,
                    "nodes_after": p.nodes_after,
                    "failure": p.failure,
                    "samples": p.samples,
                    **p.components.as_dict(),
                }
                for p in self.pauses
            ],
            "checkpoint_size_bytes": self.checkpoint_size_bytes,
            "checkpoint_save_s": self.checkpoint_save_s,
            "checkpoint_load_s": self.checkpoint_load_s,
            "worker_start_s": self.worker_start_s,
            "cold_start_s": {str(k): list(v) for k, v in self.cold_start_s},
            "shared_host_cores": self.shared_host_cores,
            "cold_start_alone_s": self.cold_start_alone_s,
            "starting_weight": self.starting_weight,
            "detect_s": self.detect_s,
            **measured,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "<profile>") -> Profile:
        """Parse the file format, with one-line errors naming ``where``."""
        try:
            pauses = tuple(
                MeasuredPause(
                    mechanism=str(p["mechanism"]),
                    nodes_before=int(p["nodes_before"]),
                    nodes_after=int(p["nodes_after"]),
                    failure=bool(p["failure"]),
                    samples=int(p.get("samples", 1)),
                    components=PauseComponents(**{k: float(p[k]) for k in PAUSE_COMPONENTS}),
                )
                for p in data.get("pauses", [])
            )
            return cls(
                version=int(data["elasim_profile_version"]),
                source=str(data.get("source", "")),
                hardware=tuple(sorted(dict(data.get("hardware", {})).items())),
                torch_version=str(data.get("torch_version", "")),
                backend=str(data.get("backend", "")),
                model=tuple(sorted(dict(data.get("model", {})).items())),
                global_batch=int(data["global_batch"]),
                step_time_s=tuple(
                    sorted((int(k), float(v)) for k, v in dict(data["step_time_s"]).items())
                ),
                pauses=pauses,
                checkpoint_size_bytes=float(data.get("checkpoint_size_bytes", 0.0)),
                checkpoint_save_s=float(data.get("checkpoint_save_s", 0.0)),
                checkpoint_load_s=float(data.get("checkpoint_load_s", 0.0)),
                worker_start_s=float(data.get("worker_start_s", 0.0)),
                cold_start_s=tuple(
                    sorted(
                        (int(k), tuple(float(o) for o in v))
                        for k, v in dict(data.get("cold_start_s", {})).items()
                    )
                ),
                shared_host_cores=int(data.get("shared_host_cores", 0)),
                cold_start_alone_s=float(data.get("cold_start_alone_s", 0.0)),
                starting_weight=float(data.get("starting_weight", 1.0)),
                detect_s=float(data.get("detect_s", 0.0)),
                extra=tuple(sorted(dict(data.get("extra", {})).items())),
                gradient_noise_scale=None
                if data.get("gradient_noise_scale") is None
                else float(data["gradient_noise_scale"]),
            )
        except ProfileError as exc:
            raise ProfileError(f"{where}: {exc}") from None
        except KeyError as exc:
            raise ProfileError(f"{where}: missing key {exc.args[0]!r}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise ProfileError(f"{where}: malformed profile: {exc}") from None


def _measured(seconds: float) -> str:
    """A time the profile holds, or ``not measured`` (0 is what a profile stores then)."""
    return f"{seconds:.4f}" if seconds > 0 else "not measured"


def describe_profile(profile: Profile) -> list[tuple[str, str]]:
    """The profile as (measurement, value) rows, for ``elasim calibrate`` and notebooks."""
    rows = [(f"step time, {w} workers (s)", f"{t:.4f}") for w, t in profile.step_time_s]
    # the scaling curve: the global batch is fixed, so throughput is batch / step time
    steps = dict(profile.step_time_s)
    base = profile.global_batch / steps[min(steps)]
    for world, seconds in profile.step_time_s:
        throughput = profile.global_batch / seconds
        rows.append(
            (
                f"throughput, {world} workers (samples/s)",
                f"{throughput:,.0f} (x{throughput / base:.2f} of {min(steps)} worker)",
            )
        )
    for pause in profile.pauses:
        label = f"{pause.mechanism} {pause.nodes_before}->{pause.nodes_after}" + (
            " (kill)" if pause.failure else ""
        )
        parts = [
            f"{name[:-2]} {value:.3f}"
            for name, value in pause.components.as_dict().items()
            if name != "pause_s" and value >= 0.0005
        ]
        detail = f" ({', '.join(parts)})" if parts else ""
        rows.append((f"pause {label} (s)", f"{pause.components.pause_s:.3f}{detail}"))
    rows += [
        ("checkpoint save (s)", _measured(profile.checkpoint_save_s)),
        ("checkpoint load (s)", _measured(profile.checkpoint_load_s)),
        ("interpreter + torch import (s)", f"{profile.worker_start_s:.2f}"),
    ]
    for count, offsets in profile.cold_start_s:
        rows.append(
            (f"cold start, {count} spawned together (s)", " / ".join(f"{o:.2f}" for o in offsets))
        )
    if profile.shared_host_cores:
        rows.append(
            (
                f"cold start alone on the {profile.shared_host_cores}-core host (s)",
                f"{profile.cold_start_alone_s:.2f}",
            )
        )
        rows.append(("a starting worker's CPU, in trainers", f"{profile.starting_weight:.2f}"))
    gns = profile.gradient_noise_scale
    shown = "not measured" if gns is None else f"{gns:,.0f}"
    rows.append(("gradient noise scale B_noise (samples)", shown))
    return rows


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write a profile atomically."""
    from elasim.output import write_json

    return write_json(path, profile.to_json())


def load_profile(path: str | Path) -> Profile:
    """Read a profile; errors are one line naming the file (and line/column for bad JSON)."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{where}: cannot read profile: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{where}:{exc.lineno}:{exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: a profile is a JSON object")
    return Profile.from_json(data, where)


def _median(values: Iterable[float], default: float = 0.0) -> float:
    items = [v for v in values if math.isfinite(v)]
    return statistics.median(items) if items else default


def _fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``y = a + b x`` (b >= 0; a >= 0), robust to one point."""
    if not points:
        return 0.0, 0.0
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    if len(set(xs)) < 2:
        return max(statistics.fmean(ys), 0.0), 0.0
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    slope = max(sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx, 0.0)
    return max(mean_y - slope * mean_x, 0.0), slope


def apply_profile(
    profile: Profile,
    job: TrainingJob | None = None,
    *,
    target_samples: float | None = None,
    min_nodes: int = 1,
    batch: BatchSemantics | str = BatchSemantics.FIXED,
) -> TrainingJob:
    """A job spec whose figures come from ``profile``.

    Args:
        profile: the measurements.
        job: a job spec to keep the work target from; ``None`` models the profiled
            model itself (fixed global batch, nodes = worker slots).
        target_samples: overrides the work target.
        min_nodes: fewest workers the job runs on.
        batch: ``fixed`` (the executor's semantics: the global batch stays the
            profiled one, so no convergence cost) or ``scaled`` (each worker keeps the
            profiled batch; a sample at the larger global batch is worth less, by the
            measured noise scale).  Under ``scaled`` the measured samples per second
            per world size are kept as they are: a first-order model that ignores
            how a larger per-worker batch amortises per-step overheads.

    Returns:
        A :class:`TrainingJob` with a measured compute table, measured pause table and the
        analytical pause model fitted to the measurements.

    Raises:
        ProfileError: ``scaled`` asked of a profile without a measured noise scale.
    """
    semantics = BatchSemantics(batch)
    b_noise = profile.gradient_noise_scale
    if semantics is BatchSemantics.SCALED and b_noise is None:
        raise ProfileError(
            "a scaled batch needs the profile's gradient noise scale, and this profile "
            "has none (calibrate again: the executor measures it on two or more workers)"
        )
    steps = dict(profile.step_time_s)
    table = tuple(sorted((w, profile.global_batch / t) for w, t in steps.items()))
    model = dict(profile.model)
    name = str(model.get("name", "profiled"))
    state_bytes = float(model.get("state_bytes", profile.checkpoint_size_bytes))
    spec = TrainingJob(
        name=f"{name} (profile)",
        description=f"{name} as measured on {dict(profile.hardware).get('cpu', 'this machine')}",
        sources=(f"profile: {profile.source}",),
        target_samples=float(
            target_samples
            if target_samples is not None
            else (job.target_samples if job is not None else profile.global_batch * 1000)
        ),
        compute=ComputeSpec(
            per_node_samples_per_s=profile.global_batch / steps[min(steps)],
            per_node_batch=profile.global_batch,
            table=table,
        ),
        network=NetworkSpec(gradient_bytes=0.0, latency_s=0.0, bandwidth_bytes_per_s=1e12),
        batch=BatchSpec(
            semantics=semantics,
            reference_batch=profile.global_batch,
            gradient_noise_scale=0.0 if b_noise is None else b_noise,
        ),
        nodes=NodesSpec(min=min_nodes, max=profile.max_world, gpus_per_node=1),
        checkpoint=_checkpoint_spec(profile, state_bytes),
        rescale=_rescale_spec(profile, state_bytes),
        path=profile.source,
        pause_table=tuple((p.key, p.components) for p in profile.pauses),
    )
    return dataclasses.replace(spec)


def _checkpoint_spec(profile: Profile, state_bytes: float) -> CheckpointSpec:
    """Checkpoint bandwidths from the measured save and load times (1e12 B/s: unmeasured)."""
    size = profile.checkpoint_size_bytes or state_bytes or 1.0
    write_bw = size / profile.checkpoint_save_s if profile.checkpoint_save_s > 0 else 1e12
    read_bw = size / profile.checkpoint_load_s if profile.checkpoint_load_s > 0 else 1e12
    return CheckpointSpec(
        size_bytes=size,
        write_bandwidth_bytes_per_s=write_bw,
        read_bandwidth_bytes_per_s=read_bw,
    )


def _rescale_spec(profile: Profile, state_bytes: float) -> RescaleSpec:
    """The analytical pause model, fitted to the measured pauses and cold starts."""
    inplace_grow = [
        p for p in profile.pauses if p.mechanism == "inplace" and p.nodes_after > p.nodes_before
    ]
    # the analytical model stands for in-place changes (restart ones are all measured
    # in the table), so it is fitted on in-place pauses when there are any
    fitted = [p for p in profile.pauses if p.mechanism == "inplace"] or list(profile.pauses)
    rendezvous_points = [(float(p.nodes_after), p.components.rendezvous_s) for p in fitted]
    base_s, per_node_s = _fit_line(rendezvous_points)
    state_s = _median(p.components.state_s for p in inplace_grow)
    state_bw = state_bytes / state_s if state_s > 0 and state_bytes > 0 else 1e12
    inplace = [p.components.acquire_s for p in profile.pauses if p.mechanism == "inplace"]
    # warm standbys start (and import torch) before they are needed, so a newcomer's
    # acquisition is what the in-place transitions measured, not a cold start
    boot_s = _median(inplace) if inplace else profile.worker_start_s
    shared = profile.shared_host_cores > 0 and profile.cold_start_alone_s > 0
    return RescaleSpec(
        detect_s=profile.detect_s,
        boot_s=boot_s,
        rendezvous_base_s=base_s,
        rendezvous_per_node_s=per_node_s,
        state_bandwidth_bytes_per_s=state_bw,
        warmup_s=_median(p.components.warmup_s for p in fitted),
        cold_start_s=(
            profile.cold_start_alone_s
            if shared and profile.cold_start_alone_s > 0
            else profile.worker_start_s
        ),
        cold_start_table=profile.cold_start_s,
        shared_host_cores=float(profile.shared_host_cores) if shared else 0.0,
        starting_weight=profile.starting_weight,
    )


# -- deriving a profile from measured runs ---------------------------------------------

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
    pooled = _Measurements()
    for run_dir in run_dirs:
        pooled = pooled.plus(_measure_run(Path(run_dir), shared_host_cores))
    model_info = dict(model or {})
    if pooled.runs:
        model_info.setdefault("name", pooled.job_name)
    step_table = _mean_step_times(pooled.quiet_steps, pooled.slowed_steps)
    if not step_table:
        raise ProfileError("the runs contain no consecutive steps to time")
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
        checkpoint_save_s=_median(pooled.saves),
        checkpoint_load_s=_median(pooled.loads),
        worker_start_s=float(worker_start_s or 0.0),
        detect_s=_median(pooled.detects),
        source=source,
        cold_start_s=cold_start_table(pooled.cold_batches),
        shared_host_cores=shared_host_cores,
        cold_start_alone_s=cold_start_alone_s(pooled.cold_batches, shared_host_cores)
        if shared_host_cores
        else 0.0,
        starting_weight=starting_weight(pooled.cold_batches, step_table, shared_host_cores)
        if shared_host_cores
        else 1.0,
        gradient_noise_scale=pooled.noise_scale.b_noise_samples
        if math.isfinite(pooled.noise_scale.b_noise_samples)
        else None,
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
