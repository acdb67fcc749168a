"""The all-states forward pass of elasim 7ad059a's solver, kept as a reference.

Copied verbatim (only the imports are new) so that the property tests can check that
:mod:`elasim.optimal.forward` computes exactly what it did, on random small problems.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from elasim.optimal.problem import PlanningProblem

_NEG = -np.inf
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
