r"""Strict loaders and atomic writers for the two canonical trace CSV formats.

The parser is written by hand on top of the ``csv`` module instead of
``pandas.read_csv`` because every complaint must name the physical file line and
the column, and pandas loses both (it skips comments and blank lines, coerces
``"nan"``, accepts ``1_000`` ...).  The rules, also in ``traces/README.md``:

* The file is UTF-8 (a BOM is tolerated), lines end in ``\n`` or ``\r\n``.
* Leading lines ``# key: value`` are metadata (``key`` an identifier, each key at
  most once).  ``##`` lines and a bare ``#`` are free comments.  Blank lines are
  ignored anywhere.  Any other ``#`` line, or a ``#`` line after the header, is an
  error.
* The first other line is the header; its column names decide the kind of trace
  (capacity: ``time_s,available[,price_per_hour]``; jobs:
  ``submit_time_s,duration_s,num_gpus[,priority]``), in any order, each once.
* Numbers are plain decimal literals (``12``, ``-3.5``, ``1e3``); ``nan``, ``inf``,
  ``1_000``, hex and empty cells are errors.  Counts must be integral
  (``16.0`` is accepted as 16, ``16.5`` is not).
* Capacity traces start at ``time_s == 0`` (traces are relative; shift them
  before loading rather than having the loader guess) and strictly increase.
  Job traces are sorted by ``submit_time_s`` (ties allowed).

Every error is a :class:`~.errors.TraceError` whose ``line`` is the 1-based
physical line and whose ``column`` is the 1-based field index.
"""

from __future__ import annotations

import importlib.resources
import logging
import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from elasim.atomic import atomic_write_text as _atomic_write_text

from .cells import (
    _NUM_RE,
    CellError,
    _short,
    iter_lines,
    parse_float,
    parse_int,
    read_text,
    split_csv_line,
)
from .errors import TraceError
from .model import METADATA_KEYS, CapacityTrace, JobTrace, TraceMetadata

__all__ = [
    "BundledTraceInfo",
    "CAPACITY_COLUMNS",
    "JOB_COLUMNS",
    "bundled_trace_names",
    "bundled_traces",
    "format_capacity_trace",
    "format_job_trace",
    "load_capacity_trace",
    "load_job_trace",
    "load_trace",
    "resolve_trace",
    "write_capacity_trace",
    "write_job_trace",
    "write_trace",
]

logger = logging.getLogger(__name__)

#: Canonical capacity-trace columns (the last one optional), in the written order.
CAPACITY_COLUMNS: tuple[str, ...] = ("time_s", "available", "price_per_hour")
#: Canonical job-trace columns (the last one optional), in the written order.
JOB_COLUMNS: tuple[str, ...] = ("submit_time_s", "duration_s", "num_gpus", "priority")
_CAPACITY_REQUIRED = CAPACITY_COLUMNS[:2]
_JOB_REQUIRED = JOB_COLUMNS[:3]

_META_RE = re.compile(r"#\s*([A-Za-z_][A-Za-z0-9_]*)\s*:(.*)\Z")


# --------------------------------------------------------------------------- parsing
@dataclass
class _Meta:
    line: int
    key: str
    value: str


@dataclass
class _Header:
    line: int
    kind: str
    columns: list[str]


_KIND_WORDS = {"capacity": "a capacity trace", "jobs": "a job trace"}


