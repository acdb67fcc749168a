"""Cluster-scheduling inputs: workloads of arriving jobs and measured application profiles.

Two formats, both Pollux's (``petuum/adaptdl`` simulator, see ``traces/README.md``):

* A **workload** CSV, header ``name,time,application,num_replicas,batch_size``: one
  job per row, ``time`` its arrival (s), ``application`` the profile it runs, and the
  GPUs and global batch size the job asks for (rigid policies use them as they are).
* An **application profile**, a folder with ``placements.csv``
  (``placement,local_bsz,step_time,sync_time``), ``scalability.csv``
  (``num_nodes,num_replicas,local_bsz,step_time,sync_time``) and one
  ``validation-<B>.csv`` (``progress,iteration,metric,grad_sqr,grad_var``) per
  validated global batch size ``B``.

The parsers are strict and hand-written for the same reason as :mod:`.io`'s: every
complaint is a :class:`~.errors.TraceError` naming the file, the physical line and
the 1-based column.  They return plain frozen records (standard library only); the
performance model built on them lives in :mod:`elasim.cluster`.
"""

from __future__ import annotations

import importlib.resources
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .cells import CellError, iter_lines, parse_float, parse_int, read_text, split_csv_line
from .errors import TraceError

__all__ = [
    "PHILLY_PREFIX",
    "WORKLOAD_COLUMNS",
    "ApplicationProfile",
    "StepRow",
    "ValidationRow",
    "WorkloadJob",
    "bundled_application_names",
    "bundled_workload_names",
    "load_application",
    "read_workload_csv",
    "resolve_workload",
]

#: The spec of a job trace mapped to a workload: ``philly[:TRACE][:key=value...]``.
PHILLY_PREFIX = "philly"

