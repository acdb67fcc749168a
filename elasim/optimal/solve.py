"""The dynamic program: cheapest node schedule that does the work by the horizon.

Minimising cost subject to "work >= W by the horizon" is solved through its
Lagrangian: for a price ``lam`` (USD per effective sample), a dynamic program over
(segment, configuration) maximises ``lam x work - cost`` exactly, switching losses
included; the smallest ``lam`` whose schedule does at least ``W`` is found by search.
Because progress is priced instead of tracked, the program has ``segments x
configurations`` states rather than ``segments x progress x configurations``, and
small losses (a 7-second pause in a 12-hour job) count exactly instead of vanishing
in a progress grid.

Every evaluated ``lam`` also gives a lower bound on the cost of *any* schedule on the
same grid that does ``W`` (weak duality): ``cost(x) + lam (W - work(x))``.  The
planner reports the best such bound next to the plan's cost, so the gap left by the
search (the schedules between two values of ``lam``) is measured, not guessed.
Ties are broken towards earlier work (a relative ``1e-9`` per segment), so that the
schedule that just does ``W`` runs as early as it can and the replay's finishing
early trims only idle time.

**Cost.**  One pass costs about ``sum_k |feasible(k-1)| x |feasible(k)|``
operations (:mod:`.forward`: only configurations the trace offers are states), and
the search takes about ten passes (cutting planes on the dual, :func:`_search`).

**Guarantee.**  For each ``lam`` the pass is exact: the best ``lam x work - cost`` over
every schedule on the grid (the tie factor aside).  The answer is a schedule that
does the work by the horizon, at a cost no more than the best of the two schedules
adjacent to the dual's breakpoint and their splices; ``lower_bound_usd`` is the
dual's maximum over the evaluated ``lam``: no schedule on the grid paying for the
segments it holds costs less.  The gap between the two is reported, not assumed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from .forward import Kernel, drops_of
from .problem import PlanningProblem

__all__ = ["Progress", "Solution", "solve"]

#: At most this many cutting planes narrowing the bracket.
_PASSES = 40
#: Forward passes of a typical solve (for progress reports).
_TYPICAL_PASSES = 10

#: ``progress(done, total)``: forward passes done, and the expected total.
Progress = Callable[[int, int], None]
#: The bracket is narrowed to this relative width.  It need not isolate the segment
#: at which the work crosses the target: the splices of the two bracketing schedules
#: (see :func:`solve`) cover what lies between them.
_PRECISION = 1e-4


@dataclass(frozen=True)
class Solution:
    """The planner's answer on its grid.

    Attributes:
        path: configuration index in each segment.
        work_samples: work of that schedule over the whole horizon (losses taken off).
        cost_usd: its cost up to where its work reaches the target (the replay stops
            there), in the planner's model.
        lower_bound_usd: no schedule on this grid that does the target costs less.
        feasible: whether any schedule on the grid does the target by the horizon.
        lam_usd_per_sample: the price of work the schedule was found at.
        progress: the planned fraction of the target done at each segment start.
    """

    path: np.ndarray
    work_samples: float
    cost_usd: float
    lower_bound_usd: float
    feasible: bool
    lam_usd_per_sample: float
    progress: np.ndarray


def _bracket(problem: PlanningProblem) -> tuple[float, float]:
    """A starting range of ``lam``: from far below to far above one node's sample price."""
    prices = [float(problem.spot_price_per_hour.max(initial=0.0))]
    if math.isfinite(problem.on_demand_price_per_hour):
        prices.append(problem.on_demand_price_per_hour)
    per_node = float(problem.goodput[problem.goodput > 0].min(initial=1.0))
    base = max(max(prices) / 3600.0 / per_node, 1e-12)
    return base * 1e-2, base * 1e2


class _Dual:
    """The evaluated points of the dual: each ``lam`` with its schedule's work and cost.

    Each pass keeps its choices, and the schedule of every evaluated ``lam`` is kept:
    the answer's two schedules are those of the final bracket's ends, both evaluated
    already, so no pass is run twice (issue 23: two passes of eleven).
    """

    def __init__(self, kernel: Kernel, target: float, progress: Progress | None) -> None:
        self.kernel, self.target, self.progress = kernel, target, progress
        self.bound = 0.0
        self.evaluations = 0
        self.paths: dict[float, np.ndarray] = {}
        if progress is not None:  # started: a first pass of minutes shows as under way
            progress(0, _TYPICAL_PASSES)

    def tick(self) -> None:
        """One more forward pass done (the total is a typical count, not a promise)."""
        self.evaluations += 1
        if self.progress is not None:
            self.progress(self.evaluations, max(_TYPICAL_PASSES, self.evaluations + 1))

    def at(self, lam: float) -> tuple[float, float]:
        """``(work, cost)`` at ``lam``; every point also tightens the lower bound."""
        value, works, costs, choices, sources = self.kernel.run(lam, keep=True)
        best = int(value.argmax())
        work, cost = float(works[best]), float(costs[best])
        self.paths[lam] = _backtrack(best, choices, sources)
        self.tick()
        self.bound = max(self.bound, cost + lam * (self.target - work))
        return work, cost

    def path(self, lam: float) -> np.ndarray:
        """The best schedule for ``lam`` (kept from its evaluation, else one pass)."""
        if lam not in self.paths:
            self.at(lam)
        return self.paths[lam]