def _parse_preamble(lines: list[tuple[int, str]], path: str) -> tuple[list[_Meta], _Header, int]:
    """Metadata lines and the header; returns the index of the first data line."""
    metas: list[_Meta] = []
    seen: dict[str, int] = {}
    for idx, (number, line) in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if stripped == "#" or stripped.startswith("##"):
                continue
            match = _META_RE.match(stripped)
            if match is None:
                raise TraceError(
                    f"malformed metadata line {_short(stripped)!r}; expected '# key: value' "
                    "(start free comments with '##')",
                    path,
                    number,
                )
            key, value = match.group(1), match.group(2).strip()
            if key in seen:
                raise TraceError(
                    f"duplicate metadata key {key!r} (first on line {seen[key]})", path, number
                )
            seen[key] = number
            metas.append(_Meta(number, key, value))
            continue
        return metas, _parse_header(number, line, path), idx + 1
    if not metas:
        raise TraceError("empty file (expected '# key: value' metadata and a header row)", path)
    raise TraceError(  # reported at the end of the file, where the header is missing
        f"no header row after {len(metas)} metadata line(s); expected "
        f"'{','.join(CAPACITY_COLUMNS)}' or '{','.join(JOB_COLUMNS[:3])}'",
        path,
        lines[-1][0],
    )


def _parse_header(number: int, line: str, path: str) -> _Header:
    try:
        columns = [c.strip() for c in split_csv_line(line)]
    except CellError as exc:
        raise TraceError(f"header: {exc}", path, number) from None
    names = set(columns)
    if names & {"time_s", "available", "price_per_hour"}:
        kind, required, known = "capacity", _CAPACITY_REQUIRED, CAPACITY_COLUMNS
    elif names & {"submit_time_s", "duration_s", "num_gpus", "priority"}:
        kind, required, known = "jobs", _JOB_REQUIRED, JOB_COLUMNS
    else:
        hint = ""
        if all(_NUM_RE.match(c) for c in columns if c):
            hint = " (the file seems to have no header row)"
        raise TraceError(
            f"unrecognised header {_short(line.strip())!r}{hint}; expected "
            f"'{','.join(CAPACITY_COLUMNS)}' (capacity, price optional) or "
            f"'{','.join(JOB_COLUMNS)}' (jobs, priority optional)",
            path,
            number,
        )
    first: dict[str, int] = {}
    for col, name in enumerate(columns, start=1):
        if not name:
            raise TraceError("empty column name in header", path, number, col)
        if name in first:
            raise TraceError(
                f"duplicate column {name!r} (also column {first[name]})", path, number, col
            )
        if name not in known:
            raise TraceError(
                f"unknown column {_short(name)!r} for {_KIND_WORDS[kind]}; "
                f"allowed: {', '.join(known)}",
                path,
                number,
                col,
            )
        first[name] = col
    missing = [c for c in required if c not in first]
    if missing:
        raise TraceError(
            f"missing column(s) {', '.join(missing)} for {_KIND_WORDS[kind]}; "
            f"expected '{','.join(known)}'",
            path,
            number,
        )
    return _Header(number, kind, columns)


def _parse_metadata(metas: list[_Meta], kind: str, path: str) -> tuple[TraceMetadata, _Meta | None]:
    """Known keys are typed and checked; others go to ``extra`` verbatim."""
    fields: dict[str, object] = {}
    extra: list[tuple[str, str]] = []
    duration: _Meta | None = None
    for meta in metas:
        key, value = meta.key, meta.value

        def fail(msg: str, meta: _Meta = meta) -> TraceError:
            return TraceError(f"metadata {meta.key!r}: {msg}", path, meta.line)

        if not value:
            raise fail("empty value")
        try:
            if key in ("instance_type", "region", "source"):
                fields[key] = value
            elif key == "gpus_per_node":
                gpus = parse_int(value)
                if gpus < 1:
                    raise CellError(f"must be a positive integer, got {gpus}")
                fields[key] = gpus
            elif key == "on_demand_price_per_hour":
                price = parse_float(value)
                if price <= 0:
                    raise CellError(f"must be > 0, got {value}")
                fields[key] = price
            elif key == "synthetic":
                if value.lower() not in ("true", "false"):
                    raise CellError(f"must be true or false, got {_short(value)!r}")
                fields[key] = value.lower() == "true"
            elif key == "duration_s":
                if kind != "capacity":
                    raise CellError("only capacity traces have a duration_s")
                if parse_float(value) <= 0:
                    raise CellError(f"must be > 0, got {value}")
                duration = meta
            else:
                extra.append((key, value))
        except CellError as exc:
            raise fail(str(exc)) from None
    assert set(fields) <= set(METADATA_KEYS)
    try:
        metadata = TraceMetadata(**fields, extra=tuple(extra))  # type: ignore[arg-type]
    except ValueError as exc:  # defensive: every field was checked above
        raise TraceError(f"metadata: {exc}", path, metas[0].line if metas else None) from None
    return metadata, duration


