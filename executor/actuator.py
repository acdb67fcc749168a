"""Real workers as the job model's actuator: :class:`GroupActuator`.

The job loop (:class:`elasim.jobmodel.JobLoop`) decides in trace seconds; a worker
group acts and measures in real seconds.  This adapter is the only place where the two
meet: it converts every :class:`~.group.GroupEvent` to an
:class:`~elasim.policies.EventRecord` at its trace time, keeps the measured step times,
pauses and checkpoint writes that the loop's estimates come from, books where the time
went, and follows the job's :class:`~elasim.policies.JobState` from the events, so the
legal transitions are enforced here as they are in the fluid model.

Time accounting: training time is booked while the group has members, waiting for
starting workers as rescale, and holding nothing as idle; a pause or a checkpoint
write measured in an event is then moved from training to rescale or checkpoint time.
Events carry pauses in real seconds as measured (``events.parquet`` keeps them so);
the books are in trace seconds.

A group's command blocks (a restart waits for its workers' cold start) while the trace
goes on: :meth:`GroupActuator.acted_until_s` tells the loop where the clock is when
it returns, so the loop books up to then and carries out what fell due meanwhile
late, at that time, rather than at a past trace time the workers never saw.

Lost work: the steps a rollback threw away are charged their measured time.  Where
none of it was measured yet (the first steps of a world: no step interval so far),
they are charged the job's typical step (:meth:`MeasuredEstimates.step_s`, the prior
before any), so ``lost_steps`` never comes with ``lost_work_h`` 0.
"""

from __future__ import annotations

import math
from typing import Any

from elasim.jobmodel import Accounting, Activity, JobStateMachine, RescaleMode
from elasim.jobmodel.accounting import RESCALE_KINDS
from elasim.jobmodel.actions import members_lost
from elasim.policies import EventKind, EventRecord, JobState

from .controls import ControllerConfig, WorkerGroup
from .estimates import MeasuredEstimates
from .group import GroupEvent

__all__ = ["GroupActuator"]


