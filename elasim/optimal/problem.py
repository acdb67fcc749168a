"""The offline planning problem: the trace cut into segments, the job model as losses.

The planner decides the node counts ``(spot, on-demand)`` at the start of every
*segment*: the trace's own changes (within the job's window, capped at
``max_nodes``, exactly as :class:`~elasim.jobmodel.CapacityReplay` replays them),
one second before every drop (knowing the trace, the plan may let nodes go with a
final checkpoint rather than lose work to the drop) and every multiple of ``step_s``.
Within a segment availability and prices are constant.

Everything the job model charges for a change is expressed as *lost effective
samples* (the work the group would have done at its new size during the pause), taken
from the very functions the fluid model uses (:func:`~elasim.jobmodel.pause_for`,
:func:`~elasim.jobmodel.leave_lead_s`, the ``auto`` checkpoint schedule):

* a start or resume: nobody trains while the nodes boot and the group forms;
* adding nodes: the old group trains while the newcomers boot (paid), then the whole
  group pauses to re-form; removing nodes: one planned re-formation;
* releasing everything: a final checkpoint write (its work taken back, as the fluid
  model does);
* a capacity drop below the spot nodes held: the preemption, graceful when the notice
  covers the leave rule (no loss), else failure detection and the step in flight
  (in place) or the work since the last periodic checkpoint rolled back (restart
  mode, or nobody left): exactly, for a group that started a segment before the drop
  (the timer restarts with every start), a whole interval for an older one (the worst
  case, so that the replay rarely falls behind the plan);
* periodic checkpoints: training runs at ``interval / (interval + write)`` of its
  goodput, with the interval ``auto`` picks at the start.

Money is the nodes held in each segment times its prices, booting nodes included, as
the books count it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from elasim.jobmodel import CheckpointSchedule, RescaleMode, leave_lead_s, pause_for

__all__ = ["PlanningProblem", "build_problem"]

#: Seconds before a capacity drop at which the plan may release the nodes it takes.
_RELEASE_LEAD_S = 1.0


@dataclass(frozen=True)
class PlanningProblem:
    """One job on one trace window, ready for the dynamic program.

    Attributes:
        start_s: segment starts (job seconds), increasing, the first 0.
        length_s: segment lengths; the last one ends at ``horizon_s``.
        available: spot nodes obtainable in each segment (capped at ``max_nodes``).
        spot_price_per_hour: spot price in each segment.
        on_demand_price_per_hour: on-demand price (``inf``: not offered).
        configs: ``(spot, on_demand)`` of each node configuration; row 0 is (0, 0).
        goodput: effective samples per second of each configuration, checkpoint
            overhead included.
        loss: lost effective samples of each planned change ``[from, to]``.
        first_loss: the same for the first start (no checkpoint to load), from (0, 0).
        forced: per segment, None or ``(rows, targets, losses, fresh_losses)``: the
            preemption of every configuration holding more spot nodes than the
            segment offers (``fresh_losses``: when the group started a segment ago).
        restarts: ``[from, to]``: the change starts the group afresh (from nothing,
            or nobody stays), which restarts the checkpoint timer.
        adds: ``[from, to]``: the change boots new nodes.  No segment shorter than
            ``min_add_s`` may start with one: its nodes would still be booting when
            the next segment starts, and a drop there would find fewer members than
            the configuration says.
        work_samples: the job's target, effective samples.
        horizon_s: the planned finish (the deadline less the margin).
        checkpoint_interval_s: the periodic interval the overhead assumes.
    """

    start_s: np.ndarray
    length_s: np.ndarray
    available: np.ndarray
    spot_price_per_hour: np.ndarray
    on_demand_price_per_hour: float
    configs: np.ndarray
    goodput: np.ndarray
    loss: np.ndarray
    first_loss: np.ndarray
    forced: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None, ...]
    restarts: np.ndarray
    adds: np.ndarray
    min_add_s: float
    work_samples: float
    horizon_s: float
    checkpoint_interval_s: float

    @property
    def segments(self) -> int:
        """Number of segments."""
        return len(self.start_s)

    def hold_usd_per_s(self, k: int) -> np.ndarray:
        """USD per second of holding each configuration in segment ``k``."""
        return self.hold_usd_table(slice(k, k + 1))[0]

    def hold_usd_table(self, segments: slice = slice(None)) -> np.ndarray:
        """``(segments, C)``: :meth:`hold_usd_per_s` of every segment, in one product."""
        spot = self.configs[None, :, 0] * self.spot_price_per_hour[segments, None]
        od = self.configs[:, 1]
        with np.errstate(invalid="ignore"):  # no on-demand offered: inf x 0 nodes is 0 here
            od_cost = np.where(od > 0, od * self.on_demand_price_per_hour, 0.0)
        return (spot + od_cost) / 3600.0


def _segments(replay: Any, horizon_s: float, step_s: float) -> tuple[np.ndarray, ...]:
    """Segment starts, lengths, availability and price from the replay, up to the horizon."""
    available, price = replay.initial
    rows_t, rows_a, rows_p = [0.0], [available], [price]
    while True:
        t = replay.next_time_s()
        if t >= horizon_s:
            break
        for item in replay.pop_due(t):
            if not item.notice:
                rows_t.append(item.time_s)
                rows_a.append(item.available)
                rows_p.append(item.price_per_hour)
    grid = np.arange(0.0, horizon_s, step_s)
    times = np.asarray(rows_t)
    drops = times[1:][np.diff(np.asarray(rows_a)) < 0]
    # the oracle knows every drop: it may let nodes go just before one (a planned
    # leave with a final checkpoint) instead of losing work to it
    before = drops - _RELEASE_LEAD_S
    starts = np.unique(np.concatenate([times, grid, before[before > 0]]))
    starts = starts[starts < horizon_s]
    # a boundary within a microsecond of the next one (rounding in the replay's job
    # times) is not a segment: the next one starts there instead
    keep = np.diff(np.append(starts, horizon_s)) > 1e-6
    starts = starts[keep]
    index = np.searchsorted(np.asarray(rows_t), starts, side="right") - 1
    starts[0] = 0.0
    lengths = np.diff(np.append(starts, horizon_s))
    return (
        starts,
        lengths,
        np.asarray(rows_a, dtype=np.int64)[index],
        np.asarray(rows_p, dtype=float)[index],
    )


def _configs(min_nodes: int, max_nodes: int, on_demand: bool) -> np.ndarray:
    """Every (spot, on-demand) pair that can run, plus (0, 0)."""
    pairs = [(0, 0)]
    for nodes in range(min_nodes, max_nodes + 1):
        for od in range(nodes + 1) if on_demand else (0,):
            pairs.append((nodes - od, od))
    return np.asarray(pairs, dtype=np.int64)


class _Losses:
    """Lost effective samples of each change, from the fluid model's own pause rules."""

    def __init__(
        self,
        job: Any,
        mode: RescaleMode,
        good: np.ndarray,
        write_s: float,
        ckpt_s: float,
        longest_ckpt_s: float,
    ):
        self.job, self.mode, self.good = job, mode, good
        self.write_s = write_s
        self.ckpt_s = ckpt_s  # periodic checkpoint interval at the start (for rollbacks)
        self.longest_ckpt_s = longest_ckpt_s  # ... and at the horizon, without preemptions
        # a few hundred distinct pauses among the ~45,000 the tables ask for at 16 nodes
        self._pauses: dict[tuple[Any, ...], float] = {}

    def pause_s(self, before: int, after: int, survivors: int, **kw: Any) -> float:
        """The fluid model's pause of one change (:func:`pause_for`), each computed once."""
        key = (before, after, survivors, *sorted(kw.items()))
        found = self._pauses.get(key)
        if found is None:
            found = self._pauses[key] = self._pause_s(before, after, survivors, **kw)
        return found

    def _pause_s(self, before: int, after: int, survivors: int, **kw: Any) -> float:
        restart_write = (
            self.write_s if self.mode is RescaleMode.RESTART and not kw.get("failure") else 0.0
        )
        return pause_for(
            self.job,
            self.mode,
            nodes_after=after,
            nodes_before=before,
            survivors=survivors,
            newcomers=after - survivors,
            failure=kw.get("failure", False),
            has_checkpoint=kw.get("has_checkpoint", True),
            waited_boot=kw.get("waited_boot", False),
            checkpoint_write_s=kw.get("write_s", restart_write),
        ).pause_s

    def start(self, nodes: int, first: bool) -> float:
        """From nothing: boot and form the group (load a checkpoint unless first)."""
        pause = self.pause_s(0, nodes, 0, has_checkpoint=not first, waited_boot=True, write_s=0.0)
        return self.good[nodes] * pause

    def planned(self, c_from: tuple[int, int], c_to: tuple[int, int], first: bool) -> float:
        """A change the plan asks for."""
        (s, o), (s2, o2) = c_from, c_to
        n, n2 = s + o, s2 + o2
        if (s, o) == (s2, o2):
            return 0.0
        if n == 0:
            return self.start(n2, first)
        stop = self.good[n] * self.write_s  # the final checkpoint's work, taken back
        if n2 == 0:
            return stop
        kept = min(s, s2) + min(o, o2)
        if kept == 0:  # nobody stays: stop, then start again
            return stop + self.start(n2, False)
        good, lost = self.good, 0.0
        down = 0.0
        if kept < n:
            down = self.pause_s(n, kept, kept)
            lost += good[n2] * down
        if n2 > kept:
            boot = self.job.rescale.boot_s
            lost += (good[n2] - good[kept]) * max(boot - down, 0.0)
            lost += good[n2] * self.pause_s(kept, n2, kept)
        return lost

    def start_pause_s(self, nodes: int) -> float:
        """Boot and group formation from nothing (no training meanwhile)."""
        if nodes == 0:
            return 0.0
        return self.pause_s(0, nodes, 0, has_checkpoint=True, waited_boot=True, write_s=0.0)

    def preempted(
        self,
        c_from: tuple[int, int],
        c_after: tuple[int, int],
        notice_s: float,
        run_s: float | None = None,
    ) -> float:
        """A drop from ``c_from`` to ``c_after`` (``(0, 0)``: nobody left that can run).

        ``run_s``: the group's wall time since it (re)started, when known; a rollback
        then loses exactly the work since its last periodic checkpoint, else half an
        interval (the expectation for a group older than a segment).
        """
        n, after = sum(c_from), sum(c_after)
        inplace = self.mode is RescaleMode.INPLACE
        lead = leave_lead_s(
            step_s=self.job.step_time_s(max(n, 1)),
            checkpoint_write_s=self.write_s,
            survivors=after,
            mode=self.mode,
        )
        graceful = notice_s > 0 and notice_s >= lead
        # a rollback loses the work since the last periodic checkpoint; the timer
        # restarts with every start, so for a group that started a segment ago it is
        # known exactly; for an older one it is charged a whole interval (the longest
        # ``auto`` reaches within the horizon): the plan keeps the worst case in hand
        if run_s is None:
            rollback = min(self.longest_ckpt_s, 86400.0)
        else:
            interval = min(self.ckpt_s, 86400.0)
            rollback = min(run_s % (interval + self.write_s), interval)
        if after == 0:
            return self.good[n] * (self.write_s if graceful else rollback)
        if graceful:
            return self.good[after] * self.pause_s(n, after, after if inplace else 0, write_s=0.0)
        pause = self.pause_s(n, after, after if inplace else 0, failure=True, write_s=0.0)
        lost = self.good[after] * pause
        if inplace:
            return lost + self.job.global_batch(n) * self.job.statistical_efficiency(n)
        return lost + self.good[n] * rollback


