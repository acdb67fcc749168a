"""Import a Bamboo / Parcae headerless node-event CSV as a capacity trace."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .cells import CellError, iter_lines, parse_int, read_text, split_csv_line
from .errors import TraceError
from .import_common import PathLike, _compress, _node_metadata, _single_path
from .model import CapacityTrace

__all__ = ["import_bamboo"]

_BAMBOO_WHAT = "headerless Bamboo node events 'ms,add|remove,node'"


def import_bamboo(
    in_path: PathLike,
    *,
    name: str | None = None,
    instance_type: str | None = None,
    region: str | None = None,
    gpus_per_node: int | None = 1,
    on_demand_price_per_hour: float | None = None,
    source: str | None = None,
    duration_s: float | None = None,
) -> CapacityTrace:
    """Import a Bamboo / Parcae node-event CSV as a capacity trace.

    Each line is ``ms,add|remove,node`` (milliseconds since the trace start, CRLF
    or LF).  ``available`` is the number of nodes present after applying *all*
    events with the same timestamp, so an add and a remove at the same instant do
    not produce a zero-length row.  Time 0 is the first event (the g4dn trace's
    first event is at 480 s; the original offset is kept as metadata
    ``first_event_ms``).  A node added twice while present, or removed while not
    present, is an error naming the line.

    The file has no end marker, so ``duration_s`` defaults to the last event time
    plus the median gap between distinct event times (the same rule the loader
    applies to a CSV without ``# duration_s``).  The Bamboo authors note that their
    AWS instance-count logs overestimate availability (missed preemption notices);
    the node-event traces carry no such statement, but see ``traces/README.md``.
    """
    path = _single_path(in_path, "bamboo")
    groups, last_line = _bamboo_groups(read_text(path), path)
    first_ms = groups[0][0]
    times = np.array([(ms - first_ms) / 1000.0 for ms, _ in groups], dtype=np.float64)
    counts = np.array([c for _, c in groups], dtype=np.int64)
    duration = _bamboo_duration(times, duration_s, path, last_line)
    t, a, _ = _compress(times, counts, None)
    extra = (("first_event_ms", str(first_ms)),) if first_ms else ()
    metadata = _node_metadata(
        instance_type=instance_type,
        region=region,
        gpus_per_node=gpus_per_node,
        on_demand_price_per_hour=on_demand_price_per_hour,
        source=source or f"{path.name} (Bamboo node-event CSV)",
        extra=extra,
    )
    return CapacityTrace(
        name=name or path.stem,
        time_s=t,
        available=a,
        price_per_hour=None,
        metadata=metadata,
        duration_s=duration,
    )


def _bamboo_groups(text: str, path: Path) -> tuple[list[tuple[int, int]], int]:
    """``(ms, nodes present after all events at ms)`` per distinct time, and the last line."""
    present: dict[str, int] = {}  # node -> line that added it
    groups: list[tuple[int, int]] = []
    last_ms = -1
    last_line = 0
    for number, line in iter_lines(text):
        if not line.strip():
            continue
        ms, event, node = _bamboo_event(line, number, path)
        if ms < last_ms:
            raise TraceError(
                f"ms: time goes backwards, {ms} is before {last_ms} on line {last_line}",
                path,
                number,
                1,
            )
        _apply_event(present, event, node, number, path)
        if groups and groups[-1][0] == ms:
            groups[-1] = (ms, len(present))
        else:
            groups.append((ms, len(present)))
        last_ms, last_line = ms, number
    if not groups:
        raise TraceError(f"no events; expected {_BAMBOO_WHAT}", path)
    return groups, last_line


def _bamboo_event(line: str, number: int, path: Path) -> tuple[int, str, str]:
    """One line's ``(ms, event, node)``; the event is checked by :func:`_apply_event`."""
    try:
        cells = [c.strip() for c in split_csv_line(line)]
    except CellError as exc:
        raise TraceError(f"{exc}; expected {_BAMBOO_WHAT}", path, number) from None
    if len(cells) != 3:
        raise TraceError(
            f"expected 3 fields ({_BAMBOO_WHAT}), got {len(cells)}",
            path,
            number,
            min(len(cells), 3) + 1,
        )
    try:
        ms = parse_int(cells[0])
    except CellError as exc:
        raise TraceError(f"ms: {exc}; expected {_BAMBOO_WHAT}", path, number, 1) from None
    if ms < 0:
        raise TraceError(f"ms: negative time {ms}", path, number, 1)
    return ms, cells[1], cells[2]


def _apply_event(present: dict[str, int], event: str, node: str, number: int, path: Path) -> None:
    """Add or remove ``node`` (line ``number``) in ``present``, refusing impossible events."""
    if not node:
        raise TraceError("empty node name", path, number, 3)
    if event == "add":
        if node in present:
            raise TraceError(
                f"node {node!r} added twice (present since line {present[node]})",
                path,
                number,
                3,
            )
        present[node] = number
    elif event == "remove":
        if node not in present:
            raise TraceError(
                f"remove of node {node!r} that is not present (never added or already removed)",
                path,
                number,
                3,
            )
        del present[node]
    else:
        raise TraceError(f"event must be 'add' or 'remove', got {event[:40]!r}", path, number, 2)


def _bamboo_duration(
    times: np.ndarray, duration_s: float | None, path: Path, last_line: int
) -> float:
    """The option ``duration_s``, or the last event plus the median gap between events."""
    if duration_s is None:
        if times.size < 2:
            raise TraceError(
                "all events share one timestamp; pass the duration_s option", path, last_line
            )
        return float(times[-1] + np.median(np.diff(times)))
    duration = float(duration_s)
    if not (math.isfinite(duration) and duration > times[-1]):
        raise TraceError(
            f"option duration_s={duration_s} must be after the last event "
            f"({times[-1]:g} s after the first)",
            path,
        )
    return duration
