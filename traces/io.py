"""Find and load traces: bundled names or paths, and the list of bundled traces.

The formats themselves, and every rule a file must keep, are in :mod:`.reader`;
writing a trace is :mod:`.writer`.  This module resolves what the user typed
(``spot_us_east.csv`` or a path) to a file and hands it to the reader, naming the
file in errors as the user wrote it.
"""

from __future__ import annotations

import importlib.resources
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import TraceError
from .model import CapacityTrace, JobTrace
from .reader import parse_trace_file

__all__ = [
    "BundledTraceInfo",
    "bundled_trace_names",
    "bundled_traces",
    "load_capacity_trace",
    "load_job_trace",
    "load_trace",
    "resolve_trace",
]

logger = logging.getLogger(__name__)


def _data_dir():
    return importlib.resources.files("elasim.traces") / "data"


def bundled_trace_names() -> list[str]:
    """File names of the traces shipped in ``elasim/traces/data`` (sorted)."""
    try:
        entries = list(_data_dir().iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(e.name for e in entries if e.name.endswith(".csv") and e.is_file())


def _is_bare_name(text: str) -> bool:
    seps = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return bool(text) and not any(s in text for s in seps) and text not in (".", "..")


def resolve_trace(name_or_path: str | Path) -> Path:
    """Find a trace file: a bundled name first, else a filesystem path.

    A bare name without any path separator (``spot_us_east.csv`` or
    ``spot_us_east``) that matches a bundled trace resolves to the packaged file,
    even if a file of that name exists in the working directory (write
    ``./spot_us_east.csv`` to mean the local one).  Anything else is a path.

    Raises:
        TraceError: nothing found; the message lists the bundled names.
    """
    text = os.fspath(name_or_path)
    if _is_bare_name(text):
        names = bundled_trace_names()
        candidate = text if text.endswith(".csv") else text + ".csv"
        if candidate in names:
            return Path(str(_data_dir() / candidate))
    path = Path(text).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        raise TraceError("is a directory, not a trace file", text)
    names = bundled_trace_names()
    raise TraceError(
        f"no such trace file or bundled trace; bundled: {', '.join(names) or '(none)'}", text
    )


def load_trace(name_or_path: str | Path) -> CapacityTrace | JobTrace:
    """Load a capacity or job trace, deciding the kind from the header row.

    ``name_or_path`` is resolved with :func:`resolve_trace`.  Errors name the file
    as the caller wrote it (``spot_us_east.csv``), not the resolved location.

    Raises:
        TraceError: anything wrong with the file, with ``path:line:column``.
    """
    path = resolve_trace(name_or_path)
    return parse_trace_file(path, _display(name_or_path, path), None)


def load_capacity_trace(name_or_path: str | Path) -> CapacityTrace:
    """Load a capacity trace; a job trace is a :class:`TraceError` at its header."""
    path = resolve_trace(name_or_path)
    trace = parse_trace_file(path, _display(name_or_path, path), "capacity")
    assert isinstance(trace, CapacityTrace)
    return trace


def capacity_rows(
    name_or_path: str | Path | None,
) -> tuple[tuple[tuple[float, int], ...] | None, float | None]:
    """A capacity trace as a cluster loop replays it: ``((time_s, available), ...)``, period.

    The rows repeat with the trace's duration, as the single-job replay does.  One
    reading for both shells of ``elasim cluster``: what the simulator replays is what
    real slots replay.  ``None`` (no trace): ``(None, None)``, every node always.

    Raises:
        TraceError: the trace is missing or malformed.
    """
    if name_or_path is None:
        return None, None
    trace = load_capacity_trace(name_or_path)
    rows = tuple(zip(trace.time_s.tolist(), trace.available.tolist(), strict=True))
    return rows, float(trace.duration_s)


def load_job_trace(name_or_path: str | Path) -> JobTrace:
    """Load a job trace; a capacity trace is a :class:`TraceError` at its header."""
    path = resolve_trace(name_or_path)
    trace = parse_trace_file(path, _display(name_or_path, path), "jobs")
    assert isinstance(trace, JobTrace)
    return trace


def _display(given: str | Path, resolved: Path) -> str:
    """Errors name the file as the caller wrote it (a bundled name stays short)."""
    del resolved
    return os.fspath(given)


# --------------------------------------------------------------------------- bundled
@dataclass(frozen=True)
class BundledTraceInfo:
    """One row of ``elasim traces list``.

    Attributes:
        name: File name to pass as ``--trace`` (``spot_us_east.csv``).
        kind: ``"capacity"`` or ``"jobs"``.
        rows: Data rows in the file.
        duration_h: Capacity: trace length.  Jobs: first to last submission.
        max_available: Capacity: most nodes offered; ``None`` for job traces.
        num_jobs: Jobs: number of jobs; ``None`` for capacity traces.
        source: The ``# source:`` line (provenance one-liner).
        path: Where the installed file lives.
    """

    name: str
    kind: str
    rows: int
    duration_h: float
    max_available: int | None
    num_jobs: int | None
    source: str | None
    path: Path

    @property
    def max_value(self) -> int:
        """The "max" column of a listing: most nodes (capacity) or number of jobs."""
        value = self.max_available if self.kind == "capacity" else self.num_jobs
        assert value is not None
        return value


def bundled_traces() -> list[BundledTraceInfo]:
    """Describe every bundled trace (loads each one; they are small)."""
    infos = []
    for name in bundled_trace_names():
        path = resolve_trace(name)
        trace = parse_trace_file(path, name, None)
        if isinstance(trace, CapacityTrace):
            infos.append(
                BundledTraceInfo(
                    name,
                    "capacity",
                    len(trace),
                    trace.duration_h,
                    trace.max_available,
                    None,
                    trace.metadata.source,
                    path,
                )
            )
        else:
            infos.append(
                BundledTraceInfo(
                    name,
                    "jobs",
                    len(trace),
                    trace.span_h,
                    None,
                    trace.num_jobs,
                    trace.metadata.source,
                    path,
                )
            )
    return infos