def _search(problem: PlanningProblem, dual: _Dual) -> tuple[float, float, float, bool]:
    """The bracket ``(low, high)`` of lam around the target's work, the bound, feasibility.

    First a bracket: ``high`` does the work, ``low`` does not (widened by 100x steps
    from a guess).  Then cutting planes: the dual ``g(lam) = cost + lam (W - work)``
    is concave and piecewise linear, each evaluation is one of its pieces, and the
    next ``lam`` is where the pieces of the two ends cross.  Either that ``lam``
    reveals a new piece (it replaces the end on its side) or it is the breakpoint
    where the work crosses ``W``, and ``g`` there is the exact maximum of the dual.
    That takes a handful of passes where bisection to a relative ``1e-4`` took 20.
    """
    target = problem.work_samples
    low, high = _bracket(problem)
    hi = dual.at(high)
    for _ in range(7):  # widen until the top of the range does the work
        if hi[0] >= target:
            break
        low, high = high, high * 1e2
        hi = dual.at(high)
    if hi[0] < target:
        return low, high, dual.bound, False
    lo = dual.at(low)
    for _ in range(7):  # ... and the bottom does not
        if lo[0] < target:
            break
        high, hi = low, lo
        low = low / 1e2
        lo = dual.at(low)
    if lo[0] >= target:
        return low, high, dual.bound, True
    for _ in range(_PASSES):
        if high / low - 1.0 < _PRECISION:
            break
        lam = (hi[1] - lo[1]) / (hi[0] - lo[0])  # where the two pieces cross
        if not low < lam < high:  # pragma: no cover - rounding at a breakpoint
            lam = math.sqrt(low * high)
        point = dual.at(lam)
        if _same(point, hi) or _same(point, lo):
            break  # no piece between: lam is the breakpoint, the bound is exact
        if point[0] >= target:
            high, hi = lam, point
        else:
            low, lo = lam, point
    return low, high, dual.bound, True


def _same(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """The same schedule's outcome, up to the rounding of the sums."""
    return all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b, strict=True))


def solve(problem: PlanningProblem, progress: Progress | None = None) -> Solution:
    """The cheapest schedule on ``problem``'s grid that does its work (see the module).

    The schedule at the top of the final bracket does the work; the one at its
    bottom does not.  With switching costs the cheapest schedule that does exactly
    the work is often neither but a mix (fast first, slow after), which no single
    lam produces (the duality gap); so the answer is the cheapest of the top
    schedule and every splice of the two at a segment boundary, each evaluated as
    the replay runs it: it stops paying when the work is done.

    ``progress(done, total)`` is called once at the start (0 done) and after every
    forward pass.
    """
    kernel = Kernel(problem, drops_of(problem))
    dual = _Dual(kernel, problem.work_samples, progress)
    low, high, bound, found = _search(problem, dual)
    top = dual.path(high)
    tables = _tables(problem)
    candidates: Iterable[tuple[np.ndarray, _Terms | None]] = [(top, None)]
    if found and low < high:
        candidates = itertools.chain(candidates, _splices(problem, tables, top, dual.path(low)))
    best = None
    for path, terms in candidates:
        reached, cost, progress = _evaluate(problem, tables, path, terms)
        if (reached or not found) and (best is None or cost < best[0]):
            best = (cost, path, progress)
    assert best is not None
    if dual.progress is not None:
        dual.progress(dual.evaluations, dual.evaluations)  # done
    cost, path, progress = best
    return Solution(
        path=path,
        work_samples=float(_evaluate_work(problem, tables, path)),
        cost_usd=float(cost),
        lower_bound_usd=max(bound, 0.0) if found else math.nan,
        feasible=found,
        lam_usd_per_sample=high,
        progress=progress,
    )


def _backtrack(end: int, choices: list[np.ndarray], sources: list[np.ndarray | None]) -> np.ndarray:
    """Configuration of each segment, from the last one's back to the first."""
    size = choices[0].shape[1] if choices else 1
    path = np.zeros(len(choices), dtype=np.int64)
    state = end
    for k in range(len(choices) - 1, -1, -1):
        age, config = divmod(state, size)
        path[k] = config
        state = int(choices[k][age, config])
        source = sources[k]
        if source is not None:
            state = int(source[state])
    return path


@dataclass(frozen=True)
class _Tables:
    """Per segment and configuration: the forced preemption's result and losses, the price."""

    forced_to: np.ndarray
    forced_loss: np.ndarray
    forced_fresh_loss: np.ndarray
    usd_per_s: np.ndarray


