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

    Attributes:
        src: source configurations (feasible before), ascending.
        tgt: target configurations (feasible now), ascending.
        rows: ``arange(len(tgt))``.
        old: ``(tgt, src)``: loss of the change, ``+inf`` where it restarts the group.
        fresh_from: ``(tgt, slot)``: the sources whose change restarts the group.
        fresh_loss: ``(tgt, slot)``: their losses.
        fresh_bar: ``(tgt, slot)``: ``+inf`` on padding.
    """

    src: np.ndarray
    tgt: np.ndarray
    rows: np.ndarray
    old: np.ndarray
    fresh_from: np.ndarray
    fresh_loss: np.ndarray
    fresh_bar: np.ndarray


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
        usd = np.stack([problem.hold_usd_per_s(k) for k in range(count)])
        self.paid = usd * problem.length_s[:, None]
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
        old = np.ascontiguousarray((loss + self._bar_old)[np.ix_(src, tgt)].T)
        fresh_from = self._fresh_from[tgt]
        made = _Block(
            src=src,
            tgt=tgt,
            rows=np.arange(len(tgt)),
            old=old,
            fresh_from=fresh_from,
            fresh_loss=loss[fresh_from, tgt[:, None]],
            fresh_bar=self._fresh_bar[tgt],
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
        priced = {key: self._priced(block, lam) for key, block in self._blocks.items()}
        choices: list[np.ndarray] = []
        sources: list[np.ndarray | None] = []
        for k, key in enumerate(self.keys):
            source = None
            drop = self.drops[k]
            if drop is not None and self.dropping[k]:
                value, work, cost, source = _preempt(drop, value, work, cost, lam, keep)
            block = self.block(key)
            tables = priced.get(key)
            if tables is None:
                tables = priced[key] = self._priced(block, lam)
            value, work, cost, choice = self._step(k, block, tables, (value, work, cost), lam, keep)
            if choice is not None:
                choices.append(choice)
                sources.append(source)
        return value, work, cost, choices, sources

    @staticmethod
    def _priced(block: _Block, lam: float) -> tuple[np.ndarray, np.ndarray]:
        """``lam x`` the block's losses (what the program subtracts from a value)."""
        return lam * block.old, lam * block.fresh_loss

    def _step(
        self,
        k: int,
        block: _Block,
        tables: tuple[np.ndarray, np.ndarray],
        states: tuple[np.ndarray, np.ndarray, np.ndarray],
        lam: float,
        keep: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Segment ``k``: the best planned change into each feasible state, then its gain.

        ``states`` is (value, work, cost) of every flat state; with ``keep``, also the
        flat source state of each planned change (``(2, C)``).
        """
        size = self.size
        value, work, cost = states
        old_priced, fresh_priced = tables
        # each configuration at the better of its two ages: a planned change costs the
        # same from either, the age matters only to what a forced preemption loses
        state = np.where(value[size:] >= value[:size], self._olds, self._cols)
        best_value = value[state]
        tgt, rows = block.tgt, block.rows
        # fresh: the few restarting changes into each target
        fresh = best_value[block.fresh_from] - fresh_priced - block.fresh_bar
        slot = fresh.argmax(axis=1)
        fresh_arg = block.fresh_from[rows, slot]
        # old: every other change, the maximum along the sources of a contiguous row
        table = best_value[block.src] - old_priced
        at = table.argmax(axis=1)
        old_arg = block.src[at]
        gain = self.gain[k, tgt]
        paid = self.paid[k, tgt]
        reward = lam * gain * self.tie[k]
        new_value = np.full(2 * size, _NEG)
        new_work = np.zeros(2 * size)
        new_cost = np.zeros(2 * size)
        for states_to, arg, best, lost in (
            (tgt, fresh_arg, fresh[rows, slot], block.fresh_loss[rows, slot]),
            (tgt + size, old_arg, table[rows, at], block.old[rows, at]),
        ):
            came = state[arg]
            new_value[states_to] = best + reward - paid
            new_work[states_to] = work[came] - lost + gain
            new_cost[states_to] = cost[came] + paid
        choice = None
        if keep:
            choice = np.zeros((2, size), dtype=np.int32)
            choice[FRESH, tgt] = state[fresh_arg]
            choice[OLD, tgt] = state[old_arg]
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