def _forced(
    pairs: list[tuple[int, int]],
    configs: np.ndarray,
    available: np.ndarray,
    lengths: np.ndarray,
    losses: _Losses,
    notice_s: float,
    n_min: int,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None, ...]:
    """Per segment: which configurations a drop takes to which, and what it costs.

    The answer depends only on the availability and the previous segment's length
    (how long a fresh group ran), so it is computed once per such pair: a long
    horizon repeats a few pairs thousands of times.
    """
    index = {pair: i for i, pair in enumerate(pairs)}
    made: dict[tuple[int, float], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    forced: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None] = []
    for k, avail in enumerate(available):
        if k == 0 or not (configs[:, 0] > avail).any():
            forced.append(None)
            continue
        key = (int(avail), float(lengths[k - 1]))
        if key not in made:
            rows = np.flatnonzero(configs[:, 0] > avail)
            targets, old, fresh = [], [], []
            for r in rows:
                s, o = pairs[r]
                left = (int(avail), o)
                target = index.get(left, 0) if sum(left) >= n_min else 0
                ran_s = max(key[1] - losses.start_pause_s(s + o), 0.0)
                old.append(losses.preempted((s, o), pairs[target], notice_s))
                fresh.append(losses.preempted((s, o), pairs[target], notice_s, ran_s))
                targets.append(target)
            made[key] = (rows, np.asarray(targets), np.asarray(old), np.asarray(fresh))
        forced.append(made[key])
    return tuple(forced)


