"""A cluster workload from a job trace such as Philly's: each job mapped to an application.

A job trace (:class:`~.model.JobTrace`) says when jobs arrived, how long they ran and
on how many GPUs, not what they trained.  A cluster-scheduling workload
(:class:`~.cluster.WorkloadJob`) needs an application with a measured profile.  The
mapping is the one Pollux's ``simulator/workload.py`` used to build its eight
workloads from Philly (facts from that file, re-implemented here; see
``traces/README.md``):

* **Filter** (on by default): keep jobs that ran at least 60 s and used under
  1,000 GPU-hours (:data:`~.from_philly.POLLUX_MIN_DURATION_S`,
  :data:`~.from_philly.POLLUX_MAX_GPU_TIME_S`).
* **Application by GPU-time** (``duration x num_gpus``): under 1 GPU-hour ``cifar10``
  or ``ncf`` (even odds); under 10 ``deepspeech2`` or ``bert`` (even odds); under 100
  ``yolov3``; else ``imagenet``.  A job's size therefore comes from its application's
  profile (epochs to train), not from how long it ran on Philly; only its arrival and
  its GPU-time class come from the trace.
* **Requested GPUs and batch size**: drawn uniformly from the configurations Pollux's
  generator used for that application.  Pollux computed them from its profiles
  (``get_configurations(0.5, 0.8)`` on 16 x 4 GPUs); here they are read from the
  bundled Pollux workloads, whose every ``(num_replicas, batch_size)`` pair per
  application is one such configuration.  The trace's own ``num_gpus`` is not used
  (Pollux's generator discards it too).

Differences from Pollux, on purpose: arrivals keep their real times (Pollux kept only
the time of day, folding a window of every day of the trace into one 8-hour day), so
the full trace stays a 108-day workload; an optional ``hours`` window and ``max_jobs``
sample reproduce Pollux's smaller workloads' shape.  The draws come from NumPy
generators seeded by ``seed``, two uniforms per job in trace order, so the same trace,
options and seed give the same workload, and a job's application does not depend on
which other jobs a window or sample kept.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from .cluster import PHILLY_PREFIX, WorkloadJob, bundled_workload_names, read_workload_csv
from .errors import TraceError
from .from_philly import POLLUX_MAX_GPU_TIME_S, POLLUX_MIN_DURATION_S
from .model import JobTrace

__all__ = [
    "GPU_HOUR_CLASSES",
    "PHILLY_PREFIX",
    "PhillyMapping",
    "application_configurations",
    "load_philly_workload",
    "map_job_trace",
    "parse_philly_spec",
]

#: A workload spec that starts with this is a job trace mapped to applications.
#: The job trace ``philly`` maps when the spec names none (bundled, one week).
DEFAULT_PHILLY_TRACE = "philly_jobs.csv"
_RAW_PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster"

#: (GPU-hours below which, applications drawn with even odds), in order; the last
#: class takes everything else.
GPU_HOUR_CLASSES: tuple[tuple[float, tuple[str, ...]], ...] = (
    (1.0, ("cifar10", "ncf")),
    (10.0, ("deepspeech2", "bert")),
    (100.0, ("yolov3",)),
    (float("inf"), ("imagenet",)),
)


@dataclass(frozen=True)
class PhillyMapping:
    """How a job trace becomes a workload.

    Attributes:
        seed: seeds every draw (application within a class, configuration, sample).
        start_h: first hour of submissions kept, from the trace's start.
        hours: how many hours of submissions to keep (None: to the end).
        max_jobs: keep a uniform sample of this many jobs (None: all).
        pollux_filter: drop jobs under 60 s or at 1,000 GPU-hours and above, as
            Pollux's generator does.
    """

    seed: int = 0
    start_h: float = 0.0
    hours: float | None = None
    max_jobs: int | None = None
    pollux_filter: bool = True

    def __post_init__(self) -> None:
        if not self.start_h >= 0:
            raise ValueError(f"start_h must be >= 0, got {self.start_h}")
        if self.hours is not None and not self.hours > 0:
            raise ValueError(f"hours must be > 0, got {self.hours}")
        if self.max_jobs is not None and self.max_jobs < 1:
            raise ValueError(f"max_jobs must be >= 1, got {self.max_jobs}")


@functools.lru_cache(maxsize=1)
def application_configurations() -> dict[str, tuple[tuple[int, int], ...]]:
    """Per application, the ``(num_replicas, batch_size)`` pairs of the Pollux workloads.

    Sorted, so a draw by index is deterministic.  Why read them and not recompute
    them: they are the configurations Pollux's generator actually drew from, and
    recomputing them would need a second copy of its utilisation rule.
    """
    pairs: dict[str, set[tuple[int, int]]] = {}
    for name in bundled_workload_names():
        if not name.startswith("pollux-workload-"):
            continue
        for job in read_workload_csv(name):
            pairs.setdefault(job.application, set()).add(
                (job.requested_gpus, job.requested_batch_size)
            )
    if not pairs:  # pragma: no cover - the package ships them
        raise ValueError("the bundled Pollux workloads are missing")
    return {app: tuple(sorted(found)) for app, found in sorted(pairs.items())}


def _kept(trace: JobTrace, mapping: PhillyMapping) -> np.ndarray:
    """Indices of the trace's jobs the mapping keeps, in trace order."""
    submit = trace.submit_time_s
    keep = submit >= mapping.start_h * 3600.0
    if mapping.hours is not None:
        keep &= submit < (mapping.start_h + mapping.hours) * 3600.0
    if mapping.pollux_filter:
        gpu_time_s = trace.duration_s * trace.num_gpus
        keep &= (trace.duration_s >= POLLUX_MIN_DURATION_S) & (gpu_time_s < POLLUX_MAX_GPU_TIME_S)
    index = np.flatnonzero(keep)
    if mapping.max_jobs is not None and mapping.max_jobs < index.size:
        sample = np.random.default_rng([mapping.seed, 1]).choice(
            index.size, size=mapping.max_jobs, replace=False
        )
        index = index[np.sort(sample)]
    return index


