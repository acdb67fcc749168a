"""The simulator's training of a cluster job: the application model's speed and pauses.

:class:`ModelTraining` is the :class:`~.job.Training` of ``elasim cluster simulate``
(real workers train ``elasim cluster run``'s jobs, :mod:`elasim.executor.cluster`).
Apart from :mod:`.job` because the job is the same whoever trains it, and because
what the model adds, periodic checkpoints and the graceful leave, comes from the
single-job model: :class:`~elasim.jobmodel.durability.DurableProgress` keeps what a
loss cannot take away, and :func:`~elasim.jobmodel.durability.final_checkpoint` is
the write before a warned leave.  Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from elasim.jobmodel import CheckpointSchedule, JobStateMachine, RescaleMode, pause_for
from elasim.jobmodel.durability import DurableProgress, Release, final_checkpoint
from elasim.policies import EventKind, EventRecord, JobState, PauseComponents
from elasim.policies.cluster import Placement, placement_gpus
from elasim.traces.cluster import WorkloadJob

from .application import Application
from .job import ClusterJob
from .speed import StepSample

__all__ = ["ModelTraining", "jobs_of", "model_job", "use_checkpoints"]

_EPS = 1e-9
# The states a job's event depends on, read at every epoch of every job: an enum member
# read off its class costs a descriptor call (about 20 times a module global's read).
_RESCALING = JobState.RESCALING
_RUNNING = JobState.RUNNING
_CHECKPOINTING = JobState.CHECKPOINTING


class ModelTraining:
    """The simulator's training of a cluster job: the application model's speed.

    Progress is integrated exactly, epoch by epoch, so a job's completion time does
    not depend on when the loop happens to look at it.  Cluster jobs checkpoint when
    they restart or release their GPUs (AdaptDL's checkpoint-restart) and, when the
    loop gives them a schedule (``--checkpoint-interval-s``; off by default), every
    interval of training, each write pausing training for its cost.  A preemption
    without notice loses the progress since the last durable checkpoint; a warned
    leave (:meth:`leave`) writes a final one first, as a single job does.

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
        #: a started job always has one to restore from (its initial state)
        self.has_checkpoint = False
        self.durable = DurableProgress()
        self.newcomer_start_s = _newcomer_start_s(pause_job, mode)
        #: a growth waiting for its newcomers: (when they are ready, the old shape, its pause)
        self._boot: tuple[float, tuple[int, ...], PauseComponents] | None = None

    def state(self) -> JobState:
        """The job's state now."""
        return self.sm.state

    def poll(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """The model changes only when the loop advances it."""
        return []

    def next_due_s(self, job: ClusterJob) -> float:
        """When the job next changes on its own: a pause, epoch or write ends, or one is due.

        ``0.0 if 0.0 > x else x`` is ``max(x, 0.0)`` and ``b if b < a else a`` is
        ``min(a, b)``, operand for operand, without the calls: the loop asks at every
        epoch and every decision of every job that holds GPUs.
        """
        state = self.sm.state
        if state is _RESCALING or state is _CHECKPOINTING:
            return self.pause_end_s
        choice = job.choice
        if state is _RUNNING and choice is not None:
            boot = self._boot
            left = job.app.epoch_progress[job.epoch + 1] - job.progress
            rate = choice.goodput if boot is None else self._boot_rate(job)
            last_s = job.last_s
            due = last_s + (0.0 if 0.0 > left else left) / rate
            if job.schedule is not None:
                due = min(due, last_s + max(job.checkpoint_due_in_s(), 0.0))
            if boot is not None:
                due = min(due, max(boot[0], last_s))
            return due
        return math.inf

    def advance(self, job: ClusterJob, t: float) -> float | None:
        """Integrate up to ``t``: pause ends, epochs, checkpoints and completion, each at its time.

        Returns the next :meth:`next_due_s` where it worked that out (else None), always
        when ``t`` falls within an epoch (where a decision brings each running job).

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
            last_s = job.last_s
            if last_s >= t - _EPS:
                due = self.next_due_s(job)
                if due > t + _EPS:
                    return due  # nothing left to integrate and no event due: when one is
            if state is _RESCALING or state is _CHECKPOINTING:
                self._hold_pause(job, t, state)
                continue
            choice = job.choice
            if state is not _RUNNING or choice is None:
                job.books.idle_s += t - last_s
                job.last_s = t
                return
            boundary = job.app.epoch_progress[job.epoch + 1]
            boot = self._boot
            rate = choice.goodput if boot is None else self._boot_rate(job)
            left = boundary - job.progress
            need_s = (0.0 if 0.0 > left else left) / rate  # max(left, 0.0) / rate
            if job.schedule is not None or boot is not None:
                took = self._interrupt(job, t, rate, need_s)  # a write or a join comes first?
                if took is not None:
                    if took:
                        continue
                    return
            within = last_s + need_s > t + _EPS  # t comes before the epoch ends
            dt = t - last_s if within else need_s
            self._train(job, dt)  # one call for either case, which books it all itself
            if within:
                job.progress += rate * dt
                job.last_s = t
                if boot is not None or job.schedule is not None:
                    return self.next_due_s(job)
                left = boundary - job.progress  # next_due_s(job), the same operations
                return t + (0.0 if 0.0 > left else left) / rate
            job.last_s, job.progress = last_s + need_s, boundary
            job.epoch += 1
            if job.epoch >= job.app.max_epochs:
                sm.to(JobState.DONE, job.last_s)
                job.finish(job.last_s)
                return
            job.configure()
            if job.fit is not None:  # only a fitted job measures: no call per epoch else
                self._measure(job)

    def _hold_pause(self, job: ClusterJob, t: float, state: JobState) -> None:
        """A re-formation's pause or a periodic write, up to ``t`` or its end."""
        end = max(min(self.pause_end_s, t), job.last_s)
        if state is _CHECKPOINTING:
            job.occupy(end - job.last_s)
            job.books.checkpoint_s += max(end - job.last_s, 0.0)
        else:
            job.hold(end - job.last_s)
        job.last_s = end
        if end >= self.pause_end_s - _EPS:
            if state is _CHECKPOINTING:
                self.durable.finish_write()
            self.sm.to(_RUNNING, end)
            if state is _RESCALING:
                self._measure(job)
            self.pause_end_s = math.inf

    def _interrupt(self, job: ClusterJob, t: float, rate: float, need_s: float) -> bool | None:
        """A periodic write or the newcomers' join before the epoch ends (``need_s`` away).

        Apart from :meth:`advance`, whose epoch step is the hot path (millions of
        epochs on a long trace), and is taken only with a checkpoint schedule or a
        growth under way.  Returns None when neither comes first, True when one was
        taken, False when ``t`` came before it.
        """
        ckpt_in_s = math.inf if job.schedule is None else job.checkpoint_due_in_s()
        boot = self._boot
        if boot is not None and boot[0] - job.last_s < min(need_s, ckpt_in_s):
            return self._until_ready(job, t, rate, max(boot[0] - job.last_s, 0.0))
        if ckpt_in_s >= need_s:
            return None
        if not self._train_for(job, t, rate, max(ckpt_in_s, 0.0)):
            return False
        self._write(job)
        return True

    def _train_for(self, job: ClusterJob, t: float, rate: float, span_s: float) -> bool:
        """Train ``span_s`` at ``rate``, or only up to ``t`` if it comes first.

        Returns True when the span was done (``job.last_s`` at its end), False when
        ``t`` came first (``job.last_s`` is ``t``).  The write and the newcomers' join
        each end such a span (:meth:`_interrupt`).
        """
        if job.last_s + span_s > t + _EPS:
            self._train(job, t - job.last_s)
            job.progress += rate * (t - job.last_s)
            job.last_s = t
            return False
        self._train(job, span_s)
        job.progress += rate * span_s
        job.last_s += span_s
        return True

    def _boot_rate(self, job: ClusterJob) -> float:
        """The goodput of the old group, which trains while the newcomers start."""
        return job.app.choose(self._boot[1], job.batch_target, job.epoch).goodput  # type: ignore[index]

    def _until_ready(self, job: ClusterJob, t: float, rate: float, wait_s: float) -> bool:
        """The old group trains until the newcomers are ready, then the group re-forms."""
        if not self._train_for(job, t, rate, wait_s):
            return False
        pause = self._boot[2]  # type: ignore[index]
        self._boot = None
        self.sm.reform(job.last_s)
        self.pause_end_s = job.last_s + pause.pause_s
        return True

    def _write(self, job: ClusterJob) -> None:
        """A periodic checkpoint begins: training pauses for its write (single-job rule)."""
        write_s = job.checkpoint_write_s
        self.durable.begin_write(job.progress)
        self.sm.to(_CHECKPOINTING, job.last_s)
        self.pause_end_s = job.last_s + write_s
        pause = PauseComponents(state_s=write_s)
        job.record([EventRecord(job.last_s, EventKind.CHECKPOINT, job.gpus, job.gpus, pause)])

    def _measure(self, job: ClusterJob) -> None:
        """A fitted job "measures" its configuration: its step, and its gradients on two GPUs.

        The simulator's side of ``--speed-model fitted``: what real workers would
        report of this configuration, read off the profile, goes into the same fit.
        """
        choice, fit = job.choice, job.fit
        if fit is None or choice is None:
            return
        replicas = job.gpus
        local = choice.atomic_bsz * (choice.accum_steps + 1)
        fit.steps([StepSample(replicas, float(local), choice.step_s, len(job.placement))])
        if replicas > 1:
            fit.gradients(*job.app.grad_stats(choice.batch_size, job.epoch))

    def _train(self, job: ClusterJob, dt: float) -> None:
        """``dt`` seconds of training on the job's GPUs, in its books and its durability.

        The only booking of training time, with the job's books written here, not
        through :meth:`ClusterJob.occupy`: it runs at every epoch and every decision
        of every job that holds GPUs (13 million times on the full Philly trace).
        """
        if dt > 0:
            self.durable.ran(dt)
            gpus = job.gpus
            job.attained_gpu_s += dt * gpus
            if gpus:
                job.held_s += dt
            books = job.books
            books.running_s += dt
            if job.choice is not None:
                books.raw_samples += job.choice.throughput * dt

    def _saved(self, job: ClusterJob) -> None:
        self.durable.save(job.progress)

    def preempt(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Back to the last durable checkpoint: the progress since it is lost."""
        before = job.gpus
        self._boot = None
        lost_progress, lost_s = self.durable.rollback(job.progress)
        raw = job.choice.throughput * lost_s if job.choice else 0.0
        if lost_progress > 0:
            job.progress = self.durable.checkpointed
        job.epoch = job.app.epoch(job.progress)
        self.sm.to(JobState.WAITING, now_s)
        self.pause_end_s = math.inf
        self.has_checkpoint = self.has_checkpoint or job.start_s is not None
        return [
            EventRecord(
                now_s, EventKind.PREEMPT, before, 0, lost_samples=raw, lost_work_h=lost_s / 3600.0
            )
        ]

    def leave(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Warned in time: a final checkpoint (:func:`final_checkpoint`), then the GPUs go.

        The single job's rule: the write takes the training of its last seconds back
        (booked as checkpoint time); where there was no room for it, the unsaved
        work is lost as without notice.
        """
        choice = job.choice
        self._boot = None
        rates = (choice.goodput, choice.throughput, 1.0) if choice else (0.0, 0.0, 1.0)
        release = Release.of(self.sm, now_s, self.pause_job.checkpoint.write_s, rates)
        saved = final_checkpoint(self.durable, job.books, job.progress, release)
        if saved is None:
            return self.preempt(job, now_s)
        job.progress = saved[0]
        job.epoch = job.app.epoch(job.progress)
        self.sm.to(JobState.WAITING, now_s)
        self.pause_end_s = math.inf
        self.has_checkpoint = True
        return [EventRecord(now_s, EventKind.PREEMPT, job.gpus, 0)]

    def release(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Releasing on purpose writes a checkpoint first, then the job waits."""
        self._boot = None
        self._saved(job)
        self.sm.to(JobState.WAITING, now_s)
        self.pause_end_s = math.inf
        self.has_checkpoint = self.has_checkpoint or job.start_s is not None
        return [EventRecord(now_s, EventKind.PAUSE, job.gpus, 0)]

    def regroup(self, job: ClusterJob, placement: Placement, now_s: float) -> list[EventRecord]:
        """The re-formation's pause (:func:`~elasim.jobmodel.pause_for`), then running."""
        before, after = job.gpus, placement_gpus(placement)
        old_shape = self._boot[1] if self._boot is not None else tuple(g for _, g in job.placement)
        self._boot = None
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
        event = EventRecord(now_s, kind, before, after, pause=pause)
        if (
            self.newcomer_start_s > 0
            and survivors
            and after > survivors
            and self.sm.state is _RUNNING
        ):
            # in place, the old group trains on while the newcomers start (as real ones do)
            self._boot = (now_s + self.newcomer_start_s, old_shape, pause)
            return [event]
        self.sm.reform(now_s)
        self.pause_end_s = now_s + pause.pause_s
        return [event]


def _newcomer_start_s(pause_job: Any, mode: RescaleMode) -> float:
    """How long a newcomer takes to start, when measured (0: not modelled, the default).

    A profile's pause table (``cluster calibrate``) has the start of a first worker from
    nothing (``0 -> 1``, spawn to ready); a worker that joins a running group starts
    the same way, and meanwhile the group trains on (in place).  Without a measured
    start a growth re-forms at once, as before (the bundled pause presets).
    """
    if mode is not RescaleMode.INPLACE or not getattr(pause_job, "pause_table", ()):
        return 0.0
    start = pause_job.measured_pause(mode.value, 0, 1, False)
    return 0.0 if start is None else start.acquire_s


def model_job(
    spec: WorkloadJob,
    app: Application,
    pause_job: Any,
    mode: RescaleMode,
    gpus_per_node: int,
) -> ClusterJob:
    """A job of the simulator's cluster loop (the loop's default ``job_factory``)."""
    return ClusterJob(spec, app, ModelTraining(pause_job, mode), gpus_per_node)


def jobs_of(
    workload: Sequence[WorkloadJob],
    applications: dict[str, Application],
    pause_job: Any,
    mode: RescaleMode,
    gpus_per_node: int,
    job_factory: Callable[..., ClusterJob],
) -> list[ClusterJob]:
    """The workload's jobs in arrival order (ties by name), each built by ``job_factory``.

    Each job gets its application model and the pause figures of its application
    (``pause_job`` is one job spec for all, or a mapping by application name).  The
    arrival order is the loop's order everywhere: admissions, views and ranks.
    """
    return [
        job_factory(
            spec,
            applications[spec.application],
            pause_job[spec.application] if isinstance(pause_job, dict) else pause_job,
            mode,
            gpus_per_node,
        )
        for spec in sorted(workload, key=lambda j: (j.arrival_s, j.name))
    ]


def use_checkpoints(
    jobs: Sequence[ClusterJob],
    interval_s: float | None,
    prior_mtbf_s: float,
    pause_of: Callable[[ClusterJob], Any],
) -> None:
    """Every job checkpoints on the single job's schedule (nothing when ``interval_s`` is inf).

    ``interval_s`` is ``--checkpoint-interval-s`` (None: Young/Daly ``auto``, with the
    capacity trace's mean time between drops as the prior); each write costs the
    job's pause preset's ``write_s``.
    """
    if interval_s is not None and math.isinf(interval_s):
        return
    schedule = CheckpointSchedule(interval_s, prior_mtbf_s)
    for job in jobs:
        job.use_checkpoints(schedule, pause_of(job).checkpoint.write_s)
