r"""The strict parser of the two canonical trace CSV formats.

Why a module of its own: reading a trace is the one place that knows the format's
rules, and it is long because every rule has its own one-line error; finding the
file (:mod:`.io`) and writing one (:mod:`.writer`) need none of it.

The parser is written by hand on top of the ``csv`` module instead of
``pandas.read_csv`` because every complaint must name the physical file line and
the column, and pandas loses both (it skips comments and blank lines, coerces
``"nan"``, accepts ``1_000`` ...).  A clean file's data rows are read in bulk
(:mod:`.bulk`), and cell by cell only where that path cannot vouch for them, which is
where the error is worded.  The rules, also in ``traces/README.md``:

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

import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .bulk import bulk_columns
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

__all__ = ["CAPACITY_COLUMNS", "JOB_COLUMNS", "parse_trace_file", "parse_trace_text"]

#: Canonical capacity-trace columns (the last one optional), in the written order.
CAPACITY_COLUMNS: tuple[str, ...] = ("time_s", "available", "price_per_hour")
#: Canonical job-trace columns (the last one optional), in the written order.
JOB_COLUMNS: tuple[str, ...] = ("submit_time_s", "duration_s", "num_gpus", "priority")
_CAPACITY_REQUIRED = CAPACITY_COLUMNS[:2]
_JOB_REQUIRED = JOB_COLUMNS[:3]

#: ``(path, line, column)`` of a cell, as a TraceError takes them
Where = tuple[str, int, int]

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


def _parse_preamble(lines: Iterable[tuple[int, str]], path: str) -> tuple[list[_Meta], _Header]:
    """Metadata lines and the header, read from the file's first lines only."""
    metas: list[_Meta] = []
    seen: dict[str, int] = {}
    last = 0
    for number, line in lines:
        last = number
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
        return metas, _parse_header(number, line, path)
    if not metas:  # blank lines and free comments only, or nothing at all
        raise TraceError("empty file (expected '# key: value' metadata and a header row)", path)
    raise TraceError(  # reported at the end of the file, where the header is missing
        f"no header row after {len(metas)} metadata line(s); expected "
        f"'{','.join(CAPACITY_COLUMNS)}' or '{','.join(JOB_COLUMNS[:3])}'",
        path,
        last,
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
    lines: Iterable[tuple[int, str]], header: _Header, path: str
) -> Iterator[tuple[int, list[str]]]:
    """The data lines after the header, split into cells (blank lines skipped)."""
    width = len(header.columns)
    for number, line in lines:
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
    return parse_trace_text(read_text(path, display), path.stem, display, expected)


def parse_trace_text(
    text: str, name: str, display: str, expected: str | None
) -> CapacityTrace | JobTrace:
    """Parse a trace file's text (:func:`parse_trace_file`), the trace named ``name``.

    Why apart: one zone of a file with a zone column is that file's text with the
    other zones' rows blanked (:mod:`.zones`), so its errors name the user's file
    and its lines, as any trace's do.

    Raises:
        TraceError: anything wrong with the text, with ``display:line:column``.
    """
    metas, header = _parse_preamble(iter_lines(text), display)
    if expected is not None and header.kind != expected:
        raise TraceError(
            f"this is {_KIND_WORDS[header.kind]} (header {','.join(header.columns)!r}), "
            f"expected {_KIND_WORDS[expected]}",
            display,
            header.line,
        )
    metadata, duration_meta = _parse_metadata(metas, header.kind, display)
    if header.kind == "capacity":
        return _parse_capacity(text, header, metadata, duration_meta, name, display)
    return _parse_jobs(text, header, metadata, name, display)


# -- the data rows: one set of rules per column, read in bulk or cell by cell -----------

#: A row check: ``(value, earlier values of the column, the raw cell, the line of the
#: row above, (path, line, column))``; it raises the column's one-line TraceError.
RowCheck = Callable[[Any, list[Any], str, int, tuple[str, int, int]], None]


@dataclass(frozen=True)
class _Column:
    """One column's rules, stated twice: row by row (to word an error) and in bulk.

    Why both: the bulk check (:mod:`.bulk`) reads a clean file in one pass, and says
    only whether every row holds; the row check finds the first row that does not,
    and names it.  The two must accept the same values (``tests/test_traces_io.py``
    compares them).
    """

    name: str
    integer: bool
    check: RowCheck
    holds: Callable[[np.ndarray], bool]


def _check_available(a: int, _earlier: list[Any], _cell: str, _prev: int, where: Where) -> None:
    if a < 0:
        raise TraceError(f"column 'available': negative node count {a}", *where)


def _check_price(p: float, _earlier: list[Any], cell: str, _prev: int, where: Where) -> None:
    if p <= 0:
        raise TraceError(f"column 'price_per_hour': price must be > 0, got {cell.strip()}", *where)


def _check_duration(d: float, _earlier: list[Any], cell: str, _prev: int, where: Where) -> None:
    if d <= 0:
        raise TraceError(f"column 'duration_s': must be > 0, got {cell.strip()}", *where)