def map_job_trace(trace: JobTrace, mapping: PhillyMapping | None = None) -> list[WorkloadJob]:
    """Map every kept job of ``trace`` to an application (see the module docstring).

    Arrivals are the kept jobs' submit times less the first kept one's, so the
    workload starts at 0.  Names are ``<application>-<index>`` in arrival order, as in
    Pollux's workloads.

    Raises:
        ValueError: no job of the trace survives the filter, window and sample.
    """
    mapping = mapping or PhillyMapping()
    configs = application_configurations()
    index = _kept(trace, mapping)
    if index.size == 0:
        raise ValueError(f"no job of {trace.name!r} is left after the filter and window")
    # two uniforms per job of the whole trace, so a window does not change a job's draw
    draws = np.random.default_rng([mapping.seed, 0]).random((len(trace), 2))[index]
    gpu_hours = (trace.duration_s * trace.num_gpus)[index] / 3600.0
    bounds = np.array([limit for limit, _ in GPU_HOUR_CLASSES])
    classes = np.searchsorted(bounds, gpu_hours, side="right")
    arrivals = trace.submit_time_s[index] - trace.submit_time_s[index[0]]
    jobs = []
    for i, (cls, (u_app, u_cfg)) in enumerate(zip(classes.tolist(), draws.tolist(), strict=True)):
        apps = GPU_HOUR_CLASSES[cls][1]
        app = apps[min(int(u_app * len(apps)), len(apps) - 1)]
        options = configs[app]
        replicas, batch = options[min(int(u_cfg * len(options)), len(options) - 1)]
        jobs.append(
            WorkloadJob(
                name=f"{app}-{i}",
                arrival_s=float(arrivals[i]),
                application=app,
                requested_gpus=replicas,
                requested_batch_size=batch,
            )
        )
    return jobs


def parse_philly_spec(spec: str) -> tuple[str, PhillyMapping]:
    """``philly[:TRACE][:key=value...]`` -> (job trace name or path, mapping).

    Parts are separated by ``:`` (not ``,``, which separates ``--workloads`` in a
    sweep); a part without ``=`` names the trace.  Keys are the fields of
    :class:`PhillyMapping`.

    Raises:
        ValueError: one line naming the bad part.
    """
    head, _, rest = spec.partition(":")
    if head != PHILLY_PREFIX:
        raise ValueError(f"workload {spec!r} does not start with {PHILLY_PREFIX!r}")
    trace, options = DEFAULT_PHILLY_TRACE, {}
    kinds = {f.name: f.type for f in fields(PhillyMapping)}
    for part in filter(None, rest.split(":")):
        key, sep, value = part.partition("=")
        if not sep:
            trace = part
            continue
        key = key.strip()
        if key not in kinds:
            raise ValueError(
                f"workload {spec!r}: unknown option {key!r}; known: {', '.join(kinds)}"
            )
        options[key] = _option(spec, key, value.strip(), str(kinds[key]))
    return trace, PhillyMapping(**options)


def _option(spec: str, key: str, value: str, kind: str) -> object:
    try:
        if "bool" in kind:
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return value.lower() in ("true", "1")
        if "int" in kind:
            return int(value)
        return float(value)
    except ValueError:
        raise ValueError(f"workload {spec!r}: {key}={value!r} is not a {kind}") from None


def _load_job_trace(name_or_path: str) -> JobTrace:
    """A job trace: elasim's job CSV (bundled name or path), or Pollux's raw Philly table."""
    from . import import_philly, load_trace

    path = Path(name_or_path).expanduser()
    if path.is_file():
        with path.open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline().strip()
        if first == _RAW_PHILLY_HEADER:
            return import_philly(path)
    trace = load_trace(name_or_path)
    if not isinstance(trace, JobTrace):
        raise TraceError("a capacity trace, not a job trace: nothing to map to jobs", name_or_path)
    return trace


def load_philly_workload(spec: str, applications: set[str] | None = None) -> list[WorkloadJob]:
    """The workload of a ``philly[...]`` spec (see :func:`parse_philly_spec`).

    Commands reach it through :func:`elasim.traces.workloads.load_workload`, which
    takes a workload CSV too.

    Raises:
        TraceError: a bad job trace (file, line, column).
        ValueError: a bad ``philly`` spec, or a mapped application that is not in
            ``applications``.
    """
    trace, mapping = parse_philly_spec(spec)
    jobs = map_job_trace(_load_job_trace(trace), mapping)
    used = {job.application for job in jobs}
    missing = sorted(used - applications) if applications is not None else []

    if missing:
        raise ValueError(
            f"workload {spec!r} maps jobs to {', '.join(missing)}, which has no profile here"
        )
    return jobs
