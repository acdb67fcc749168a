r"""The strict parser of the two canonical trace CSV formats.

Why a module of its own: reading a trace is the one place that knows the format's
rules, and it is long because every rule has its own one-line error; finding the
file (:mod:`.io`) and writing one (:mod:`.writer`) need none of it.

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

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from .cells import (
    _NUM_RE,
    CellError,
    _short,
    format_float,
    iter_lines,
    parse_float,
    parse_int,
    read_text,
    split_csv_line,
)
from .errors import TraceError
from .model import METADATA_KEYS, CapacityTrace, JobTrace, TraceMetadata

__all__ = ["CAPACITY_COLUMNS", "JOB_COLUMNS", "parse_trace_file"]

#: Canonical capacity-trace columns (the last one optional), in the written order.
CAPACITY_COLUMNS: tuple[str, ...] = ("time_s", "available", "price_per_hour")
#: Canonical job-trace columns (the last one optional), in the written order.
JOB_COLUMNS: tuple[str, ...] = ("submit_time_s", "duration_s", "num_gpus", "priority")
_CAPACITY_REQUIRED = CAPACITY_COLUMNS[:2]
_JOB_REQUIRED = JOB_COLUMNS[:3]

_META_RE = re.compile(r"#\s*([A-Za-z_][A-Za-z0-9_]*)\s*:(.*)\Z")


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


def parse_trace_file(path: Path, display: str, expected: str | None) -> CapacityTrace | JobTrace:
    """Parse the trace at ``path``, of the ``expected`` kind (``None``: either).

    Args:
        path: the file to read.
        display: how errors name the file (as the caller wrote it).
        expected: ``"capacity"``, ``"jobs"`` or ``None``.

    Raises:
        TraceError: anything wrong with the file, with ``path:line:column``.
    """
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
            f"{format_float(times[-1])} on line {prev_line}",
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
            f"time_s {format_float(times[-1])} (line {prev_line})",
            display,
            duration_meta.line,
        )
    return duration


def _check_submit_time(
    s: float, submit: list[float], cell: str, prev_line: int, where: tuple[str, int, int]
) -> None:
    """A job row's submit time: never negative, never before the row above.

    The job-trace counterpart of :func:`_check_row_time` (jobs may share a submit
    time).  ``submit`` are the earlier rows' times, ``cell`` the raw
    ``submit_time_s`` text (echoed in the message) and ``where`` the
    ``(path, line, column)`` of the cell.
    """
    text = cell.strip()
    if s < 0:
        raise TraceError(f"column 'submit_time_s': negative time {text}", *where)
    if submit and s < submit[-1]:
        raise TraceError(
            f"column 'submit_time_s': time goes backwards, {text} is before "
            f"{format_float(submit[-1])} on line {prev_line} (sort jobs by submit time)",
            *where,
        )


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
        _check_submit_time(s, submit, cells[idx_s], prev_line, (display, number, idx_s + 1))
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
