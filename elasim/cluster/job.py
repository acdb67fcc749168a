"""One job of a cluster: its life on whatever GPUs the cluster policy grants.

A cluster of jobs is many job models.  :class:`ClusterJob` holds everything that
defines one job's life, once, whoever trains it: its placement and the allocation it
was given (restarts, peak GPUs, attained GPU time, time held), its batch, its
progress and epoch, its events and its :class:`~elasim.jobmodel.Accounting` books,
and the view a cluster policy sees.  What differs between the simulator and real
workers is only *how it trains*, behind the narrow :class:`Training` interface:

* :class:`ModelTraining` (the simulator): a placement and a batch size give a step
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

from elasim.jobmodel import Accounting, JobStateMachine, RescaleMode, pause_for
from elasim.policies import EventKind, EventRecord, JobState
from elasim.policies.cluster import ClusterJobView, Placement, placement_gpus
from elasim.traces.cluster import WorkloadJob

from .application import Application, BatchChoice
from .results import JobResult

__all__ = ["ADAPTIVE", "ClusterJob", "JobSpeedModel", "ModelTraining", "Training", "model_job"]

#: A batch size of 0 in a decision: the job adapts its own batch to its placement at
#: every epoch (what AdaptDL's library does inside a Pollux job).
ADAPTIVE = 0
_EPS = 1e-9
# The states a job's event depends on, read at every epoch of every job: an enum member
# read off its class costs a descriptor call (about 20 times a module global's read).
_RESCALING = JobState.RESCALING
_RUNNING = JobState.RUNNING


def _replaced(view: ClusterJobView, changes: dict[str, Any]) -> ClusterJobView:
    """``dataclasses.replace(view, **changes)``, without the dataclass's ``__init__``.

    Why: a running job's view changes at every decision (7 million views on the full
    Philly trace at 1,024 GPUs), and a frozen dataclass's ``__init__`` sets its 16
    fields one ``object.__setattr__`` at a time (2 us, against 0.3 us for the copy,
    which a test checks equals the constructor's: the view has no ``__post_init__``).
    """
    new = object.__new__(ClusterJobView)
    fields = new.__dict__
    fields.update(view.__dict__)
    fields.update(changes)
    return new


class JobSpeedModel:
    """The :class:`~elasim.policies.cluster.JobSpeed` of one job in one epoch."""

    __slots__ = ("_app", "_cache", "_epoch", "_gpn")

    def __init__(self, app: Application, epoch: int, gpus_per_node: int) -> None:
        self._app = app
        self._epoch = epoch
        self._gpn = gpus_per_node
        self._cache: dict[tuple[int, int, int | None], float] = {}

    @classmethod
    def of(cls, app: Application, epoch: int, gpus_per_node: int) -> JobSpeedModel:
        """The model of every job of ``app`` in ``epoch``: one, shared, and its cache too.

        Why shared: a speed depends on the application, the epoch and the shape only,
        and a policy that sizes jobs (``srtf``, ``pollux``) asks hundreds of shapes per
        decision; with a model per job and epoch, a quarter of the asks on the Philly
        trace at 1,024 GPUs missed the cache.
        """
        key = (epoch, gpus_per_node)
        model = app.speed_models.get(key)
        if model is None:
            model = app.speed_models[key] = cls(app, epoch, gpus_per_node)
        return model

    def _shape(self, nodes: int, gpus: int) -> tuple[int, ...]:
        nodes = max(1, min(nodes, gpus))
        base, extra = divmod(gpus, nodes)
        return tuple(base + (1 if i < extra else 0) for i in range(nodes))

    def goodput(self, nodes: int, gpus: int, batch_size: int | None = None) -> float:
        """Progress per second (see the protocol)."""
        if gpus <= 0:
            return 0.0
        key = (nodes, gpus, batch_size)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        shape = self._shape(nodes, gpus)
        if batch_size is None or batch_size == ADAPTIVE:
            choice = self._app.best(shape, self._epoch)
            out = choice.goodput if choice is not None else 0.0
        else:
            out = self._app.configure(shape, batch_size, self._epoch).goodput
        self._cache[key] = out
        return out

    def best_batch(self, nodes: int, gpus: int) -> int:
        """The best global batch on that shape (0 when none fits)."""
        if gpus <= 0:
            return 0
        choice = self._app.best(self._shape(nodes, gpus), self._epoch)
        return choice.batch_size if choice is not None else 0


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

    def poll(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """What happened without being asked (a polling job only)."""


class ClusterJob:
    """The state and books of one job (mutable; the loop owns it).

    Args:
        spec: the workload row.
        app: its application's model (the speed a policy is told, and the epochs).
        training: how it trains (:class:`ModelTraining`, or real workers).
        gpus_per_node: for the speed model's shapes.
        keeps_batch: the job trains with its requested batch whatever a policy
            chooses (an executor job's global batch is fixed); a policy's other
            choice is noted in :attr:`batch_ignored`, not applied.
    """

    def __init__(
        self,
        spec: WorkloadJob,
        app: Application,
        training: Training,
        gpus_per_node: int,
        *,
        keeps_batch: bool = False,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.app = app
        self.training = training
        self.gpus_per_node = gpus_per_node
        self.keeps_batch = keeps_batch
        self.batch_ignored: int | None = None
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
        self._choices_of: tuple[Placement, int] = ((), -1)  # what _choices hold choices of
        self._choices: list[BatchChoice | None] = []  # by epoch, for _choices_of
        self._shape: tuple[int, ...] = ()  # GPUs per node of _choices_of
        self._view: ClusterJobView | None = None
        self._view_key: tuple[Any, ...] = ()

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
        choice = self.choice
        key = (
            self.placement,
            choice.batch_size if choice is not None else self.batch_target,  # batch_size
            self.attained_gpu_s,
            self.held_s,
            self.progress,
            self.epoch,
            self.restarts,
            self.peak_gpus,
        )
        if self._view is not None and key == self._view_key:
            return self._view
        app = self.app
        if self._speed is None or self._speed._epoch != self.epoch:
            self._speed = JobSpeedModel.of(app, self.epoch, self.gpus_per_node)
        self._view_key = key
        done = self.progress / app.target_progress
        left = app.target_progress - self.progress
        state = {  # min(done, 1.0), max(left, 0.0) and max(restarts, 0), without the calls
            "placement": self.placement,
            "batch_size": key[1] or self.spec.requested_batch_size,
            "attained_gpu_s": self.attained_gpu_s,
            "running_s": self.held_s,
            "progress": 1.0 if 1.0 < done else done,
            "remaining": 0.0 if 0.0 > left else left,
            "epoch": self.epoch,
            "restarts": 0 if 0 > self.restarts else self.restarts,
            "peak_gpus": self.peak_gpus,
            "speed": self._speed,
        }
        if self._view is None:
            self._view = ClusterJobView(
                name=self.name,
                application=app.name,
                arrival_s=self.spec.arrival_s,
                requested_gpus=self.spec.requested_gpus,
                requested_batch_size=self.spec.requested_batch_size,
                max_gpus=app.max_gpus(),
                **state,
            )
        else:
            self._view = _replaced(self._view, state)
        return self._view

    # -- time -----------------------------------------------------------------------------

    def configure(self) -> None:
        """The batch choice of the placement, target batch and epoch (None unplaced).

        A job asks at every epoch (millions of times on the full Philly trace): it
        keeps the application's row of choices by epoch for its placement and target
        (:meth:`Application.epoch_choices`), so that an epoch costs a list index.
        """
        placement = self.placement
        if not placement:
            self.choice = None
            return
        if placement is not self._choices_of[0] or self.batch_target != self._choices_of[1]:
            self._choices_of = (placement, self.batch_target)
            self._shape = tuple(g for _, g in placement)
            self._choices = self.app.epoch_choices(self._shape, self.batch_target)
        row = self._choices
        epoch = min(self.epoch, len(row) - 1)
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

    def hold(self, dt: float, running: bool) -> None:
        """:meth:`occupy`, booked as training (at the batch choice's rate) or rescaling."""
        if dt <= 0:
            return
        self.attained_gpu_s += dt * self.gpus  # occupy(dt), inline: at every epoch
        if self.gpus:
            self.held_s += dt
        if running:
            self.books.running_s += dt
            if self.choice is not None:
                self.books.raw_samples += self.choice.throughput * dt
        else:
            self.books.rescale_s += dt

    def finish(self, t: float) -> None:
        """The job reached its target at ``t``: its last event, and its GPUs go."""
        self.finish_s = t
        self.record([EventRecord(t, EventKind.DONE, self.gpus, self.gpus)])
        self.placement = ()
        self.gpus = 0
        self.choice = None

    def record(self, events: list[EventRecord]) -> None:
        """Keep the events and count them in the books."""
        for event in events:
            self.events.append(event)
            self.books.count(event)

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

    def set_batch(self, batch_size: int | None) -> None:
        """Use ``batch_size`` from now on (None: the requested batch; 0: adaptive)."""
        if self.keeps_batch:
            if batch_size not in (None, self.spec.requested_batch_size):
                self.batch_ignored = batch_size
            batch_size = None
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


class ModelTraining:
    """The simulator's training of a cluster job: the application model's speed.

    Progress is integrated exactly, epoch by epoch, so a job's completion time does
    not depend on when the loop happens to look at it.  Cluster jobs checkpoint when
    they restart or release their GPUs (AdaptDL's checkpoint-restart), not
    periodically, so a preemption loses the progress made since the job last
    (re)started.

    Args:
        pause_job: the job spec whose ``[rescale]`` and ``[checkpoint]`` figures give
            the re-formation pause (:func:`~elasim.jobmodel.pause_for`).
        mode: in place or restart.
    """

    polls = False

    def __init__(self, pause_job: Any, mode: RescaleMode) -> None:
        self.pause_job = pause_job
        self.mode = mode
        self.sm = JobStateMachine()
        self.pause_end_s = math.inf
        self.has_checkpoint = False
        self.ckpt_progress = 0.0  # progress saved by the last checkpoint
        self.run_since_ckpt_s = 0.0  # training time a preemption would lose
        self.lost_progress = 0.0

    def state(self) -> JobState:
        """The job's state now."""
        return self.sm.state

    def poll(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """The model changes only when the loop advances it."""
        return []

    def next_due_s(self, job: ClusterJob) -> float:
        """When the job next changes on its own: a pause ends or an epoch ends."""
        state = self.sm.state
        if state is _RESCALING:
            return self.pause_end_s
        if state is _RUNNING and job.choice is not None:
            boundary = job.app.epoch_progress[job.epoch + 1]
            return job.last_s + max(boundary - job.progress, 0.0) / job.choice.goodput
        return math.inf

    def advance(self, job: ClusterJob, t: float) -> float | None:
        """Integrate up to ``t``: pause ends, epochs and completion, each at its time.

        Less than ``_EPS`` before ``t`` there is no time left to integrate, but an
        event due by then (a pause end, an epoch boundary a rounding error away) is
        still taken.  Why: the loop calls ``advance(due)`` for the event it popped.
        Months into a run ``last_s + need_s`` rounds to ``last_s`` (a float's spacing
        at 2e7 s is 4e-9 s), so an advance that took nothing then left the event due
        at the same time, and the loop popped it forever (the full Philly trace on 64
        GPUs hung 238 simulated days in).
        """
        sm = self.sm
        while job.finish_s is None:
            state = sm.state
            if job.last_s >= t - _EPS:
                due = self.next_due_s(job)
                if due > t + _EPS:
                    return due  # nothing left to integrate and no event due
            if state is _RESCALING:
                end = max(min(self.pause_end_s, t), job.last_s)
                job.hold(end - job.last_s, running=False)
                job.last_s = end
                if end >= self.pause_end_s - _EPS:
                    sm.to(_RUNNING)
                    self.pause_end_s = math.inf
                continue
            if state is not _RUNNING or job.choice is None:
                job.books.idle_s += t - job.last_s
                job.last_s = t
                return None
            boundary = job.app.epoch_progress[job.epoch + 1]
            rate = job.choice.goodput
            need_s = max(boundary - job.progress, 0.0) / rate
            if job.last_s + need_s > t + _EPS:
                self._train(job, t - job.last_s)
                job.progress += rate * (t - job.last_s)
                job.last_s = t
                return None
            self._train(job, need_s)
            job.last_s += need_s
            job.progress = boundary
            job.epoch += 1
            if job.epoch >= job.app.max_epochs:
                self.sm.to(JobState.DONE)
                job.finish(job.last_s)
                return None
            job.configure()
        return None

    def _train(self, job: ClusterJob, dt: float) -> None:
        if dt > 0:
            self.run_since_ckpt_s += dt
            job.hold(dt, running=True)

    def _saved(self, job: ClusterJob) -> None:
        self.ckpt_progress = job.progress
        self.run_since_ckpt_s = 0.0

    def preempt(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Back to the last checkpoint: the progress since the job last (re)started."""
        before = job.gpus
        lost_progress = job.progress - self.ckpt_progress
        lost_h = self.run_since_ckpt_s / 3600.0
        raw = job.choice.throughput * self.run_since_ckpt_s if job.choice else 0.0
        job.progress = self.ckpt_progress
        job.epoch = job.app.epoch(job.progress)
        self.run_since_ckpt_s = 0.0
        self.sm.to(JobState.WAITING)
        self.pause_end_s = math.inf
        self.has_checkpoint = self.has_checkpoint or job.start_s is not None
        self.lost_progress += lost_progress
        return [
            EventRecord(now_s, EventKind.PREEMPT, before, 0, lost_samples=raw, lost_work_h=lost_h)
        ]

    def release(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Releasing on purpose writes a checkpoint first, then the job waits."""
        self._saved(job)
        self.sm.to(JobState.WAITING)
        self.pause_end_s = math.inf
        self.has_checkpoint = self.has_checkpoint or job.start_s is not None
        return [EventRecord(now_s, EventKind.PAUSE, job.gpus, 0)]

    def regroup(self, job: ClusterJob, placement: Placement, now_s: float) -> list[EventRecord]:
        """The re-formation's pause (:func:`~elasim.jobmodel.pause_for`), then running."""
        before, after = job.gpus, placement_gpus(placement)
        survivors = 0
        if self.mode is RescaleMode.INPLACE and job.placement:
            old = dict(job.placement)
            survivors = sum(min(g, old.get(n, 0)) for n, g in placement)
        restart = survivors == 0
        write_s = self.pause_job.checkpoint.write_s if restart and job.placement else 0.0
        if restart and job.placement:
            self._saved(job)  # a restart checkpoints before it stops
        pause = pause_for(
            self.pause_job,
            self.mode,
            nodes_after=after,
            nodes_before=before,
            survivors=survivors,
            newcomers=after - survivors,
            failure=False,
            has_checkpoint=self.has_checkpoint or bool(job.placement),
            waited_boot=False,
            checkpoint_write_s=write_s,
        )
        if job.start_s is None:
            kind = EventKind.SCALE_UP
        elif not job.placement:
            kind = EventKind.RESUME
        else:
            kind = EventKind.SCALE_UP if after >= before else EventKind.SCALE_DOWN
        self.sm.to(JobState.RESCALING)
        self.pause_end_s = now_s + pause.pause_s
        return [EventRecord(now_s, kind, before, after, pause=pause)]


def model_job(
    spec: WorkloadJob,
    app: Application,
    pause_job: Any,
    mode: RescaleMode,
    gpus_per_node: int,
    *,
    keeps_batch: bool = False,
) -> ClusterJob:
    """A job of the simulator's cluster loop (the loop's default ``job_factory``)."""
    return ClusterJob(
        spec, app, ModelTraining(pause_job, mode), gpus_per_node, keeps_batch=keeps_batch
    )
