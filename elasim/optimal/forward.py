"""The forward pass of the dynamic program for one price of work, over feasible states.

The program (see :mod:`.solve`) keeps, per segment, the best value ``lam x work -
cost`` of ending in each state ``(age, configuration)``.  The pass here computes
exactly what the all-states pass of earlier versions computed (the same floating
point operations in the same order, the same first-index tie-breaking), but touches
only what can matter:

* **targets**: only configurations whose spot nodes the segment offers (the others
  are barred, ``-inf``);
* **sources**: only configurations the previous segment offered (every other state
  is ``-inf`` there, and a ``-inf`` source is never the first maximum of a target
  that has a finite one);
* **tables**: the priced loss of every planned change between two availability
  levels is a contiguous ``(targets, sources)`` block, built once per problem and
  priced once per ``lam``, so the maximum runs along the fast axis.

On the bundled traces a third of the time has no spot at all, where a segment costs
``17 x 17`` instead of ``153 x 153`` operations at 16 nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .problem import PlanningProblem

__all__ = ["Drop", "Kernel", "drops_of"]

_NEG = -np.inf
#: The age of a group: started at this segment's start (its checkpoint timer too),
#: or earlier.  Only a drop that takes every node needs it (what is rolled back).
FRESH, OLD = 0, 1


@dataclass(frozen=True)
class Drop:
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


def drops_of(problem: PlanningProblem) -> list[Drop | None]:
    """The drops of every segment as gathers (built once per problem)."""
    size = len(problem.configs)
    out: list[Drop | None] = []
    made: dict[int, Drop] = {}  # segments share their forced tables (see problem._forced)
    for forced in problem.forced:
        if forced is None:
            out.append(None)
            continue
        if id(forced) in made:
            out.append(made[id(forced)])
            continue
        rows, targets, old_losses, fresh_losses = forced
        taken = set(rows.tolist())
        lists: dict[int, list[tuple[int, float]]] = {}
        for row, target, old, fresh in zip(rows, targets, old_losses, fresh_losses, strict=True):
            entry = lists.setdefault(int(target), [])
            entry.append((FRESH * size + int(row), float(fresh)))
            entry.append((OLD * size + int(row), float(old)))
        for target, entry in lists.items():
            if target not in taken:
                entry.append((OLD * size + target, 0.0))
        width = max(len(entry) for entry in lists.values())
        land = np.asarray([OLD * size + t for t in lists], dtype=np.int64)
        come = np.tile(land[:, None], (1, width))
        lost = np.full((len(land), width), np.inf)
        for i, entry in enumerate(lists.values()):
            come[i, : len(entry)] = [state for state, _ in entry]
            lost[i, : len(entry)] = [loss for _, loss in entry]
        gone = np.concatenate([FRESH * size + rows, OLD * size + rows])
        made[id(forced)] = Drop(gone, land, come, lost)
        out.append(made[id(forced)])
    return out


@dataclass(frozen=True)
class _Block:
    """The planned changes from one availability level into another (one loss variant).

    The two candidate tables of a segment, restarting changes (``(tgt, slot)``) then
    all others (``(tgt, src)``), lie flat one after the other in ``loss`` (and in the
    segment's scratch ``work``), so that the best candidate of every target state,
    both ages, is gathered with one ``take`` per quantity (issue 23: a pass is some
    3,000 small segments, where each NumPy call counts).

    Attributes:
        src: source configurations (feasible before), ascending.
        tgt: target configurations (feasible now), ascending.
        states: the target flat states, fresh then old: ``tgt`` and ``tgt + C``.
        loss: the fresh table ``(tgt, slot)``, then the old table ``(tgt, src)``
            (``+inf`` where a change restarts the group), raveled.
        fresh_from: ``(tgt, slot)``: the sources whose change restarts the group.
        fresh_bar: ``(tgt, slot)``: ``+inf`` on padding.
        came_from: for every flat candidate, the configuration it comes from.
        first: per target state, the flat index of its first candidate.
        work: scratch for the candidates' values (one segment at a time), and its
            two tables ``fresh`` and ``old`` (views).
        pick: scratch for each target state's best candidate, and its two halves.
    """

    src: np.ndarray
    tgt: np.ndarray
    states: np.ndarray
    loss: np.ndarray
    fresh_from: np.ndarray
    fresh_bar: np.ndarray
    came_from: np.ndarray
    first: np.ndarray
    work: np.ndarray
    fresh: np.ndarray
    old: np.ndarray
    pick: np.ndarray
    pick_fresh: np.ndarray
    pick_old: np.ndarray

    def tables(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``flat`` (laid out as ``loss``) with its two tables: (flat, fresh, old)."""
        rows, split = len(self.tgt), self.fresh_from.size
        return flat, flat[:split].reshape(rows, -1), flat[split:].reshape(rows, len(self.src))


class Kernel:
    """The forward pass of one problem, for any ``lam`` (see the module)."""

    def __init__(self, problem: PlanningProblem, drops: list[Drop | None]) -> None:
        self.problem, self.drops = problem, drops
        configs = problem.configs
        self.size = size = len(configs)
        count = problem.segments
        top = int(configs[:, 0].max())
        self.levels = np.minimum(problem.available, top).astype(np.int64)
        self.short = problem.length_s < problem.min_add_s
        self.gain = problem.goodput[None, :] * problem.length_s[:, None]  # (segments, C)
        self.paid = problem.hold_usd_table() * problem.length_s[:, None]
        self.tie = 1.0 + 1e-9 * (count - np.arange(count)) / count
        cols = np.arange(size)
        self._bar_old = np.where(problem.restarts, np.inf, 0.0)
        sources_of = [np.flatnonzero(problem.restarts[:, c]) for c in range(size)]
        width = max(1, max(len(found) for found in sources_of))
        fresh_from = np.tile(cols[:, None], (1, width))
        for c, found in enumerate(sources_of):
            fresh_from[c, : len(found)] = found
        self._fresh_from = fresh_from
        self._fresh_bar = np.where(problem.restarts[fresh_from, cols[:, None]], 0.0, np.inf)
        self._feasible = {a: np.flatnonzero(configs[:, 0] <= a) for a in range(top + 1)}
        self._blocks: dict[tuple[int, int, bool, bool], _Block] = {}
        self.keys = [self._key(k) for k in range(count)]
        # a drop to a level no lower than the last segment's takes nothing anyone holds
        # (every configuration above it was barred there): it need not be replayed
        self.dropping = np.concatenate([[True], self.levels[1:] < self.levels[:-1]])
        self._cols = cols
        self._olds = cols + size
        self._none = np.full(2 * size, _NEG)  # a segment's states before its changes
        self._zeros = np.zeros(2 * size)
        self._segment_rows()
        self._laid_out: list[Any] | None = None

    def _segment_rows(self) -> None:
        """Gain and price of each segment's target states (both ages), laid end to end.

        A segment's rows are a slice of these (no NumPy call per segment); the reward
        ``lam x gain x tie`` is one product per pass over all of them.
        """
        rows = [self._feasible[int(level)] for level in self.levels]
        ks = np.repeat(np.arange(len(rows)), [2 * len(r) for r in rows])
        both = np.concatenate([np.concatenate([r, r]) for r in rows])
        self._gain_rows = self.gain[ks, both]
        self._paid_rows = self.paid[ks, both]
        self._tie_rows = self.tie[ks]
        ends = np.cumsum([2 * len(r) for r in rows]).tolist()
        self._spans = list(zip([0, *ends[:-1]], ends, strict=True))

    def _key(self, k: int) -> tuple[int, int, bool, bool]:
        """Block of segment ``k``: (source level or -1 at the start, level, first, short)."""
        before = -1 if k == 0 else int(self.levels[k - 1])
        return before, int(self.levels[k]), k == 0, bool(self.short[k])

    def _loss(self, first: bool, short: bool) -> np.ndarray:
        """The loss of every planned change in a segment of this kind (as the program had)."""
        problem = self.problem
        loss = problem.loss
        if first:
            loss = loss.copy()
            loss[0] = problem.first_loss  # the very first start loads no checkpoint
        if short:
            loss = np.where(problem.adds, np.inf, loss)  # too short to boot nodes in
        return loss

    def block(self, key: tuple[int, int, bool, bool]) -> _Block:
        """The block of ``key``, built on first use."""
        found = self._blocks.get(key)
        if found is not None:
            return found
        before, level, first, short = key
        loss = self._loss(first, short)
        src = np.zeros(1, dtype=np.int64) if before < 0 else self._feasible[before]
        tgt = self._feasible[level]
        old = (loss + self._bar_old)[np.ix_(src, tgt)].T
        fresh_from = self._fresh_from[tgt]
        fresh_loss = loss[fresh_from, tgt[:, None]]
        rows = np.arange(len(tgt))
        split = fresh_from.size
        work = np.empty(split + old.size)
        pick = np.empty(2 * len(tgt), dtype=np.intp)
        made = _Block(
            src=src,
            tgt=tgt,
            states=np.concatenate([tgt, tgt + self.size]),
            loss=np.concatenate([fresh_loss.ravel(), old.ravel()]),
            fresh_from=fresh_from,
            fresh_bar=self._fresh_bar[tgt],
            came_from=np.concatenate([fresh_from.ravel(), np.tile(src, len(tgt))]),
            first=np.concatenate([rows * fresh_from.shape[1], split + rows * len(src)]),
            work=work,
            fresh=work[:split].reshape(len(tgt), -1),
            old=work[split:].reshape(len(tgt), len(src)),
            pick=pick,
            pick_fresh=pick[: len(tgt)],
            pick_old=pick[len(tgt) :],
        )
        self._blocks[key] = made
        return made

    def run(
        self, lam: float, *, keep: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray | None]]:
        """Value, work and cost of ending in each flat state; with ``keep``, the choices.

        ``choices[k]`` is ``(2, C)``: per age and configuration, the flat state the
        planned change came from; ``sources[k]`` maps each state after segment ``k``'s
        forced preemption to the state it came from (None: no drop).
        """
        size = self.size
        value = np.full(2 * size, _NEG)
        value[OLD * size] = 0.0  # nothing held
        work = np.zeros(2 * size)
        cost = np.zeros(2 * size)
        priced = {key: block.tables(lam * block.loss) for key, block in self._blocks.items()}
        rewards = lam * self._gain_rows * self._tie_rows
        choices: list[np.ndarray] = []
        sources: list[np.ndarray | None] = []
        for key, block, drop, (a, b) in self._segments():
            source = None
            if drop is not None:
                value, work, cost, source = _preempt(drop, value, work, cost, lam, keep)
            tables = priced.get(key)
            if tables is None:
                tables = priced[key] = block.tables(lam * block.loss)
            value, work, cost, choice = self._step(
                block, tables, (value, work, cost), (rewards[a:b], a, b), keep
            )
            if choice is not None:
                choices.append(choice)
                sources.append(source)
        return value, work, cost, choices, sources

    def _segments(self) -> list[tuple[tuple[int, int, bool, bool], _Block, Drop | None, Any]]:
        """Per segment: its block's key and block, the drop to replay (or None), its span."""
        if self._laid_out is None:
            drops = [d if go else None for d, go in zip(self.drops, self.dropping, strict=True)]
            blocks = [self.block(key) for key in self.keys]
            self._laid_out = list(zip(self.keys, blocks, drops, self._spans, strict=True))
        return self._laid_out

    def _step(
        self,
        block: _Block,
        priced: tuple[np.ndarray, np.ndarray, np.ndarray],
        states: tuple[np.ndarray, np.ndarray, np.ndarray],
        rows: tuple[np.ndarray, int, int],
        keep: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """One segment: the best planned change into each feasible state, then its gain.

        ``states`` is (value, work, cost) of every flat state, ``priced`` the block's
        losses times ``lam`` (:meth:`_Block.tables`), ``rows`` the segment's rewards
        and its span in the gain and price rows; with ``keep``, also the flat source
        state of each planned change (``(2, C)``).
        """
        size = self.size
        value, work, cost = states
        reward, a, b = rows
        _, fresh_priced, old_priced = priced
        # each configuration at the better of its two ages: a planned change costs the
        # same from either, the age matters only to what a forced preemption loses
        state = np.where(value[size:] >= value[:size], self._olds, self._cols)
        best_value = value[state]
        # fresh: the few restarting changes into each target
        fresh = np.subtract(best_value.take(block.fresh_from), fresh_priced, out=block.fresh)
        fresh -= block.fresh_bar
        # old: every other change, the maximum along the sources of a contiguous row
        np.subtract(best_value[block.src], old_priced, out=block.old)
        fresh.argmax(axis=1, out=block.pick_fresh)
        block.old.argmax(axis=1, out=block.pick_old)
        pick = block.pick
        pick += block.first
        came = state[block.came_from[pick]]
        paid = self._paid_rows[a:b]
        new_value = self._none.copy()
        new_work = self._zeros.copy()
        new_cost = self._zeros.copy()
        new_value[block.states] = block.work[pick] + reward - paid
        new_work[block.states] = work[came] - block.loss[pick] + self._gain_rows[a:b]
        new_cost[block.states] = cost[came] + paid
        choice = None
        if keep:
            choice = np.zeros(2 * size, dtype=np.int32)
            choice[block.states] = came
            choice = choice.reshape(2, size)
        return new_value, new_work, new_cost, choice


def _preempt(
    drop: Drop,
    value: np.ndarray,
    work: np.ndarray,
    cost: np.ndarray,
    lam: float,
    keep: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Configurations above the new availability lose their spot nodes (either age)."""
    candidates = value[drop.come] - lam * drop.lost
    slot = candidates.argmax(axis=1)
    rows = np.arange(len(drop.land))
    picked = drop.come[rows, slot]
    new_value, new_work, new_cost = value.copy(), work.copy(), cost.copy()
    new_value[drop.gone] = _NEG
    new_value[drop.land] = candidates[rows, slot]
    new_work[drop.land] = work[picked] - drop.lost[rows, slot]
    new_cost[drop.land] = cost[picked]
    source = None
    if keep:
        source = np.arange(len(value))
        source[drop.land] = picked
    return new_value, new_work, new_cost, source
