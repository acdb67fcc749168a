"""Restart: every change stops all workers and cold-starts a fresh group (the baseline).

TorchElastic semantics (see :mod:`.group` for why we use our own spawner rather
than ``torchrun``'s agent).  A change goes through four steps, one method each:

1. **Stop the old group** (:meth:`RestartChanges._stop_for_restart`).  A *planned*
   change asks for a checkpoint at a step boundary and lets the workers exit on
   their own; after a *failure* the survivors are given time to notice (and flush
   their step records), then terminated.
2. **Count the loss** (:meth:`RestartChanges._restart_loss`): after a failure,
   everything since the last checkpoint, at its measured cost (:mod:`.pauses`).
3. **Cold-start** ``len(kinds)`` fresh processes
   (:meth:`RestartChanges._cold_start`): interpreter + torch import + job build,
   the ``acquire_s`` of the pause.
4. **Form and restore**: the new group restores the last checkpoint that this run
   wrote (:meth:`~.pool.WorkerPool._form`), and rank 0's payload becomes the event.

Why a module of its own: the restart mechanism changes independently of the
in-place one (it is the baseline we compare against, and follows TorchElastic),
and its pause accounting (teardown as rendezvous, rollback to a checkpoint) differs.
:class:`RestartChanges` builds on :class:`~.pauses.PauseAccounting` and, through
it, on :class:`~.pool.WorkerPool`.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from elasim.policies import EventKind

from .pauses import PauseAccounting
from .protocol import Command, CommandOp
from .records import GroupEvent
from .workertable import NodeKind, WorkerStatus

__all__ = ["RestartChanges"]


class RestartChanges(PauseAccounting):
    """Changes by stop, cold start and checkpoint restore (see the module docstring)."""

    def _restart_change(
        self,
        kind: EventKind,
        kinds: list[NodeKind],
        *,
        planned: bool,
        failure_wall_s: float | None,
        begin_real_s: float,
        before: int,
    ) -> list[GroupEvent]:
        """Stop everyone, cold-start ``len(kinds)`` fresh workers, restore the checkpoint."""
        old = [w for w in self._members if self.workers.alive(w)]
        typical = self.typical_step_s(before) if before else None
        write_s = 0.0
        t0 = time.time()
        events = self._stop_for_restart(old, planned=planned, before=before)
        t_exited = time.time()
        last_wall = self._last_step_wall()
        lost, lost_s = self._restart_loss(planned, before)
        self._members = []
        if not kinds:
            return self._restart_to_nothing(
                events,
                old,
                planned=planned,
                begin_real_s=begin_real_s,
                before=before,
                lost=lost,
                lost_s=lost_s,
            )
        fresh, acquire = self._cold_start(kinds)
        restore = self._checkpoint_path if self._last_checkpoint_step is not None else None
        members, payload = self._form(fresh, restore=restore)
        if payload is None and self._done:
            return events
        if payload is not None and payload.get("restored_step"):
            events.append(GroupEvent(EventKind.RESTORE, begin_real_s, 0, len(members)))
        teardown = max(t_exited - t0 - write_s, 0.0) if old else 0.0
        if not old and self._started_once:
            kind = EventKind.RESUME
        events.append(
            self._pause_event(
                kind,
                before,
                len(members),
                payload,
                begin_real_s=begin_real_s,
                acquire_s=acquire,
                extra_rendezvous_s=teardown,
                extra_state_s=write_s,
                lost_steps=lost,
                lost_real_s=lost_s,
                last_end_wall_s=last_wall if old else None,
                typical_s=typical,
                detail={"mode": "restart", "planned": planned},
            )
        )
        self._started_once = self._started_once or payload is not None
        return events

    def _stop_for_restart(self, old: list[int], *, planned: bool, before: int) -> list[GroupEvent]:
        """Stop the members ``old``; returns the planned checkpoint's event, if any."""
        events: list[GroupEvent] = []
        if old and planned:
            self._publish(Command(CommandOp.STOP, checkpoint=True, tag="restart"))
            stopped: dict[str, Any] = {}

            def got_stop() -> bool:
                event = self._take(lambda e: e["type"] == "stopped")
                if event is not None:
                    stopped["event"] = event
                return bool(stopped) or not any(self.workers.alive(w) for w in old)

            self._wait_until(got_stop, self.settings.change_timeout_s)
            ckpt = self._take(lambda e: e["type"] == "checkpoint" and e.get("tag") == "restart")
            if ckpt is not None:
                events.append(self._checkpoint_event(ckpt, before))
            self._await_exit(old, self.settings.stop_grace_s)
        elif old:
            # TorchElastic: a failed worker stops the whole group.  Let survivors notice
            # (they flush their step records) before terminating them.
            self._wait_until(
                lambda: all(
                    not self.workers.alive(w)
                    or any(e["wid"] == w for e in self._failed_collectives)
                    for w in old
                ),
                self.settings.worker.collective_timeout_s + 1.0,
            )
            for wid in old:
                self.workers.kill(wid, signal.SIGTERM)
            self._await_exit(old, self.settings.stop_grace_s)
        self._failed_collectives.clear()
        return events

    def _restart_loss(self, planned: bool, before: int) -> tuple[int, float]:
        """Steps (and real seconds) a failure throws away: back to the last checkpoint."""
        if planned or not self._started_once:
            return 0, 0.0
        ckpt_step = self._last_checkpoint_step or 0
        lost = self._lost_since(ckpt_step) + 1  # and the step in flight
        return lost, self._rollback_run_s(ckpt_step, before)

    def _restart_to_nothing(
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
            events = self._with_lost(events, lost, lost_s)
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
        t_spawn = time.time()
        fresh: list[int] = []
        for node_kind in kinds:
            worker = self._spawn()
            if worker is None:
                break
            worker.kind = node_kind
            fresh.append(worker.wid)
        self._wait_until(
            lambda: all(self.workers[w].status is not WorkerStatus.STARTING for w in fresh),
            self.settings.ready_timeout_s,
        )
        fresh = [w for w in fresh if self.workers[w].status is WorkerStatus.STANDBY]
        readies = [self.workers[w].ready_wall_s or t_spawn for w in fresh]
        acquire = max(max(readies, default=t_spawn) - t_spawn, 0.0)
        return fresh, acquire
