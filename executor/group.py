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

Where things are.  :class:`ProcessWorkerGroup` is composed of one collaborator per
concern, each an object with an interface of its own that is handed what it uses:

* :attr:`~ProcessWorkerGroup.pool` (:class:`~.pool.WorkerPool`): processes, the
  store, standbys, forming a generation.  It holds the worker table
  (:mod:`.workertable`) and what the workers reported (:mod:`.reports`); how a
  process is started on a host is :mod:`.launchers`.
* :attr:`~ProcessWorkerGroup.pauses` (:class:`~.pauses.PauseAccounting`): rank 0's
  ``PAUSE`` payload and the step records as events, the cost of a rollback.  It reads
  the pool's step log only.
* :attr:`~ProcessWorkerGroup.changes`: the mechanism of the group's mode, an
  :class:`~.inplace.InplaceChanges` or a :class:`~.restart.RestartChanges`, both
  handed the pool and the accounting, and both offering the three changes of
  :class:`Mechanism`.
* :mod:`.records`: what the group reports (:class:`GroupEvent`,
  :class:`StepRecord`, :class:`WorkerStart`, :class:`GroupProgress`);
  :mod:`.settings`: :class:`GroupSettings`.
* here: what the controller calls (``apply``, ``preempt``, ``poll``, ``checkpoint``,
  ...): which members a decision keeps, adds or loses, and when a failure is handled.

Every name that lived in this module before the split is still importable from it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from elasim.jobmodel import RescaleMode  # the one definition, shared with the simulator
from elasim.policies import EventKind

from .inplace import InplaceChanges
from .launchers import Launcher, LocalLauncher, ProcessHandle
from .pauses import PauseAccounting
from .pool import WorkerPool
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
from .workertable import NodeKind, Worker, WorkerStatus, newest