def _planned_losses(losses: _Losses, pairs: list[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """Work lost to every planned change of configuration: ``(loss, first_loss)``.

    ``loss[i, j]`` is the loss of changing from configuration ``i`` to ``j`` while
    running; ``first_loss[j]`` that of starting in ``j`` from nothing.  Tabulated once
    so that the solver's forward pass only looks them up.
    """
    size = len(pairs)
    loss = np.zeros((size, size))
    for i, a in enumerate(pairs):
        for j, b in enumerate(pairs):
            loss[i, j] = losses.planned(a, b, first=False)
    first_loss = np.asarray([losses.planned((0, 0), b, first=True) for b in pairs])
    return loss, first_loss


def _transitions(configs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which changes of configuration restart the group, and which add nodes.

    A change restarts (pays a start from nothing) when it leads to a running
    configuration from none, or keeps no node of either market; it adds nodes when
    the target has more nodes than the two keep in common.  ``[i, j]`` is the change
    from ``i`` to ``j``.
    """
    totals = configs.sum(axis=1)
    kept = np.minimum.outer(configs[:, 0], configs[:, 0]) + np.minimum.outer(
        configs[:, 1], configs[:, 1]
    )
    restarts = (totals[None, :] > 0) & ((totals[:, None] == 0) | (kept == 0))
    adds = totals[None, :] > kept
    return restarts, adds


def build_problem(
    replay: Any,
    job: Any,
    *,
    mode: RescaleMode,
    notice_s: float,
    horizon_s: float,
    step_s: float,
    on_demand_price_per_hour: float | None,
    checkpoint_interval_s: float | None,
    checkpoint_cost_s: float | None,
    like: PlanningProblem | None = None,
) -> PlanningProblem:
    """The planning problem for ``job`` on ``replay``'s window, up to ``horizon_s``.

    ``like``: a problem of the same job and settings over another horizon, whose
    planned-change losses (which do not depend on the horizon) are taken over.
    """
    n_min, n_max = job.nodes.min, job.nodes.max
    od_price = math.inf if on_demand_price_per_hour is None else float(on_demand_price_per_hour)
    write_s = job.checkpoint.write_s if checkpoint_cost_s is None else checkpoint_cost_s
    schedule = CheckpointSchedule(checkpoint_interval_s, replay.prior_mtbf_s)
    interval = schedule.current_interval_s(write_s, 0.0, 0)
    keep = interval / (interval + write_s) if math.isfinite(interval) and interval > 0 else 1.0
    raw = np.asarray(
        [0.0] + [job.goodput(n) for n in range(1, n_max + 1)],
        dtype=float,
    )
    raw[:n_min] = 0.0
    good = raw * keep
    starts, lengths, available, prices = _segments(replay, horizon_s, step_s)
    configs = _configs(n_min, n_max, math.isfinite(od_price))
    pairs = [(int(s), int(o)) for s, o in configs]
    longest = max(schedule.current_interval_s(write_s, horizon_s, 0), interval)
    losses = _Losses(job, mode, good, write_s, interval, longest)
    if like is not None and np.array_equal(like.configs, configs):
        loss, first_loss = like.loss, like.first_loss
    else:
        loss, first_loss = _planned_losses(losses, pairs)
    forced = _forced(pairs, configs, available, lengths, losses, notice_s, n_min)
    restarts, adds = _transitions(configs)
    return PlanningProblem(
        start_s=starts,
        length_s=lengths,
        available=available,
        spot_price_per_hour=prices,
        on_demand_price_per_hour=od_price,
        configs=configs,
        goodput=good[configs.sum(axis=1)],
        loss=loss,
        first_loss=first_loss,
        forced=forced,
        restarts=restarts,
        adds=adds,
        min_add_s=float(losses.start_pause_s(n_max)),
        work_samples=float(job.target_samples),
        horizon_s=float(horizon_s),
        checkpoint_interval_s=float(interval),
    )
