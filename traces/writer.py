"""Canonical text and atomic writes of capacity and job traces.

Why a module of its own: writing is the inverse of :mod:`.reader` but shares none of
its checks; it only has to produce text that the reader gives back bit for bit
(floats at ``repr`` precision, via :func:`.cells.format_float`) and replace a file
atomically.  The output depends only on the trace, so rebuilt bundled traces are
byte-identical.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from elasim.atomic import atomic_write_text as _atomic_write_text

from .cells import format_float
from .model import CapacityTrace, JobTrace, TraceMetadata

__all__ = [
    "format_capacity_trace",
    "format_job_trace",
    "write_capacity_trace",
    "write_job_trace",
    "write_trace",
]


def _metadata_lines(meta: TraceMetadata, always_gpus: bool) -> list[str]:
    out: list[str] = []
    if meta.instance_type is not None:
        out.append(f"# instance_type: {meta.instance_type}")
    if always_gpus or meta.gpus_per_node != 1:
        out.append(f"# gpus_per_node: {meta.gpus_per_node}")
    if meta.region is not None:
        out.append(f"# region: {meta.region}")
    if meta.on_demand_price_per_hour is not None:
        out.append(f"# on_demand_price_per_hour: {format_float(meta.on_demand_price_per_hour)}")
    if meta.source is not None:
        out.append(f"# source: {meta.source}")
    if meta.synthetic:
        out.append("# synthetic: true")
    return out


def format_capacity_trace(trace: CapacityTrace) -> str:
    """The canonical CSV text of a capacity trace (what the writer stores).

    Metadata first (``gpus_per_node`` and ``duration_s`` always, the others when
    set, then ``extra`` in order), then ``time_s,available[,price_per_hour]``.
    Floats are written with ``repr`` precision, so a load gives back the same
    bits; output depends only on the trace (bit-identical rebuilds).
    """
    lines = _metadata_lines(trace.metadata, always_gpus=True)
    lines.append(f"# duration_s: {format_float(trace.duration_s)}")
    lines.extend(f"# {k}: {v}" for k, v in trace.metadata.extra)
    times = [format_float(t) for t in trace.time_s.tolist()]
    avail = [str(a) for a in trace.available.tolist()]
    if trace.price_per_hour is None:
        lines.append("time_s,available")
        lines.extend(f"{t},{a}" for t, a in zip(times, avail, strict=True))
    else:
        lines.append("time_s,available,price_per_hour")
        prices = [format_float(p) for p in trace.price_per_hour.tolist()]
        lines.extend(f"{t},{a},{p}" for t, a, p in zip(times, avail, prices, strict=True))
    return "\n".join(lines) + "\n"


def format_job_trace(trace: JobTrace) -> str:
    """The canonical CSV text of a job trace.

    The ``priority`` column is written only when some priority is non-zero.
    """
    lines = _metadata_lines(trace.metadata, always_gpus=False)
    lines.extend(f"# {k}: {v}" for k, v in trace.metadata.extra)
    submit = [format_float(t) for t in trace.submit_time_s.tolist()]
    dur = [format_float(d) for d in trace.duration_s.tolist()]
    gpus = [str(g) for g in trace.num_gpus.tolist()]
    if np.any(trace.priority != 0):
        lines.append("submit_time_s,duration_s,num_gpus,priority")
        prio = [str(p) for p in trace.priority.tolist()]
        lines.extend(f"{s},{d},{g},{p}" for s, d, g, p in zip(submit, dur, gpus, prio, strict=True))
    else:
        lines.append("submit_time_s,duration_s,num_gpus")
        lines.extend(f"{s},{d},{g}" for s, d, g in zip(submit, dur, gpus, strict=True))
    return "\n".join(lines) + "\n"


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` so that ``path`` is either the old file or the complete new one.

    :func:`elasim.atomic.atomic_write_text` (temp file in the same directory, fsync,
    rename, fsync of the directory).  A new file gets ``0o666`` less the umask, a
    replaced file keeps its mode.  The directory must exist: a trace written into a
    mistyped folder is an error, not a new folder.
    """
    return _atomic_write_text(path, text, make_parents=False)


def write_capacity_trace(trace: CapacityTrace, path: str | Path) -> Path:
    """Write ``trace`` in the canonical capacity format, atomically; returns the path."""
    return atomic_write_text(path, format_capacity_trace(trace))


def write_job_trace(trace: JobTrace, path: str | Path) -> Path:
    """Write ``trace`` in the canonical job format, atomically; returns the path."""
    return atomic_write_text(path, format_job_trace(trace))


def write_trace(trace: CapacityTrace | JobTrace, path: str | Path) -> Path:
    """Write either kind of trace (dispatch on the type)."""
    if isinstance(trace, CapacityTrace):
        return write_capacity_trace(trace, path)
    if isinstance(trace, JobTrace):
        return write_job_trace(trace, path)
    raise TypeError(f"not a trace: {type(trace).__name__}")
