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
when it does.  :class:`InplaceChanges` builds on :class:`~.pauses.PauseAccounting`
and, through it, on :class:`~.pool.WorkerPool`.
"""

from __future__ import annotations

import time

from elasim.policies import EventKind

from .pauses import PauseAccounting
from .protocol import Command, CommandOp
from .records import GroupEvent
from .workertable import NodeKind, WorkerStatus

__all__ = ["InplaceChanges"]


class InplaceChanges(PauseAccounting):
    """Changes by in-place re-formation (see the module docstring).

    Attributes:
        _starved_since: since when no member trains while newcomers warm up (the
            group sets it to None at the start).
    """

    _starved_since: float | None

    def _inplace_apply(
        self,
        kind: EventKind,
        cur: list[int],
        survivors: list[int],
        add_spot: int,
        add_od: int,
        *,
        dropping: bool,
        begin: float,
        wait_ready_s: float | None,
    ) -> list[GroupEvent]:
        """``apply`` in place: ready standbys join the ``survivors`` of ``cur``.

        ``dropping``: some current members leave.  See
        :meth:`~.group.ProcessWorkerGroup.apply` for ``wait_ready_s``.
        """
        before = len(cur)
        if not survivors and not (add_spot + add_od):
            # every node released on purpose: checkpoint, then stop
            return self._stop_all(EventKind.PAUSE, begin, before)
        t_request = time.time()
        wait_s = self.settings.ready_timeout_s if wait_ready_s is None else wait_ready_s
        newcomers = self._ready_standbys(add_spot + add_od, wait_s)
        waited_s = time.time() - t_request
        self._pump()
        if self._done:
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
            self.workers[wid].kind = NodeKind.SPOT if i < add_spot else NodeKind.ON_DEMAND
        if not newcomers and not dropping:
            return []
        if not survivors and cur:
            self._stop_all(EventKind.PAUSE, begin, before)
        return self._inplace_change(
            kind,
            survivors,
            newcomers,
            failure_wall_s=None,
            begin_real_s=begin,
            before=before if survivors else 0,
            waited_s=0.0 if survivors else waited_s,
        )

    def _inplace_change(
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
        events: list[GroupEvent] = []
        typical = self.typical_step_s(before) if before else None
        last_wall = self._last_step_wall()
        restore = None
        if not survivors and self._last_checkpoint_step is not None:
            restore = self._checkpoint_path  # only a checkpoint this run wrote
        t_publish = time.time()
        members, payload = self._form(
            survivors + newcomers, failure_wall_s=failure_wall_s, restore=restore
        )
        if payload is None and self._done:
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
            readies = [self.workers[w].ready_wall_s or t_publish for w in newcomers]
            acquire += max(max(readies) - t_publish, 0.0)
        events.append(
            self._pause_event(
                kind,
                before,
                after,
                payload,
                begin_real_s=begin_real_s,
                acquire_s=acquire,
                lost_steps=lost,
                last_end_wall_s=last_wall if survivors else None,
                typical_s=typical,
                detail={"mode": "inplace", "newcomers": len(newcomers)},
            )
        )
        self._started_once = self._started_once or payload is not None
        if self.settings.standby:
            self._fill_standbys()
        return events

    def _stop_all(self, kind: EventKind, begin: float, before: int) -> list[GroupEvent]:
        """Every member leaves on purpose: final checkpoint, then stop."""
        old = [w for w in self._members if self.workers.alive(w)]
        events: list[GroupEvent] = []
        keep = self._keep_warm
        if old:
            self._publish(
                Command(
                    CommandOp.STOP,
                    checkpoint=self._checkpoint_path is not None,
                    keep=keep,
                    tag="stop",
                )
            )
            self._wait_until(
                lambda: (
                    any(e["type"] == "stopped" for e in self._inbox)
                    or not any(self.workers.alive(w) for w in old)
                ),
                self.settings.change_timeout_s,
            )
            self._take(lambda e: e["type"] == "stopped")
            ckpt = self._take(lambda e: e["type"] == "checkpoint" and e.get("tag") == "stop")
            if ckpt is not None:
                events.append(self._checkpoint_event(ckpt, before))
            if keep:  # they stay, as warm standbys
                self._wait_until(
                    lambda: all(self.workers[w].status is not WorkerStatus.MEMBER for w in old),
                    self.settings.stop_grace_s,
                )
            else:
                self._await_exit(old, self.settings.stop_grace_s)
        self._members = []
        events.append(GroupEvent(kind, begin, before, 0))
        if self._keep_warm:
            self._fill_standbys()
        return events

    def _lost_everything(self, dead: list[int], begin: float, before: int) -> list[GroupEvent]:
        """Every member died: the next start restores the last checkpoint."""
        self._await_exit(dead, self.settings.stop_grace_s)
        ckpt_step = self._last_checkpoint_step or 0
        lost = self._lost_since(ckpt_step) + 1  # and the step in flight
        self._members = []
        batch = self._global_batch or 0
        events = [
            GroupEvent(
                EventKind.PREEMPT,
                begin,
                before,
                0,
                lost_steps=lost,
                lost_samples=float(lost * batch),
                lost_real_s=self._rollback_run_s(ckpt_step, before),
            ),
            GroupEvent(EventKind.PAUSE, begin, before, 0),
        ]
        if self.settings.standby:
            self._fill_standbys()
        return events
