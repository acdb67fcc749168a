"""Importers: published trace formats -> the canonical capacity/job traces.

``import_trace(fmt, in_path, out_path=None, **opts)`` is what
``elasim traces import --format F IN OUT`` calls.  The formats, their options and
every choice they make are documented per function below and in
``traces/README.md``:

* ``skypilot``: Can't Be Late / SkyPilot spot JSON (``metadata.gap_seconds``,
  ``data``, optional ``prices``) -> capacity trace (:func:`import_skypilot`).
* ``bamboo``: Bamboo / Parcae headerless node-event CSV ``ms,add|remove,node`` ->
  capacity trace (:func:`import_bamboo`).
* ``aws-price``: AWS ``describe-spot-price-history`` JSON, spliced as the price
  column of an existing capacity trace (:func:`import_aws_price`).
* ``philly``: Pollux-condensed Philly CSV
  (``timestamp,duration,num_gpus,gpu_time,cluster``) -> job trace
  (:func:`import_philly`).

Every problem, including a file of the wrong format, becomes a
:class:`~.errors.TraceError` (never a traceback).  JSON inputs report the parser's
line and column for syntax errors and a JSON path such as ``data[17]`` as the
column for bad values (the ``json`` module keeps no per-value line numbers).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import TraceError
from .io import (
    CellError,
    iter_lines,
    load_capacity_trace,
    parse_float,
    parse_int,
    read_text,
    split_csv_line,
    write_trace,
)
from .model import CapacityTrace, JobTrace, TraceMetadata

__all__ = [
    "IMPORT_FORMATS",
    "ImporterOption",
    "import_aws_price",
    "import_bamboo",
    "import_philly",
    "import_skypilot",
    "import_trace",
    "importer_options",
]

logger = logging.getLogger(__name__)

#: Formats understood by :func:`import_trace`.
IMPORT_FORMATS: tuple[str, ...] = ("skypilot", "bamboo", "aws-price", "philly")

PathLike = str | os.PathLike


# --------------------------------------------------------------------------- options
@dataclass(frozen=True)
class ImporterOption:
    """One ``key=value`` option of an importer (for ``--help`` and validation).

    Attributes:
        name: Keyword name.
        type_name: ``str``, ``int``, ``float``, ``bool``, ``list`` (comma separated),
            ``timestamp`` (ISO 8601) or ``trace`` (bundled name, path or object).
        default: Default value (``None``: unset / derived, see ``doc``).
        doc: One-line description.
    """

    name: str
    type_name: str
    default: Any
    doc: str


_COMMON = (
    ImporterOption("name", "str", None, "trace name (default: output or input file stem)"),
    ImporterOption("source", "str", None, "provenance one-liner for '# source:'"),
)
_NODE_META = (
    ImporterOption("instance_type", "str", None, "instance type of one node, e.g. p3.2xlarge"),
    ImporterOption("region", "str", None, "cloud region, e.g. us-east-2"),
    ImporterOption("gpus_per_node", "int", 1, "GPUs per node"),
    ImporterOption(
        "on_demand_price_per_hour", "float", None, "USD per node-hour of an on-demand node"
    ),
)

_OPTIONS: dict[str, tuple[ImporterOption, ...]] = {
    "skypilot": _COMMON + _NODE_META,
    "bamboo": _COMMON
    + _NODE_META
    + (
        ImporterOption(
            "duration_s",
            "float",
            None,
            "trace length (default: last event + median gap between event times)",
        ),
    ),
    "aws-price": _COMMON
    + (
        ImporterOption("base", "trace", None, "capacity trace that receives the price (required)"),
        ImporterOption("zone", "str", None, "availability zone, e.g. us-east-2b"),
        ImporterOption("instance_type", "str", None, "default: the base trace's instance_type"),
        ImporterOption(
            "start", "timestamp", None, "UTC time of trace t=0 (default: first price record)"
        ),
        ImporterOption("product", "str", "Linux/UNIX", "ProductDescription to keep"),
        ImporterOption(
            "on_demand_price_per_hour", "float", None, "override the base trace's value"
        ),
    ),
    "philly": _COMMON
    + (
        ImporterOption("cluster", "list", None, "keep only these virtual clusters"),
        ImporterOption("start", "timestamp", None, "keep jobs submitted at or after (local)"),
        ImporterOption("end", "timestamp", None, "keep jobs submitted before (local)"),
        ImporterOption(
            "pollux_filter", "bool", False, "Pollux's filter: duration>=60 s, gpu_time<1000 GPU-h"
        ),
    ),
}


def importer_options(fmt: str) -> tuple[ImporterOption, ...]:
    """The options :func:`import_trace` accepts for ``fmt``."""
    _check_format(fmt)
    return _OPTIONS[fmt]


def _check_format(fmt: str) -> None:
    if fmt not in _OPTIONS:
        raise TraceError(f"unknown import format {fmt!r}; known: {', '.join(IMPORT_FORMATS)}")


def _convert_option(fmt: str, opt: ImporterOption, value: Any) -> Any:
    """Accept typed values (Python callers) and strings (the CLI's ``key=value``)."""
    if value is None:
        return None

    def bad(msg: str) -> TraceError:
        return TraceError(f"{fmt} option {opt.name}={_show(value)}: {msg}")

    if not isinstance(value, str):
        if opt.type_name == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise bad("expected an integer")
        if opt.type_name == "float" and (
            isinstance(value, bool) or not isinstance(value, (int, float))
        ):
            raise bad("expected a number")
        if opt.type_name == "bool" and not isinstance(value, bool):
            raise bad("expected true or false")
        if opt.type_name == "list" and isinstance(value, Sequence):
            return tuple(str(v) for v in value)
        return value
    text = value.strip()
    try:
        if opt.type_name == "int":
            return parse_int(text)
        if opt.type_name == "float":
            return parse_float(text)
        if opt.type_name == "bool":
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise CellError("expected true or false")
        if opt.type_name == "list":
            items = tuple(v.strip() for v in text.split(",") if v.strip())
            if not items:
                raise CellError("empty list")
            return items
    except CellError as exc:
        raise bad(str(exc)) from None
    if not text:
        raise bad("empty value")
    return text


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def import_trace(
    fmt: str,
    in_path: PathLike | Sequence[PathLike],
    out_path: PathLike | None = None,
    **opts: Any,
) -> CapacityTrace | JobTrace:
    """Convert a published trace into elasim's canonical format.

    Args:
        fmt: One of :data:`IMPORT_FORMATS`.
        in_path: Input file.  ``aws-price`` also takes a directory (every ``*.json``
            in it) or a list of files, because AWS price history comes in windows.
        out_path: If given, the result is also written there (atomically).
        **opts: Format options (:func:`importer_options`); values may be strings, as
            the CLI passes them, or typed Python values.

    Returns:
        The imported trace (also written to ``out_path`` when given).

    Raises:
        TraceError: unknown format or option, unreadable or malformed input.
    """
    _check_format(fmt)
    known = {o.name: o for o in _OPTIONS[fmt]}
    kwargs: dict[str, Any] = {}
    for key, value in opts.items():
        if key not in known:
            raise TraceError(
                f"unknown option {key!r} for format {fmt}; known: {', '.join(sorted(known))}"
            )
        kwargs[key] = _convert_option(fmt, known[key], value)
    if kwargs.get("name") is None:
        kwargs["name"] = Path(out_path).stem if out_path is not None else None
    func: Callable[..., CapacityTrace | JobTrace] = {
        "skypilot": import_skypilot,
        "bamboo": import_bamboo,
        "aws-price": import_aws_price,
        "philly": import_philly,
    }[fmt]
    trace = func(in_path, **kwargs)
    if out_path is not None:
        try:
            write_trace(trace, out_path)
        except OSError as exc:
            raise TraceError(f"cannot write: {exc.strerror or exc}", out_path) from None
    return trace


def _single_path(in_path: Any, fmt: str) -> Path:
    if isinstance(in_path, (str, os.PathLike)):
        return Path(in_path)
    raise TraceError(f"format {fmt} takes one input file, got {type(in_path).__name__}")


def _node_metadata(
    *,
    instance_type: str | None,
    region: str | None,
    gpus_per_node: int | None,
    on_demand_price_per_hour: float | None,
    source: str,
    extra: tuple[tuple[str, str], ...] = (),
) -> TraceMetadata:
    try:
        return TraceMetadata(
            instance_type=instance_type,
            gpus_per_node=1 if gpus_per_node is None else gpus_per_node,
            region=region,
            on_demand_price_per_hour=on_demand_price_per_hour,
            source=" ".join(source.split()),
            extra=extra,
        )
    except ValueError as exc:
        raise TraceError(f"option: {exc}") from None


def _compress(
    time_s: np.ndarray, available: np.ndarray, price: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Drop rows that repeat the previous row's values (the step function is unchanged)."""
    keep = np.ones(time_s.size, dtype=bool)
    same = available[1:] == available[:-1]
    if price is not None:
        same &= price[1:] == price[:-1]
    keep[1:] = ~same
    return time_s[keep], available[keep], None if price is None else price[keep]


def _load_json(path: Path, what: str) -> Any:
    text = read_text(path)
    if not text.strip():
        raise TraceError(f"empty file (expected {what})", path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(
            f"not valid JSON ({exc.msg}); expected {what}", path, exc.lineno, exc.colno
        ) from None
    except RecursionError:
        raise TraceError(f"JSON nested too deeply; expected {what}", path) from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --------------------------------------------------------------------------- skypilot
_SKY_WHAT = "a SkyPilot / Can't Be Late trace {'metadata': {'gap_seconds': N}, 'data': [...]}"


def import_skypilot(
    in_path: PathLike,
    *,
    name: str | None = None,
    instance_type: str | None = None,
    region: str | None = None,
    gpus_per_node: int | None = 1,
    on_demand_price_per_hour: float | None = None,
    source: str | None = None,
) -> CapacityTrace:
    """Import a Can't Be Late / SkyPilot spot trace JSON as a capacity trace.

    ``data[i]`` is the number of obtainable nodes during tick ``i``, which starts at
    ``i * gap_seconds``; ``prices[i]`` (optional) is the spot price in USD per
    node-hour.  Consecutive ticks with equal values are merged into one row (the
    step function is unchanged), and ``duration_s = len(data) * gap_seconds`` so
    the last tick keeps its full length.  The files store no absolute time, no
    instance type and no region, so those come from the options (never guessed).

    The values are used as stored, with the convention of the published repository
    (``1`` = available); the older ``sky_spot`` simulator inverted it, see
    ``shared/traces-real/skypilot-spot-traces/SOURCE.md``.
    """
    path = _single_path(in_path, "skypilot")
    doc = _load_json(path, _SKY_WHAT)
    if not isinstance(doc, dict):
        raise TraceError(f"top level is a JSON {type(doc).__name__}; expected {_SKY_WHAT}", path)
    for key in ("metadata", "data"):
        if key not in doc:
            raise TraceError(f"no {key!r} key; expected {_SKY_WHAT}", path, None, key)
    meta = doc["metadata"]
    if not isinstance(meta, dict) or "gap_seconds" not in meta:
        raise TraceError("'metadata' must be an object with 'gap_seconds'", path, None, "metadata")
    gap = meta["gap_seconds"]
    if not _is_number(gap) or not math.isfinite(gap) or gap <= 0:
        raise TraceError(
            f"gap_seconds must be a positive number, got {_show(gap)}",
            path,
            None,
            "metadata.gap_seconds",
        )
    data = doc["data"]
    if not isinstance(data, list) or not data:
        raise TraceError("'data' must be a non-empty list of node counts", path, None, "data")
    values = np.empty(len(data), dtype=np.int64)
    for i, v in enumerate(data):
        if not _is_number(v) or not math.isfinite(v) or v != math.floor(v) or abs(v) > 2**53:
            raise TraceError(f"not an integer node count: {_show(v)}", path, None, f"data[{i}]")
        if v < 0:
            raise TraceError(f"negative node count {v}", path, None, f"data[{i}]")
        values[i] = int(v)
    prices = None
    if doc.get("prices") is not None:
        raw = doc["prices"]
        if not isinstance(raw, list) or len(raw) != len(data):
            got = len(raw) if isinstance(raw, list) else type(raw).__name__
            raise TraceError(
                f"'prices' must be a list as long as 'data' ({len(data)}), got {got}",
                path,
                None,
                "prices",
            )
        prices = np.empty(len(raw), dtype=np.float64)
        for i, p in enumerate(raw):
            if not _is_number(p) or not math.isfinite(p) or p <= 0:
                raise TraceError(
                    f"price must be a positive number, got {_show(p)}", path, None, f"prices[{i}]"
                )
            prices[i] = float(p)
    ignored = sorted(set(doc) - {"metadata", "data", "prices"})
    if ignored:
        logger.warning("%s: ignoring unknown top-level keys %s", path, ignored)
    times = np.arange(len(data), dtype=np.float64) * float(gap)
    t, a, p = _compress(times, values, prices)
    metadata = _node_metadata(
        instance_type=instance_type,
        region=region,
        gpus_per_node=gpus_per_node,
        on_demand_price_per_hour=on_demand_price_per_hour,
        source=source or f"{path.name} (SkyPilot spot-trace JSON, gap {gap} s)",
    )
    return CapacityTrace(
        name=name or path.stem,
        time_s=t,
        available=a,
        price_per_hour=p,
        metadata=metadata,
        duration_s=len(data) * float(gap),
    )


# --------------------------------------------------------------------------- bamboo
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
    text = read_text(path)
    present: dict[str, int] = {}
    groups: list[tuple[int, int]] = []  # (ms, count after all events at ms)
    last_ms = -1
    last_line = 0
    for number, line in iter_lines(text):
        if not line.strip():
            continue
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
        if ms < last_ms:
            raise TraceError(
                f"ms: time goes backwards, {ms} is before {last_ms} on line {last_line}",
                path,
                number,
                1,
            )
        event, node = cells[1], cells[2]
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
            raise TraceError(
                f"event must be 'add' or 'remove', got {event[:40]!r}", path, number, 2
            )
        if groups and groups[-1][0] == ms:
            groups[-1] = (ms, len(present))
        else:
            groups.append((ms, len(present)))
        last_ms, last_line = ms, number
    if not groups:
        raise TraceError(f"no events; expected {_BAMBOO_WHAT}", path)
    first_ms = groups[0][0]
    times = np.array([(ms - first_ms) / 1000.0 for ms, _ in groups], dtype=np.float64)
    counts = np.array([c for _, c in groups], dtype=np.int64)
    if duration_s is None:
        if times.size < 2:
            raise TraceError(
                "all events share one timestamp; pass the duration_s option", path, last_line
            )
        duration = float(times[-1] + np.median(np.diff(times)))
    else:
        duration = float(duration_s)
        if not (math.isfinite(duration) and duration > times[-1]):
            raise TraceError(
                f"option duration_s={duration_s} must be after the last event "
                f"({times[-1]:g} s after the first)",
                path,
            )
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


# --------------------------------------------------------------------------- aws-price
_AWS_WHAT = "AWS describe-spot-price-history JSON {'SpotPriceHistory': [...]}"
_AWS_FIELDS = ("AvailabilityZone", "InstanceType", "ProductDescription", "SpotPrice", "Timestamp")


def _parse_utc(text: str) -> float:
    """ISO 8601 -> POSIX seconds; a naive time is UTC (AWS reports UTC with ``Z``)."""
    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    when = dt.datetime.fromisoformat(t)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


def _utc_iso(posix_s: float) -> str:
    when = dt.datetime.fromtimestamp(posix_s, tz=dt.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when.microsecond == 0 else when.isoformat()


def _aws_files(in_path: Any) -> list[Path]:
    if isinstance(in_path, (str, os.PathLike)):
        path = Path(in_path)
        if path.is_dir():
            files = sorted(path.glob("*.json"))
            if not files:
                raise TraceError("directory holds no *.json price files", path)
            return files
        return [path]
    if isinstance(in_path, Sequence) and in_path:
        return [Path(p) for p in in_path]
    raise TraceError(f"aws-price needs a file, a directory or a list of files, got {in_path!r}")


@dataclass(frozen=True)
class _PriceRecord:
    time: float
    zone: str
    instance_type: str
    product: str
    price: float


def _aws_records(files: list[Path]) -> list[_PriceRecord]:
    records: list[_PriceRecord] = []
    for path in files:
        doc = _load_json(path, _AWS_WHAT)
        if not isinstance(doc, dict) or "SpotPriceHistory" not in doc:
            raise TraceError(f"no 'SpotPriceHistory' key; expected {_AWS_WHAT}", path)
        history = doc["SpotPriceHistory"]
        if not isinstance(history, list):
            raise TraceError("'SpotPriceHistory' must be a list", path, None, "SpotPriceHistory")
        for i, rec in enumerate(history):
            where = f"SpotPriceHistory[{i}]"
            if not isinstance(rec, dict):
                raise TraceError("record must be an object", path, None, where)
            for key in _AWS_FIELDS:
                if key not in rec:
                    raise TraceError(f"record has no {key!r}", path, None, where)
            for key in ("AvailabilityZone", "InstanceType", "ProductDescription", "Timestamp"):
                if not isinstance(rec[key], str) or not rec[key].strip():
                    raise TraceError("must be a non-empty string", path, None, f"{where}.{key}")
            raw = rec["SpotPrice"]
            try:
                if isinstance(raw, str):
                    price = parse_float(raw)
                elif _is_number(raw):
                    price = float(raw)
                else:
                    raise CellError(f"not a number: {_show(raw)}")
                if not (math.isfinite(price) and price > 0):
                    raise CellError(f"price must be > 0, got {_show(raw)}")
            except CellError as exc:
                raise TraceError(str(exc), path, None, f"{where}.SpotPrice") from None
            try:
                when = _parse_utc(rec["Timestamp"])
            except (ValueError, OverflowError):
                raise TraceError(
                    f"not an ISO 8601 time: {_show(rec['Timestamp'])}",
                    path,
                    None,
                    f"{where}.Timestamp",
                ) from None
            records.append(
                _PriceRecord(
                    when,
                    rec["AvailabilityZone"].strip(),
                    rec["InstanceType"].strip(),
                    rec["ProductDescription"].strip(),
                    price,
                )
            )
    return records


def import_aws_price(
    in_path: PathLike | Sequence[PathLike],
    *,
    base: PathLike | CapacityTrace | None = None,
    zone: str | None = None,
    instance_type: str | None = None,
    start: str | None = None,
    product: str = "Linux/UNIX",
    on_demand_price_per_hour: float | None = None,
    name: str | None = None,
    source: str | None = None,
) -> CapacityTrace:
    """Splice an AWS spot price history into a capacity trace as its price column.

    Choices (also in ``traces/README.md``):

    * Inputs: one JSON file, a directory (every ``*.json``) or a list of files.
      AWS returns overlapping windows, so records are de-duplicated on
      (Timestamp, AvailabilityZone, SpotPrice) after filtering by ``zone``,
      ``instance_type`` and ``product``.  Two different prices for one zone at the
      same timestamp are an error.  ``zone`` / ``instance_type`` may be omitted only
      when the files hold exactly one (``instance_type`` defaults to the base
      trace's).
    * Alignment: ``start`` (ISO 8601, UTC if naive) is the wall-clock time of trace
      ``t = 0``; default: the first matching price record.  The price at trace time
      ``t`` is the latest record with ``Timestamp <= start + t``: AWS records are
      price *changes*, so the price is a step function.  A ``start`` before the
      first record is an error (the price there is unknown).
    * End: if ``start + duration_s`` is after the newest record of all input files
      (roughly when the history was fetched), the last price is held to the end of
      the trace, a warning is logged and metadata ``price_note`` says from when.
    * Rows: the union of the base trace's row times and the price-change times
      inside the trace, consecutive equal rows merged.  ``available`` and
      ``duration_s`` come unchanged from the base; a price column already in the
      base is replaced.
    * Metadata: the base's, with ``instance_type`` set, ``region`` derived from the
      zone if the base has none, ``price_zone`` and ``price_start_utc`` added, and a
      ``source`` stating that availability and price come from separate sources.
    """
    if base is None:
        raise TraceError("aws-price needs option base=TRACE (the capacity trace to price)")
    if isinstance(base, CapacityTrace):
        base_trace = base
    else:
        base_trace = load_capacity_trace(base)
    files = _aws_files(in_path)
    records = _aws_records(files)
    if not records:
        raise TraceError("no price records in the input", files[0] if len(files) == 1 else None)
    newest_any = max(r.time for r in records)
    itype = instance_type or base_trace.metadata.instance_type
    types = sorted({r.instance_type for r in records})
    if itype is None:
        if len(types) != 1:
            raise TraceError(f"pass instance_type=...; the input has {', '.join(types)}")
        itype = types[0]
    selected = [r for r in records if r.instance_type == itype and r.product == product]
    if not selected:
        products = sorted({r.product for r in records if r.instance_type == itype})
        raise TraceError(
            f"no records for instance type {itype!r} and product {product!r}; "
            f"instance types: {', '.join(types)}; products for {itype}: "
            f"{', '.join(products) or '(none)'}"
        )
    zones = sorted({r.zone for r in selected})
    if zone is None:
        if len(zones) != 1:
            raise TraceError(f"pass zone=...; {itype} has prices for {', '.join(zones)}")
        zone = zones[0]
    selected = [r for r in selected if r.zone == zone]
    if not selected:
        raise TraceError(f"no {itype} records in zone {zone!r}; zones: {', '.join(zones)}")
    by_time: dict[float, float] = {}
    for rec in selected:  # de-duplicate overlapping windows
        old = by_time.setdefault(rec.time, rec.price)
        if old != rec.price:
            raise TraceError(
                f"conflicting {itype} prices in {zone} at {_utc_iso(rec.time)}: {old} and "
                f"{rec.price}"
            )
    rec_times = sorted(by_time)
    rec_prices = [by_time[t] for t in rec_times]
    if start is None:
        t0 = rec_times[0]
    else:
        try:
            t0 = _parse_utc(start)
        except (ValueError, OverflowError):
            raise TraceError(
                f"aws-price option start={_show(start)}: not an ISO 8601 time"
            ) from None
    if t0 < rec_times[0]:
        raise TraceError(
            f"start {_utc_iso(t0)} is before the first {itype} price record in {zone} "
            f"({_utc_iso(rec_times[0])}); the price there is unknown"
        )
    duration = base_trace.duration_s
    rel = np.asarray(rec_times, dtype=np.float64) - t0
    price_arr = np.asarray(rec_prices, dtype=np.float64)
    inner = rel[(rel > 0) & (rel < duration)]
    times = np.union1d(base_trace.time_s, inner)
    avail = base_trace.available[base_trace.at(times)]
    price = price_arr[np.searchsorted(rel, times, side="right") - 1]
    t, a, p = _compress(times, np.asarray(avail), price)
    if base_trace.price_per_hour is not None:
        logger.info("%s: replacing the base trace's price column", base_trace.name)
    extra = [
        (k, v)
        for k, v in base_trace.metadata.extra
        if k not in ("price_zone", "price_start_utc", "price_note")
    ]
    extra += [("price_zone", zone), ("price_start_utc", _utc_iso(t0))]
    if t0 + duration > newest_any:
        held_from = max(rec_times[-1] - t0, 0.0)
        logger.warning(
            "trace ends %s after the newest price record; holding the last price",
            _utc_iso(t0 + duration),
        )
        extra.append(("price_note", f"price series ends; last price held from t={held_from:g} s"))
    base_meta = base_trace.metadata
    zone_region = re.sub(r"[a-z]+$", "", zone)
    region = base_meta.region or zone_region
    if region != zone_region:
        logger.warning(
            "splicing %s prices onto a trace of region %s (kept as the trace's region)",
            zone,
            region,
        )
    default_source = (
        f"availability: {base_meta.source or base_trace.name}; price: AWS spot price history "
        f"{zone} {itype} {product} from {_utc_iso(t0)} (spliced: separate sources)"
    )
    try:
        metadata = TraceMetadata(
            instance_type=itype,
            gpus_per_node=base_meta.gpus_per_node,
            region=region,
            on_demand_price_per_hour=(
                on_demand_price_per_hour
                if on_demand_price_per_hour is not None
                else base_meta.on_demand_price_per_hour
            ),
            source=" ".join((source or default_source).split()),
            synthetic=base_meta.synthetic,
            extra=tuple(extra),
        )
    except ValueError as exc:
        raise TraceError(f"option: {exc}") from None
    return CapacityTrace(
        name=name or base_trace.name,
        time_s=t,
        available=a,
        price_per_hour=p,
        metadata=metadata,
        duration_s=duration,
    )


# --------------------------------------------------------------------------- philly
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
    clusters = None
    if cluster is not None:
        clusters = {cluster} if isinstance(cluster, str) else set(cluster)
    t_lo = _parse_local(start, "start") if start is not None else None
    t_hi = _parse_local(end, "end") if end is not None else None
    lines = iter_lines(text)
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
    rows: list[tuple[dt.datetime, float, int]] = []
    for number, line in lines:
        if not line.strip():
            continue
        try:
            cells = split_csv_line(line)
        except CellError as exc:
            raise TraceError(str(exc), path, number) from None
        if len(cells) != len(columns):
            raise TraceError(
                f"expected {len(columns)} fields, got {len(cells)}",
                path,
                number,
                min(len(cells), len(columns)) + 1,
            )
        stamp = cells[i_ts].strip()
        try:
            if not _PHILLY_TIME_RE.match(stamp):
                raise ValueError
            when = dt.datetime.fromisoformat(stamp)
        except ValueError:
            raise TraceError(
                f"timestamp: expected 'YYYY-MM-DD HH:MM:SS', got {stamp[:40]!r}",
                path,
                number,
                i_ts + 1,
            ) from None
        try:
            duration = parse_float(cells[i_du])
        except CellError as exc:
            raise TraceError(f"duration: {exc}", path, number, i_du + 1) from None
        if duration <= 0:
            raise TraceError(f"duration: must be > 0, got {duration:g}", path, number, i_du + 1)
        try:
            gpus = parse_int(cells[i_ng])
        except CellError as exc:
            raise TraceError(f"num_gpus: {exc}", path, number, i_ng + 1) from None
        if gpus < 1:
            raise TraceError(f"num_gpus: must be >= 1, got {gpus}", path, number, i_ng + 1)
        try:
            gpu_time = parse_float(cells[i_gt])
        except CellError as exc:
            raise TraceError(f"gpu_time: {exc}", path, number, i_gt + 1) from None
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
        if clusters is not None and vc not in clusters:
            continue
        if t_lo is not None and when < t_lo:
            continue
        if t_hi is not None and when >= t_hi:
            continue
        if pollux_filter and not (
            duration >= POLLUX_MIN_DURATION_S and gpu_time < POLLUX_MAX_GPU_TIME_S
        ):
            continue
        rows.append((when, duration, gpus))
    if not rows:
        raise TraceError("no jobs left after the filters", path)
    rows.sort(key=lambda r: r[0])  # stable: ties keep file order
    t0 = rows[0][0]
    submit = np.array([(r[0] - t0).total_seconds() for r in rows], dtype=np.float64)
    extra: list[tuple[str, str]] = [("start_time_local", t0.isoformat(sep=" "))]
    if clusters is not None:
        extra.append(("cluster", ",".join(sorted(clusters))))
    if t_lo is not None or t_hi is not None:
        lo = t_lo.isoformat(sep=" ") if t_lo else "-"
        hi = t_hi.isoformat(sep=" ") if t_hi else "-"
        extra.append(("window_local", f"[{lo}, {hi})"))
    if pollux_filter:
        extra.append(("filter", "pollux: duration >= 60 s and gpu_time < 1000 GPU-h"))
    metadata = TraceMetadata(
        source=" ".join((source or f"{path.name} (Pollux-condensed Philly CSV)").split()),
        extra=tuple(extra),
    )
    return JobTrace(
        name=name or path.stem,
        submit_time_s=submit,
        duration_s=np.array([r[1] for r in rows], dtype=np.float64),
        num_gpus=np.array([r[2] for r in rows], dtype=np.int64),
        metadata=metadata,
    )
