"""Restart: every change stops all workers and cold-starts a fresh group (the baseline).

TorchElastic semantics (see :mod:`.group` for why we use our own spawner rather
than ``torchrun``'s agent).  A change goes through four steps, one method each:

1. **Stop the old group** (:meth:`RestartChanges._stop`).  A *planned* change asks
   for a checkpoint at a step boundary and lets the workers exit on their own; after
   a *failure* the survivors are given time to notice (and flush their step
   records), then terminated.
2. **Count the loss** (:meth:`RestartChanges._loss`): after a failure, everything
   since the last checkpoint, at its measured cost (:mod:`.pauses`).
3. **Cold-start** ``len(kinds)`` fresh processes (:meth:`RestartChanges._cold_start`):
   interpreter + torch import + job build, the ``acquire_s`` of the pause.
4. **Form and restore**: the new group restores the last checkpoint that this run
   wrote (:meth:`~.pool.WorkerPool.form`), and rank 0's payload becomes the event.

Why a module of its own: the restart mechanism changes independently of the
in-place one (it is the baseline we compare against, and follows TorchElastic),
and its pause accounting (teardown as rendezvous, rollback to a checkpoint) differs.
:class:`RestartChanges` is handed the group's pool (:class:`~.pool.WorkerPool`) and
pause accounting (:class:`~.pauses.PauseAccounting`); it offers the group the three
changes every mechanism offers (:class:`~.group.Mechanism`), each one a restart.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from elasim.policies import EventKind

from .pauses import PauseAccounting, with_lost
from .pool import WorkerPool
from .protocol import Command, CommandOp
from .records import GroupEvent
from .settings import GroupSettings
from .workertable import NodeKind, WorkerStatus

__all__ = ["RestartChanges"]


class RestartChanges:
    """Changes by stop, cold start and checkpoint restore (see the module docstring).

    Args:
        settings: the group's settings (the timeouts, the workers' collective timeout).
        pool: the group's processes.
        pauses: turns what the pool reports into events.
    """

    def __init__(self, settings: GroupSettings, pool: WorkerPool, pauses: PauseAccounting) -> None:
        self._settings = settings
        self._pool = pool
        self._pauses = pauses
        #: a generation has trained: a failure rolls back, a group formed from none resumes
        self._started_once = False

    # -- the three changes -------------------------------------------------------------------

    def apply(
        self,
        kind: EventKind,
        cur: list[int],
        survivors: list[int],
        add_spot: int,
        add_od: int,
        *,
        begin_real_s: float,
        wait_ready_s: float | None,
    ) -> list[GroupEvent]:
        """A decision: restart on the ``survivors`` of ``cur`` plus the nodes added.

        ``wait_ready_s`` is unused: a restart waits for its cold start.
        """
        kinds = self._kinds(survivors) + [NodeKind.SPOT] * add_spot
        kinds += [NodeKind.ON_DEMAND] * add_od
        return self._change(kind, kinds, planned=True, begin_real_s=begin_real_s, before=len(cur))

    def leave(
        self, victims: list[int], survivors: list[int], *, begin_real_s: float, before: int
    ) -> list[GroupEvent]:
        """A graceful preemption: checkpoint, stop everyone, restart the ``survivors``."""
        kinds = self._kinds(survivors)
        return self._change(
            EventKind.PREEMPT, kinds, planned=True, begin_real_s=begin_real_s, before=before
        )

    def recover(
        self,
        dead: list[int],
        survivors: list[int],
        *,
        failure_wall_s: float,
        begin_real_s: float,
        before: int,
    ) -> list[GroupEvent]:
        """Members ``dead`` died: stop the rest, restart the ``survivors``, roll back."""
        kinds = self._kinds(survivors)
        return self._change(
            EventKind.PREEMPT, kinds, planned=False, begin_real_s=begin_real_s, before=before
        )

    # -- how -------------------------------------------------------------------------------

    def _kinds(self, wids: list[int]) -> list[NodeKind]:
        """The node kinds of ``wids`` (a worker of no kind is left out)."""
        kinds = [self._pool.workers[w].kind for w in wids]
        return [k for k in kinds if k is not None]

    def _change(
        self,
        kind: EventKind,
        kinds: list[NodeKind],
        *,
        planned: bool,
        begin_real_s: float,
        before: int,
    ) -> list[GroupEvent]:
        """Stop everyone, cold-start ``len(kinds)`` fresh workers, restore the checkpoint."""
        pool, reports = self._pool, self._pool.reports
        old = [w for w in pool.members if pool.workers.alive(w)]
        typical = self._pauses.typical_step_s(before) if before else None
        t0 = time.time()
        events = self._stop(old, planned=planned, before=before)
        t_exited = time.time()
        last_wall = reports.steps.last_wall_s()
        lost, lost_s = self._loss(planned, before)
        pool.clear_members()
        if not kinds:
            return self._to_nothing(
                events,
                old,
                planned=planned,
                begin_real_s=begin_real_s,
                before=before,
                lost=lost,
                lost_s=lost_s,
            )
        fresh, acquire = self._cold_start(kinds)
        restore = pool.checkpoint_path if reports.last_checkpoint_step is not None else None
        members, payload = pool.form(fresh, restore=restore)
        if payload is None and reports.done:
            return events
        if payload is not None and payload.get("restored_step"):
            events.append(GroupEvent(EventKind.RESTORE, begin_real_s, 0, len(members)))
        if not old and self._started_once:
            kind = EventKind.RESUME
        events.append(
            self._pauses.pause_event(
                kind,
                before,
                len(members),
                payload,
                begin_real_s=begin_real_s,
                global_batch=reports.global_batch,
                acquire_s=acquire,
                extra_rendezvous_s=max(t_exited - t0, 0.0) if old else 0.0,  # the teardown
                lost_steps=lost,
                lost_real_s=lost_s,
                last_end_wall_s=last_wall if old else None,
                typical_s=typical,
                detail={"mode": "restart", "planned": planned},
            )
        )
        self._started_once = self._started_once or payload is not None
        return events

    def _stop(self, old: list[int], *, planned: bool, before: int) -> list[GroupEvent]:
        """Stop the members ``old``; returns the planned checkpoint's event, if any."""
        pool, reports, alive = self._pool, self._pool.reports, self._pool.workers.alive
        events: list[GroupEvent] = []
        if old and planned:
            pool.publish(Command(CommandOp.STOP, checkpoint=True, tag="restart"))
            stopped: dict[str, Any] = {}

            def got_stop() -> bool:
                event = reports.take(lambda e: e["type"] == "stopped")
                if event is not None:
                    stopped["event"] = event
                return bool(stopped) or not any(alive(w) for w in old)

            pool.wait_until(got_stop, self._settings.change_timeout_s)
            ckpt = reports.take(lambda e: e["type"] == "checkpoint" and e.get("tag") == "restart")
            if ckpt is not None:
                events.append(self._pauses.checkpoint_event(ckpt, before))
            pool.await_exit(old, self._settings.stop_grace_s)
        elif old:
            # TorchElastic: a failed worker stops the whole group.  Let survivors notice
            # (they flush their step records) before terminating them.
            pool.wait_until(
                lambda: all(
                    not alive(w) or any(e["wid"] == w for e in reports.failed_collectives)
                    for w in old
                ),
                self._settings.worker.collective_timeout_s + 1.0,
            )
            for wid in old:
                pool.workers.kill(wid, signal.SIGTERM)
            pool.await_exit(old, self._settings.stop_grace_s)
        reports.failed_collectives.clear()
        return events

    def _loss(self, planned: bool, before: int) -> tuple[int, float]:
        """Steps (and real seconds) a failure throws away: back to the last checkpoint."""
        if planned or not self._started_once:
            return 0, 0.0
        ckpt_step = self._pool.reports.last_checkpoint_step or 0
        lost = self._pauses.lost_since(ckpt_step) + 1  # and the step in flight
        return lost, self._pauses.rollback_run_s(ckpt_step, before)

    def _to_nothing(
        self,
        events: list[GroupEvent],
        old: list[int],
        *,
        planned: bool,
        begin_real_s: float,
        before: int,
        lost: int,
        lost_s: float,
    ) -> list[GroupEvent]:
        """The change leaves no node: report the loss (after a failure), then the pause."""
        if not planned and before:
            events.append(GroupEvent(EventKind.PREEMPT, begin_real_s, before, 0))
            events = with_lost(events, lost, lost_s, self._pool.reports.global_batch)
        if old or before:
            events.append(
                GroupEvent(EventKind.PAUSE, begin_real_s, before, 0, detail=(("mode", "restart"),))
            )
        return events

    def _cold_start(self, kinds: list[NodeKind]) -> tuple[list[int], float]:
        """Spawn one fresh worker per kind; returns those that became ready, and ``acquire_s``.

        ``acquire_s`` runs from the spawn to the last ``READY`` (the processes start
        together and share the host's cores).
        """
        pool, workers = self._pool, self._pool.workers
        t_spawn = time.time()
        fresh: list[int] = []
        for node_kind in kinds:
            worker = pool.spawn()
            if worker is None:
                break
            worker.kind = node_kind
            fresh.append(worker.wid)
        pool.wait_until(
            lambda: all(workers[w].status is not WorkerStatus.STARTING for w in fresh),
            self._settings.ready_timeout_s,
        )
        fresh = [w for w in fresh if workers[w].status is WorkerStatus.STANDBY]
        readies = [workers[w].ready_wall_s or t_spawn for w in fresh]
        acquire = max(max(readies, default=t_spawn) - t_spawn, 0.0)
        return fresh, acquire
