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

The program runs for several values of ``lam`` at once (numpy, one array axis per
value): about ``segments x values x configurations^2`` operations per pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .problem import PlanningProblem

__all__ = ["Solution", "solve"]

_NEG = -np.inf
#: Values of lam per pass, and at most this many passes narrowing the bracket.
_PER_PASS = 12
_PASSES = 12
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


#: The age of a group: started at this segment's start (its checkpoint timer too),
#: or earlier.  Only a drop that takes every node needs it (what is rolled back).
_FRESH, _OLD = 0, 1


def _change_tables(problem: PlanningProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How planned changes are gathered: (bar on old changes, fresh sources, fresh bar).

    A change either restarts the group (fresh) or not (old).  Few changes restart it
    (from nothing, or to nodes of the other market only), so the fresh ones are
    gathered per target (padded with the target itself, barred by ``+inf``) instead
    of a C x C table; the old ones are the rest, the restarts barred by ``+inf``.
    """
    size = len(problem.configs)
    cols = np.arange(size)
    bar_old = np.where(problem.restarts, np.inf, 0.0)
    sources_of = [np.flatnonzero(problem.restarts[:, c]) for c in range(size)]
    width = max(1, max(len(found) for found in sources_of))
    fresh_from = np.tile(cols[:, None], (1, width))  # (target, slot) -> source
    for c, found in enumerate(sources_of):
        fresh_from[c, : len(found)] = found
    fresh_bar = np.where(problem.restarts[fresh_from, cols[:, None]], 0.0, np.inf)
    return bar_old, fresh_from, fresh_bar


def _forward(
    problem: PlanningProblem, lams: np.ndarray, drops: list[_Drop | None], *, keep: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray | None]]:
    """One pass for every ``lam``: the best value, work and cost ending in each state.

    A state is (age, configuration), flattened as ``age x C + configuration``.  With
    ``keep`` (one ``lam`` only) it also returns, per segment, the argmax of the
    planned change (per age and configuration) and the source of each state after a
    forced preemption, for the backtrack.
    """
    size = len(problem.configs)
    count = problem.segments
    lam = lams[:, None]
    value, work, cost = _start_states(len(lams), size)
    spot = problem.configs[:, 0]
    goodput = problem.goodput
    choices: list[np.ndarray] = []
    sources: list[np.ndarray | None] = []
    cols = np.arange(size)
    first = problem.loss.copy()
    first[0] = problem.first_loss  # the very first start loads no checkpoint
    bar_old, fresh_from, fresh_bar = _change_tables(problem)
    fresh = (fresh_from, fresh_bar)
    # lam x loss of the old (non-restarting) changes, the same in most segments
    priced_old = lam[:, :, None] * (problem.loss + bar_old)[None, :, :]
    for k in range(count):
        drop = drops[k]
        source = None
        if drop is not None:
            value, work, cost, source = _preempt(drop, value, work, cost, lam, keep)
        loss = first if k == 0 else problem.loss
        if problem.length_s[k] < problem.min_add_s:
            loss = np.where(problem.adds, np.inf, loss)  # too short to boot nodes in
        best_value, best_work, best_cost, state = _better_age(value, work, cost, cols)
        if k == 0 or problem.length_s[k] < problem.min_add_s:
            table = best_value[:, :, None] - lam[:, :, None] * (loss + bar_old)[None, :, :]
        else:
            table = best_value[:, :, None] - priced_old
        length = problem.length_s[k]
        gain = goodput * length
        paid = problem.hold_usd_per_s(k) * length
        tie = 1.0 + 1e-9 * (count - k) / count
        feasible = spot <= problem.available[k]
        parts = []
        for arg, best in _best_changes(best_value, table, loss, lam, fresh, cols):
            parts.append(
                (
                    np.where(feasible, best + lam * gain * tie - paid, _NEG),
                    np.take_along_axis(best_work, arg, axis=1) - loss[arg, cols] + gain,
                    np.take_along_axis(best_cost, arg, axis=1) + paid,
                    np.take_along_axis(state, arg, axis=1),
                )
            )
        value = np.concatenate([parts[0][0], parts[1][0]], axis=1)
        work = np.concatenate([parts[0][1], parts[1][1]], axis=1)
        cost = np.concatenate([parts[0][2], parts[1][2]], axis=1)
        if keep:
            choices.append(np.stack([parts[0][3][0], parts[1][3][0]]).astype(np.int32))
            sources.append(source)
    return value, work, cost, choices, sources


def _start_states(values: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value, work and cost of every state before the first segment, for ``values`` lams.

    The job holds nothing yet: only the old-age state of the empty configuration
    (index 0) is reachable, at value, work and cost 0; every other state is barred.
    """
    value = np.full((values, 2 * size), _NEG)
    value[:, _OLD * size] = 0.0  # nothing held
    work = np.zeros_like(value)
    cost = np.zeros_like(value)
    return value, work, cost


def _better_age(
    value: np.ndarray, work: np.ndarray, cost: np.ndarray, cols: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each configuration at the better of its two ages, with the flat state it is.

    A planned change costs the same from either age, so it can start from the better
    one; the age matters only to what a forced preemption loses.
    """
    size = len(cols)
    older = value[:, size:] >= value[:, :size]
    best_value = np.where(older, value[:, size:], value[:, :size])
    best_work = np.where(older, work[:, size:], work[:, :size])
    best_cost = np.where(older, cost[:, size:], cost[:, :size])
    state = np.where(older, size + cols, cols)
    return best_value, best_work, best_cost, state


def _best_changes(
    best_value: np.ndarray,
    table: np.ndarray,
    loss: np.ndarray,
    lam: np.ndarray,
    fresh: tuple[np.ndarray, np.ndarray],
    cols: np.ndarray,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The best planned change into each configuration: ``(fresh, old)``, each ``(arg, best)``.

    Fresh changes (restarts) are gathered per target from their few sources
    (:func:`_change_tables`); old ones are the argmax over the priced ``table`` of
    every source.  ``arg`` is the source configuration, ``best`` its value after the
    change's priced loss.
    """
    fresh_from, fresh_bar = fresh
    values = (
        best_value[:, fresh_from]
        - lam[:, :, None] * loss[fresh_from, cols[:, None]][None]
        - fresh_bar[None]
    )
    slot = values.argmax(axis=2)
    fresh_arg = fresh_from[cols, slot]
    fresh_best = np.take_along_axis(values, slot[:, :, None], axis=2)[:, :, 0]
    old_arg = table.argmax(axis=1)
    old_best = np.take_along_axis(table, old_arg[:, None, :], axis=1)[:, 0, :]
    return (fresh_arg, fresh_best), (old_arg, old_best)


@dataclass(frozen=True)
class _Drop:
    """A capacity drop as a gather: each landing state picks its best candidate.

    Attributes:
        gone: flat states (both ages) of the configurations the drop takes nodes from.
        land: flat states (old age) where the survivors land.
        come: ``(land, slot)``: candidate flat states (the landing state itself when it
            survives the drop, and every state the drop takes to it).
        lost: ``(land, slot)``: the work each candidate loses (``inf``: padding).
    """

    gone: np.ndarray
    land: np.ndarray
    come: np.ndarray
    lost: np.ndarray


def _drops(problem: PlanningProblem) -> list[_Drop | None]:
    """The drops of every segment as gathers (built once per problem)."""
    size = len(problem.configs)
    out: list[_Drop | None] = []
    for forced in problem.forced:
        if forced is None:
            out.append(None)
            continue
        rows, targets, old_losses, fresh_losses = forced
        taken = set(rows.tolist())
        lists: dict[int, list[tuple[int, float]]] = {}
        for row, target, old, fresh in zip(rows, targets, old_losses, fresh_losses, strict=True):
            entry = lists.setdefault(int(target), [])
            entry.append((_FRESH * size + int(row), float(fresh)))
            entry.append((_OLD * size + int(row), float(old)))
        for target, entry in lists.items():
            if target not in taken:
                entry.append((_OLD * size + target, 0.0))
        width = max(len(entry) for entry in lists.values())
        land = np.asarray([_OLD * size + t for t in lists], dtype=np.int64)
        come = np.tile(land[:, None], (1, width))
        lost = np.full((len(land), width), np.inf)
        for i, entry in enumerate(lists.values()):
            come[i, : len(entry)] = [state for state, _ in entry]
            lost[i, : len(entry)] = [loss for _, loss in entry]
        gone = np.concatenate([_FRESH * size + rows, _OLD * size + rows])
        out.append(_Drop(gone, land, come, lost))
    return out


def _preempt(
    drop: _Drop,
    value: np.ndarray,
    work: np.ndarray,
    cost: np.ndarray,
    lam: np.ndarray,
    keep: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Configurations above the new availability lose their spot nodes (either age)."""
    candidates = value[:, drop.come] - lam[:, :, None] * drop.lost[None]
    slot = candidates.argmax(axis=2)
    picked = drop.come[np.arange(len(drop.land)), slot]  # (lams, land)
    pick_lost = np.take_along_axis(drop.lost[None], slot[:, :, None], axis=2)[:, :, 0]
    new_value, new_work, new_cost = value.copy(), work.copy(), cost.copy()
    new_value[:, drop.gone] = _NEG
    new_value[:, drop.land] = np.take_along_axis(candidates, slot[:, :, None], axis=2)[:, :, 0]
    new_work[:, drop.land] = np.take_along_axis(work, picked, axis=1) - pick_lost
    new_cost[:, drop.land] = np.take_along_axis(cost, picked, axis=1)
    source = None
    if keep:
        source = np.arange(value.shape[1])
        source[drop.land] = picked[0]
    return new_value, new_work, new_cost, source


def _outcomes(
    problem: PlanningProblem, lams: np.ndarray, drops: list[_Drop | None]
) -> tuple[np.ndarray, np.ndarray]:
    """Work and cost of the best schedule for each ``lam``."""
    value, work, cost, _, _ = _forward(problem, lams, drops, keep=False)
    best = value.argmax(axis=1)
    rows = np.arange(len(lams))
    return work[rows, best], cost[rows, best]


def _bracket(problem: PlanningProblem) -> tuple[float, float]:
    """A starting range of ``lam``: from far below to far above one node's sample price."""
    prices = [float(problem.spot_price_per_hour.max(initial=0.0))]
    if math.isfinite(problem.on_demand_price_per_hour):
        prices.append(problem.on_demand_price_per_hour)
    per_node = float(problem.goodput[problem.goodput > 0].min(initial=1.0))
    base = max(max(prices) / 3600.0 / per_node, 1e-12)
    return base * 1e-2, base * 1e2


def _search(
    problem: PlanningProblem, drops: list[_Drop | None]
) -> tuple[float, float, float, bool]:
    """The bracket ``(low, high)`` of lam around the target's work, the bound, feasibility."""
    target = problem.work_samples
    low, high = _bracket(problem)
    bound = 0.0
    found = False
    for _ in range(8):  # widen until the top of the range does the work
        works, costs = _outcomes(problem, np.asarray([high]), drops)
        bound = max(bound, float(costs[0] + high * (target - works[0])))
        if works[0] >= target:
            found = True
            break
        low, high = high, high * 1e2
    if not found:
        return low, high, bound, False
    for _ in range(_PASSES):
        if high / low - 1.0 < _PRECISION:
            break
        lams = np.geomspace(low, high, _PER_PASS)
        works, costs = _outcomes(problem, lams, drops)
        bound = max(bound, float(np.max(costs + lams * (target - works))))
        enough = np.flatnonzero(works >= target)
        if len(enough) == 0:  # pragma: no cover - the top was checked above
            break
        first = int(enough[0])
        high = float(lams[first])
        low = float(lams[first - 1]) if first > 0 else low / 1e2
    return low, high, bound, True


def _path(problem: PlanningProblem, lam: float, drops: list[_Drop | None]) -> np.ndarray:
    """The best schedule for one ``lam``."""
    value, _, _, choices, sources = _forward(problem, np.asarray([lam]), drops, keep=True)
    return _backtrack(int(value[0].argmax()), choices, sources)


def solve(problem: PlanningProblem) -> Solution:
    """The cheapest schedule on ``problem``'s grid that does its work (see the module).

    The schedule at the top of the final bracket does the work; the one at its
    bottom does not.  With switching costs the cheapest schedule that does exactly
    the work is often neither but a mix (fast first, slow after), which no single
    lam produces (the duality gap); so the answer is the cheapest of the top
    schedule and every splice of the two at a segment boundary, each evaluated as
    the replay runs it: it stops paying when the work is done.
    """
    drops = _drops(problem)
    low, high, bound, found = _search(problem, drops)
    top = _path(problem, high, drops)
    tables = _tables(problem)
    candidates = [top]
    if found and low < high:
        candidates += _splices(problem, tables, top, _path(problem, low, drops))
    best = None
    for path in candidates:
        reached, cost, progress = _evaluate(problem, tables, path)
        if (reached or not found) and (best is None or cost < best[0]):
            best = (cost, path, progress)
    assert best is not None
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
    usd = np.stack([problem.hold_usd_per_s(k) for k in range(count)])
    return _Tables(forced_to, forced_loss, fresh_loss, usd)


def _work_after_changes(
    problem: PlanningProblem, tables: _Tables, path: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Work done when each segment starts (after its changes), and each segment's gain."""
    ks = np.arange(len(path))
    previous = np.concatenate([[0], path[:-1]])
    after = tables.forced_to[ks, previous]
    fresh = problem.restarts[after, path]
    was_fresh = np.concatenate([[False], fresh[:-1]])
    forced = np.where(
        was_fresh, tables.forced_fresh_loss[ks, previous], tables.forced_loss[ks, previous]
    )
    lost = forced + problem.loss[after, path]
    lost[0] = problem.first_loss[path[0]]
    short = (problem.length_s < problem.min_add_s) & problem.adds[after, path]
    lost[short] = np.inf  # as in the program: no boot may start a segment this short
    gain = problem.goodput[path] * problem.length_s
    start = np.concatenate([[0.0], np.cumsum(gain)[:-1]]) - np.cumsum(lost)
    return start, gain


def _evaluate_work(problem: PlanningProblem, tables: _Tables, path: np.ndarray) -> float:
    """Work of ``path`` over the whole horizon."""
    start, gain = _work_after_changes(problem, tables, path)
    return float(start[-1] + gain[-1])


def _evaluate(
    problem: PlanningProblem, tables: _Tables, path: np.ndarray
) -> tuple[bool, float, np.ndarray]:
    """As the replay runs ``path``: (work done by the horizon, cost until done, progress)."""
    target = problem.work_samples
    start, gain = _work_after_changes(problem, tables, path)
    paid = tables.usd_per_s[np.arange(len(path)), path] * problem.length_s
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
) -> list[np.ndarray]:
    """``first`` up to a segment boundary and ``second`` from it, and the other way round."""
    count = len(first)
    step = max(count // 400, 1)
    cuts = range(1, count, step)
    out = []
    for a, b in ((first, second), (second, first)):
        for cut in cuts:
            out.append(np.concatenate([a[:cut], b[cut:]]))
    return out
