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

import csv
import io
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .errors import TraceError
from .model import CapacityTrace, JobTrace, TraceMetadata

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


def _header(lines: list[str]) -> int:
    """Index of the header row (the first line that is not a ``#`` comment)."""
    return next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))


def _has_zone_column(path: Path) -> bool:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                return ZONE_COLUMN in [c.strip() for c in line.split(",")]
    return False


def _split_zones(path: Path, shown: str) -> ZoneSet:
    """A one-file zone set: each zone's rows as a file of its own, loaded as any trace."""
    from .io import load_capacity_trace

    lines = path.read_text(encoding="utf-8").splitlines()
    at = _header(lines)
    meta = [line for line in lines[:at] if not line.startswith("# duration_s:")]
    rows = list(csv.reader(lines[at:]))
    header = [c.strip() for c in rows[0]]
    column = header.index(ZONE_COLUMN)
    kept = [c for i, c in enumerate(header) if i != column]
    zones: dict[str, list[list[str]]] = {}
    for row in rows[1:]:
        if row:
            zones.setdefault(row[column].strip(), []).append(
                [c for i, c in enumerate(row) if i != column]
            )
    if len(zones) < 2:
        raise TraceError(f"a zone column needs two or more zones, got {list(zones)}", shown)
    traces = []
    with tempfile.TemporaryDirectory() as tmp:
        for zone, zone_rows in zones.items():
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows([kept, *zone_rows])
            file = Path(tmp) / f"{zone}.csv"
            file.write_text("\n".join(meta) + ("\n" if meta else "") + out.getvalue())
            traces.append(load_capacity_trace(file))
    return ZoneSet(tuple(traces))
