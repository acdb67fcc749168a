"""Pause measurement: rank 0's ``PAUSE`` payload and the step records, as events.

How a change's pause is split into components (the accounting rules themselves are
in :mod:`.group`'s docstring): a survivor's payload already carries
``detect_s``/``rendezvous_s``/``state_s``/``warmup_s``; without survivors the
components come from the new rank 0's timestamps, plus what only the controller saw
(the cold start of fresh processes as ``acquire_s``, the teardown of the old ones
as rendezvous, a checkpoint write as state).  Rollbacks are charged the *measured*
time of the lost steps (:meth:`PauseAccounting.rollback_run_s`), and a checkpoint
report becomes a ``CHECKPOINT`` event placed when the write began.

Why a module of its own: these rules change together and for a different reason
than the mechanisms do (the simulator's event schema, and what the sim-vs-real
comparison needs), and both mechanisms (:mod:`.inplace`, :mod:`.restart`) and the
script group (:mod:`.script`) share them.  :class:`PauseAccounting` reads only a
step log (:class:`~.records.StepLog`), whoever fills it; it starts and stops
nothing, and whatever else a rule needs (the batch size, the world size) is an
argument.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from elasim.policies import EventKind, PauseComponents

from .records import GroupEvent, StepLog, StepRecord, step_durations

__all__ = ["PauseAccounting", "with_lost"]


class PauseAccounting:
    """Step timing, rollback cost, and the event of every change (module docstring).

    Args:
        steps: the run's step log.
        clock_of: turns a worker's ``time.time()`` into the controller's clock.
    """

    def __init__(self, steps: StepLog, clock_of: Callable[[float], float]) -> None:
        self._steps = steps
        self._clock_of = clock_of

    def step_time_by_world(self, recent: int = 64) -> dict[int, float]:
        """Median step time (real s) per world size, from consecutive steps of one generation."""
        by_world: dict[int, list[float]] = {}
        for row, step_s in step_durations(self._steps.records[-(recent * 8) :]):
            by_world.setdefault(row.world_size, []).append(step_s)
        return {n: statistics.median(v[-recent:]) for n, v in by_world.items() if v}

    def typical_step_s(self, world: int) -> float | None:
        """Median step time at ``world`` (or over every world size, when not measured)."""
        table = self.step_time_by_world()
        if world in table:
            return table[world]
        return statistics.median(table.values()) if table else None

    def lineage(self) -> dict[int, float]:
        """The committed steps of the current lineage, each with its duration (real s).

        Walking the step records in time order, a step number that does not go up
        means a rollback: the steps from there on were thrown away and are being
        redone, so they leave the lineage.  What a later rollback loses is then what
        was really committed since its checkpoint, not the highest step ever seen
        (which counted the work of an earlier rollback a second time).  The first
        step of a generation, whose time the pause holds, counts as a typical step of
        its world size.
        """
        table = self.step_time_by_world()
        typical = statistics.median(table.values()) if table else 0.0
        lineage: dict[int, float] = {}
        previous: StepRecord | None = None
        for record in sorted(self._steps.records, key=lambda r: r.real_s):
            if lineage and record.step <= max(lineage):
                lineage = {k: v for k, v in lineage.items() if k < record.step}
            if (
                previous is not None
                and record.gen == previous.gen
                and (record.step == previous.step + 1)
            ):
                lineage[record.step] = record.real_s - previous.real_s
            else:
                lineage[record.step] = table.get(record.world_size, typical)
            previous = record
        return lineage

    def lost_since(self, after_step: int) -> int:
        """Committed steps of the current lineage after ``after_step``."""
        return sum(1 for step in self.lineage() if step > after_step)

    def rollback_run_s(self, after_step: int, world: int) -> float:
        """Training time a rollback to ``after_step`` throws away (real seconds).

        The measured durations of the lineage's steps after it (see :meth:`lineage`),
        plus one step in flight.  Multiplying the lost steps by today's typical step
        instead overstates the loss whenever the steps ran at another world size.
        """
        table = self.step_time_by_world()
        typical = table.get(world) or (statistics.median(table.values()) if table else 0.0)
        lineage = self.lineage()
        return sum(d for step, d in lineage.items() if step > after_step) + typical

    def checkpoint_event(
        self, message: dict[str, Any], nodes: int, detail: tuple[tuple[str, Any], ...] = ()
    ) -> GroupEvent:
        """A worker's checkpoint report as a CHECKPOINT event, placed when the write began."""
        write_s = float(message["write_s"])
        return GroupEvent(
            EventKind.CHECKPOINT,
            self._clock_of(float(message["wall_s"]) - write_s),
            nodes,
            nodes,
            PauseComponents(state_s=write_s),
            detail=detail,
        )

    def pause_event(
        self,
        kind: EventKind,
        before: int,
        after: int,
        payload: dict[str, Any] | None,
        *,
        begin_real_s: float,
        global_batch: int | None,
        acquire_s: float = 0.0,
        extra_rendezvous_s: float = 0.0,
        extra_state_s: float = 0.0,
        lost_steps: int = 0,
        lost_real_s: float | None = None,
        last_end_wall_s: float | None = None,
        typical_s: float | None = None,
        detail: dict[str, Any] | None = None,
    ) -> GroupEvent:
        """Turn rank 0's ``PAUSE`` payload into a :class:`GroupEvent`.

        ``global_batch``: samples per step as the group knows them (None: rank 0's).
        """
        info = dict(detail or {})
        if payload is None:
            return GroupEvent(kind, begin_real_s, before, after, detail=tuple(info.items()))
        typical = payload.get("typical_step_s") or typical_s
        first_step_s = float(payload["first_step_s"])
        pause, interval = _components(
            payload,
            typical,
            acquire_s=acquire_s,
            extra_rendezvous_s=extra_rendezvous_s,
            extra_state_s=extra_state_s,
            last_end_wall_s=last_end_wall_s,
        )
        step_s = typical or first_step_s
        batch = global_batch or int(payload.get("global_batch", 0))
        info.update(
            gen=payload.get("gen"),
            receivers=payload.get("receivers"),
            state_bytes=payload.get("state_bytes"),
            restored_step=payload.get("restored_step"),
        )
        return GroupEvent(
            kind,
            begin_real_s,
            before,
            after,
            pause,
            lost_steps=lost_steps,
            lost_samples=float(lost_steps * batch),
            lost_real_s=lost_steps * step_s if lost_real_s is None else lost_real_s,
            interval_s=interval,
            detail=tuple((k, v) for k, v in info.items() if v is not None),
        )