def _data_rows(
    lines: list[tuple[int, str]], start: int, header: _Header, path: str
) -> Iterator[tuple[int, list[str]]]:
    width = len(header.columns)
    for number, line in lines[start:]:
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            raise TraceError("metadata/comment lines must come before the header row", path, number)
        try:
            cells = split_csv_line(line)
        except CellError as exc:
            raise TraceError(str(exc), path, number) from None
        if len(cells) != width:
            col = min(len(cells), width) + 1
            raise TraceError(
                f"expected {width} fields ({','.join(header.columns)}), got {len(cells)}",
                path,
                number,
                col,
            )
        yield number, cells


def _parse(path: Path, display: str, expected: str | None) -> CapacityTrace | JobTrace:
    text = read_text(path, display)
    lines = list(iter_lines(text))
    if not any(line.strip() for _, line in lines):
        raise TraceError("empty file (expected '# key: value' metadata and a header row)", display)
    metas, header, start = _parse_preamble(lines, display)
    if expected is not None and header.kind != expected:
        raise TraceError(
            f"this is {_KIND_WORDS[header.kind]} (header {','.join(header.columns)!r}), "
            f"expected {_KIND_WORDS[expected]}",
            display,
            header.line,
        )
    metadata, duration_meta = _parse_metadata(metas, header.kind, display)
    if header.kind == "capacity":
        return _parse_capacity(lines, start, header, metadata, duration_meta, path, display)
    return _parse_jobs(lines, start, header, metadata, path, display)


_V = TypeVar("_V")


def _parse_cell(
    parse: Callable[[str], _V], cells: list[str], index: int, name: str, path: str, line: int
) -> _V:
    """Parse one cell; a bad value becomes a TraceError at its line and (1-based) column."""
    try:
        return parse(cells[index])
    except CellError as exc:
        raise TraceError(f"column {name!r}: {exc}", path, line, index + 1) from None


def _parse_capacity(
    lines: list[tuple[int, str]],
    start: int,
    header: _Header,
    metadata: TraceMetadata,
    duration_meta: _Meta | None,
    path: Path,
    display: str,
) -> CapacityTrace:
    idx_t = header.columns.index("time_s")
    idx_a = header.columns.index("available")
    idx_p = header.columns.index("price_per_hour") if "price_per_hour" in header.columns else -1
    times: list[float] = []
    avail: list[int] = []
    prices: list[float] = []
    prev_line = 0
    for number, cells in _data_rows(lines, start, header, display):
        t = _parse_cell(parse_float, cells, idx_t, "time_s", display, number)
        _check_row_time(t, times, cells[idx_t], prev_line, (display, number, idx_t + 1))
        a = _parse_cell(parse_int, cells, idx_a, "available", display, number)
        if a < 0:
            raise TraceError(
                f"column 'available': negative node count {a}", display, number, idx_a + 1
            )
        if idx_p >= 0:
            p = _parse_cell(parse_float, cells, idx_p, "price_per_hour", display, number)
            if p <= 0:
                raise TraceError(
                    f"column 'price_per_hour': price must be > 0, got {cells[idx_p].strip()}",
                    display,
                    number,
                    idx_p + 1,
                )
            prices.append(p)
        times.append(t)
        avail.append(a)
        prev_line = number
    if not times:
        raise TraceError("no data rows after the header", display, header.line)
    duration = _capacity_duration(duration_meta, times, prev_line, display)
    try:
        return CapacityTrace(
            name=path.stem,
            time_s=np.asarray(times, dtype=np.float64),
            available=np.asarray(avail, dtype=np.int64),
            price_per_hour=np.asarray(prices, dtype=np.float64) if idx_p >= 0 else None,
            metadata=metadata,
            duration_s=duration,  # type: ignore[arg-type]
        )
    except ValueError as exc:  # defensive: the checks above cover the model's rules
        raise TraceError(str(exc), display, header.line) from None


