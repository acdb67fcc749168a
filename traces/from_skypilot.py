"""Import a Can't Be Late / SkyPilot spot trace JSON as a capacity trace."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from .errors import TraceError
from .import_common import (
    PathLike,
    _compress,
    _is_number,
    _load_json,
    _node_metadata,
    _show,
    _single_path,
)
from .model import CapacityTrace

__all__ = ["import_skypilot"]

logger = logging.getLogger(__name__)

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
    gap = _sky_gap(doc["metadata"], path)
    values = _sky_counts(doc["data"], path)
    prices = _sky_prices(doc.get("prices"), len(values), path)
    ignored = sorted(set(doc) - {"metadata", "data", "prices"})
    if ignored:
        logger.warning("%s: ignoring unknown top-level keys %s", path, ignored)
    times = np.arange(len(values), dtype=np.float64) * float(gap)
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
        duration_s=len(values) * float(gap),
    )


def _sky_gap(meta: Any, path: Path) -> int | float:
    """``metadata.gap_seconds``, a positive number (returned as stored, int or float)."""
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
    return gap


def _sky_counts(data: Any, path: Path) -> np.ndarray:
    """``data``: a non-empty list of non-negative integral node counts."""
    if not isinstance(data, list) or not data:
        raise TraceError("'data' must be a non-empty list of node counts", path, None, "data")
    values = np.empty(len(data), dtype=np.int64)
    for i, v in enumerate(data):
        if not _is_number(v) or not math.isfinite(v) or v != math.floor(v) or abs(v) > 2**53:
            raise TraceError(f"not an integer node count: {_show(v)}", path, None, f"data[{i}]")
        if v < 0:
            raise TraceError(f"negative node count {v}", path, None, f"data[{i}]")
        values[i] = int(v)
    return values


def _sky_prices(raw: Any, ticks: int, path: Path) -> np.ndarray | None:
    """``prices`` (optional): one positive price per tick, or ``None`` when absent."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != ticks:
        got = len(raw) if isinstance(raw, list) else type(raw).__name__
        raise TraceError(
            f"'prices' must be a list as long as 'data' ({ticks}), got {got}",
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
    return prices