def with_lost(
    events: list[GroupEvent], lost: int, lost_s: float, global_batch: int | None
) -> list[GroupEvent]:
    """``events`` with ``lost`` steps (``lost_s`` real seconds) charged to the last one."""
    if not lost or not events:
        return events
    last = events[-1]
    batch = global_batch or 0
    events[-1] = GroupEvent(
        last.kind,
        last.real_s,
        last.nodes_before,
        last.nodes_after,
        last.pause,
        lost,
        float(lost * batch),
        lost_s,
        last.interval_s,
        last.detail,
    )
    return events


def _components(
    payload: dict[str, Any],
    typical: float | None,
    *,
    acquire_s: float,
    extra_rendezvous_s: float,
    extra_state_s: float,
    last_end_wall_s: float | None,
) -> tuple[PauseComponents, float | None]:
    """The pause components of rank 0's payload, and the raw interval when measured.

    A survivor measured its own components; a fresh rank 0 only has timestamps, and
    the interval needs the old group's last step end (``last_end_wall_s``).
    """
    interval = None
    if payload.get("survivor"):
        pause = PauseComponents(
            detect_s=float(payload["detect_s"]),
            acquire_s=acquire_s,
            rendezvous_s=float(payload["rendezvous_s"]) + extra_rendezvous_s,
            state_s=float(payload["state_s"]) + extra_state_s,
            warmup_s=float(payload["warmup_s"]),
        )
        if payload.get("last_end_wall_s") is not None:
            interval = float(payload["first_end_wall_s"]) - float(payload["last_end_wall_s"])
        return pause, interval
    first_step_s = float(payload["first_step_s"])
    warmup = max(first_step_s - typical, 0.0) if typical else 0.0
    pause = PauseComponents(
        acquire_s=acquire_s,
        rendezvous_s=max(payload["t_formed"] - payload["t_cmd"], 0.0) + extra_rendezvous_s,
        state_s=max(payload["t_synced"] - payload["t_formed"], 0.0) + extra_state_s,
        warmup_s=warmup,
    )
    if last_end_wall_s is not None:
        interval = float(payload["first_end_wall_s"]) - last_end_wall_s
    return pause, interval