def _check_row_time(
    t: float, times: list[float], cell: str, prev_line: int, where: tuple[str, int, int]
) -> None:
    """A capacity row's time: 0 on the first row, then strictly increasing.

    ``times`` are the earlier rows' times, ``cell`` the raw ``time_s`` text (echoed in
    the message) and ``where`` the ``(path, line, column)`` of the cell.
    """
    text = cell.strip()
    if not times:
        if t != 0:
            raise TraceError(
                f"column 'time_s': the first row must be at time 0 (traces are relative; "
                f"shift the times), got {text}",
                *where,
            )
    elif t == times[-1]:
        raise TraceError(
            f"column 'time_s': duplicate time {text} (also on line {prev_line})", *where
        )
    elif t < times[-1]:
        raise TraceError(
            f"column 'time_s': time goes backwards, {text} is before "
            f"{_fmt_float(times[-1])} on line {prev_line}",
            *where,
        )


def _capacity_duration(
    duration_meta: _Meta | None, times: list[float], prev_line: int, display: str
) -> float | None:
    """The ``# duration_s`` of a capacity trace, checked against its rows.

    ``None`` lets the model derive it (last row plus the median gap), which needs at
    least two rows.
    """
    if duration_meta is None:
        if len(times) == 1:
            raise TraceError(
                "a one-row capacity trace needs a '# duration_s: N' metadata line",
                display,
                prev_line,
            )
        return None
    duration = parse_float(duration_meta.value)
    if duration <= times[-1]:
        raise TraceError(
            f"metadata 'duration_s': {duration_meta.value} must be after the last row's "
            f"time_s {_fmt_float(times[-1])} (line {prev_line})",
            display,
            duration_meta.line,
        )
    return duration


def _parse_jobs(
    lines: list[tuple[int, str]],
    start: int,
    header: _Header,
    metadata: TraceMetadata,
    path: Path,
    display: str,
) -> JobTrace:
    cols = header.columns
    idx_s, idx_d, idx_g = (cols.index(c) for c in _JOB_REQUIRED)
    idx_p = cols.index("priority") if "priority" in cols else -1
    submit: list[float] = []
    dur: list[float] = []
    gpus: list[int] = []
    prio: list[int] = []
    prev_line = 0
    for number, cells in _data_rows(lines, start, header, display):
        s = _parse_cell(parse_float, cells, idx_s, "submit_time_s", display, number)
        if s < 0:
            raise TraceError(
                f"column 'submit_time_s': negative time {cells[idx_s].strip()}",
                display,
                number,
                idx_s + 1,
            )
        if submit and s < submit[-1]:
            raise TraceError(
                f"column 'submit_time_s': time goes backwards, {cells[idx_s].strip()} is before "
                f"{_fmt_float(submit[-1])} on line {prev_line} (sort jobs by submit time)",
                display,
                number,
                idx_s + 1,
            )
        d = _parse_cell(parse_float, cells, idx_d, "duration_s", display, number)
        if d <= 0:
            raise TraceError(
                f"column 'duration_s': must be > 0, got {cells[idx_d].strip()}",
                display,
                number,
                idx_d + 1,
            )
        g = _parse_cell(parse_int, cells, idx_g, "num_gpus", display, number)
        if g < 1:
            raise TraceError(
                f"column 'num_gpus': must be >= 1, got {g}", display, number, idx_g + 1
            )
        if idx_p >= 0:
            prio.append(_parse_cell(parse_int, cells, idx_p, "priority", display, number))
        submit.append(s)
        dur.append(d)
        gpus.append(g)
        prev_line = number
    if not submit:
        raise TraceError("no data rows after the header", display, header.line)
    try:
        return JobTrace(
            name=path.stem,
            submit_time_s=np.asarray(submit, dtype=np.float64),
            duration_s=np.asarray(dur, dtype=np.float64),
            num_gpus=np.asarray(gpus, dtype=np.int64),
            priority=np.asarray(prio, dtype=np.int64) if idx_p >= 0 else None,  # type: ignore[arg-type]
            metadata=metadata,
        )
    except ValueError as exc:  # defensive
        raise TraceError(str(exc), display, header.line) from None