def _tables(problem: PlanningProblem) -> _Tables:
    count, size = problem.segments, len(problem.configs)
    forced_to = np.tile(np.arange(size), (count, 1))
    forced_loss = np.zeros((count, size))
    fresh_loss = np.zeros((count, size))
    for k, forced in enumerate(problem.forced):
        if forced is not None:
            rows, targets, losses, fresh = forced
            forced_to[k, rows] = targets
            forced_loss[k, rows] = losses
            fresh_loss[k, rows] = fresh
    usd = problem.hold_usd_table()
    return _Tables(forced_to, forced_loss, fresh_loss, usd)


@dataclass(frozen=True)
class _Terms:
    """Per segment of one schedule: work lost at its start, work it gains, USD it pays."""

    lost: np.ndarray
    gain: np.ndarray
    paid: np.ndarray


def _lost_at(
    problem: PlanningProblem, tables: _Tables, path: np.ndarray, at: np.ndarray
) -> np.ndarray:
    """Work lost at the start of segments ``at`` of ``path``: the forced drop, then the change.

    A segment's loss depends only on its configuration and the two before it (what
    the drop found, and whether that group had just started), so a splice of two
    schedules differs from them only in the two segments after its cut.
    """
    previous = np.where(at > 0, path[at - 1], 0)
    before = np.where(at > 1, path[at - 2], 0)
    after = tables.forced_to[at, previous]
    was_fresh = (at > 0) & problem.restarts[tables.forced_to[at - 1, before], previous]
    forced = np.where(
        was_fresh, tables.forced_fresh_loss[at, previous], tables.forced_loss[at, previous]
    )
    here = path[at]
    lost = forced + problem.loss[after, here]
    lost[at == 0] = problem.first_loss[path[0]]
    short = (problem.length_s[at] < problem.min_add_s) & problem.adds[after, here]
    lost[short] = np.inf  # as in the program: no boot may start a segment this short
    return lost


def _terms(problem: PlanningProblem, tables: _Tables, path: np.ndarray) -> _Terms:
    """Every segment's terms of ``path``."""
    ks = np.arange(len(path))
    return _Terms(
        lost=_lost_at(problem, tables, path, ks),
        gain=problem.goodput[path] * problem.length_s,
        paid=tables.usd_per_s[ks, path] * problem.length_s,
    )


def _work_after_changes(terms: _Terms) -> np.ndarray:
    """Work done when each segment starts (after its changes)."""
    return np.concatenate([[0.0], np.cumsum(terms.gain)[:-1]]) - np.cumsum(terms.lost)


def _evaluate_work(problem: PlanningProblem, tables: _Tables, path: np.ndarray) -> float:
    """Work of ``path`` over the whole horizon."""
    terms = _terms(problem, tables, path)
    return float(_work_after_changes(terms)[-1] + terms.gain[-1])


def _evaluate(
    problem: PlanningProblem, tables: _Tables, path: np.ndarray, terms: _Terms | None = None
) -> tuple[bool, float, np.ndarray]:
    """As the replay runs ``path``: (work done by the horizon, cost until done, progress).

    ``terms``: ``path``'s terms when known (a splice's, see :func:`_splices`).
    """
    target = problem.work_samples
    terms = terms or _terms(problem, tables, path)
    start, gain, paid = _work_after_changes(terms), terms.gain, terms.paid
    progress = np.clip(start / target, 0.0, 1.0)
    hits = np.flatnonzero(start + gain >= target)
    if len(hits) == 0:
        return False, float(paid.sum()), progress
    k = int(hits[0])
    share = min(max(target - start[k], 0.0) / gain[k], 1.0) if gain[k] > 0 else 0.0
    progress[k + 1 :] = 1.0
    return True, float(paid[:k].sum() + paid[k] * share), progress


def _splices(
    problem: PlanningProblem, tables: _Tables, first: np.ndarray, second: np.ndarray
) -> Iterator[tuple[np.ndarray, _Terms]]:
    """``first`` up to a segment boundary and ``second`` from it, and the other way round.

    Each splice comes with its terms: its two schedules' own, but for the two
    segments after the cut (:func:`_lost_at`), the very values a full evaluation
    computes, at a fraction of its cost (some 800 splices a solve).
    """
    count = len(first)
    step = max(count // 400, 1)
    cuts = range(1, count, step)
    for a, b in ((first, second), (second, first)):
        head, tail = _terms(problem, tables, a), _terms(problem, tables, b)
        for cut in cuts:
            path = np.concatenate([a[:cut], b[cut:]])
            edge = np.arange(cut, min(cut + 2, count))
            lost = _lost_at(problem, tables, path, edge)
            yield (
                path,
                _Terms(
                    lost=np.concatenate([head.lost[:cut], lost, tail.lost[cut + len(edge) :]]),
                    gain=np.concatenate([head.gain[:cut], tail.gain[cut:]]),
                    paid=np.concatenate([head.paid[:cut], tail.paid[cut:]]),
                ),
            )
