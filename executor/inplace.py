"""In place: survivors keep their processes and re-form; warm standbys join.

Every free slot holds a *warm standby* (torch imported, job built) while the group
trains.  A change publishes generation ``g+1``: survivors re-form in place, and
newcomers (standbys that are ready) receive the state by broadcast from a survivor
(see :mod:`.worker`).  A member dropped on purpose finishes its step and goes back
to the warm pool; a victim of a hard preemption is SIGKILLed, and survivors notice
through a failing collective and lose only the step in flight.  When every member is
gone, the next start restores the last checkpoint, like a restart.

Why a module of its own: this is the mechanism the project is about, and it
changes for its own reasons (standby policy, when a newcomer counts as acquired,
how a starved group waits); the restart baseline (:mod:`.restart`) must not move
when it does.  :class:`InplaceChanges` is handed the group's pool
(:class:`~.pool.WorkerPool`, the processes) and pause accounting
(:class:`~.pauses.PauseAccounting`, the events); it offers the group the three
changes every mechanism offers (:class:`~.group.Mechanism`).
"""

from __future__ import annotations

import time

from elasim.policies import EventKind

from .pauses import PauseAccounting
from .pool import WorkerPool
from .protocol import Command, CommandOp
from .records import GroupEvent
from .settings import GroupSettings
from .workertable import NodeKind, WorkerStatus

__all__ = ["InplaceChanges"]


