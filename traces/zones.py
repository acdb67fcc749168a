"""Several zones, each with its own capacity trace: :class:`ZoneSet` and its loaders.

A job that may run in one of several zones (``elasim simulate --trace a.csv --trace
b.csv``) replays one capacity trace per zone, all from the same start offset: the
zones' traces share a clock.  They come from one file each, or from one file with a
``zone`` column (the rows of each zone in it, in time order, each zone's first at
``time_s`` 0; the file's metadata applies to every zone).

A zone set is not a :class:`~.model.CapacityTrace`: nothing that reads one trace
reads a zone set by mistake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .cells import CellError, iter_lines, join_csv_line, read_text, split_csv_line
from .errors import TraceError
from .model import CapacityTrace, JobTrace, TraceMetadata
from .reader import parse_trace_text

__all__ = ["ZONE_COLUMN", "ZoneSet", "load_zones"]

#: The column that names each row's zone in a one-file zone set.
ZONE_COLUMN = "zone"


@dataclass(frozen=True, eq=False)
class ZoneSet:
    """The capacity traces of the zones a job may run in, in the run's order.

    Attributes:
        traces: one capacity trace per zone (two or more), named after its zone.
    """

    kind: ClassVar[str] = "zones"

    traces: tuple[CapacityTrace, ...]

    def __post_init__(self) -> None:
        traces = tuple(self.traces)
        if len(traces) < 2:
            raise ValueError("a zone set needs two or more zones")
        if not all(isinstance(t, CapacityTrace) for t in traces):
            raise ValueError("every zone needs a capacity trace")
        names = [t.name for t in traces]
        if len(set(names)) != len(names):
            raise ValueError(f"zone names must differ: {names}")
        object.__setattr__(self, "traces", traces)

    @property
    def name(self) -> str:
        """The zones' names joined with ``+``."""
        return "+".join(t.name for t in self.traces)

    @property
    def names(self) -> tuple[str, ...]:
        """Each zone's name."""
        return tuple(t.name for t in self.traces)

    @property
    def metadata(self) -> TraceMetadata:
        """The first zone's (the on-demand price is one for every zone)."""
        return self.traces[0].metadata

    @property
    def duration_s(self) -> float:
        """The shortest zone's: a start offset must lie within every zone's trace."""
        return min(t.duration_s for t in self.traces)

    @property
    def max_available(self) -> int:
        """Most nodes any zone ever offers."""
        return max(t.max_available for t in self.traces)

    @property
    def priced(self) -> bool:
        """Whether every zone has a price column."""
        return all(t.price_per_hour is not None for t in self.traces)

    def shortest(self) -> CapacityTrace:
        """The zone whose trace is shortest (where a random start offset is drawn)."""
        return min(self.traces, key=lambda t: t.duration_s)


def load_zones(names_or_paths: Sequence[str | Path]) -> CapacityTrace | JobTrace | ZoneSet:
    """One trace per name, or one file with a ``zone`` column: the zones of a run.

    One name without a ``zone`` column is any trace, as :func:`~.io.load_trace` loads
    it (one zone, or a shared cluster's jobs).

    Raises:
        TraceError: a file that does not load, or a job trace among them.
    """
    from .io import load_capacity_trace, load_trace, resolve_trace

    if len(names_or_paths) == 1:
        path = resolve_trace(names_or_paths[0])
        if _has_zone_column(path):
            return _split_zones(path, str(names_or_paths[0]))
        return load_trace(names_or_paths[0])
    return ZoneSet(tuple(load_capacity_trace(name) for name in names_or_paths))


def _has_zone_column(path: Path) -> bool:
    """Whether the header names a zone column.

    A file that is not UTF-8 text has none: the reader then says what is wrong with
    it, naming the file and the line.
    """
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    return ZONE_COLUMN in [c.strip() for c in line.split(",")]
    except UnicodeDecodeError:
        return False
    return False


def _zone_lines(text: str, shown: str) -> tuple[int, int, dict[str, list[str]]]:
    """The header's index, the zone column's, and each zone's lines (others' blank).

    Each zone keeps every line where it was (other zones' rows and ``# duration_s``
    blank, which the reader skips), less the zone column, so the reader's errors
    name the user's file and its lines.
    """
    lines = [line for _, line in iter_lines(text)]
    at = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    header = split_csv_line(lines[at])
    column = [c.strip() for c in header].index(ZONE_COLUMN)
    head = ["" if line.startswith("# duration_s:") else line for line in lines[:at]]
    head.append(_without(header, column, lines[at]))
    zones: dict[str, list[str]] = {}
    for number, line in enumerate(lines[at + 1 :], start=at + 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue  # the reader words these, in every zone
        try:
            cells = split_csv_line(line)
        except CellError as exc:
            raise TraceError(str(exc), shown, number) from None
        zone = cells[column].strip() if len(cells) > column else ""
        if not zone:
            raise TraceError(f"no zone in column {column + 1} ({ZONE_COLUMN})", shown, number)
        rows = zones.setdefault(zone, [*head, *[""] * (len(lines) - at - 1)])
        rows[number - 1] = _without(cells, column, line)
    return at, column, zones


def _without(cells: list[str], column: int, line: str) -> str:
    """``line`` (split into ``cells``) less its zone column, quoted as it was needed.

    A line with no quote is its cells joined by commas; one with a quote is joined as
    CSV quotes, so a quoted cell that holds a comma or a quote stays one cell.
    """
    kept = [c for i, c in enumerate(cells) if i != column]
    return ",".join(kept) if '"' not in line else join_csv_line(kept)


def _split_zones(path: Path, shown: str) -> ZoneSet:
    """A one-file zone set: each zone's rows read as a trace of its own.

    Every error names the user's file, the zone, and the line (and column) in that
    file: a zone is the file's text with the other zones' rows blanked.
    """
    text = read_text(path, shown)
    try:
        at, column, zones = _zone_lines(text, shown)
    except (StopIteration, ValueError) as exc:
        if isinstance(exc, TraceError):
            raise
        raise TraceError(f"no header with a {ZONE_COLUMN!r} column", shown) from None
    if len(zones) < 2:
        raise TraceError(f"a zone column needs two or more zones, got {list(zones)}", shown)
    traces = []
    for zone, lines in zones.items():
        rows = [n for n, line in enumerate(lines[at + 1 :], start=at + 2) if line]
        if len(rows) == 1:  # the file's '# duration_s' is every zone's, so not the fix
            raise TraceError(
                f"zone {zone!r} has one row; each zone needs two or more (a zone's trace "
                "ends a median gap after its last row)",
                shown,
                rows[0],
            )
        try:
            trace = parse_trace_text("\n".join(lines) + "\n", zone, shown, "capacity")
        except TraceError as exc:
            col = exc.column
            if isinstance(col, int) and col > column:
                col += 1  # the zone column, removed from the zone's text
            raise TraceError(f"zone {zone!r}: {exc.message}", exc.path, exc.line, col) from None
        assert isinstance(trace, CapacityTrace)
        traces.append(trace)
    return ZoneSet(tuple(traces))
