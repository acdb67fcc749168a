"""One job of a cluster: its life on whatever GPUs the cluster policy grants.

A cluster of jobs is many job models.  :class:`ClusterJob` holds everything that
defines one job's life, once, whoever trains it: its placement and the allocation it
was given (restarts, peak GPUs, attained GPU time, time held), its batch, its
progress and epoch, its events and its :class:`~elasim.jobmodel.Accounting` books,
and the view a cluster policy sees.  What differs between the simulator and real
workers is only *how it trains*, behind the narrow :class:`Training` interface:

* :class:`~.training.ModelTraining` (the simulator): a placement and a batch size give a step
  time (:class:`~elasim.cluster.application.Application`), the statistical
  efficiency moves with the epoch, progress is integrated exactly, epoch by epoch,
  and a re-formation pauses for :func:`~elasim.jobmodel.pause_for` (rendezvous,
  checkpoint restore or state broadcast, warm-up; in place or restart), with the
  enforced :class:`~elasim.jobmodel.JobStateMachine`;
* real workers (``elasim cluster run``, :mod:`elasim.executor.cluster`): progress is
  the steps the workers committed, and a re-formation's pause is measured.

Why an interface and not a subclass: the real job used to subclass this one and
override its methods, and its copy of ``reallocate`` stopped updating the peak
allocation, which ``pollux`` and ``srtf`` cap growth with, so no real job ever grew
past one slot.  Nothing here can be overridden that way now.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from elasim.jobmodel import Accounting, CheckpointSchedule, checkpoint_timer_after
from elasim.policies import EventKind, EventRecord, JobState
from elasim.policies.cluster import ClusterJobView, Placement, placement_gpus
from elasim.traces.cluster import WorkloadJob

from .application import Application, BatchChoice
from .results import JobResult
from .speed import ADAPTIVE, JobSpeedModel, SpeedFit

__all__ = ["ADAPTIVE", "ClusterJob", "JobSpeedModel", "Training"]

_EPS = 1e-9


_new = object.__new__  # a view without the dataclass's ``__init__`` (see ClusterJob.view)


class Training(Protocol):
    """How a cluster job trains: the only thing a modelled and a real job differ in.

    Every method gets the job, whose shared fields (placement, batch choice,
    progress, books) it reads and moves through the job's own helpers
    (:meth:`ClusterJob.hold`, :meth:`ClusterJob.finish`); the job records what
    they return and keeps every other piece of bookkeeping itself.

    Attributes:
        polls: whether things happen without being asked (real workers finish when
            they finish), so the loop must :meth:`poll` every turn.
    """

    polls: bool

    def state(self) -> JobState:
        """The job's state now."""

    def next_due_s(self, job: ClusterJob) -> float:
        """When the job next changes on its own (inf: not before a poll)."""

    def advance(self, job: ClusterJob, t: float) -> float | None:
        """Train up to ``t``: progress, epochs, pause ends and completion.

        Returns its next :meth:`next_due_s` where it worked that out, else None.
        """

    def regroup(self, job: ClusterJob, placement: Placement, now_s: float) -> list[EventRecord]:
        """Re-form the job's group on ``placement`` (not empty), before the job moves.

        The job's fields still describe the old allocation; the events returned
        (the re-formation and its pause) are recorded once the job has moved.
        """

    def release(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Give every GPU back on purpose (a checkpoint is written first)."""

    def preempt(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """The job's GPUs are taken without notice: roll back to its last checkpoint."""

    def leave(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Its GPUs go after a notice long enough to leave gracefully (nothing is lost)."""

    def poll(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """What happened without being asked (a polling job only)."""


class ClusterJob:
    """The state and books of one job (mutable; the loop owns it).

    Args:
        spec: the workload row.
        app: its application's model (the speed a policy is told, and the epochs).
        training: how it trains (:class:`~.training.ModelTraining`, or real workers).
        gpus_per_node: for the speed model's shapes.
    """

    def __init__(
        self,
        spec: WorkloadJob,
        app: Application,
        training: Training,
        gpus_per_node: int,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.app = app
        self.training = training
        self.gpus_per_node = gpus_per_node
        self.books = Accounting()
        self.placement: Placement = ()
        self.gpus = 0
        #: the batch it trains with unless told otherwise (its request, within the validated)
        self.default_batch = min(spec.requested_batch_size, app.max_batch)
        self.batch_target = self.default_batch
        self.choice: BatchChoice | None = None
        self.progress = 0.0
        self.epoch = 0
        self.last_s = spec.arrival_s
        self.start_s: float | None = None
        self.finish_s: float | None = None
        self.attained_gpu_s = 0.0
        self.held_s = 0.0
        self.restarts = -1
        self.peak_gpus = 0
        self.events: list[EventRecord] = []
        self._speed: JobSpeedModel | None = None
        #: what the job measured, when its policy sees a fitted speed (None: the oracle's)
        self.fit: SpeedFit | None = None
        self._choices_of: tuple[Placement, int] = ((), -1)  # what _choices hold choices of
        self._choices: list[BatchChoice | None] = []  # by epoch, for _choices_of
        self._shape: tuple[int, ...] = ()  # GPUs per node of _choices_of
        self._view: ClusterJobView | None = None
        self._view_key: tuple[Any, ...] = ()
        #: periodic checkpoints (None: none, the default; :meth:`use_checkpoints`)
        self.schedule: CheckpointSchedule | None = None
        self.checkpoint_write_s = 0.0
        self.checkpoint_interval_s = math.inf
        self._ckpt_mark_s = 0.0  # the books' running time at the last checkpoint

    # -- views ----------------------------------------------------------------------------

    @property
    def polls(self) -> bool:
        """Whether the loop must poll the job every turn (real workers)."""
        return self.training.polls

    @property
    def state(self) -> JobState:
        """The job's state (its training's)."""
        return self.training.state()

    @property
    def done(self) -> bool:
        """Whether the job has finished."""
        return self.finish_s is not None

    @property
    def batch_size(self) -> int:
        """The global batch it trains with now (its target before it runs)."""
        return self.choice.batch_size if self.choice is not None else self.batch_target

    def view(self) -> ClusterJobView:
        """What a policy sees of it.

        The last view is kept and returned again while nothing in it changed: a job
        that waits for GPUs looks the same at every decision, and on an overloaded
        cluster (thousands of waiting jobs) building those views was half the run.
        """
        choice, fit, view = self.choice, self.fit, self._view
        key = (
            self.placement,
            choice.batch_size if choice is not None else self.batch_target,  # batch_size
            self.attained_gpu_s,
            self.held_s,
            self.progress,
            self.epoch,
            self.restarts,
            self.peak_gpus,
            fit and fit.model(),
        )
        if view is not None and key == self._view_key:
            return view
        app = self.app if fit is None else self.speed_app()
        speed = self._speed
        if speed is None or speed._epoch != self.epoch or speed._app is not app:
            speed = self._speed = JobSpeedModel.of(app, self.epoch, self.gpus_per_node)
        self._view_key = key
        if view is None:
            view = self._blank_view(app)
        done = self.progress / app.target_progress
        left = app.target_progress - self.progress
        # dataclasses.replace(view, ...) without the dataclass's __init__, which sets 16
        # fields one object.__setattr__ at a time (a test checks the copy equals it); the
        # changes are stored one by one, not through a dict of them (0.6 us a view, and a
        # running job's view changes at every decision: 9 million on the full Philly
        # trace at 1,024 GPUs); min(done, 1.0), max(left, 0.0), max(restarts, 0) inline
        new = _new(ClusterJobView)
        fields = new.__dict__
        fields.update(view.__dict__)
        fields["placement"] = self.placement
        fields["batch_size"] = key[1] or self.spec.requested_batch_size
        fields["attained_gpu_s"] = self.attained_gpu_s
        fields["running_s"] = self.held_s
        fields["progress"] = 1.0 if 1.0 < done else done
        fields["remaining"] = 0.0 if 0.0 > left else left
        fields["epoch"] = self.epoch
        fields["restarts"] = 0 if 0 > self.restarts else self.restarts
        fields["peak_gpus"] = self.peak_gpus
        fields["speed"] = speed
        self._view = new
        return new

    def _blank_view(self, app: Application) -> ClusterJobView:
        """The fields of the job's views that never change; :meth:`view` sets the others."""
        spec = self.spec
        return ClusterJobView(
            name=self.name,
            application=app.name,
            arrival_s=spec.arrival_s,
            requested_gpus=spec.requested_gpus,
            requested_batch_size=spec.requested_batch_size,
            max_gpus=app.max_gpus(),
            placement=(),
            batch_size=0,
            attained_gpu_s=0.0,
            running_s=0.0,
            progress=0.0,
            remaining=0.0,
            epoch=0,
            restarts=0,
        )

    # -- time -----------------------------------------------------------------------------

    def configure(self) -> None:
        """The batch choice of the placement, target batch and epoch (None unplaced).

        A job asks at every epoch (millions of times on the full Philly trace): it
        keeps the application's row of choices by epoch for its placement and target
        (:meth:`Application.epoch_choices`), so that an epoch costs a list index.
        A fitted job that adapts its batch picks it from its fit, as AdaptDL's agent
        does, and trains at that batch as the profile says.
        """
        placement = self.placement
        if not placement:
            self.choice = None
            return
        if self.fit is not None and self.batch_target == ADAPTIVE:
            batch = self.batch_plan(placement)[0]
            self.choice = self.app.configure(tuple(g for _, g in placement), batch, self.epoch)
            return
        if placement is not self._choices_of[0] or self.batch_target != self._choices_of[1]:
            self._choices_of = (placement, self.batch_target)
            self._shape = tuple(g for _, g in placement)
            self._choices = self.app.epoch_choices(self._shape, self.batch_target)
        row = self._choices
        last = len(row) - 1
        epoch = last if last < self.epoch else self.epoch  # min(self.epoch, last)
        choice = row[epoch]
        if choice is None:
            choice = row[epoch] = self.app.choose(self._shape, self.batch_target, epoch)
        self.choice = choice

    def poll(self, now_s: float) -> bool:
        """A polling job's news at ``now_s``; True when it finished."""
        self.record(self.training.poll(self, now_s))
        return self.done

    def next_due_s(self) -> float:
        """When the job next changes on its own (a pause or an epoch ends)."""
        return self.training.next_due_s(self)

    def advance(self, t: float) -> None:
        """Bring the job to ``t`` (see :meth:`Training.advance`)."""
        self.training.advance(self, t)

    def occupy(self, dt: float) -> None:
        """``dt`` seconds on the job's GPUs: its attained service and its time held."""
        if dt <= 0:
            return
        self.attained_gpu_s += dt * self.gpus
        if self.gpus:
            self.held_s += dt

    def hold(self, dt: float) -> None:
        """:meth:`occupy`, booked as rescaling (a pause holds the GPUs, nothing trains).

        Training time is booked by the training itself (the simulator's
        ``ModelTraining._train``), with its durability, in one step.
        """
        if dt <= 0:
            return
        self.occupy(dt)
        self.books.rescale_s += dt

    def finish(self, t: float) -> None:
        """The job reached its target at ``t``: its last event, and its GPUs go."""
        self.finish_s = t
        self.record([EventRecord(t, EventKind.DONE, self.gpus, self.gpus)])
        self.placement = ()
        self.gpus = 0
        self.choice = None

    def record(self, events: list[EventRecord], warned: bool = False) -> None:
        """Keep the events and count them in the books (and the checkpoint timer).

        ``warned``: they come of a leave warned in time (no failure unless it lost work).
        """
        for event in events:
            self.events.append(event)
            self.books.count(event, warned)
            if self.schedule is not None:
                self._time_checkpoints(event, self.schedule)

    # -- periodic checkpoints -------------------------------------------------------------

    def use_checkpoints(self, schedule: CheckpointSchedule, write_s: float) -> None:
        """Checkpoint every ``schedule`` interval of training, each write ``write_s``.

        The single-job rule, not a copy: :class:`~elasim.jobmodel.CheckpointSchedule`
        (fixed, or Young/Daly ``auto`` re-estimated after every checkpoint and every
        preemption, with the job's own time and preemptions), and the timer restarts
        at a checkpoint or a pause, as in :class:`~elasim.jobmodel.JobLoop`.
        """
        self.schedule = schedule
        self.checkpoint_write_s = write_s
        self.checkpoint_interval_s = schedule.current_interval_s(write_s, 0.0, 0)

    def checkpoint_due_in_s(self) -> float:
        """Training seconds left before the next periodic checkpoint (inf: none)."""
        return self.checkpoint_interval_s - (self.books.running_s - self._ckpt_mark_s)

    def restart_checkpoint_timer(self) -> None:
        """A checkpoint was asked for: the timer restarts even if none was written."""
        self._ckpt_mark_s = self.books.running_s

    def _time_checkpoints(self, event: EventRecord, schedule: CheckpointSchedule) -> None:
        """The single job's timer rule (:func:`~elasim.jobmodel.checkpoint_timer_after`)."""
        restart, self.checkpoint_interval_s = checkpoint_timer_after(
            event.kind,
            schedule,
            self.checkpoint_interval_s,
            write_s=self.checkpoint_write_s,
            elapsed_s=event.time_s - self.spec.arrival_s,
            failures=self.books.failures,
        )
        if restart:
            self._ckpt_mark_s = self.books.running_s

    def result(self) -> JobResult:
        """Its row of the run's results."""
        finish, books = self.finish_s, self.books
        return JobResult(
            name=self.name,
            application=self.app.name,
            arrival_s=self.spec.arrival_s,
            start_s=self.start_s,
            finish_s=finish,
            jct_s=None if finish is None else finish - self.spec.arrival_s,
            gpu_s=self.attained_gpu_s,
            rescales=books.rescales,
            final_batch_size=self.batch_size,
            running_s=books.running_s,
            rescale_s=books.rescale_s,
            preemptions=books.preemptions,
            lost_work_h=books.lost_s / 3600.0,
        )

    # -- changes --------------------------------------------------------------------------

    def preempt(self, now_s: float) -> EventRecord | None:
        """Its GPUs are taken without notice (capacity dropped): see :meth:`Training.preempt`."""
        if self.done or not self.placement:
            return None
        events = self.training.preempt(self, now_s)
        self.placement, self.gpus, self.choice = (), 0, None
        self.record(events)
        return events[-1] if events else None

    def leave(self, now_s: float) -> EventRecord | None:
        """Its GPUs go gracefully, warned in time (:meth:`Training.leave`)."""
        if self.done or not self.placement:
            return None
        events = self.training.leave(self, now_s)
        self.placement, self.gpus, self.choice = (), 0, None
        self.record(events, warned=True)
        return events[-1] if events else None

    def speed_app(self) -> Application:
        """The application its policy sees: the profile, or the fit of what it measured."""
        return self.app if self.fit is None else self.fit.model()

    def batch_plan(self, placement: Placement) -> tuple[int, float]:
        """The batch on ``placement`` and its AdaScale gain (real workers' plan).

        Chosen as the policy sees the job (:meth:`speed_app`): Pollux's agent picks
        the batch from its own fit, and AdaptDL's AdaScale its gain from the gradient
        statistics it measured.
        """
        app, shape = self.speed_app(), tuple(g for _, g in placement)
        batch = app.choose(shape, self.batch_target, self.epoch).batch_size
        return batch, app.gain(batch, self.epoch)

    def set_batch(self, batch_size: int | None) -> None:
        """Use ``batch_size`` from now on (None: the requested batch; 0: adaptive)."""
        if batch_size is None:
            batch_size = self.default_batch
        if batch_size != self.batch_target:
            self.batch_target = batch_size
            self.configure()

    def reallocate(self, placement: Placement, now_s: float) -> EventRecord | None:
        """Move to ``placement`` at ``now_s`` (the loop has advanced the job to it)."""
        if placement == self.placement or self.done:
            return None
        if not placement:
            events = self.training.release(self, now_s)
            self.placement, self.gpus, self.choice = (), 0, None
        else:
            events = self.training.regroup(self, placement, now_s)
            if self.start_s is None:
                self.start_s = now_s
            self.restarts += 1
            self.placement, self.gpus = placement, placement_gpus(placement)
            self.peak_gpus = max(self.peak_gpus, self.gpus)
            self.configure()
        self.record(events)
        return events[-1] if events else None
