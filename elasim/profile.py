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
* checkpoint save and load times -> checkpoint bandwidths; worker start time -> the
  acquisition delay; failure detection time -> ``detect_s``.

Pure Python plus pandas for reading runs; no simpy, no torch.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasim.job import (
    BatchSemantics,
    BatchSpec,
    CheckpointSpec,
    ComputeSpec,
    JobSpec,
    NetworkSpec,
    NodesSpec,
    RescaleSpec,
)
from elasim.policies import PAUSE_COMPONENTS, PauseComponents

__all__ = [
    "PROFILE_VERSION",
    "MeasuredPause",
    "Profile",
    "ProfileError",
    "apply_profile",
    "load_profile",
    "pauses_from_events",
    "profile_from_runs",
    "save_profile",
    "step_times_from_steps",
]

PROFILE_VERSION = 1


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
        step_time_s: median step time per world size.
        pauses: measured transitions.
        checkpoint_size_bytes: size of one checkpoint file.
        checkpoint_save_s: median atomic save time.
        checkpoint_load_s: median load time.
        worker_start_s: median time for a fresh worker to start and import torch.
        detect_s: median time for survivors to notice a killed peer.
        source: what produced it (``calibrate`` or a run directory).
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
    extra: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("hardware", "model", "extra"):  # canonical order: equal files compare equal
            object.__setattr__(self, name, tuple(sorted(dict(getattr(self, name)).items())))
        if self.version != PROFILE_VERSION:
            raise ProfileError(
                f"profile version {self.version} is not supported (expected {PROFILE_VERSION})"
            )
        if self.global_batch < 1:
            raise ProfileError("global_batch must be >= 1")
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
        """A JSON-ready dict (the file format)."""
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
            "detect_s": self.detect_s,
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
                detect_s=float(data.get("detect_s", 0.0)),
                extra=tuple(sorted(dict(data.get("extra", {})).items())),
            )
        except ProfileError as exc:
            raise ProfileError(f"{where}: {exc}") from None
        except KeyError as exc:
            raise ProfileError(f"{where}: missing key {exc.args[0]!r}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise ProfileError(f"{where}: malformed profile: {exc}") from None


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
    job: JobSpec | None = None,
    *,
    target_samples: float | None = None,
    min_nodes: int = 1,
) -> JobSpec:
    """A job spec whose figures come from ``profile``.

    Args:
        profile: the measurements.
        job: a job spec to keep the work target from; ``None`` models the profiled
            model itself (fixed global batch, nodes = worker slots).
        target_samples: overrides the work target.
        min_nodes: fewest workers the job runs on.

    Returns:
        A :class:`JobSpec` with a measured compute table, measured pause table and the
        analytical pause model fitted to the measurements.
    """
    steps = dict(profile.step_time_s)
    max_world = profile.max_world
    table = tuple(sorted((w, profile.global_batch / t) for w, t in steps.items()))
    inplace_grow = [
        p for p in profile.pauses if p.mechanism == "inplace" and p.nodes_after > p.nodes_before
    ]
    # the analytical model stands for in-place changes (restart ones are all measured
    # in the table), so it is fitted on in-place pauses when there are any
    fitted = [p for p in profile.pauses if p.mechanism == "inplace"] or list(profile.pauses)
    rendezvous_points = [(float(p.nodes_after), p.components.rendezvous_s) for p in fitted]
    base_s, per_node_s = _fit_line(rendezvous_points)
    state_bytes = float(dict(profile.model).get("state_bytes", profile.checkpoint_size_bytes))
    state_s = _median(p.components.state_s for p in inplace_grow)
    state_bw = state_bytes / state_s if state_s > 0 and state_bytes > 0 else 1e12
    size = profile.checkpoint_size_bytes or state_bytes or 1.0
    write_bw = size / profile.checkpoint_save_s if profile.checkpoint_save_s > 0 else 1e12
    read_bw = size / profile.checkpoint_load_s if profile.checkpoint_load_s > 0 else 1e12
    model = dict(profile.model)
    name = str(model.get("name", "profiled"))
    inplace = [p.components.acquire_s for p in profile.pauses if p.mechanism == "inplace"]
    # warm standbys start (and import torch) before they are needed, so a newcomer's
    # acquisition is what the in-place transitions measured, not a cold start
    boot_s = _median(inplace) if inplace else profile.worker_start_s
    spec = JobSpec(
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
            semantics=BatchSemantics.FIXED,
            reference_batch=profile.global_batch,
            gradient_noise_scale=0.0,
        ),
        nodes=NodesSpec(min=min_nodes, max=max_world, gpus_per_node=1),
        checkpoint=CheckpointSpec(
            size_bytes=size,
            write_bandwidth_bytes_per_s=write_bw,
            read_bandwidth_bytes_per_s=read_bw,
        ),
        rescale=RescaleSpec(
            detect_s=profile.detect_s,
            boot_s=boot_s,
            rendezvous_base_s=base_s,
            rendezvous_per_node_s=per_node_s,
            state_bandwidth_bytes_per_s=state_bw,
            warmup_s=_median(p.components.warmup_s for p in fitted),
            cold_start_s=profile.worker_start_s,
        ),
        path=profile.source,
        pause_table=tuple((p.key, p.components) for p in profile.pauses),
    )
    return dataclasses.replace(spec)