class GroupActuator:
    """A :class:`~.controller.WorkerGroup` (real processes, or a fake) as an actuator.

    Args:
        group: the worker group.
        config: the controller's settings (time scale, priors, tables).
        origin: ``() -> float``, the run's start on the group's clock (real seconds).
        rescale: the job's mechanism (a restart group retries a failed restart only
            when something changed).
        now: ``() -> float``, the group's clock now (real seconds, the clock of
            ``origin``); None: commands are taken to act at once (a fake group).
    """

    #: real workers crash, finish or fail to start without being asked: the loop polls
    polls = True

    def __init__(
        self,
        group: WorkerGroup,
        config: ControllerConfig,
        origin: Any,
        *,
        rescale: RescaleMode = RescaleMode.INPLACE,
        now: Any = None,
    ) -> None:
        self.group = group
        self._now = now
        self.config = config
        self.rescale = rescale
        self.scale = config.time_scale
        self._origin = origin
        self.books = Accounting()
        self._sm = JobStateMachine()
        self._last_s = 0.0
        self._acquired = (0, 0)
        self.meter = self
        #: what the loop's observation and rules estimate, from what this measured
        self.estimates = MeasuredEstimates(group, config)
        self._moves: list[tuple[float, Activity]] = []
        #: real seconds since the start, and the raw pause interval, of each event it
        #: reported, by the event's identity (the loop adds notices and DONE itself)
        self.measured: dict[int, tuple[float, float | None]] = {}
        self.last_pause_s: float | None = None

    # -- state -------------------------------------------------------------------------

    @property
    def state(self) -> JobState:
        """The job's state, followed from the group's events."""
        return self._sm.state

    @property
    def training(self) -> bool:
        """Members are training (the checkpoint timer runs)."""
        return sum(self.group.held()) > 0

    def paid(self) -> tuple[int, int]:
        """Members, or the nodes asked for while their workers start, whichever is more."""
        spot, od = self.group.held()
        return max(spot, self._acquired[0]), max(od, self._acquired[1])

    def members(self) -> tuple[int, int]:
        """Members of the current generation."""
        return self.group.held()

    def _follow(self, event: EventRecord) -> None:
        """Move the job's state along the event (legal transitions only)."""
        sm, kind, at_s = self._sm, event.kind, event.time_s
        if kind in RESCALE_KINDS:
            sm.reform(at_s)
            sm.to(JobState.RUNNING if event.nodes_after else JobState.WAITING, at_s)
        elif kind is EventKind.RESTORE:
            sm.reform(at_s)
        elif kind is EventKind.CHECKPOINT and sm.state is JobState.RUNNING:
            sm.to(JobState.CHECKPOINTING, at_s)
            sm.to(JobState.RUNNING, at_s)
        elif kind in (EventKind.PAUSE, EventKind.PREEMPT) and event.nodes_after == 0:
            sm.to(JobState.WAITING, at_s)

    # -- time ----------------------------------------------------------------------------

    def advance(self, now_s: float, books: Accounting) -> None:
        """Book the time since the last call, then the pauses measured meanwhile."""
        dt = now_s - self._last_s
        if dt > 0:
            self._last_s = now_s
            members = sum(self.group.held())
            if members:
                books.spend(Activity.RUNNING, dt)
            elif sum(self.paid()):
                books.spend(Activity.RESCALE, dt)
            else:
                books.spend(Activity.IDLE, dt)
        for seconds, activity in self._moves:
            books.move(seconds, Activity.RUNNING, activity)
        self._moves.clear()

    def finished(self, now_s: float) -> bool:
        """Whether rank 0 reported the end of training."""
        if not self.group.done:
            return False
        sm = self._sm
        for state in (JobState.RESCALING, JobState.RUNNING, JobState.DONE):
            if sm.state is not JobState.DONE and sm.state.can_become(state):
                sm.to(state, now_s)
        return sm.state is JobState.DONE

    def next_due_s(self, now_s: float) -> float:
        """The group reports through :meth:`poll`; nothing is scheduled here."""
        return math.inf

    def acted_until_s(self, now_s: float) -> float:
        """Trace time now, after a command that may have blocked (``now_s`` at least)."""
        if self._now is None:
            return now_s
        return max(now_s, (self._now() - self._origin()) * self.scale)

    def wait(self, real_s: float) -> None:
        """Sleep up to ``real_s``, returning early when the group has news."""
        self.group.wait(real_s)

    # -- events ----------------------------------------------------------------------------

    def _convert(self, events: list[GroupEvent]) -> list[EventRecord]:
        out = []
        scale = self.scale
        for ev in events:
            real_s = ev.real_s - self._origin()
            lost_real_s = ev.lost_real_s
            if ev.lost_steps and lost_real_s <= 0:  # not measured: the typical step
                lost_real_s = ev.lost_steps * self.estimates.step_s() / scale
            record = EventRecord(
                time_s=max(real_s * scale, 0.0),
                kind=ev.kind,
                nodes_before=ev.nodes_before,
                nodes_after=ev.nodes_after,
                pause=ev.pause,
                lost_samples=ev.lost_samples,
                lost_work_h=lost_real_s * scale / 3600.0,
                lost_steps=ev.lost_steps,
            )
            out.append(record)
            self.measured[id(record)] = (real_s, ev.interval_s)
            self._measure(record)
            self._follow(record)
        return out

    def _measure(self, record: EventRecord) -> None:
        """Book a measured pause or write where its time went; the estimates learn it."""
        self.estimates.learn(record)
        pause = record.pause.pause_s
        if record.kind is EventKind.CHECKPOINT:
            self._moves.append((pause * self.scale, Activity.CHECKPOINT))
        elif pause > 0 and record.kind in RESCALE_KINDS | {EventKind.PREEMPT}:
            self.last_pause_s = pause
            self._moves.append((pause * self.scale, Activity.RESCALE))

    # -- acting ------------------------------------------------------------------------------

    def apply(self, spot: int, on_demand: int, now_s: float, fresh: bool) -> list[EventRecord]:
        """Ask for ``spot`` + ``on_demand`` nodes; newcomers still starting join later.

        A ``restart`` group restarts only when the target or the capacity changed
        (``fresh``): each attempt is a full restart.
        """
        self._acquired = (spot, on_demand)
        if self.group.held() == (spot, on_demand):
            return []
        if self.rescale is RescaleMode.RESTART and not fresh:
            return []
        return self._convert(self.group.apply(spot, on_demand, wait_ready_s=0.0))

    def preempt(
        self, victims: int, graceful: bool, now_s: float, drop_s: float | None = None
    ) -> list[EventRecord]:
        """Take ``victims`` spot nodes: ones still starting first, then members.

        A graceful leave tells the group when the drop comes (``kill_at_real_s``, on
        the group's clock), so that a group of processes it does not control (a
        user's script) can kill what is left exactly then.
        """
        paid_spot = self.paid()[0]
        keep = max(paid_spot - victims, 0)
        self._acquired = (min(self._acquired[0], keep), self._acquired[1])
        kill = members_lost(victims, paid_spot, self.group.held()[0])
        if kill <= 0:
            return []
        kill_at = None if drop_s is None else self._origin() + drop_s / self.scale
        return self._convert(self.group.preempt(kill, graceful=graceful, kill_at_real_s=kill_at))

    def checkpoint(self, now_s: float) -> list[EventRecord]:
        """Ask rank 0 for a checkpoint at the next step boundary."""
        return self._convert(self.group.checkpoint())

    def moved(self, now_s: float) -> None:
        """Arrived in another zone: nothing to forget (real workers restart anyway).

        The group released every worker when the move began; the next :meth:`apply`
        starts new ones, which load the moved checkpoint.
        """

    def settle(self, now_s: float) -> list[EventRecord]:
        """Real changes complete inside :meth:`apply`; nothing ends on its own."""
        return []

    def admit(self, now_s: float) -> list[EventRecord]:
        """Warm standbys join at the next :meth:`apply`."""
        return []

    def poll(self, now_s: float) -> list[EventRecord]:
        """Crashed members and failed collectives, handled by the group."""
        return self._convert(self.group.poll())

    # -- the meter (trace seconds) ------------------------------------------------------------

    def progress(self) -> float:
        """Steps done / the job's steps."""
        steps = min(self.group.progress().step, self.config.max_steps)
        return steps / self.config.max_steps

    def remaining_samples(self) -> float:
        """Samples of the steps still to do."""
        steps = min(self.group.progress().step, self.config.max_steps)
        batch = self.group.global_batch or self.config.global_batch
        return float((self.config.max_steps - steps) * batch)

    def step_count(self) -> int:
        """Steps committed."""
        return self.group.progress().step

    def view(self) -> tuple[int, int, int, float, str, int]:
        """A timeline row's worth: paid, members, progress, state, steps."""
        spot, od = self.paid()
        return (
            spot,
            od,
            sum(self.group.held()),
            self.progress(),
            self._sm.state.value,
            self.step_count(),
        )