# --------------------------------------------------------------------------- public loaders
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
    return _parse(path, _display(name_or_path, path), None)


def load_capacity_trace(name_or_path: str | Path) -> CapacityTrace:
    """Load a capacity trace; a job trace is a :class:`TraceError` at its header."""
    path = resolve_trace(name_or_path)
    trace = _parse(path, _display(name_or_path, path), "capacity")
    assert isinstance(trace, CapacityTrace)
    return trace


def load_job_trace(name_or_path: str | Path) -> JobTrace:
    """Load a job trace; a capacity trace is a :class:`TraceError` at its header."""
    path = resolve_trace(name_or_path)
    trace = _parse(path, _display(name_or_path, path), "jobs")
    assert isinstance(trace, JobTrace)
    return trace


def _display(given: str | Path, resolved: Path) -> str:
    """Errors name the file as the caller wrote it (a bundled name stays short)."""
    del resolved
    return os.fspath(given)


# --------------------------------------------------------------------------- writing
def _fmt_float(value: float) -> str:
    """Shortest text that parses back to exactly ``value``; integral values as ints."""
    v = float(value)
    if v == math.floor(v) and abs(v) < 1e16:
        return str(int(v))
    return repr(v)


def _metadata_lines(meta: TraceMetadata, always_gpus: bool) -> list[str]:
    out: list[str] = []
    if meta.instance_type is not None:
        out.append(f"# instance_type: {meta.instance_type}")
    if always_gpus or meta.gpus_per_node != 1:
        out.append(f"# gpus_per_node: {meta.gpus_per_node}")
    if meta.region is not None:
        out.append(f"# region: {meta.region}")
    if meta.on_demand_price_per_hour is not None:
        out.append(f"# on_demand_price_per_hour: {_fmt_float(meta.on_demand_price_per_hour)}")
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
    lines.append(f"# duration_s: {_fmt_float(trace.duration_s)}")
    lines.extend(f"# {k}: {v}" for k, v in trace.metadata.extra)
    times = [_fmt_float(t) for t in trace.time_s.tolist()]
    avail = [str(a) for a in trace.available.tolist()]
    if trace.price_per_hour is None:
        lines.append("time_s,available")
        lines.extend(f"{t},{a}" for t, a in zip(times, avail, strict=True))
    else:
        lines.append("time_s,available,price_per_hour")
        prices = [_fmt_float(p) for p in trace.price_per_hour.tolist()]
        lines.extend(f"{t},{a},{p}" for t, a, p in zip(times, avail, prices, strict=True))
    return "\n".join(lines) + "\n"


def format_job_trace(trace: JobTrace) -> str:
    """The canonical CSV text of a job trace.

    The ``priority`` column is written only when some priority is non-zero.
    """
    lines = _metadata_lines(trace.metadata, always_gpus=False)
    lines.extend(f"# {k}: {v}" for k, v in trace.metadata.extra)
    submit = [_fmt_float(t) for t in trace.submit_time_s.tolist()]
    dur = [_fmt_float(d) for d in trace.duration_s.tolist()]
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
        trace = _parse(path, name, None)
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