WORKLOAD_COLUMNS: tuple[str, ...] = ("name", "time", "application", "num_replicas", "batch_size")
_PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
_SCALABILITY_COLUMNS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
_VALIDATION_COLUMNS = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
_VALIDATION_NAME = re.compile(r"^validation-(\d+)\.csv$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True)
class WorkloadJob:
    """One job of a workload.

    Attributes:
        name: unique job name.
        arrival_s: arrival time (s from the workload's start).
        application: the application profile it runs.
        requested_gpus: GPUs it asks for (``num_replicas``).
        requested_batch_size: global batch size it asks for.
    """

    name: str
    arrival_s: float
    application: str
    requested_gpus: int
    requested_batch_size: int


@dataclass(frozen=True)
class StepRow:
    """One measured step: ``step_s`` in all, of which ``sync_s`` synchronising gradients.

    Attributes:
        num_nodes: nodes used.
        num_replicas: GPUs used.
        local_bsz: per-GPU batch size.
        step_s: time of one optimizer step.
        sync_s: time of its gradient synchronisation.
        placement: GPUs per node when measured per placement (``()`` for scalability rows).
    """

    num_nodes: int
    num_replicas: int
    local_bsz: float
    step_s: float
    sync_s: float
    placement: tuple[int, ...] = ()


@dataclass(frozen=True)
class ValidationRow:
    """One epoch of a run at one global batch size.

    Attributes:
        progress: cumulative statistical-efficiency-weighted progress after the epoch.
        iteration: optimizer steps done.
        metric: the validation metric.
        grad_sqr: squared norm of the mean gradient during the epoch.
        grad_var: gradient variance during the epoch.
    """

    progress: float
    iteration: float
    metric: float
    grad_sqr: float
    grad_var: float


@dataclass(frozen=True)
class ApplicationProfile:
    """A parsed application profile (the raw measurements, no model).

    Attributes:
        name: the folder's name.
        placements: rows of ``placements.csv``.
        scalability: rows of ``scalability.csv``.
        validation: ``((batch_size, rows), ...)`` sorted by batch size.
        path: where it was loaded from.
    """

    name: str
    placements: tuple[StepRow, ...]
    scalability: tuple[StepRow, ...]
    validation: tuple[tuple[int, tuple[ValidationRow, ...]], ...]
    path: str = ""


def _rows(path: Path, display: str, columns: tuple[str, ...]) -> list[tuple[int, list[str]]]:
    """The data rows of a CSV with exactly ``columns`` (any order), reordered to them."""
    text = read_text(path, display)
    lines = [(n, line) for n, line in iter_lines(text) if line.strip()]
    if not lines:
        raise TraceError("empty file; expected a header " + ",".join(columns), display, 1)
    number, header_line = lines[0]
    header = [h.strip() for h in header_line.split(",")]
    for i, name in enumerate(header, start=1):
        if name not in columns:
            raise TraceError(
                f"unknown column {name!r}; expected {','.join(columns)}", display, number, i
            )
        if header.index(name) != i - 1:
            raise TraceError(f"column {name!r} appears twice", display, number, i)
    missing = [c for c in columns if c not in header]
    if missing:
        raise TraceError(f"missing column(s) {', '.join(missing)}", display, number)
    order = [header.index(c) for c in columns]
    out = []
    for number, line in lines[1:]:
        try:
            fields = split_csv_line(line)
        except CellError as exc:
            raise TraceError(str(exc), display, number) from None
        if len(fields) != len(header):
            raise TraceError(
                f"{len(fields)} fields, the header has {len(header)}",
                display,
                number,
                min(len(fields), len(header)) + 1,
            )
        out.append((number, [fields[i] for i in order]))
    return out


def _cell(
    parse: Callable[[str], float | int],
    fields: list[str],
    idx: int,
    where: tuple[str, int, list[int]],
    minimum: float | None = None,
    name: str = "",
) -> float:
    display, line, cols = where
    try:
        value = parse(fields[idx])
    except CellError as exc:
        raise TraceError(f"{name}: {exc}", display, line, cols[idx]) from None
    if minimum is not None and value < minimum:
        raise TraceError(f"{name}: must be >= {minimum:g}, got {value!r}", display, line, cols[idx])
    return value


def _header_columns(path: Path, display: str, columns: tuple[str, ...]) -> list[int]:
    """1-based positions of ``columns`` in the file's header (for messages)."""
    for _, line in iter_lines(read_text(path, display)):
        if line.strip():
            header = [h.strip() for h in line.split(",")]
            return [header.index(c) + 1 for c in columns]
    return list(range(1, len(columns) + 1))


def read_workload_csv(
    name_or_path: str | Path, applications: set[str] | None = None
) -> list[WorkloadJob]:
    """Parse a workload CSV (a bundled name such as ``pollux-workload-6``, or a path).

    Commands take a workload through :func:`elasim.traces.workloads.load_workload`,
    which also maps a job trace (``philly[...]``) to jobs.

    Args:
        name_or_path: the workload.
        applications: the application names it may use (None: any name).

    Returns:
        The jobs sorted by arrival (ties by name).

    Raises:
        TraceError: with file, line and column.
        ValueError: a bad ``philly`` spec.
    """
    path = resolve_workload(name_or_path)
    display = os.fspath(name_or_path)
    rows = _rows(path, display, WORKLOAD_COLUMNS)
    cols = _header_columns(path, display, WORKLOAD_COLUMNS)
    jobs: list[WorkloadJob] = []
    seen: set[str] = set()
    for line, fields in rows:
        where = (display, line, cols)
        name = fields[0].strip()
        if not _NAME.match(name):
            raise TraceError(f"name: {name!r} is not a job name", display, line, cols[0])
        if name in seen:
            raise TraceError(f"name: {name!r} appears twice", display, line, cols[0])
        seen.add(name)
        app = fields[2].strip()
        if applications is not None and app not in applications:
            known = ", ".join(sorted(applications))
            raise TraceError(
                f"application: unknown {app!r}; known: {known}", display, line, cols[2]
            )
        if not _NAME.match(app):
            raise TraceError(f"application: {app!r} is not a name", display, line, cols[2])
        jobs.append(
            WorkloadJob(
                name=name,
                arrival_s=float(_cell(parse_float, fields, 1, where, 0.0, "time")),
                application=app,
                requested_gpus=int(_cell(parse_int, fields, 3, where, 1, "num_replicas")),
                requested_batch_size=int(_cell(parse_int, fields, 4, where, 1, "batch_size")),
            )
        )
    if not jobs:
        raise TraceError("no jobs", display)
    return sorted(jobs, key=lambda j: (j.arrival_s, j.name))


def _step_rows(path: Path, display: str, placement: bool) -> tuple[StepRow, ...]:
    columns = _PLACEMENT_COLUMNS if placement else _SCALABILITY_COLUMNS
    rows = _rows(path, display, columns)
    cols = _header_columns(path, display, columns)
    out = []
    for line, fields in rows:
        where = (display, line, cols)
        if placement:
            digits = fields[0].strip()
            if not digits.isdigit() or "0" in digits:
                raise TraceError(
                    f"placement: {digits!r} is not a string of digits 1-9 (GPUs per node)",
                    display,
                    line,
                    cols[0],
                )
            shape = tuple(int(d) for d in digits)
            nodes, replicas, rest = len(shape), sum(shape), fields[1:]
        else:
            nodes = int(_cell(parse_int, fields, 0, where, 1, "num_nodes"))
            replicas = int(_cell(parse_int, fields, 1, where, nodes, "num_replicas"))
            shape, rest = (), fields[2:]
        off = len(fields) - len(rest)
        sub = (display, line, cols[off:])
        bsz = _cell(parse_float, rest, 0, sub, 1.0, "local_bsz")
        step = _cell(parse_float, rest, 1, sub, 0.0, "step_time")
        sync = _cell(parse_float, rest, 2, sub, 0.0, "sync_time")
        if step <= 0:
            raise TraceError("step_time: must be > 0", display, line, cols[off + 1])
        out.append(StepRow(nodes, replicas, bsz, step, sync, shape))
    if not out:
        raise TraceError("no rows", display)
    return tuple(out)


def _validation_rows(path: Path, display: str) -> tuple[ValidationRow, ...]:
    rows = _rows(path, display, _VALIDATION_COLUMNS)
    cols = _header_columns(path, display, _VALIDATION_COLUMNS)
    out = []
    last = 0.0
    for line, fields in rows:
        where = (display, line, cols)
        progress = _cell(parse_float, fields, 0, where, 0.0, "progress")
        if progress < last:
            raise TraceError("progress: decreases", display, line, cols[0])
        last = progress
        out.append(
            ValidationRow(
                progress=progress,
                iteration=_cell(parse_float, fields, 1, where, 0.0, "iteration"),
                metric=_cell(parse_float, fields, 2, where, None, "metric"),
                grad_sqr=_cell(parse_float, fields, 3, where, 0.0, "grad_sqr"),
                grad_var=_cell(parse_float, fields, 4, where, 0.0, "grad_var"),
            )
        )
    if not out:
        raise TraceError("no epochs", display)
    return tuple(out)


def load_application(name_or_path: str | Path) -> ApplicationProfile:
    """Parse an application profile folder (a bundled name such as ``cifar10``, or a path).

    Raises:
        TraceError: a missing file, or a bad cell with file, line and column.
    """
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if not path.is_dir():
        if text in bundled_application_names():
            path = Path(str(_cluster_dir() / "applications" / text))
        else:
            bundled = ", ".join(bundled_application_names())
            raise TraceError(
                f"no such application folder or bundled application; bundled: {bundled}", text
            )
    display = text.rstrip("/")
    placements = _step_rows(path / "placements.csv", f"{display}/placements.csv", True)
    scal_path = path / "scalability.csv"
    scalability = (
        _step_rows(scal_path, f"{display}/scalability.csv", False) if scal_path.exists() else ()
    )
    validation = []
    for entry in sorted(path.iterdir(), key=lambda p: p.name):
        match = _VALIDATION_NAME.match(entry.name)
        if match:
            batch = int(match.group(1))
            if batch < 1:
                raise TraceError(
                    "batch size in the file name must be >= 1", f"{display}/{entry.name}"
                )
            validation.append((batch, _validation_rows(entry, f"{display}/{entry.name}")))
    if not validation:
        raise TraceError("no validation-<batch>.csv files", display)
    validation.sort()
    return ApplicationProfile(path.name, placements, scalability, tuple(validation), str(path))


def _cluster_dir():
    return importlib.resources.files("elasim.traces") / "data" / "cluster"


def bundled_workload_names() -> list[str]:
    """Names of the bundled workloads (``pollux-workload-1`` ...), sorted."""
    try:
        entries = list((_cluster_dir() / "workloads").iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(e.name[:-4] for e in entries if e.name.endswith(".csv"))


def bundled_application_names() -> list[str]:
    """Names of the bundled application profiles, sorted."""
    try:
        entries = list((_cluster_dir() / "applications").iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(e.name for e in entries if e.is_dir())


def resolve_workload(name_or_path: str | Path) -> Path:
    """A bundled workload name (with or without ``.csv``) first, else a path.

    Raises:
        TraceError: nothing found; the message lists the bundled names.
    """
    text = os.fspath(name_or_path)
    stem = text[:-4] if text.endswith(".csv") else text
    if "/" not in text and stem in bundled_workload_names():
        return Path(str(_cluster_dir() / "workloads" / f"{stem}.csv"))
    path = Path(text).expanduser()
    if path.is_file():
        return path
    names = ", ".join(bundled_workload_names()) or "(none)"
    raise TraceError(f"no such workload file or bundled workload; bundled: {names}", text)