def _check_gpus(g: int, _earlier: list[Any], _cell: str, _prev: int, where: Where) -> None:
    if g < 1:
        raise TraceError(f"column 'num_gpus': must be >= 1, got {g}", *where)


def _check_nothing(*_args: Any) -> None:
    return None


def _check_row_time(t: float, times: list[float], cell: str, prev_line: int, where: Where) -> None:
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


def _check_submit_time(
    s: float, submit: list[float], cell: str, prev_line: int, where: Where
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


def _always(_values: np.ndarray) -> bool:
    return True


#: Every column's rules, in the order a row's cells are checked (the written order).
_COLUMNS: dict[str, tuple[_Column, ...]] = {
    "capacity": (
        _Column(
            "time_s",
            False,
            _check_row_time,
            lambda v: bool(v[0] == 0 and (np.diff(v) > 0).all()),
        ),
        _Column("available", True, _check_available, lambda v: bool((v >= 0).all())),
        _Column("price_per_hour", False, _check_price, lambda v: bool((v > 0).all())),
    ),
    "jobs": (
        _Column(
            "submit_time_s",
            False,
            _check_submit_time,
            lambda v: bool((v >= 0).all() and (np.diff(v) >= 0).all()),
        ),
        _Column("duration_s", False, _check_duration, lambda v: bool((v > 0).all())),
        _Column("num_gpus", True, _check_gpus, lambda v: bool((v >= 1).all())),
        _Column("priority", True, _check_nothing, _always),
    ),
}


def _read_columns(text: str, header: _Header, display: str) -> tuple[dict[str, np.ndarray], int]:
    """The header's columns as arrays, and the line of the last data row.

    A clean file is read in bulk (:func:`.bulk.bulk_columns`); anything the bulk
    reader does not vouch for (a bad cell, a broken rule, or only a layout it does
    not read: blank lines, spaces, quotes) is read again cell by cell, which raises
    the error at its line and column, or returns the same columns.
    """
    columns = [c for c in _COLUMNS[header.kind] if c.name in header.columns]
    where = [header.columns.index(c.name) for c in columns]
    bulk = bulk_columns(
        text,
        header.line,
        len(header.columns),
        [(i, c.integer, c.holds) for i, c in zip(where, columns, strict=True)],
    )
    if bulk is not None:
        arrays, rows = bulk
        return dict(zip((c.name for c in columns), arrays, strict=True)), header.line + rows
    values: list[list[Any]] = [[] for _ in columns]
    prev_line = 0
    lines = itertools.islice(iter_lines(text), header.line, None)
    for number, cells in _data_rows(lines, header, display):
        for column, index, out in zip(columns, where, values, strict=True):
            parse = parse_int if column.integer else parse_float
            value = _parse_cell(parse, cells, index, column.name, display, number)
            column.check(value, out, cells[index], prev_line, (display, number, index + 1))
            out.append(value)
        prev_line = number
    if not prev_line:
        raise TraceError("no data rows after the header", display, header.line)
    arrays = {
        c.name: np.asarray(v, dtype=np.int64 if c.integer else np.float64)
        for c, v in zip(columns, values, strict=True)
    }
    return arrays, prev_line


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
    text: str,
    header: _Header,
    metadata: TraceMetadata,
    duration_meta: _Meta | None,
    name: str,
    display: str,
) -> CapacityTrace:
    columns, last_line = _read_columns(text, header, display)
    times = columns["time_s"]
    duration = _capacity_duration(duration_meta, times, last_line, display)
    try:
        return CapacityTrace(
            name=name,
            time_s=times,
            available=columns["available"],
            price_per_hour=columns.get("price_per_hour"),
            metadata=metadata,
            duration_s=duration,  # type: ignore[arg-type]
        )
    except ValueError as exc:  # defensive: the checks above cover the model's rules
        raise TraceError(str(exc), display, header.line) from None


def _capacity_duration(
    duration_meta: _Meta | None, times: np.ndarray, last_line: int, display: str
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
                last_line,
            )
        return None
    duration = parse_float(duration_meta.value)
    if duration <= times[-1]:
        raise TraceError(
            f"metadata 'duration_s': {duration_meta.value} must be after the last row's "
            f"time_s {format_float(times[-1])} (line {last_line})",
            display,
            duration_meta.line,
        )
    return duration


def _parse_jobs(
    text: str, header: _Header, metadata: TraceMetadata, name: str, display: str
) -> JobTrace:
    columns, _ = _read_columns(text, header, display)
    try:
        return JobTrace(
            name=name,
            submit_time_s=columns["submit_time_s"],
            duration_s=columns["duration_s"],
            num_gpus=columns["num_gpus"],
            priority=columns.get("priority"),  # type: ignore[arg-type]
            metadata=metadata,
        )
    except ValueError as exc:  # defensive
        raise TraceError(str(exc), display, header.line) from None
