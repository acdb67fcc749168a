"""One job of a cluster: its life on whatever GPUs the cluster policy grants.

The rules of that life are the job model's (:mod:`elasim.jobmodel`), called directly
rather than written again: the enforced :class:`~elasim.jobmodel.JobStateMachine`,
the :class:`~elasim.jobmodel.Accounting` books and event counts, and the pause of a
group re-formation from :func:`~elasim.jobmodel.pause_for` (rendezvous, checkpoint
restore or state broadcast, warm-up; in place or restart), not a flat constant.

What is cluster-specific is the speed: a placement and a batch size give a step time
(:class:`~elasim.cluster.application.Application`), and the statistical efficiency
moves with the epoch.  Progress is integrated exactly, epoch by epoch, so a job's
completion time does not depend on when the loop happens to look at it.
"""

from __future__ import annotations

import math
from typing import Any

from elasim.jobmodel import Accounting, JobStateMachine, RescaleMode, pause_for
from elasim.policies import EventKind, EventRecord, JobState
from elasim.policies.cluster import ClusterJobView, Placement, placement_gpus
from elasim.traces.cluster import WorkloadJob

from .application import Application, BatchChoice

__all__ = ["ADAPTIVE", "ClusterJob", "JobSpeedModel"]

#: A batch size of 0 in a decision: the job adapts its own batch to its placement at
#: every epoch (what AdaptDL's library does inside a Pollux job).
ADAPTIVE = 0
_EPS = 1e-9


class JobSpeedModel:
    """The :class:`~elasim.policies.cluster.JobSpeed` of one job in one epoch."""

    __slots__ = ("_app", "_cache", "_epoch", "_gpn")

    def __init__(self, app: Application, epoch: int, gpus_per_node: int) -> None:
        self._app = app
        self._epoch = epoch
        self._gpn = gpus_per_node
        self._cache: dict[tuple[int, int, int | None], float] = {}

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


