"""Helpers every importer shares: input paths, JSON loading, row merging, metadata.

One module per source format (``from_skypilot``, ``from_bamboo``, ``from_aws_price``,
``from_philly``) builds on these; :mod:`.importers` ties them together.  Every
problem becomes a :class:`~.errors.TraceError`, never a traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .cells import read_text
from .errors import TraceError
from .model import TraceMetadata

PathLike = str | os.PathLike


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


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
