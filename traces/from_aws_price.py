"""Splice an AWS spot price history into a capacity trace as its price column."""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .cells import CellError, parse_float
from .errors import TraceError
from .import_common import PathLike, _compress, _is_number, _load_json, _show
from .io import load_capacity_trace
from .model import CapacityTrace, TraceMetadata

__all__ = ["import_aws_price"]

logger = logging.getLogger(__name__)

_AWS_WHAT = "AWS describe-spot-price-history JSON {'SpotPriceHistory': [...]}"
_AWS_FIELDS = ("AvailabilityZone", "InstanceType", "ProductDescription", "SpotPrice", "Timestamp")


def _parse_utc(text: str) -> float:
    """ISO 8601 -> POSIX seconds; a naive time is UTC (AWS reports UTC with ``Z``)."""
    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    when = dt.datetime.fromisoformat(t)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _utc_iso(posix_s: float) -> str:
    when = dt.datetime.fromtimestamp(posix_s, tz=dt.UTC)
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
    base_trace = base if isinstance(base, CapacityTrace) else load_capacity_trace(base)
    files = _aws_files(in_path)
    records = _aws_records(files)
    if not records:
        raise TraceError("no price records in the input", files[0] if len(files) == 1 else None)
    choice = _PriceChoice(zone, instance_type, start, product)
    return _priced_trace(base_trace, records, choice, on_demand_price_per_hour, name, source)


@dataclass(frozen=True)
class _PriceChoice:
    """Which price series of the input to splice, and where trace time 0 falls.

    Attributes:
        zone: the availability zone, or None if the input holds one.
        instance_type: the instance type, or None for the base trace's (or the
            input's only one).
        start: the ISO 8601 wall-clock time of trace ``t = 0``, or None for the first
            matching record.
        product: the ``ProductDescription`` (``Linux/UNIX``).
    """

    zone: str | None
    instance_type: str | None
    start: str | None
    product: str


def _priced_trace(
    base_trace: CapacityTrace,
    records: list[_PriceRecord],
    choice: _PriceChoice,
    on_demand_price_per_hour: float | None,
    name: str | None,
    source: str | None,
) -> CapacityTrace:
    """``base_trace`` with the chosen price series of ``records`` as its price column.

    Why apart from :func:`import_aws_price`: that function reads and checks the
    inputs (files, the base trace); this one is the splice itself, on records already
    in memory, following the choices documented there.
    """
    itype, zone, selected = _select_records(
        records,
        choice.instance_type or base_trace.metadata.instance_type,
        choice.product,
        choice.zone,
    )
    rec_times, rec_prices = _price_steps(selected, itype, zone)
    t0 = _trace_start(choice.start, rec_times[0], itype, zone)
    t, a, p = _splice(base_trace, rec_times, rec_prices, t0)
    if base_trace.price_per_hour is not None:
        logger.info("%s: replacing the base trace's price column", base_trace.name)
    extra = _price_extra(
        base_trace, zone, t0, newest_s=max(r.time for r in records), last_change_s=rec_times[-1]
    )
    metadata = _price_metadata(
        base_trace,
        extra,
        zone=zone,
        itype=itype,
        product=choice.product,
        t0=t0,
        on_demand_price_per_hour=on_demand_price_per_hour,
        source=source,
    )
    return CapacityTrace(
        name=name or base_trace.name,
        time_s=t,
        available=a,
        price_per_hour=p,
        metadata=metadata,
        duration_s=base_trace.duration_s,
    )


def _select_records(
    records: list[_PriceRecord], itype: str | None, product: str, zone: str | None
) -> tuple[str, str, list[_PriceRecord]]:
    """The records of one instance type, product and zone; returns ``(itype, zone, records)``.

    ``itype`` / ``zone`` may be ``None`` only when the input holds exactly one.
    """
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
    return itype, zone, selected


def _price_steps(
    selected: list[_PriceRecord], itype: str, zone: str
) -> tuple[list[float], list[float]]:
    """Price changes sorted by time, de-duplicated over overlapping AWS windows."""
    by_time: dict[float, float] = {}
    for rec in selected:
        old = by_time.setdefault(rec.time, rec.price)
        if old != rec.price:
            raise TraceError(
                f"conflicting {itype} prices in {zone} at {_utc_iso(rec.time)}: {old} and "
                f"{rec.price}"
            )
    rec_times = sorted(by_time)
    return rec_times, [by_time[t] for t in rec_times]


def _trace_start(start: str | None, first_s: float, itype: str, zone: str) -> float:
    """POSIX time of trace ``t = 0``: the option ``start``, else the first price record."""
    if start is None:
        return first_s
    try:
        t0 = _parse_utc(start)
    except (ValueError, OverflowError):
        raise TraceError(f"aws-price option start={_show(start)}: not an ISO 8601 time") from None
    if t0 < first_s:
        raise TraceError(
            f"start {_utc_iso(t0)} is before the first {itype} price record in {zone} "
            f"({_utc_iso(first_s)}); the price there is unknown"
        )
    return t0


def _splice(
    base_trace: CapacityTrace, rec_times: list[float], rec_prices: list[float], t0: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Rows of the base trace and the price changes inside it, equal rows merged."""
    rel = np.asarray(rec_times, dtype=np.float64) - t0
    price_arr = np.asarray(rec_prices, dtype=np.float64)
    inner = rel[(rel > 0) & (rel < base_trace.duration_s)]
    times = np.union1d(base_trace.time_s, inner)
    avail = base_trace.available[base_trace.at(times)]
    price = price_arr[np.searchsorted(rel, times, side="right") - 1]
    return _compress(times, np.asarray(avail), price)


def _price_extra(
    base_trace: CapacityTrace, zone: str, t0: float, *, newest_s: float, last_change_s: float
) -> tuple[tuple[str, str], ...]:
    """The base's extra metadata with the price's zone, start and (if held) note."""
    extra = [
        (k, v)
        for k, v in base_trace.metadata.extra
        if k not in ("price_zone", "price_start_utc", "price_note")
    ]
    extra += [("price_zone", zone), ("price_start_utc", _utc_iso(t0))]
    if t0 + base_trace.duration_s > newest_s:
        held_from = max(last_change_s - t0, 0.0)
        logger.warning(
            "trace ends %s after the newest price record; holding the last price",
            _utc_iso(t0 + base_trace.duration_s),
        )
        extra.append(("price_note", f"price series ends; last price held from t={held_from:g} s"))
    return tuple(extra)


def _price_metadata(
    base_trace: CapacityTrace,
    extra: tuple[tuple[str, str], ...],
    *,
    zone: str,
    itype: str,
    product: str,
    t0: float,
    on_demand_price_per_hour: float | None,
    source: str | None,
) -> TraceMetadata:
    """The base's metadata with the instance type, a region and a two-source ``source``."""
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
        return TraceMetadata(
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
            extra=extra,
        )
    except ValueError as exc:
        raise TraceError(f"option: {exc}") from None