class InplaceChanges:
    """Changes by in-place re-formation (see the module docstring).

    Args:
        settings: the group's settings (``standby``, the timeouts).
        pool: the group's processes.
        pauses: turns what the pool reports into events.
    """

    def __init__(self, settings: GroupSettings, pool: WorkerPool, pauses: PauseAccounting) -> None:
        self._settings = settings
        self._pool = pool
        self._pauses = pauses
        #: a generation has trained: a group formed after losing every member resumes
        self._started_once = False
        #: since when no member trains while newcomers warm up
        self._starved_since: float | None = None

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
        """A decision: ready standbys join the ``survivors`` of the members ``cur``.

        See :meth:`~.group.ProcessWorkerGroup.apply` for ``wait_ready_s``.
        """
        pool, before = self._pool, len(cur)
        if not survivors and not (add_spot + add_od):
            # every node released on purpose: checkpoint, then stop
            return self._stop_all(EventKind.PAUSE, begin_real_s, before)
        t_request = time.time()
        wait_s = self._settings.ready_timeout_s if wait_ready_s is None else wait_ready_s
        newcomers = pool.ready_standbys(add_spot + add_od, wait_s)
        waited_s = time.time() - t_request
        pool.pump()
        if pool.reports.done:
            return []
        if not survivors and not cur:
            if len(newcomers) < add_spot + add_od and self._starved_since is None:
                self._starved_since = t_request  # nobody trains until they are ready
            if not newcomers:
                return []
            if self._starved_since is not None:
                waited_s = time.time() - self._starved_since
            self._starved_since = None
        for i, wid in enumerate(newcomers):
            pool.workers[wid].kind = NodeKind.SPOT if i < add_spot else NodeKind.ON_DEMAND
        dropping = len(survivors) < len(cur)
        if not newcomers and not dropping:
            return []
        if not survivors and cur:
            self._stop_all(EventKind.PAUSE, begin_real_s, before)
        return self._change(
            kind,
            survivors,
            newcomers,
            failure_wall_s=None,
            begin_real_s=begin_real_s,
            before=before if survivors else 0,
            waited_s=0.0 if survivors else waited_s,
        )

    def leave(
        self, victims: list[int], survivors: list[int], *, begin_real_s: float, before: int
    ) -> list[GroupEvent]:
        """A graceful preemption: the ``victims`` leave at a step boundary.

        Without survivors: a final checkpoint, then stop.  With them: they re-form,
        and the victims go back to the warm pool (waited for, up to ``stop_grace_s``).
        """
        if not survivors:
            return self._stop_all(EventKind.PAUSE, begin_real_s, before)
        events = self._change(
            EventKind.PREEMPT,
            survivors,
            [],
            failure_wall_s=None,
            begin_real_s=begin_real_s,
            before=before,
        )
        workers = self._pool.workers
        self._pool.wait_until(
            lambda: all(workers[w].status is not WorkerStatus.MEMBER for w in victims),
            self._settings.stop_grace_s,
        )
        return events

    def recover(
        self,
        dead: list[int],
        survivors: list[int],
        *,
        failure_wall_s: float,
        begin_real_s: float,
        before: int,
    ) -> list[GroupEvent]:
        """Members ``dead`` died without notice: the survivors re-form, losing a step."""
        if not survivors:
            return self._lost_everything(dead, begin_real_s, before)
        return self._change(
            EventKind.PREEMPT,
            survivors,
            [],
            failure_wall_s=failure_wall_s,
            begin_real_s=begin_real_s,
            before=before,
        )

    # -- how -------------------------------------------------------------------------------

    def _change(
        self,
        kind: EventKind,
        survivors: list[int],
        newcomers: list[int],
        *,
        failure_wall_s: float | None,
        begin_real_s: float,
        before: int,
        waited_s: float = 0.0,
    ) -> list[GroupEvent]:
        """Re-form in place; ``waited_s``: time nobody trained while standbys warmed up."""
        pool, reports = self._pool, self._pool.reports
        events: list[GroupEvent] = []
        typical = self._pauses.typical_step_s(before) if before else None
        last_wall = reports.steps.last_wall_s()
        restore = None
        if not survivors and reports.last_checkpoint_step is not None:
            restore = pool.checkpoint_path  # only a checkpoint this run wrote
        t_publish = time.time()
        members, payload = pool.form(
            survivors + newcomers, failure_wall_s=failure_wall_s, restore=restore
        )
        if payload is None and reports.done:
            return events
        after = len(members)
        if not survivors and self._started_once and payload is not None:
            restored = payload.get("restored_step")
            if restored:
                events.append(GroupEvent(EventKind.RESTORE, begin_real_s, 0, after))
            kind = EventKind.RESUME
        lost = 1 if failure_wall_s is not None and survivors else 0
        acquire = waited_s
        if not survivors and newcomers:
            readies = [pool.workers[w].ready_wall_s or t_publish for w in newcomers]
            acquire += max(max(readies) - t_publish, 0.0)
        events.append(
            self._pauses.pause_event(
                kind,
                before,
                after,
                payload,
                begin_real_s=begin_real_s,
                global_batch=reports.global_batch,
                acquire_s=acquire,
                lost_steps=lost,
                last_end_wall_s=last_wall if survivors else None,
                typical_s=typical,
                detail={"mode": "inplace", "newcomers": len(newcomers)},
            )
        )
        self._started_once = self._started_once or payload is not None
        if self._settings.standby:
            pool.fill_standbys()
        return events

    def _stop_all(self, kind: EventKind, begin: float, before: int) -> list[GroupEvent]:
        """Every member leaves on purpose: final checkpoint, then stop.

        With standbys (``settings.standby``) they stay, as warm standbys.
        """
        pool, reports, workers = self._pool, self._pool.reports, self._pool.workers
        old = [w for w in pool.members if workers.alive(w)]
        events: list[GroupEvent] = []
        keep = self._settings.standby
        if old:
            checkpoint = pool.checkpoint_path is not None
            pool.publish(Command(CommandOp.STOP, checkpoint=checkpoint, keep=keep, tag="stop"))
            pool.wait_until(
                lambda: (
                    reports.has(lambda e: e["type"] == "stopped")
                    or not any(workers.alive(w) for w in old)
                ),
                self._settings.change_timeout_s,
            )
            reports.take(lambda e: e["type"] == "stopped")
            ckpt = reports.take(lambda e: e["type"] == "checkpoint" and e.get("tag") == "stop")
            if ckpt is not None:
                events.append(self._pauses.checkpoint_event(ckpt, before))
            if keep:  # they stay, as warm standbys
                pool.wait_until(
                    lambda: all(workers[w].status is not WorkerStatus.MEMBER for w in old),
                    self._settings.stop_grace_s,
                )
            else:
                pool.await_exit(old, self._settings.stop_grace_s)
        pool.clear_members()
        events.append(GroupEvent(kind, begin, before, 0))
        if keep:
            pool.fill_standbys()
        return events

    def _lost_everything(self, dead: list[int], begin: float, before: int) -> list[GroupEvent]:
        """Every member died: the next start restores the last checkpoint."""
        pool, reports = self._pool, self._pool.reports
        pool.await_exit(dead, self._settings.stop_grace_s)
        ckpt_step = reports.last_checkpoint_step or 0
        lost = self._pauses.lost_since(ckpt_step) + 1  # and the step in flight
        pool.clear_members()
        batch = reports.global_batch or 0
        events = [
            GroupEvent(
                EventKind.PREEMPT,
                begin,
                before,
                0,
                lost_steps=lost,
                lost_samples=float(lost * batch),
                lost_real_s=self._pauses.rollback_run_s(ckpt_step, before),
            ),
            GroupEvent(EventKind.PAUSE, begin, before, 0),
        ]
        if self._settings.standby:
            pool.fill_standbys()
        return events