class ClusterJob:
    """The state and books of one job (mutable; the loop owns it).

    Args:
        spec: the workload row.
        app: its application's model.
        pause_job: the job spec whose ``[rescale]`` and ``[checkpoint]`` figures give
            the re-formation pause (:func:`~elasim.jobmodel.pause_for`).
        mode: in place or restart.
        gpus_per_node: for the speed model's shapes.
    """

    def __init__(
        self,
        spec: WorkloadJob,
        app: Application,
        pause_job: Any,
        mode: RescaleMode,
        gpus_per_node: int,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.app = app
        self.pause_job = pause_job
        self.mode = mode
        self.gpus_per_node = gpus_per_node
        self.books = Accounting()
        self.sm = JobStateMachine()
        self.placement: Placement = ()
        self.gpus = 0
        self.batch_target = min(spec.requested_batch_size, app.max_batch)
        self.choice: BatchChoice | None = None
        self.progress = 0.0
        self.epoch = 0
        self.last_s = spec.arrival_s
        self.pause_end_s = math.inf
        self.start_s: float | None = None
        self.finish_s: float | None = None
        self.attained_gpu_s = 0.0
        self.held_s = 0.0
        self.restarts = -1
        self.peak_gpus = 0
        self.has_checkpoint = False
        self.ckpt_progress = 0.0  # progress saved by the last checkpoint
        self.run_since_ckpt_s = 0.0  # training time a preemption would lose
        self.lost_progress = 0.0
        self.events: list[EventRecord] = []
        self._speed: JobSpeedModel | None = None
        self._view: ClusterJobView | None = None
        self._view_key: tuple[Any, ...] = ()

    # -- views ----------------------------------------------------------------------------

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
        key = (
            self.placement,
            self.batch_size,
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
            self._speed = JobSpeedModel(app, self.epoch, self.gpus_per_node)
        self._view_key = key
        self._view = ClusterJobView(
            name=self.name,
            application=app.name,
            arrival_s=self.spec.arrival_s,
            requested_gpus=self.spec.requested_gpus,
            requested_batch_size=self.spec.requested_batch_size,
            max_gpus=app.max_gpus(),
            placement=self.placement,
            batch_size=self.batch_size or self.spec.requested_batch_size,
            attained_gpu_s=self.attained_gpu_s,
            running_s=self.held_s,
            progress=min(self.progress / app.target_progress, 1.0),
            remaining=max(app.target_progress - self.progress, 0.0),
            epoch=self.epoch,
            restarts=max(self.restarts, 0),
            peak_gpus=self.peak_gpus,
            speed=self._speed,
        )
        return self._view

    # -- time -----------------------------------------------------------------------------

    def _configure(self) -> None:
        if not self.placement:
            self.choice = None
            return
        shape = tuple(g for _, g in self.placement)
        if self.batch_target == ADAPTIVE:
            self.choice = self.app.best(shape, self.epoch) or self.app.configure(
                shape, self.app.init_batch, self.epoch
            )
        else:
            self.choice = self.app.configure(shape, self.batch_target, self.epoch)

    #: the model changes only when the loop advances it (a real job polls: the executor)
    polls = False

    def poll(self, now_s: float) -> bool:
        """A polling job's news at ``now_s`` (True: it changed; the model never polls)."""
        return False

    def next_due_s(self) -> float:
        """When the job next changes on its own: a pause ends or an epoch ends."""
        state = self.sm.state
        if state is JobState.RESCALING:
            return self.pause_end_s
        if state is JobState.RUNNING and self.choice is not None:
            boundary = self.app.epoch_progress[self.epoch + 1]
            return self.last_s + max(boundary - self.progress, 0.0) / self.choice.goodput
        return math.inf

    def advance(self, t: float) -> None:
        """Integrate up to ``t``: pause ends, epochs and completion, each at its time.

        Less than ``_EPS`` before ``t`` there is no time left to integrate, but an
        event due by then (a pause end, an epoch boundary a rounding error away) is
        still taken.  Why: the loop calls ``advance(due)`` for the event it popped.
        Months into a run ``last_s + need_s`` rounds to ``last_s`` (a float's spacing
        at 2e7 s is 4e-9 s), so an advance that took nothing then left the event due
        at the same time, and the loop popped it forever (the full Philly trace on 64
        GPUs hung 238 simulated days in).
        """
        while not self.done:
            state = self.sm.state
            if self.last_s >= t - _EPS and self.next_due_s() > t + _EPS:
                return  # nothing left to integrate and no event due
            if state is JobState.RESCALING:
                end = max(min(self.pause_end_s, t), self.last_s)
                self._hold(end - self.last_s, running=False)
                self.last_s = end
                if end >= self.pause_end_s - _EPS:
                    self.sm.to(JobState.RUNNING)
                    self.pause_end_s = math.inf
                continue
            if state is not JobState.RUNNING or self.choice is None:
                self.books.idle_s += t - self.last_s
                self.last_s = t
                return
            boundary = self.app.epoch_progress[self.epoch + 1]
            rate = self.choice.goodput
            need_s = max(boundary - self.progress, 0.0) / rate
            if self.last_s + need_s > t + _EPS:
                self._hold(t - self.last_s, running=True)
                self.progress += rate * (t - self.last_s)
                self.last_s = t
                return
            self._hold(need_s, running=True)
            self.last_s += need_s
            self.progress = boundary
            self.epoch += 1
            if self.epoch >= self.app.max_epochs:
                self._finish(self.last_s)
                return
            self._configure()

    def _hold(self, dt: float, running: bool) -> None:
        if dt <= 0:
            return
        self.attained_gpu_s += dt * self.gpus
        self.held_s += dt
        if running:
            self.run_since_ckpt_s += dt
            self.books.running_s += dt
            if self.choice is not None:
                self.books.raw_samples += self.choice.throughput * dt
        else:
            self.books.rescale_s += dt

    def _finish(self, t: float) -> None:
        self.sm.to(JobState.DONE)
        self.finish_s = t
        self._event(EventRecord(t, EventKind.DONE, self.gpus, self.gpus))
        self.placement = ()
        self.gpus = 0
        self.choice = None

    def _event(self, event: EventRecord) -> None:
        self.events.append(event)
        self.books.count(event)

    # -- changes --------------------------------------------------------------------------

    def _saved(self) -> None:
        self.ckpt_progress = self.progress
        self.run_since_ckpt_s = 0.0

    def preempt(self, now_s: float) -> EventRecord | None:
        """Its GPUs are taken without notice (capacity dropped): back to the last checkpoint.

        Cluster jobs checkpoint when they restart or release their GPUs (AdaptDL's
        checkpoint-restart), not periodically, so a preemption loses the progress
        made since the job last (re)started.
        """
        if self.done or not self.placement:
            return None
        before = self.gpus
        lost_progress = self.progress - self.ckpt_progress
        lost_h = self.run_since_ckpt_s / 3600.0
        raw = self.choice.throughput * self.run_since_ckpt_s if self.choice else 0.0
        self.progress = self.ckpt_progress
        self.epoch = self.app.epoch(self.progress)
        self.run_since_ckpt_s = 0.0
        self.sm.to(JobState.WAITING)
        self.placement, self.gpus, self.choice = (), 0, None
        self.pause_end_s = math.inf
        self.has_checkpoint = self.has_checkpoint or self.start_s is not None
        self.lost_progress += lost_progress
        event = EventRecord(
            now_s, EventKind.PREEMPT, before, 0, lost_samples=raw, lost_work_h=lost_h
        )
        self._event(event)
        return event

    def set_batch(self, batch_size: int | None) -> None:
        """Use ``batch_size`` from now on (None: the requested batch; 0: adaptive)."""
        if batch_size is None:
            batch_size = min(self.spec.requested_batch_size, self.app.max_batch)
        if batch_size != self.batch_target:
            self.batch_target = batch_size
            self._configure()

    def reallocate(self, placement: Placement, now_s: float) -> EventRecord | None:
        """Move to ``placement`` at ``now_s`` (the loop has advanced the job to it)."""
        if placement == self.placement or self.done:
            return None
        before, after = self.gpus, placement_gpus(placement)
        if not placement:
            self._saved()  # releasing on purpose writes a checkpoint first
            self.sm.to(JobState.WAITING)
            self.placement, self.gpus, self.choice = (), 0, None
            self.pause_end_s = math.inf
            self.has_checkpoint = self.has_checkpoint or self.start_s is not None
            event = EventRecord(now_s, EventKind.PAUSE, before, 0)
            self._event(event)
            return event
        survivors = 0
        if self.mode is RescaleMode.INPLACE and self.placement:
            old = dict(self.placement)
            survivors = sum(min(g, old.get(n, 0)) for n, g in placement)
        restart = survivors == 0
        write_s = self.pause_job.checkpoint.write_s if restart and self.placement else 0.0
        if restart and self.placement:
            self._saved()  # a restart checkpoints before it stops
        pause = pause_for(
            self.pause_job,
            self.mode,
            nodes_after=after,
            nodes_before=before,
            survivors=survivors,
            newcomers=after - survivors,
            failure=False,
            has_checkpoint=self.has_checkpoint or bool(self.placement),
            waited_boot=False,
            checkpoint_write_s=write_s,
        )
        if self.start_s is None:
            self.start_s = now_s
            kind = EventKind.SCALE_UP
        elif not self.placement:
            kind = EventKind.RESUME
        else:
            kind = EventKind.SCALE_UP if after >= before else EventKind.SCALE_DOWN
        self.restarts += 1
        self.sm.to(JobState.RESCALING)
        self.placement, self.gpus = placement, after
        self.peak_gpus = max(self.peak_gpus, after)
        self.pause_end_s = now_s + pause.pause_s
        self._configure()
        event = EventRecord(now_s, kind, before, after, pause=pause)
        self._event(event)
        return event
