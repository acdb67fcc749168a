"""Import the Pollux-condensed Philly job table as a job trace."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from .cells import CellError, iter_lines, parse_float, parse_int, read_text, split_csv_line
from .errors import TraceError
from .import_common import PathLike, _show, _single_path
from .model import JobTrace, TraceMetadata

__all__ = ["POLLUX_MAX_GPU_TIME_S", "POLLUX_MIN_DURATION_S", "import_philly"]

_V = TypeVar("_V")

_PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
_PHILLY_WHAT = "Pollux-condensed Philly CSV 'timestamp,duration,num_gpus,gpu_time,cluster'"
_PHILLY_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\Z")
#: Pollux's ``workload.py`` filter, reproduced by ``pollux_filter=True``.
POLLUX_MIN_DURATION_S = 60.0
POLLUX_MAX_GPU_TIME_S = 1000 * 3600.0


def _parse_local(text: str, option: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise TraceError(f"philly option {option}={_show(text)}: not an ISO 8601 time") from None
    if when.tzinfo is not None:
        raise TraceError(
            f"philly option {option}={_show(text)}: Philly times are naive local times; "
            "drop the UTC offset"
        )
    return when


def import_philly(
    in_path: PathLike,
    *,
    name: str | None = None,
    cluster: Sequence[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    pollux_filter: bool = False,
    source: str | None = None,
) -> JobTrace:
    """Import the Pollux-condensed Philly job table as a job trace.

    * ``submit_time_s`` = seconds since the earliest *kept* job's ``timestamp``;
      jobs are sorted by time (stable, so file order breaks ties).  The timestamps
      are naive local times of the Philly logs; differences are taken naively, so a
      daylight-saving change inside a window (if the logs observe one) would shift
      later jobs by an hour.  The absolute time of ``t = 0`` is kept as metadata
      ``start_time_local``.
    * ``duration_s`` = ``duration`` (run time once started), ``num_gpus`` as is,
      ``priority`` 0.  ``gpu_time`` must equal ``duration * num_gpus`` (a check
      that catches shifted columns).
    * All rows are kept by default, including the 65 exact duplicate rows of the
      shared file (they are in the source; dropping them would be a guess).
    * Filters: ``cluster`` (one or more virtual-cluster ids), ``start`` / ``end``
      (submit window ``[start, end)``, local time), and ``pollux_filter``: Pollux's
      ``workload.py`` rule ``duration >= 60 s and gpu_time < 1000 GPU-hours``
      (74,428 of the 82,247 jobs remain on the full file).
    """
    path = _single_path(in_path, "philly")
    text = read_text(path)
    keep = _PhillyFilter(
        clusters=None
        if cluster is None
        else frozenset({cluster} if isinstance(cluster, str) else cluster),
        start=_parse_local(start, "start") if start is not None else None,
        end=_parse_local(end, "end") if end is not None else None,
        pollux=pollux_filter,
    )
    rows = _kept_jobs(text, path, keep)
    t0 = rows[0][0]
    submit = np.array([(r[0] - t0).total_seconds() for r in rows], dtype=np.float64)
    metadata = TraceMetadata(
        source=" ".join((source or f"{path.name} (Pollux-condensed Philly CSV)").split()),
        extra=(("start_time_local", t0.isoformat(sep=" ")), *keep.metadata_extra()),
    )
    return JobTrace(
        name=name or path.stem,
        submit_time_s=submit,
        duration_s=np.array([r[1] for r in rows], dtype=np.float64),
        num_gpus=np.array([r[2] for r in rows], dtype=np.int64),
        metadata=metadata,
    )


def _kept_jobs(text: str, path: Path, keep: _PhillyFilter) -> list[tuple[dt.datetime, float, int]]:
    """The ``(submit time, duration, gpus)`` of every job ``keep`` passes, by submit time.

    Why apart from :func:`import_philly`: reading and checking the table line by line
    is independent of how the kept jobs become a trace; the sort is stable, so ties
    keep file order.

    Raises:
        TraceError: a bad header or row, or no job left after the filters.
    """
    lines = iter_lines(text)
    width, index = _philly_header(lines, path)
    rows: list[tuple[dt.datetime, float, int]] = []
    for number, line in lines:
        if not line.strip():
            continue
        when, duration, gpus, gpu_time, vc = _philly_row(line, number, width, index, path)
        if keep(when, duration, gpu_time, vc):
            rows.append((when, duration, gpus))
    if not rows:
        raise TraceError("no jobs left after the filters", path)
    rows.sort(key=lambda r: r[0])  # stable: ties keep file order
    return rows


@dataclass(frozen=True)
class _PhillyFilter:
    """Which jobs :func:`import_philly` keeps (``None`` / ``False``: no filter)."""

    clusters: frozenset[str] | None
    start: dt.datetime | None
    end: dt.datetime | None
    pollux: bool

    def __call__(self, when: dt.datetime, duration: float, gpu_time: float, vc: str) -> bool:
        """Whether the job submitted at ``when`` in cluster ``vc`` passes every filter."""
        if self.clusters is not None and vc not in self.clusters:
            return False
        if self.start is not None and when < self.start:
            return False
        if self.end is not None and when >= self.end:
            return False
        return not self.pollux or (
            duration >= POLLUX_MIN_DURATION_S and gpu_time < POLLUX_MAX_GPU_TIME_S
        )

    def metadata_extra(self) -> list[tuple[str, str]]:
        """The filters as metadata, so a trace says how it was cut from the file."""
        extra: list[tuple[str, str]] = []
        if self.clusters is not None:
            extra.append(("cluster", ",".join(sorted(self.clusters))))
        if self.start is not None or self.end is not None:
            lo = self.start.isoformat(sep=" ") if self.start else "-"
            hi = self.end.isoformat(sep=" ") if self.end else "-"
            extra.append(("window_local", f"[{lo}, {hi})"))
        if self.pollux:
            extra.append(("filter", "pollux: duration >= 60 s and gpu_time < 1000 GPU-h"))
        return extra


def _philly_header(
    lines: Iterator[tuple[int, str]], path: Path
) -> tuple[int, tuple[int, int, int, int, int]]:
    """Read up to the header row; returns its width and the 0-based index of each column.

    The indices are in :data:`_PHILLY_COLUMNS` order; ``lines`` is left at the first
    data line.
    """
    header_line = 0
    columns: list[str] = []
    for number, line in lines:
        if line.strip():
            header_line = number
            try:
                columns = [c.strip() for c in split_csv_line(line)]
            except CellError as exc:
                raise TraceError(f"header: {exc}", path, number) from None
            break
    if not header_line:
        raise TraceError(f"empty file (expected {_PHILLY_WHAT})", path)
    seen: dict[str, int] = {}
    for col, cname in enumerate(columns, start=1):
        if cname in seen:
            raise TraceError(f"duplicate column {cname!r}", path, header_line, col)
        if cname not in _PHILLY_COLUMNS:
            raise TraceError(
                f"unknown column {cname[:40]!r}; expected {_PHILLY_WHAT}", path, header_line, col
            )
        seen[cname] = col - 1
    missing = [c for c in _PHILLY_COLUMNS if c not in seen]
    if missing:
        raise TraceError(
            f"missing column(s) {', '.join(missing)}; expected {_PHILLY_WHAT}", path, header_line
        )
    i_ts, i_du, i_ng, i_gt, i_cl = (seen[c] for c in _PHILLY_COLUMNS)
    return len(columns), (i_ts, i_du, i_ng, i_gt, i_cl)


def _philly_row(
    line: str, number: int, width: int, index: tuple[int, int, int, int, int], path: Path
) -> tuple[dt.datetime, float, int, float, str]:
    """One data line's ``(submit time, duration, gpus, gpu_time, cluster)``, checked."""
    i_ts, i_du, i_ng, i_gt, i_cl = index
    try:
        cells = split_csv_line(line)
    except CellError as exc:
        raise TraceError(str(exc), path, number) from None
    if len(cells) != width:
        raise TraceError(
            f"expected {width} fields, got {len(cells)}", path, number, min(len(cells), width) + 1
        )
    stamp = cells[i_ts].strip()
    try:
        if not _PHILLY_TIME_RE.match(stamp):
            raise ValueError
        when = dt.datetime.fromisoformat(stamp)
    except ValueError:
        raise TraceError(
            f"timestamp: expected 'YYYY-MM-DD HH:MM:SS', got {stamp[:40]!r}", path, number, i_ts + 1
        ) from None
    duration = _philly_number(parse_float, cells, i_du, "duration", path, number)
    if duration <= 0:
        raise TraceError(f"duration: must be > 0, got {duration:g}", path, number, i_du + 1)
    gpus = _philly_number(parse_int, cells, i_ng, "num_gpus", path, number)
    if gpus < 1:
        raise TraceError(f"num_gpus: must be >= 1, got {gpus}", path, number, i_ng + 1)
    gpu_time = _philly_number(parse_float, cells, i_gt, "gpu_time", path, number)
    if abs(gpu_time - duration * gpus) > 1e-6 * max(1.0, abs(gpu_time)):
        raise TraceError(
            f"gpu_time {gpu_time:g} != duration * num_gpus ({duration * gpus:g})",
            path,
            number,
            i_gt + 1,
        )
    vc = cells[i_cl].strip()
    if not vc:
        raise TraceError("cluster: empty value", path, number, i_cl + 1)
    return when, duration, gpus, gpu_time, vc


def _philly_number(
    parse: Callable[[str], _V], cells: list[str], i: int, column: str, path: Path, number: int
) -> _V:
    """Parse one numeric cell; a bad value names the column, line and field."""
    try:
        return parse(cells[i])
    except CellError as exc:
        raise TraceError(f"{column}: {exc}", path, number, i + 1) from None
