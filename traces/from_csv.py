"""Import any CSV as a capacity or job trace by naming its columns (``--format csv --map``).

A mapping says which column of the input holds which field of elasim's trace:
``time=2,fail=3`` or ``submit=submitted,duration=runtime,gpus=gpus``.  A column is a
header name, or a 1-based index (all digits) for files without a header.

Capacity fields: ``time`` (required), then either ``available`` (node counts) or
``fail`` (failure flags: ``1`` = not obtainable, anything else = ``nodes`` nodes
obtainable), and optionally ``price`` (USD per node-hour).  Job fields: ``submit``
(required), ``duration`` or ``end``, ``gpus`` (fractional GPUs are rounded up, and
how many were is logged and kept as ``gpus_rounded_up`` metadata) and optionally
``priority``.

Times are seconds (``time_unit`` scales plain numbers: ``s``, ``ms``, ``min``,
``h``) or ISO 8601 timestamps (naive ones are UTC); trace time 0 is the first row,
or ``start``.  A capacity trace lasts until its last row plus the median gap between
rows unless ``duration_s`` says otherwise.  Rows must come in time order; lines
starting with ``#`` and blank lines are skipped.

Every bad cell is a :class:`~.errors.TraceError` naming the file, the line and the
column (its 1-based index), and the CLI exits 2.  ``where`` keeps only the rows that
match (``gpu>0``), and ``skip_invalid`` leaves out the rows that fail those checks
instead of stopping at the first; either way the trace records how many rows were
left out and why (:mod:`.csv_rows`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .cells import CellError, iter_lines, parse_float, read_text, split_csv_line
from .csv_rows import LEFT_OUT_KEY, left_out_text, parse_where, select, timestamp, valid
from .errors import TraceError
from .import_common import PathLike, _compress, _node_metadata, _single_path
from .model import CapacityTrace, JobTrace

__all__ = ["CAPACITY_FIELDS", "JOB_FIELDS", "PRESETS", "import_csv"]

logger = logging.getLogger(__name__)

CAPACITY_FIELDS = ("time", "available", "fail", "price")
JOB_FIELDS = ("submit", "duration", "end", "gpus", "priority")
_UNITS = {"s": 1.0, "ms": 1e-3, "min": 60.0, "h": 3600.0}

#: Named mappings for known raw formats (``--format`` values that mean ``csv``).
PRESETS: dict[str, dict[str, str]] = {
    # Can't Be Late's raw probe logs: ``idx,ISO-time,fail`` without a header, one
    # probe of one node every ~600 s (Michaelvll/skypilot-spot-strategy)
    "skypilot-raw": {"map": "time=2,fail=3", "header": "false"},
}


@dataclass(frozen=True)
class _Table:
    """The input's data rows: (line number, cells), and the header's names."""

    rows: list[tuple[int, list[str]]]
    names: dict[str, int]


@dataclass(frozen=True)
class _RowChoice:
    """Which rows :func:`import_csv` keeps (its ``where`` and ``skip_invalid`` options).

    Attributes:
        where: ``COLUMN OP VALUE`` clauses that must all hold (:mod:`.csv_rows`).
        skip_invalid: leave out rows that fail validation rather than stop there.
    """

    where: tuple[str, ...] = ()
    skip_invalid: bool = False


def _parse_map(text: Any) -> dict[str, str]:
    items = text if isinstance(text, (tuple, list)) else str(text).split(",")
    mapping: dict[str, str] = {}
    for item in items:
        field, sep, column = str(item).partition("=")
        field, column = field.strip(), column.strip()
        if not sep or not field or not column:
            raise TraceError(f"csv option map: expected field=column, got {item!r}")
        if field not in CAPACITY_FIELDS + JOB_FIELDS:
            known = ", ".join(CAPACITY_FIELDS + JOB_FIELDS)
            raise TraceError(f"csv option map: unknown field {field!r}; known: {known}")
        if field in mapping:
            raise TraceError(f"csv option map: field {field!r} mapped twice")
        mapping[field] = column
    return mapping


def _read_table(path: Path, text: str, header: bool) -> _Table:
    rows: list[tuple[int, list[str]]] = []
    names: dict[str, int] = {}
    for number, line in iter_lines(text):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            cells = [c.strip() for c in split_csv_line(line)]
        except CellError as exc:
            raise TraceError(str(exc), path, number) from None
        if header and not names and not rows:
            names = {name: i for i, name in enumerate(cells)}
            continue
        rows.append((number, cells))
    if not rows:
        raise TraceError("no data rows", path)
    return _Table(rows, names)


def _column_index(column: str, table: _Table, path: Path) -> int:
    if column.isdigit():
        index = int(column) - 1
        if index < 0:
            raise TraceError(f"csv option map: columns count from 1, got {column}", path)
        return index
    if column not in table.names:
        shown = ", ".join(table.names) or "(no header: use --opt header=true or 1-based indexes)"
        raise TraceError(f"no column named {column!r}; the header has: {shown}", path, 1)
    return table.names[column]


def _cells(table: _Table, index: int, path: Path) -> list[tuple[int, str]]:
    out = []
    for number, cells in table.rows:
        if index >= len(cells):
            raise TraceError(f"row has {len(cells)} columns, needs {index + 1}", path, number)
        out.append((number, cells[index]))
    return out


def _label(field: str, mapping: dict[str, str]) -> str:
    """A field as errors name it: with the user's column (``submit (column start_s)``).

    Why: the user wrote the column, not the field; naming only ``time`` for a
    ``submit=start_s`` mapping sent them looking for a column that is not there.
    """
    return f"{field} (column {mapping[field]})"


def _absolute_times(
    cells: list[tuple[int, str]], column: int, unit: str, path: Path, label: str
) -> tuple[np.ndarray, bool]:
    """Each cell as seconds (numbers times ``unit``, or POSIX seconds of a timestamp)."""
    scale = _UNITS.get(unit)
    if scale is None:
        raise TraceError(f"csv option time_unit: expected one of {', '.join(_UNITS)}, got {unit!r}")
    values = np.empty(len(cells))
    iso = False
    for i, (number, text) in enumerate(cells):
        try:
            values[i] = parse_float(text) * scale
            continue
        except CellError:
            stamp = timestamp(text)
        if stamp is None:
            raise TraceError(
                f"{label}: neither a number nor an ISO 8601 timestamp: {text!r}",
                path,
                number,
                column + 1,
            )
        values[i], iso = stamp, True
    return values, iso


def _relative(
    values: np.ndarray, iso: bool, start: Any, cells: list[tuple[int, str]], column: int, path: Path
) -> np.ndarray:
    """Seconds since trace time 0 (the first row, or ``start``), checked for order."""
    if start is None:
        origin: float | None = float(values[0])
    elif iso:
        origin = timestamp(str(start))
    else:
        try:
            origin = parse_float(str(start))
        except CellError:
            origin = None
    if origin is None:
        raise TraceError(f"csv option start: not a time like the column's: {start!r}")
    out = values - origin
    for i in range(1, len(out)):
        if out[i] < out[i - 1]:
            raise TraceError(
                "time goes backwards: rows must be in time order", path, cells[i][0], column + 1
            )
    return out


def _numbers(cells: list[tuple[int, str]], column: int, field: str, path: Path) -> np.ndarray:
    values = np.empty(len(cells))
    for i, (number, text) in enumerate(cells):
        try:
            values[i] = parse_float(text)
        except CellError as exc:
            raise TraceError(f"{field}: {exc}", path, number, column + 1) from None
    return values


def _counts(cells: list[tuple[int, str]], column: int, field: str, path: Path) -> np.ndarray:
    values = _numbers(cells, column, field, path)
    for (number, _), value in zip(cells, values, strict=True):
        if value < 0 or value != math.floor(value):
            raise TraceError(f"{field}: not a node count: {value:g}", path, number, column + 1)
    return values.astype(np.int64)


def _duration_s(times: np.ndarray, given: float | None) -> float:
    if given is not None:
        return float(given)
    gaps = np.diff(times)
    gaps = gaps[gaps > 0]
    return float(times[-1] + (np.median(gaps) if gaps.size else 1.0))


def import_csv(
    in_path: PathLike,
    *,
    map: Any = None,  # noqa: A002 - the option is called map on the command line
    header: bool | None = None,
    time_unit: str = "s",
    start: Any = None,
    nodes: int | None = 1,
    duration_s: float | None = None,
    name: str | None = None,
    instance_type: str | None = None,
    region: str | None = None,
    gpus_per_node: int | None = 1,
    on_demand_price_per_hour: float | None = None,
    source: str | None = None,
    where: Any = None,
    skip_invalid: bool | None = False,
) -> CapacityTrace | JobTrace:
    """Import a CSV whose columns ``map`` names (see the module docstring)."""
    path = _single_path(in_path, "csv")
    text = read_text(path)
    if map is None:
        raise TraceError(
            "format csv needs a column mapping: --map time=COL,available=COL ...", path
        )
    mapping = _parse_map(map)
    by_name = any(not column.isdigit() for column in mapping.values())
    table = _read_table(path, text, by_name if header is None else header)
    index = {field: _column_index(column, table, path) for field, column in mapping.items()}
    clauses = (where,) if isinstance(where, str) else tuple(where or ())
    table, left_out = _chosen(path, table, mapping, index, _RowChoice(clauses, bool(skip_invalid)))
    column = {field: _cells(table, i, path) for field, i in index.items()}
    if "submit" in mapping:
        return _jobs(path, mapping, index, column, (time_unit, start), (name, source), left_out)
    if "time" not in mapping:
        raise TraceError("csv option map: a capacity trace needs time=COL, a job trace submit=COL")
    meta = {
        "instance_type": instance_type,
        "region": region,
        "gpus_per_node": gpus_per_node,
        "on_demand_price_per_hour": on_demand_price_per_hour,
    }
    options = _CapacityOptions(time_unit, start, nodes, duration_s, name, source)
    return _capacity(path, mapping, index, column, options, {**meta, "extra": left_out})


def _chosen(
    path: Path,
    table: _Table,
    mapping: dict[str, str],
    index: dict[str, int],
    choice: _RowChoice,
) -> tuple[_Table, tuple[tuple[str, str], ...]]:
    """The table without the rows ``choice`` leaves out, and the metadata saying which.

    Why before any column is read: a left-out row must not stop the import, and the
    counts are per reason so that the written trace states what it is a subset of.
    """
    clauses = tuple(parse_where(text) for text in choice.where)
    rows, dropped = select(table.rows, clauses, lambda c: _column_index(c, table, path))
    if choice.skip_invalid:
        rows, invalid = valid(rows, mapping, index)
        dropped.update(invalid)
    if not rows:
        raise TraceError(f"no data rows left ({left_out_text(dropped)})", path)
    text = left_out_text(dropped)
    if text is not None:
        logger.info("%s: left out rows: %s", path, text)
    extra = () if text is None else ((LEFT_OUT_KEY, text),)
    return _Table(rows, table.names), extra


@dataclass(frozen=True)
class _CapacityOptions:
    """The options of :func:`import_csv` that shape a capacity trace's rows.

    Attributes:
        time_unit: the unit of plain-number times (a key of ``_UNITS``).
        start: trace time 0 (a number or timestamp like the column's), or None.
        nodes: nodes obtainable when a ``fail`` flag is not 1 (None: 1).
        duration_s: the trace's length, or None for last row plus the median gap.
        name: the trace's name, or None for the file's stem.
        source: the ``source`` metadata, or None to describe the file and mapping.
    """

    time_unit: str
    start: Any
    nodes: int | None
    duration_s: float | None
    name: str | None
    source: str | None


def _capacity(
    path: Path,
    mapping: dict[str, str],
    index: dict[str, int],
    column: dict[str, list[tuple[int, str]]],
    options: _CapacityOptions,
    meta: dict[str, Any],
) -> CapacityTrace:
    """The capacity-trace half of :func:`import_csv`."""
    times, first = _capacity_times(path, index, column, options, _label("time", mapping))
    if ("available" in mapping) == ("fail" in mapping):
        raise TraceError("csv option map: give exactly one of available=COL and fail=COL")
    if "available" in mapping:
        available = _counts(
            column["available"], index["available"], _label("available", mapping), path
        )
    else:
        flags = _numbers(column["fail"], index["fail"], _label("fail", mapping), path)
        nodes = 1 if options.nodes is None else options.nodes
        available = np.where(flags == 1, 0, nodes).astype(np.int64)
    available = available[first:]
    price = None
    if "price" in mapping:
        price = _numbers(column["price"], index["price"], _label("price", mapping), path)[first:]
    length = _duration_s(times, options.duration_s)
    t, a, p = _compress(times, available, price)
    metadata = _node_metadata(**meta, source=_source(path, mapping, options.source))
    try:
        return CapacityTrace(
            name=options.name or path.stem,
            time_s=t,
            available=a,
            price_per_hour=p,
            metadata=metadata,
            duration_s=length,
        )
    except ValueError as exc:
        raise TraceError(str(exc), path) from None


def _capacity_times(
    path: Path,
    index: dict[str, int],
    column: dict[str, list[tuple[int, str]]],
    options: _CapacityOptions,
    label: str,
) -> tuple[np.ndarray, int]:
    """Row times from trace time 0, and the index of the first row kept.

    Why its own step: a ``start`` inside the file drops the rows before it, except
    the one in force at the start, which moves to time 0; every other column is cut
    at the same row.
    """
    raw, iso = _absolute_times(column["time"], index["time"], options.time_unit, path, label)
    times = _relative(raw, iso, options.start, column["time"], index["time"], path)
    if times[0] > 0:
        raise TraceError(
            "the start option is before the first row: nothing is known about that time",
            path,
            column["time"][0][0],
            index["time"] + 1,
        )
    first = int(np.flatnonzero(times <= 0)[-1])  # the row in force at the start
    return np.maximum(times[first:], 0.0), first


def _source(path: Path, mapping: dict[str, str], source: str | None) -> str:
    """The ``source`` metadata: as given, or the file and the mapping it was read with."""
    described = ",".join(f"{k}={v}" for k, v in mapping.items())
    return source or f"{path.name} (csv, map {described})"


def _jobs(
    path: Path,
    mapping: dict[str, str],
    index: dict[str, int],
    column: dict[str, list[tuple[int, str]]],
    clock: tuple[str, Any],
    naming: tuple[str | None, str | None],
    left_out: tuple[tuple[str, str], ...],
) -> JobTrace:
    """The job-trace half of :func:`import_csv`.

    ``clock`` is ``(time_unit, start)``, ``naming`` ``(name, source)`` and ``left_out``
    the metadata lines of the rows left out (:func:`_chosen`).
    """
    (time_unit, start), (name, source) = clock, naming
    if ("duration" in mapping) == ("end" in mapping) or "gpus" not in mapping:
        raise TraceError("csv option map: a job trace needs submit, gpus and one of duration, end")
    submit, duration = _job_times(path, mapping, index, column, time_unit, start)
    kept = submit >= 0  # jobs submitted before the start option are left out
    if not kept.any():
        raise TraceError("no job is submitted at or after the start option", path)
    column = {
        field: [c for c, keep in zip(cells, kept, strict=True) if keep]
        for field, cells in column.items()
    }
    submit, duration = submit[kept], duration[kept]
    where = index["duration"] if "duration" in index else index["end"]
    for (number, _), value in zip(column["submit"], duration, strict=True):
        if not value > 0:
            raise TraceError(f"job runs {value:g} s: duration must be > 0", path, number, where + 1)
    gpus, rounded = _whole_gpus(column["gpus"], index["gpus"], path, _label("gpus", mapping))
    priority = None
    if "priority" in mapping:
        priority = _counts(column["priority"], index["priority"], _label("priority", mapping), path)
    extra = left_out
    if rounded:
        logger.warning("%s: rounded %d fractional GPU counts up to whole GPUs", path, rounded)
        extra = (*extra, ("gpus_rounded_up", str(rounded)))
    metadata = _node_metadata(
        instance_type=None,
        region=None,
        gpus_per_node=1,
        on_demand_price_per_hour=None,
        source=_source(path, mapping, source),
        extra=extra,
    )
    try:
        return JobTrace(
            name=name or path.stem,
            submit_time_s=submit,
            duration_s=duration,
            num_gpus=gpus,
            priority=priority,
            metadata=metadata,
        )
    except ValueError as exc:
        raise TraceError(str(exc), path) from None


def _job_times(
    path: Path,
    mapping: dict[str, str],
    index: dict[str, int],
    column: dict[str, list[tuple[int, str]]],
    time_unit: str,
    start: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Each job's submit time from trace time 0, and its duration in seconds.

    Why its own step: a duration is either its own column (in ``time_unit``) or the
    ``end`` column less the submit time, both read in the same clock as ``submit``
    (numbers or timestamps) before ``start`` shifts it.
    """
    raw, iso = _absolute_times(
        column["submit"], index["submit"], time_unit, path, _label("submit", mapping)
    )
    submit = _relative(raw, iso, start, column["submit"], index["submit"], path)
    if "duration" in mapping:
        duration = _numbers(
            column["duration"], index["duration"], _label("duration", mapping), path
        )
        return submit, duration * _UNITS[time_unit]
    ends, _ = _absolute_times(column["end"], index["end"], time_unit, path, _label("end", mapping))
    return submit, ends - raw


def _whole_gpus(
    cells: list[tuple[int, str]], column: int, path: Path, label: str
) -> tuple[np.ndarray, int]:
    """GPU counts rounded up to whole GPUs, and how many were fractional.

    Why: the simulator places whole GPUs, while some traces record fractions; the
    count of rounded jobs is logged and kept in the trace's metadata.
    """
    raw = _numbers(cells, column, label, path)
    gpus = np.ceil(raw).astype(np.int64)
    rounded = int(np.count_nonzero(gpus != raw))
    for (number, _), value in zip(cells, raw, strict=True):
        if not value > 0:
            raise TraceError(f"{label} must be > 0, got {value:g}", path, number, column + 1)
    return gpus, rounded
