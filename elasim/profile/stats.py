"""The two robust statistics a profile is made and applied with.

Measurements on a loaded host are noisy and sometimes missing: a median that skips
non-finite values (with a default when nothing was measured) and a least-squares line
that stays non-negative and copes with a single point.  Both :mod:`.runs` (making a
profile) and :mod:`.apply` (fitting the simulator's pause model) use them, so they
live below both.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

__all__ = ["finite_median", "fit_line"]


def finite_median(values: Iterable[float], default: float = 0.0) -> float:
    """Median of the finite values; ``default`` when there are none (not measured)."""
    items = [v for v in values if math.isfinite(v)]
    return statistics.median(items) if items else default


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``y = a + b x`` (b >= 0; a >= 0), robust to one point."""
    if not points:
        return 0.0, 0.0
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    if len(set(xs)) < 2:
        return max(statistics.fmean(ys), 0.0), 0.0
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    slope = max(sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx, 0.0)
    return max(mean_y - slope * mean_x, 0.0), slope
