"""The optimum's rule at a price of work: the lower convex hull of (rate, cost).

At a price ``lam`` of an effective sample, the best configuration maximises
``lam x rate - cost``; over every price, the best ones are the vertices of the lower
convex hull of the candidates' ``(rate, cost)`` points, each best from the slope of
the edge before it.  ``receding`` builds one frontier per availability level.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["PUT_OFF", "Vertex", "best_at", "lower_frontier", "spot_first", "spot_markup"]

#: Relative rounding within which two prices of work (or two slopes) are equal.
_REL_EPS = 1e-9
#: A price of work this much (relative) below a step is below it, whatever the rounding.
PUT_OFF = 1e-6


class Vertex(NamedTuple):
    """A configuration on a frontier, and the price of work from which it is the best."""

    from_lam: float
    rate: float
    cost: float
    config: tuple[int, int]


def _turns_up(a: tuple[float, ...], b: tuple[float, ...], c: tuple[float, ...]) -> bool:
    """Whether ``b`` lies on or above the segment ``a``-``c`` (not on the lower hull).

    Collinear within rounding counts as above: equal prices per sample (linear
    scaling) make one step, not several a few ulps apart.
    """
    left = (b[1] - a[1]) * (c[0] - a[0])
    right = (c[1] - a[1]) * (b[0] - a[0])
    return left >= right - _REL_EPS * max(abs(left), abs(right))


def lower_frontier(points: list[tuple[float, float, tuple[int, int]]]) -> list[Vertex]:
    """The vertices of the lower convex hull of ``(rate, cost, config)`` points.

    ``points`` must hold ``(0, 0, (0, 0))`` (holding nothing), so the first vertex is
    the best at every price up to the first edge's slope.
    """
    points = sorted(points, key=lambda p: (p[0], p[1]))
    hull: list[tuple[float, float, tuple[int, int]]] = []
    for point in points:
        if hull and hull[-1][0] == point[0]:
            continue  # the same rate dearer
        while len(hull) >= 2 and _turns_up(hull[-2], hull[-1], point):
            hull.pop()
        hull.append(point)
    vertices = [Vertex(-math.inf, *hull[0])]
    for before, after in zip(hull, hull[1:], strict=False):
        slope = (after[1] - before[1]) / (after[0] - before[0])
        vertices.append(Vertex(slope, *after))
    return vertices


def best_at(vertices: list[Vertex], lam: float) -> Vertex:
    """The vertex that is best at ``lam`` (ties, within rounding: more work)."""
    best = vertices[0]
    for vertex in vertices[1:]:
        if vertex.from_lam > lam + _REL_EPS * abs(lam):
            break
        best = vertex
    return best


def spot_markup(vertices: list[Vertex], lam: float, high: float) -> float:
    """``lam`` raised towards ``high`` as far as that buys spot nodes only.

    Never on-demand nodes beyond those ``lam`` buys outright: a price just below
    their vertex, and ``lam`` itself at their tie (left to ``receding``'s pacing).
    """
    base = best_at(vertices, lam * (1.0 - PUT_OFF)).config[1]
    for vertex in vertices:
        if vertex.from_lam > high:
            break
        if vertex.config[1] > base:
            return max(lam, min(high, vertex.from_lam * (1.0 - PUT_OFF)))
    return max(lam, high)


def spot_first(
    rate: Callable[[int], float],
    nodes: tuple[int, int],
    available: int,
    prices_per_s: tuple[float, float],
    cap: float,
) -> list[Vertex]:
    """The configurations worth holding at some price of work, with ``available`` spot.

    Candidates: for each node count from ``nodes[0]`` to ``nodes[1]``, spot first (the
    cheaper market), on-demand for the rest, and only those whose samples cost at
    most ``cap`` (the plan's price of a sample: then every sample done keeps the
    budget whole), plus holding nothing.  ``rate(n)``: samples per second on ``n``
    nodes; ``prices_per_s``: a spot node's and an on-demand node's USD per second.
    The hull (``O(max_nodes)``) answers every price.
    """
    spot_per_s, od_per_s = prices_per_s
    points = [(0.0, 0.0, (0, 0))]
    for count in range(nodes[0], nodes[1] + 1):
        spot = min(available, count)
        samples_per_s = rate(count)
        cost = spot * spot_per_s + ((count - spot) * od_per_s if count > spot else 0.0)
        if samples_per_s > 0.0 and cost <= cap * samples_per_s * (1.0 + 1e-9):
            points.append((samples_per_s, cost, (spot, count - spot)))
    return lower_frontier(points)