__all__ = [
    "ExecutorError",
    "GroupEvent",
    "GroupProgress",
    "GroupSettings",
    "Launcher",
    "LocalLauncher",
    "Mechanism",
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


class Mechanism(Protocol):
    """How membership changes: the three changes the group asks of its mechanism.

    Each returns the events of the change (unsplit: the group writes a preemption
    with survivors as two events, :func:`split_preempt`).
    """

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
        """A decision: keep ``survivors`` of the members ``cur``, add the nodes asked."""

    def leave(
        self, victims: list[int], survivors: list[int], *, begin_real_s: float, before: int
    ) -> list[GroupEvent]:
        """A graceful preemption: ``victims`` leave at a step boundary."""

    def recover(
        self,
        dead: list[int],
        survivors: list[int],
        *,
        failure_wall_s: float,
        begin_real_s: float,
        before: int,
    ) -> list[GroupEvent]:
        """Members ``dead`` are gone without notice (since ``failure_wall_s``)."""


class ProcessWorkerGroup:
    """Worker processes driven through generations (see the module docstring).

    Attributes:
        settings: the group's settings.
        mode: the rescale mode (``settings.mode``).
        pool: the processes, the store and what the workers reported.
        pauses: the pause accounting, over the pool's step log.
        changes: the mechanism of ``mode``.
    """

    def __init__(
        self,
        settings: GroupSettings,
        launchers: Sequence[Launcher],
        *,
        now: Callable[[], float] | None = None,
    ) -> None:
        self._now = now or time.monotonic
        self.pool = WorkerPool(settings, launchers, now=self._now)
        self.settings = settings
        self.mode = settings.mode
        self.pauses = PauseAccounting(self.pool.reports.steps, self.pool.clock_of)
        mechanism = RestartChanges if self.mode is RescaleMode.RESTART else InplaceChanges
        self.changes: Mechanism = mechanism(settings, self.pool, self.pauses)
        self._keep_warm = self.mode is RescaleMode.INPLACE and settings.standby

    def start(self) -> None:
        """Open the store, publish the settings, start warm standbys (``inplace``)."""
        self.pool.open()
        if self._keep_warm:
            self.pool.start_standbys()

    def close(self) -> None:
        """Tell every worker to exit, then make sure they did."""
        self.pool.close()

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
        pool = self.pool
        pool.pump()
        if pool.reports.done:
            return []
        cur = list(pool.members)
        cur_spot = [w for w in cur if pool.workers[w].kind is NodeKind.SPOT]
        cur_od = [w for w in cur if pool.workers[w].kind is NodeKind.ON_DEMAND]
        drop = {*newest(cur_spot, len(cur_spot) - spot), *newest(cur_od, len(cur_od) - on_demand)}
        add_spot = max(spot - len(cur_spot), 0)
        add_od = max(on_demand - len(cur_od), 0)
        if not drop and not add_spot and not add_od:
            return []
        begin = self._now()
        survivors = [w for w in cur if w not in drop]
        kind = EventKind.SCALE_UP if add_spot + add_od > 0 else EventKind.SCALE_DOWN
        return self.changes.apply(
            kind,
            cur,
            survivors,
            add_spot,
            add_od,
            begin_real_s=begin,
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
        pool = self.pool
        pool.pump()
        victims = newest((w for w in pool.members if pool.workers[w].kind is NodeKind.SPOT), count)
        if not victims or pool.reports.done:
            return []
        begin = self._now()
        before = len(pool.members)
        survivors = [w for w in pool.members if w not in victims]
        if graceful:
            events = self.changes.leave(victims, survivors, begin_real_s=begin, before=before)
            return events if survivors else _relabel(events, before)
        kill_wall = time.time()
        for wid in victims:
            pool.workers.kill(wid, signal.SIGKILL)
        return self.changes.recover(
            victims, survivors, failure_wall_s=kill_wall, begin_real_s=begin, before=before
        )

    def set_batch(self, global_batch: int, gain: float) -> None:
        """Train with ``global_batch`` and AdaScale ``gain`` from the next generation on.

        Why at a re-formation only: every rank must switch at the same step, and a
        ``JOIN`` is the one command that all of them act on at one step boundary with
        a fresh sampler position; a cluster policy's batch is applied so.
        """
        self.pool.batch = (int(global_batch), float(gain))

    def checkpoint(self, tag: str = "interval") -> list[GroupEvent]:
        """Ask rank 0 to checkpoint at the next step boundary; wait for it."""
        pool, reports = self.pool, self.pool.reports
        pool.pump()
        if not pool.members or reports.done or pool.checkpoint_path is None:
            return []
        pool.publish(Command(CommandOp.CHECKPOINT, tag=tag))
        got: dict[str, Any] = {}

        def written() -> bool:
            event = reports.take(lambda e: e["type"] == "checkpoint" and e.get("tag") == tag)
            if event is not None:
                got["event"] = event
            return bool(got) or reports.done or bool(pool.crashed)

        pool.wait_until(written, self.settings.change_timeout_s)
        if not got:
            return []
        event = got["event"]
        return [
            self.pauses.checkpoint_event(
                event, len(pool.members), detail=(("step", int(event["step"])),)
            )
        ]

    def poll(self) -> list[GroupEvent]:
        """Handle what happened on its own: crashed members, failed collectives."""
        return split_preempt(self._poll())

    def _poll(self) -> list[GroupEvent]:
        pool, reports, workers = self.pool, self.pool.reports, self.pool.workers
        pool.pump()
        if reports.done:
            return []
        if self._keep_warm:
            pool.fill_standbys()
        crashed = [w for w in pool.crashed if w in pool.members]
        pool.crashed.clear()
        if crashed:
            begin = self._now()
            before = len(pool.members)
            survivors = [w for w in pool.members if w not in crashed]
            wall = min(
                workers[w].fault_wall_s or workers[w].exit_wall_s or time.time() for w in crashed
            )
            return self.changes.recover(
                crashed, survivors, failure_wall_s=wall, begin_real_s=begin, before=before
            )
        if reports.failed_collectives and pool.members:
            # a collective timed out without anyone dying: re-form with everyone alive
            first = min(float(e["wall_s"]) for e in reports.failed_collectives)
            if time.time() - first < 1.0:
                return []
            reports.failed_collectives.clear()
            begin = self._now()
            before = len(pool.members)
            survivors = [w for w in pool.members if workers.alive(w)]
            dead = [w for w in pool.members if not workers.alive(w)]
            return self.changes.recover(
                dead, survivors, failure_wall_s=first, begin_real_s=begin, before=before
            )
        return []

    def wait(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s`` real seconds, returning early if something happened."""
        if timeout_s <= 0:
            return
        reports = self.pool.reports

        def eventful() -> bool:
            return reports.done or bool(self.pool.crashed) or bool(reports.failed_collectives)

        self.pool.wait_until(eventful, timeout_s)

    def finish(self) -> None:
        """Training is over: send the standbys home."""
        self.pool.finish()

    def release_standbys(self, keep: int = 0) -> int:
        """Send home every standby (ready or starting) beyond ``keep``; return how many.

        In a shared pool (``elasim cluster run``) a worker dropped from the group
        stays alive as a standby and so holds its slot; the cluster gave that slot to
        another job, which can start its worker only once this one has exited.
        Starting ones are killed (they have not built the job yet); ready ones are
        told to exit.
        """
        return self.pool.release_standbys(keep)

    def kill_member(self, index: int = -1) -> int:
        """SIGKILL one member without telling anyone (tests: an unexpected crash)."""
        wid = self.pool.members[index]
        self.pool.workers[wid].proc.send_signal(signal.SIGKILL)
        return wid

    def warm(self, count: int, timeout_s: float | None = None) -> int:
        """Make sure ``count`` warm standbys are ready (spawning as slots allow).

        Returns how many are ready.  Training continues meanwhile; tests and
        benchmarks call this so that a following ``apply`` measures the in-place
        mechanism rather than a cold start.
        """
        return len(self.pool.ready_standbys(count, timeout_s or self.settings.ready_timeout_s))

    # -- queries -----------------------------------------------------------------------------

    @property
    def launchers(self) -> list[Launcher]:
        """Where worker processes are started (the pool's)."""
        return self.pool.launchers

    @launchers.setter
    def launchers(self, launchers: list[Launcher]) -> None:
        self.pool.launchers = launchers

    @property
    def address(self) -> str:
        """``HOST:PORT`` of the run's store, as workers (on any host) reach it."""
        return self.pool.address

    @property
    def slots(self) -> int:
        """Worker slots over all launchers."""
        return self.pool.slots

    def held(self) -> tuple[int, int]:
        """``(spot, on_demand)`` members of the current generation."""
        return self.pool.workers.kind_counts(self.pool.members)

    @property
    def members(self) -> tuple[int, ...]:
        """Worker ids of the current generation, in rank order."""
        return self.pool.members

    def progress(self) -> GroupProgress:
        """The latest reported training progress."""
        self.pool.pump()
        reports = self.pool.reports
        return reports.steps.progress(reports.done, reports.metrics)

    def step_records(self) -> tuple[StepRecord, ...]:
        """Every step rank 0 reported, in order of completion."""
        self.pool.pump()
        return self.pool.reports.steps.in_order()

    def worker_starts(self) -> tuple[WorkerStart, ...]:
        """Every worker process started so far, in spawn order (see :class:`WorkerStart`)."""
        self.pool.pump()
        return self.pool.workers.starts(self.pool.clock_of)

    def step_time_by_world(self, recent: int = 64) -> dict[int, float]:
        """Median step time (real s) per world size, from consecutive steps of one generation."""
        return self.pauses.step_time_by_world(recent)

    def typical_step_s(self, world: int | None = None) -> float | None:
        """Median step time at ``world`` (or at the current size)."""
        return self.pauses.typical_step_s(len(self.pool.members) if world is None else world)

    @property
    def global_batch(self) -> int | None:
        """Samples per step, once a worker has reported it."""
        return self.pool.reports.global_batch

    @property
    def last_checkpoint_step(self) -> int | None:
        """Step of the newest checkpoint written in this run."""
        return self.pool.reports.last_checkpoint_step

    @property
    def done(self) -> bool:
        """Whether training finished."""
        return self.pool.reports.done

    @property
    def target_accuracy(self) -> float | None:
        """The job's stated accuracy target (from the first READY worker)."""
        return self.pool.reports.target_accuracy

    @property
    def job_name(self) -> str | None:
        """The job's name (from the first READY worker)."""
        return self.pool.reports.job_name


def _relabel(events: list[GroupEvent], before: int) -> list[GroupEvent]:
    """A graceful loss of every node: the PREEMPT itself, then the PAUSE."""
    head = GroupEvent(EventKind.PREEMPT, events[-1].real_s, before, 0)
    return [*events[:-1], head, events[-1]]
