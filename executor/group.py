"""Real worker groups: processes, generations, and the measured pause of every change.

:class:`ProcessWorkerGroup` is what the controller's decisions are applied to.  It
owns the run's authenticated store (bound to ``127.0.0.1`` unless told otherwise), starts
worker processes through *launchers* (local subprocesses, or remote agents, see
:mod:`.agent`), and turns "hold 3 spot and 1 on-demand node" into generations of
the process group.  One worker process is one node (one slot; one GPU with NCCL).

Two mechanisms (:class:`RescaleMode`):

* ``inplace``: every free slot holds a *warm standby* (torch imported, job built)
  while the group trains.  A change publishes generation ``g+1``; survivors re-form
  in place and newcomers receive the state by broadcast (see :mod:`.worker`).  A
  victim of a hard preemption is SIGKILLed; survivors notice through a failing
  collective and lose only the step in flight.
* ``restart``: TorchElastic semantics, the baseline.  Every change stops *all*
  workers (a planned change first writes a checkpoint at a step boundary; a failure
  does not), starts *fresh* processes (cold: interpreter + torch import), and the
  new group restores the last checkpoint.  We use our own spawner rather than
  ``torchrun``'s agent because the *controller* decides membership here (torchrun
  re-forms when its own rendezvous sees agents come and go, which cannot be driven
  per decision), and because the point is to measure the mechanism (stop, cold start,
  rendezvous, checkpoint load) without torchrun's fixed rendezvous timeouts; the
  benchmark measures a plain ``torchrun --max-restarts`` job separately.

Pause accounting (real seconds; the controller converts to trace time).  For a
change with survivors the pause is measured by the new rank 0, a survivor: from its
last step end before the change to its first step end after it, minus one typical
step (the time it did not train), split into ``detect_s`` (failure -> noticed),
``rendezvous_s`` (noticed -> new group formed, including waiting for the plan and
tearing the old group down), ``state_s`` (state sync) and ``warmup_s`` (first step
minus a typical step).  ``acquire_s`` is zero when warm standbys were ready, which is
the point of keeping them.  Without survivors (``restart`` mode, or a resume after
losing every node) ``acquire_s`` is the cold start of the new processes, teardown
of the old ones counts as rendezvous, and a checkpoint write/load as state.

Where things are.  :class:`ProcessWorkerGroup` is composed of one layer per concern,
as base classes: ``WorkerPool`` <- ``PauseAccounting`` <- ``InplaceChanges`` and
``RestartChanges`` <- ``ProcessWorkerGroup``.  Each layer calls only into the layers
below it, so each module reads on its own (why base classes and not helper objects:
see :mod:`.pool`).

* :mod:`.records`: what the group reports (:class:`GroupEvent`,
  :class:`StepRecord`, :class:`WorkerStart`, :class:`GroupProgress`).
* :mod:`.pool`: processes, the store, worker events and step records, standbys,
  forming a generation (:class:`~.pool.WorkerPool`); how a process is started on a
  host is :mod:`.launchers`.
* :mod:`.pauses`: rank 0's ``PAUSE`` payload and the step records as events, the
  cost of a rollback (:class:`~.pauses.PauseAccounting`).
* :mod:`.inplace` and :mod:`.restart`: the two mechanisms
  (:class:`~.inplace.InplaceChanges`, :class:`~.restart.RestartChanges`).
* :mod:`.settings`: :class:`GroupSettings`, below every part (the pool reads them).
* here: :class:`RescaleMode`, and what the controller calls
  (``apply``, ``preempt``, ``poll``, ``checkpoint``, ...), which picks the mechanism.

Every name that lived in this module before the split is still importable from it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from typing import Any

from elasim.jobmodel import RescaleMode  # the one definition, shared with the simulator
from elasim.policies import EventKind

from .inplace import InplaceChanges
from .launchers import Launcher, LocalLauncher, ProcessHandle
from .protocol import Command, CommandOp
from .records import (
    ExecutorError,
    GroupEvent,
    GroupProgress,
    StepRecord,
    WorkerStart,
    split_preempt,
)
from .restart import RestartChanges
from .settings import GroupSettings
from .workertable import NodeKind, Worker, WorkerStatus

__all__ = [
    "ExecutorError",
    "GroupEvent",
    "GroupProgress",
    "GroupSettings",
    "Launcher",
    "LocalLauncher",
    "NodeKind",
    "ProcessHandle",
    "ProcessWorkerGroup",
    "RescaleMode",
    "StepRecord",
    "WorkerStart",
    "WorkerStatus",
    "split_preempt",
]

#: the worker record's name before it moved to :mod:`.workertable` (tools inspecting
#: the table imported it from here)
_Worker = Worker


class ProcessWorkerGroup(InplaceChanges, RestartChanges):
    """Worker processes driven through generations (see the module docstring)."""

    def __init__(
        self,
        settings: GroupSettings,
        launchers: Sequence[Launcher],
        *,
        now: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(settings, launchers, now=now)
        self.mode = settings.mode
        self._keep_warm = self.mode is RescaleMode.INPLACE and settings.standby
        self._starved_since: float | None = None

    def start(self) -> None:
        """Open the store, publish the settings, start warm standbys (``inplace``)."""
        self._open_store()
        if self._keep_warm:
            self._start_standbys()

    # -- what the controller calls ---------------------------------------------------------

    def apply(
        self, spot: int, on_demand: int, *, wait_ready_s: float | None = None
    ) -> list[GroupEvent]:
        """Move the membership towards ``spot`` + ``on_demand`` nodes.

        Args:
            spot: spot nodes to hold.
            on_demand: on-demand nodes to hold.
            wait_ready_s: how long to wait for warm standbys to join (None: up to
                ``ready_timeout_s``).  The controller passes 0: newcomers that are
                still starting join at a later call (like booting nodes in the
                simulator), so the loop never blocks on a cold start.
        """
        self._pump()
        if self._done:
            return []
        cur = list(self._members)
        cur_spot = [w for w in cur if self.workers[w].kind is NodeKind.SPOT]
        cur_od = [w for w in cur if self.workers[w].kind is NodeKind.ON_DEMAND]
        # victims of a scale-down: the newest first (deterministic)
        drop = set(sorted(cur_spot)[spot:] if len(cur_spot) > spot else [])
        drop |= set(sorted(cur_od)[on_demand:] if len(cur_od) > on_demand else [])
        add_spot = max(spot - len(cur_spot), 0)
        add_od = max(on_demand - len(cur_od), 0)
        if not drop and not add_spot and not add_od:
            return []
        begin = self._now()
        survivors = [w for w in cur if w not in drop]
        before = len(cur)
        kind = EventKind.SCALE_UP if add_spot + add_od > 0 else EventKind.SCALE_DOWN
        if self.mode is RescaleMode.RESTART:
            kinds = [self.workers[w].kind for w in survivors]
            kinds += [NodeKind.SPOT] * add_spot + [NodeKind.ON_DEMAND] * add_od
            return self._restart_change(
                kind,
                [k for k in kinds if k is not None],
                planned=True,
                failure_wall_s=None,
                begin_real_s=begin,
                before=before,
            )
        return self._inplace_apply(
            kind,
            cur,
            survivors,
            add_spot,
            add_od,
            dropping=bool(drop),
            begin=begin,
            wait_ready_s=wait_ready_s,
        )

    def preempt(
        self, count: int, *, graceful: bool, kill_at_real_s: float | None = None
    ) -> list[GroupEvent]:
        """Take ``count`` spot members away (newest first): gracefully, or by SIGKILL.

        ``kill_at_real_s`` is unused: elasim's own workers leave at the step boundary
        they are told to, within the lead the job model gave them.
        """
        return split_preempt(self._preempt(count, graceful=graceful))

    def _preempt(self, count: int, *, graceful: bool) -> list[GroupEvent]:
        self._pump()
        spot_members = sorted(w for w in self._members if self.workers[w].kind is NodeKind.SPOT)
        victims = spot_members[len(spot_members) - min(count, len(spot_members)) :]
        if not victims or self._done:
            return []
        begin = self._now()
        before = len(self._members)
        survivors = [w for w in self._members if w not in victims]
        if graceful:
            if self.mode is RescaleMode.RESTART:
                kinds = [self.workers[w].kind for w in survivors]
                events = self._restart_change(
                    EventKind.PREEMPT,
                    [k for k in kinds if k is not None],
                    planned=True,
                    failure_wall_s=None,
                    begin_real_s=begin,
                    before=before,
                )
                return events if survivors else self._relabel(events, before)
            if not survivors:
                return self._relabel(self._stop_all(EventKind.PAUSE, begin, before), before)
            events = self._inplace_change(
                EventKind.PREEMPT,
                survivors,
                [],
                failure_wall_s=None,
                begin_real_s=begin,
                before=before,
            )
            self._wait_until(
                lambda: all(self.workers[w].status is not WorkerStatus.MEMBER for w in victims),
                self.settings.stop_grace_s,
            )
            return events
        kill_wall = time.time()
        for wid in victims:
            self.workers.kill(wid, signal.SIGKILL)
        return self._after_failure(victims, survivors, kill_wall, begin, before)

    def _relabel(self, events: list[GroupEvent], before: int) -> list[GroupEvent]:
        """A graceful loss of every node: the PREEMPT itself, then the PAUSE."""
        head = GroupEvent(EventKind.PREEMPT, events[-1].real_s, before, 0)
        return [*events[:-1], head, events[-1]]

    def _after_failure(
        self,
        dead: list[int],
        survivors: list[int],
        failure_wall_s: float,
        begin: float,
        before: int,
    ) -> list[GroupEvent]:
        """Recover from members that died without notice."""
        if self.mode is RescaleMode.RESTART:
            kinds = [self.workers[w].kind for w in survivors]
            return self._restart_change(
                EventKind.PREEMPT,
                [k for k in kinds if k is not None],
                planned=False,
                failure_wall_s=failure_wall_s,
                begin_real_s=begin,
                before=before,
            )
        if not survivors:
            return self._lost_everything(dead, begin, before)
        return self._inplace_change(
            EventKind.PREEMPT,
            survivors,
            [],
            failure_wall_s=failure_wall_s,
            begin_real_s=begin,
            before=before,
        )

    def checkpoint(self, tag: str = "interval") -> list[GroupEvent]:
        """Ask rank 0 to checkpoint at the next step boundary; wait for it."""
        self._pump()
        if not self._members or self._done or self._checkpoint_path is None:
            return []
        self._publish(Command(CommandOp.CHECKPOINT, tag=tag))
        got: dict[str, Any] = {}

        def written() -> bool:
            event = self._take(lambda e: e["type"] == "checkpoint" and e.get("tag") == tag)
            if event is not None:
                got["event"] = event
            return bool(got) or self._done or bool(self._crashed)

        self._wait_until(written, self.settings.change_timeout_s)
        if not got:
            return []
        event = got["event"]
        return [
            self._checkpoint_event(
                event, len(self._members), detail=(("step", int(event["step"])),)
            )
        ]

    def poll(self) -> list[GroupEvent]:
        """Handle what happened on its own: crashed members, failed collectives."""
        return split_preempt(self._poll())

    def _poll(self) -> list[GroupEvent]:
        self._pump()
        if self._done:
            return []
        if self._keep_warm:
            self._fill_standbys()
        crashed = [w for w in self._crashed if w in self._members]
        self._crashed.clear()
        if crashed:
            begin = self._now()
            before = len(self._members)
            survivors = [w for w in self._members if w not in crashed]
            wall = min(
                self.workers[w].fault_wall_s or self.workers[w].exit_wall_s or time.time()
                for w in crashed
            )
            return self._after_failure(crashed, survivors, wall, begin, before)
        if self._failed_collectives and self._members:
            # a collective timed out without anyone dying: re-form with everyone alive
            first = min(float(e["wall_s"]) for e in self._failed_collectives)
            if time.time() - first < 1.0:
                return []
            self._failed_collectives.clear()
            begin = self._now()
            before = len(self._members)
            survivors = [w for w in self._members if self.workers.alive(w)]
            dead = [w for w in self._members if not self.workers.alive(w)]
            return self._after_failure(dead, survivors, first, begin, before)
        return []

    def wait(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s`` real seconds, returning early if something happened."""
        if timeout_s <= 0:
            return

        def eventful() -> bool:
            return self._done or bool(self._crashed) or bool(self._failed_collectives)

        self._wait_until(eventful, timeout_s)

    def finish(self) -> None:
        """Training is over: send the standbys home."""
        standbys = tuple(w.wid for w in self.workers.records() if w.status is not WorkerStatus.DEAD)
        if standbys and self._store is not None:
            self._publish(Command(CommandOp.EXIT, wids=standbys))

    def release_standbys(self, keep: int = 0) -> int:
        """Send home every standby (ready or starting) beyond ``keep``; return how many.

        In a shared pool (``elasim cluster run``) a worker dropped from the group
        stays alive as a standby and so holds its slot; the cluster gave that slot to
        another job, which can start its worker only once this one has exited.
        Starting ones are killed (they have not built the job yet); ready ones are
        told to exit.
        """
        self._pump()
        idle = sorted(
            (
                w
                for w in self.workers.records()
                if w.status in (WorkerStatus.STANDBY, WorkerStatus.STARTING)
            ),
            key=lambda w: (w.status is WorkerStatus.STANDBY, w.wid),
        )
        extra = idle[: max(len(idle) - keep, 0)]
        ready = tuple(w.wid for w in extra if w.status is WorkerStatus.STANDBY)
        if ready and self._store is not None:
            self._publish(Command(CommandOp.EXIT, wids=ready))
        for w in extra:
            if w.status is WorkerStatus.STARTING:
                self.workers.kill(w.wid)
        return len(extra)

    def kill_member(self, index: int = -1) -> int:
        """SIGKILL one member without telling anyone (tests: an unexpected crash)."""
        wid = self._members[index]
        self.workers[wid].proc.send_signal(signal.SIGKILL)
        return wid