# -- deriving a profile from measured runs ---------------------------------------------

_CHANGE_KINDS = ("scale_up", "scale_down", "resume")


def step_times_from_steps(steps: Any) -> dict[int, float]:
    """Median step time per world size from a run's ``steps.parquet`` frame.

    Only consecutive steps of one generation count (the first step after a change
    carries the warm-up, which the pause already includes).
    """
    frame = steps.sort_values("time_s", kind="stable")
    out: dict[int, list[float]] = {}
    previous = None
    for row in frame.itertuples(index=False):
        if previous is not None and row.gen == previous.gen and row.step == previous.step + 1:
            out.setdefault(int(row.world_size), []).append(float(row.time_s - previous.time_s))
        previous = row
    return {world: statistics.median(values) for world, values in sorted(out.items()) if values}


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
) -> Profile:
    """Build a profile from executor run directories (``summary.json``, parquet files).

    Step times are pooled over all runs; pauses are keyed by each run's mechanism;
    checkpoint save time is the median ``state_s`` of ``checkpoint`` events; load time
    the median ``state_s`` of restart-mode group formations (which load a checkpoint).
    """
    import pandas as pd

    steps_by_world: dict[int, list[float]] = {}
    pauses: list[MeasuredPause] = []
    saves: list[float] = []
    loads: list[float] = []
    detects: list[float] = []
    global_batch = 0
    model_info = dict(model or {})
    for run_dir in run_dirs:
        run = Path(run_dir)
        summary = json.loads((run / "summary.json").read_text())
        mechanism = str(summary.get("inputs", {}).get("rescale", "inplace"))
        steps = pd.read_parquet(run / "steps.parquet")
        events = pd.read_parquet(run / "events.parquet")
        for world, seconds in step_times_from_steps(steps).items():
            steps_by_world.setdefault(world, []).append(seconds)
        if len(steps) and not global_batch:
            # the typical step (an epoch's last step may be shorter)
            global_batch = int(round(float(steps["samples"].median())))
        pauses.extend(pauses_from_events(events, mechanism))
        saves.extend(events.loc[events["kind"] == "checkpoint", "state_s"].astype(float))
        changes = events[events["kind"].isin(_CHANGE_KINDS) & (events["nodes_after"] > 0)]
        if mechanism == "restart":
            loads.extend(changes["state_s"].astype(float))
        detects.extend(float(v) for v in changes["detect_s"] if float(v) > 0)
        model_info.setdefault("name", summary.get("inputs", {}).get("job", "executor job"))
    if not steps_by_world:
        raise ProfileError("the runs contain no consecutive steps to time")
    return Profile(
        version=PROFILE_VERSION,
        hardware=tuple((hardware or {}).items()),
        torch_version=torch_version,
        backend=backend,
        model=tuple(model_info.items()),
        global_batch=max(global_batch, 1),
        step_time_s=tuple((w, statistics.median(v)) for w, v in sorted(steps_by_world.items())),
        pauses=tuple(pauses),
        checkpoint_size_bytes=float(model_info.get("checkpoint_bytes", 0.0)),
        checkpoint_save_s=_median(saves),
        checkpoint_load_s=_median(loads),
        worker_start_s=float(worker_start_s or 0.0),
        detect_s=_median(detects),
        source=source,
    )
