"""Many elastic jobs on one cluster under one cluster policy, driven by any clock.

:class:`ClusterLoop` is to a cluster what :class:`elasim.jobmodel.JobLoop` is to one
job: it never waits.  A shell (SimPy's environment in :mod:`elasim.sim.cluster`, a
fake or real clock on the executor side) calls :meth:`ClusterLoop.turn` with the
current time and gets back the time at which the loop next has work.  Time is
event-driven: arrivals, a job's pause ending or epoch ending (its speed changes),
completions and the policy's own ``wake_after_s``; nothing is ticked.

Within one turn at time ``t``:

1. jobs whose own event is due are advanced to ``t`` (pause ends, epochs, completion);
2. jobs that arrive by ``t`` join;
3. a decision is due after an arrival, a completion or the policy's wake-up: every
   job that holds GPUs is brought to ``t`` (a waiting job has nothing to advance, and
   its view is kept while it waits), the policy sees a frozen
   :class:`~elasim.policies.cluster.ClusterObservation`, its answer is validated
   (a bad answer is a :class:`~elasim.jobmodel.PolicyError` naming the policy; a bad
   batch size one logged line), each job whose placement or batch changes is
   reallocated, and the decision is logged with the batches it set;
4. the next time: the next arrival, the earliest job event, the wake-up.

The decision log (:attr:`ClusterLoop.decisions`): frozen records, equal bit for bit
for the same inputs, whichever shell ran the loop.  A run that needs none keeps none
(``keep_decisions=False``: on the full Philly trace it was most of the memory);
``on_decision`` gets each record as it is made, to stream it to disk.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from typing import Any

from elasim.jobmodel import CHECKPOINT_OFF, RescaleMode, pause_for
from elasim.jobmodel.loop import MIN_WAKE_S, _policy_error
from elasim.policies.cluster import (
    ClusterDecision,
    ClusterDecisionRecord,
    ClusterJobView,
    ClusterObservation,
    ClusterPolicy,
    Placement,
)
from elasim.traces.cluster import WorkloadJob

from .application import Application
from .events import JobEvents
from .job import ClusterJob
from .results import ClusterResult, summarize_jobs
from .spot import Leave, SpotFeed
from .training import jobs_of, model_job, use_checkpoints
from .validate import validate_decision
from .views import ViewChunks

__all__ = ["ClusterLoop"]

_EPS = 1e-9
#: Decisions in a row that leave usable GPUs idle while jobs wait and nothing else can
#: change (no arrival to come): the policy will never run them, and the loop stops
#: rather than ask it forever.
STALL_DECISIONS = 1000
#: Jobs per chunk of the observation's :class:`JobViews` (by arrival rank): a decision
#: rebuilds the chunks of the jobs whose views changed and shares the rest.
VIEW_CHUNK = 256


class ClusterLoop:
    """The jobs of one workload on ``num_nodes`` x ``gpus_per_node`` GPUs.

    Args:
        policy: the cluster policy.
        workload: the jobs (any order; they join at their arrival).
        applications: the application models by name.
        pause_job: the job spec whose ``[rescale]``/``[checkpoint]`` figures give each
            reallocation's pause, or a mapping from application name to one.
        num_nodes: nodes in the cluster.
        gpus_per_node: GPUs per node.
        mode: how a job re-forms its group (restart: AdaptDL's checkpoint-restart).
        record_timeline: keep the allocation timeline.
        job_factory: builds each job from ``(spec, app, pause_job, mode, gpus_per_node)``
            (default :func:`~.training.model_job`: a :class:`ClusterJob` the application
            model trains).  The executor's shell passes one whose jobs real worker
            groups train (:mod:`elasim.executor.cluster`), the same
            :class:`ClusterJob` with another training; such a job ``polls``: the loop
            asks it at every turn (:meth:`ClusterJob.poll`), since real workers finish
            when they finish, not when a model says.
        on_change: called as ``on_change(time_s, job, placement, batch_size)`` whenever a
            job's allocation or batch changes (its completion included, with ``()``):
            how a shell with real workers learns what to start, move or stop.
        capacity: ``((time_s, nodes available), ...)`` from time 0, sorted: spot
            capacity (nodes ``0 .. available - 1`` are usable); a drop preempts the
            jobs on the lost nodes (:mod:`.spot`).  None: every node, always.
        capacity_period_s: repeat the capacity rows with this period (a trace's
            duration); None: the last row holds forever.
        notice_s: each drop is announced this long before (0: none); a job warned in
            time leaves gracefully, by the single job's rule (:mod:`.spot`).
        checkpoint_interval_s: periodic checkpoints of every job, as for one job
            (None: Young/Daly ``auto``; ``inf``: off, the default).
        keep_decisions: keep the decision log in :attr:`decisions` (off: only
            :attr:`decision_count` is kept).
        on_decision: called with each :class:`ClusterDecisionRecord` as it is made
            (a writer that streams the log to disk).
    """

    def __init__(
        self,
        policy: ClusterPolicy,
        workload: Sequence[WorkloadJob],
        applications: dict[str, Application],
        pause_job: Any,
        *,
        num_nodes: int,
        gpus_per_node: int,
        mode: RescaleMode = RescaleMode.RESTART,
        record_timeline: bool = True,
        job_factory: Callable[..., ClusterJob] = model_job,
        on_change: Callable[[float, str, Placement, int], None] | None = None,
        capacity: Sequence[tuple[float, int]] | None = None,
        capacity_period_s: float | None = None,
        keep_decisions: bool = True,
        on_decision: Callable[[ClusterDecisionRecord], None] | None = None,
        notice_s: float = 0.0,
        checkpoint_interval_s: float | None = CHECKPOINT_OFF,
    ) -> None:
        if num_nodes < 1 or gpus_per_node < 1:
            raise ValueError("a cluster needs at least one node and one GPU per node")
        self.policy = policy
        self.num_nodes = num_nodes
        self.gpus_per_node = gpus_per_node
        self.mode = mode
        self._pause_job = pause_job
        self.jobs = jobs_of(workload, applications, pause_job, mode, gpus_per_node, job_factory)
        self._by_name = {job.name: job for job in self.jobs}
        self._rank = {job.name: i for i, job in enumerate(self.jobs)}
        self._polls = any(getattr(job, "polls", False) for job in self.jobs)
        self._next_arrival = 0
        #: the arrived, unfinished jobs, in arrival order (their order in ``jobs``)
        self.active: list[ClusterJob] = []
        self._init_incremental_state()
        self.decisions: list[ClusterDecisionRecord] = []
        self.decision_count = 0
        self._keep_decisions = keep_decisions
        self._on_decision = on_decision
        #: (time_s, job, gpus, nodes, batch_size) at every change of a job's allocation
        self.timeline: list[tuple[float, str, int, int, int]] = []
        self._record_timeline = record_timeline
        self._on_change = on_change
        self.decision_due = False
        self.wake_at_s = math.inf
        self.now_s, self.turns, self.peak_active = 0.0, 0, 0  # peak: most jobs active at once
        self._rescale_estimate_s = self._estimate_rescale_s()
        self._spot = (
            None
            if not capacity
            else SpotFeed(capacity, capacity_period_s, num_nodes=num_nodes, notice_s=notice_s)
        )
        self.available_nodes: int | None = None
        self.lost_from = num_nodes  # nodes from this one on are gone for good (lost hosts)
        self.preemptions = 0
        prior_s = math.inf if self._spot is None else self._spot.prior_mtbf_s
        use_checkpoints(self.jobs, checkpoint_interval_s, prior_s, self._pause_of)
        self._stalled = 0
        self.stalled = False  # gave up on a policy that leaves every job waiting

    def _init_incremental_state(self) -> None:
        """The caches and queues that keep a turn's work proportional to what changed.

        What keeps a decision O(jobs that hold or change GPUs), not O(active jobs), on
        an overloaded cluster whose queue holds tens of thousands of waiting jobs: a
        job without GPUs neither moves nor changes its view until a decision names it.
        """
        self._views = ViewChunks(VIEW_CHUNK)  # each active job's last view
        self._active_names: set[str] = set()  # the names of ``active``
        self._holding: set[str] = set()  # active jobs with a placement
        self._held: list[ClusterJob] = []  # those jobs, in arrival order (kept sorted)
        self._dirty: set[str] = set()  # jobs whose view may have changed since observe()
        self._own_batch: set[str] = set()  # jobs whose batch target is not the requested one
        self._bad: set[tuple[str, object]] = set()  # bad batch sizes already logged
        self._events = JobEvents(remember=not self._polls)  # each job's next event

    def _pause_of(self, job: ClusterJob) -> Any:
        pause_job = self._pause_job
        return pause_job[job.spec.application] if isinstance(pause_job, dict) else pause_job

    def _estimate_rescale_s(self) -> float:
        if not self.jobs:
            return 0.0
        pause_job = self._pause_of(self.jobs[0])
        return pause_for(
            pause_job,
            self.mode,
            nodes_after=self.gpus_per_node,
            survivors=0,
            newcomers=self.gpus_per_node,
            failure=False,
            has_checkpoint=True,
            waited_boot=False,
            checkpoint_write_s=pause_job.checkpoint.write_s,
        ).pause_s

    # -- the turn -------------------------------------------------------------------------

    def turn(self, now_s: float, until_s: float = math.inf) -> float:
        """Do everything due at ``now_s``; return when the loop next has work (inf: done).

        Then, unless a job polls, the turns that follow and take job events only (an
        epoch or a pause ends, a job finishes, and what the policy decides then) are
        taken here too, each at its own time, up to the next arrival, wake-up or
        capacity change or past ``until_s``: exactly the turns a shell that calls at
        every time returned would make, since nothing else happens between them.  Why:
        a job has a turn at every epoch (its speed changes), about 4 million on the
        full Philly trace; each call through a shell (SimPy's) cost more than the turn.
        """
        self._turn(now_s)
        if self._polls:
            return self.next_time_s()
        return self._job_turns(until_s)

    def _job_turns(self, until_s: float) -> float:
        """The turns from now on that take job events only (see :meth:`turn`); the next time.

        The same turns, in the same order, as :meth:`_turn` at each time
        :meth:`next_time_s` gives, with what cannot change between them (the next
        arrival, capacity change and wake-up, the active jobs) read again only after a
        decision, and the event a turn is for checked once, not twice.
        """
        top_due, due_jobs = self._events.top_due, self._due_jobs
        while not self.stalled:
            other_s = self._next_other_s()
            wake_s = self.wake_at_s - _EPS
            capacity_s = self._next_capacity_s()
            pending = self._next_arrival < len(self.jobs)
            arrival_s = self.jobs[self._next_arrival].spec.arrival_s if pending else math.inf
            while True:
                due = top_due()
                nxt = due if due < other_s else other_s
                if not (
                    nxt <= until_s
                    and nxt < wake_s
                    and nxt + _EPS < capacity_s
                    and nxt + _EPS < arrival_s
                ):
                    return nxt  # a turn the shell makes (or past until_s)
                self.turns += 1
                self.now_s = nxt
                due_jobs(nxt, True)  # the event top_due() found is current
                if self.decision_due:
                    self._decide(nxt)
                    break  # the wake-up and the active jobs may have changed
        return math.inf

    def _turn(self, now_s: float) -> None:
        """One turn: jobs' events, polls, capacity, arrivals, wake-up, then a decision."""
        self.turns += 1
        self.now_s = now_s
        self._due_jobs(now_s)
        if self._polls:
            for job in list(self.active):
                if job.poll(now_s) and job.done:
                    self._complete(job)
        while self._next_capacity_s() <= now_s + _EPS:
            self._capacity_change(now_s)
        while self._next_arrival < len(self.jobs):
            job = self.jobs[self._next_arrival]
            if job.spec.arrival_s > now_s + _EPS:
                break
            self._next_arrival += 1
            job.last_s = job.spec.arrival_s
            self.active.append(job)
            self._active_names.add(job.name)
            self._set_view(job.name, job.view())
            self.decision_due = True
            self.peak_active = max(self.peak_active, len(self.active))
        if self.active and now_s >= self.wake_at_s - _EPS:  # as next_time_s() schedules it
            self.wake_at_s = math.inf
            self.decision_due = True
        if self.decision_due:
            self._decide(now_s)

    @property
    def jobs_done(self) -> int:
        """Jobs that arrived and finished so far (a shell's progress)."""
        return self._next_arrival - len(self.active)

    @property
    def finished(self) -> bool:
        """Every job has arrived and finished, or the loop stalled (a shell stops turning)."""
        return self.stalled or (self._next_arrival >= len(self.jobs) and not self.active)

    def _next_capacity_s(self) -> float:
        return math.inf if self._spot is None else self._spot.next_time_s()

    def _capacity_change(self, now_s: float) -> None:
        """What the spot feed has due: rows, notices and the graceful leaves they planned."""
        for item in self._spot.pop_due(now_s):  # type: ignore[union-attr]
            if isinstance(item, Leave):
                self._leave(item, now_s)
            elif item.notice:
                self._notice(item.drop_s, item.available, now_s)
            else:
                self.set_available(now_s, item.available)

    def set_available(self, now_s: float, nodes: int) -> None:
        """Nodes ``0 .. nodes - 1`` usable (never from ``lost_from`` on): others' jobs preempted.

        Without notice: the work of the jobs on the nodes now gone is lost.
        """
        available = min(max(nodes, 0), self.num_nodes, self.lost_from)
        if available == self.available_nodes:
            return
        self.available_nodes = available
        self._vacate(available, now_s)

    def _notice(self, drop_s: float, available: int, now_s: float) -> None:
        """Jobs on the doomed nodes are warned; those warned in time plan to leave."""
        self._spot.warn(self._movers(), drop_s, available, now_s, self.mode, self._pause_of)  # type: ignore[union-attr]

    def _leave(self, leave: Leave, now_s: float) -> None:
        """The doomed nodes are vacated (gracefully by the warned jobs) and given up."""
        self._spot.cap(leave.drop_s, leave.available)  # type: ignore[union-attr]
        self._vacate(leave.available, now_s, leave.graceful)

    def _vacate(self, available: int, now_s: float, graceful: frozenset[str] = frozenset()) -> None:
        """Jobs on nodes ``available`` and up go: ``graceful`` ones leave, others are preempted."""
        self.decision_due = True
        for job in self._movers():
            if not any(node >= available for node, _ in job.placement):
                continue
            job.advance(now_s)
            if job.done:
                self._complete(job)
                continue
            gone = job.leave(now_s) if job.name in graceful else job.preempt(now_s)
            self._events.forget(job.name)
            if gone is not None:
                self.preemptions += 1
                self._timeline(now_s, job)
            self._track(job)

    def next_time_s(self) -> float:
        """The next arrival, job event or wake-up (inf when nothing is left to happen)."""
        if self.stalled:
            return math.inf
        due, other_s = self._events.top_due(), self._next_other_s()
        return due if due < other_s else other_s

    def _next_other_s(self) -> float:
        """The next arrival, capacity change or wake-up (inf: none)."""
        best = self.wake_at_s if self.active else math.inf
        if self.active or self._next_arrival < len(self.jobs):
            best = min(best, self._next_capacity_s())
        if self._next_arrival < len(self.jobs):
            best = min(best, self.jobs[self._next_arrival].spec.arrival_s)
        return best

    def _due_jobs(self, now_s: float, top_checked: bool = False) -> None:
        """Advance the jobs whose events are due by ``now_s``.

        With ``top_checked`` the first one is known current (:meth:`JobEvents.top_due`
        just checked it), so it is not checked again.
        """
        events = self._events
        heap, pop = events.heap, events.pop
        scale = now_s if now_s > 0.0 else -now_s  # max(1.0, abs(now_s)), without the calls
        limit_s = now_s + _EPS * (scale if scale > 1.0 else 1.0)
        while heap and heap[0][0] <= limit_s:
            due, job = pop()
            if not top_checked and events.stale(job, due):
                continue
            top_checked = False
            last_s = job.last_s
            nxt = job.training.advance(job, last_s if last_s > due else due)  # max(due, last_s)
            if job.finish_s is None:
                events.push(job, nxt)
            else:
                self._complete(job)

    def _complete(self, job: ClusterJob) -> None:
        rank = self._rank
        index = bisect_left(self.active, rank[job.name], key=lambda j: rank[j.name])
        del self.active[index]  # O(log n) to find: ``active`` stays in arrival order
        self._active_names.discard(job.name)
        self._views.drop(rank[job.name], job.name)
        self._set_holding(job, False)
        self._dirty.discard(job.name)
        self._own_batch.discard(job.name)
        self.decision_due = True
        self._timeline(job.finish_s or self.now_s, job)

    def _movers(self) -> list[ClusterJob]:
        """The active jobs whose time can matter, in arrival order.

        Those that hold GPUs (or pause to take them up).  A job without GPUs only waits:
        advancing it books idle time, which no cluster result reports, and its view
        stays the same, so it is brought to the present only when a decision names it
        (:meth:`_decide`).  A polling job (real workers) can change at any time: with
        those, every active job moves.
        """
        return list(self.active) if self._polls else self._held[:]

    def _set_holding(self, job: ClusterJob, holds: bool) -> None:
        """Whether ``job`` is among the holding jobs; ``_held`` stays in arrival order.

        Kept sorted as jobs come and go, not sorted at every decision: a decision on
        1,024 GPUs sees dozens of holding jobs, and a job starts or stops at few.
        """
        name = job.name
        if holds == (name in self._holding):
            return
        rank = self._rank
        if holds:
            self._holding.add(name)
            insort(self._held, job, key=lambda j: rank[j.name])
        else:
            self._holding.discard(name)
            del self._held[bisect_left(self._held, rank[name], key=lambda j: rank[j.name])]

    def _track(self, job: ClusterJob) -> None:
        """Note what a change to ``job`` (not finished) did to the sets above."""
        name = job.name
        self._set_holding(job, bool(job.placement))
        if job.batch_target != job.default_batch:
            self._own_batch.add(name)
        else:
            self._own_batch.discard(name)
        self._dirty.add(name)

    # -- deciding -------------------------------------------------------------------------

    def observe(self, now_s: float) -> ClusterObservation:
        """Bring every active job to ``now_s`` and build the policy's view.

        Only the jobs that can have changed are advanced and viewed again (see
        :meth:`_movers`); the others' views are those kept from before.
        """
        movers = self._movers()
        self._events.forget_all()  # they move: each one's due is the one it now says
        by_name = self._by_name
        if self._polls:  # every active job moves, and a polling job's due is asked of it
            for job in movers:
                job.advance(now_s)
                if job.done:
                    self._complete(job)
            for name in self._dirty.union(self._holding):
                self._set_view(name, by_name[name].view())
            for job in movers:
                if not job.done:
                    self._set_view(job.name, job.view())
            held = tuple(self._view_of(job.name) for job in self._held)
        else:
            # the movers are the jobs that hold GPUs, in arrival order: each is brought to
            # now (its due is what its advance says) and, unless it finished, viewed
            views, rank, keep, known = [], self._rank, self._views.set, self._events.known
            for job in movers:
                due = job.training.advance(job, now_s)
                if job.finish_s is not None:
                    self._complete(job)
                    continue
                name = job.name
                if due is not None:
                    known[name] = due
                view = job.view()
                keep(rank[name], name, view)
                views.append(view)
            for name in self._dirty.difference(self._holding):
                self._set_view(name, by_name[name].view())
            held = tuple(views)
        self._dirty.clear()
        return ClusterObservation(
            now_s=now_s,
            num_nodes=self.num_nodes,
            gpus_per_node=self.gpus_per_node,
            jobs=self._views.views(),
            rescale_cost_s=self._rescale_estimate_s,
            available_nodes=self.available_nodes
            if self._spot is None
            else self._spot.usable(self.available_nodes, now_s),
            held=held,
        )

    def _view_of(self, name: str) -> ClusterJobView | None:
        """The active job's last view (None: not an active job)."""
        rank = self._rank.get(name)
        return None if rank is None else self._views.get(rank, name)

    def _set_view(self, name: str, view: ClusterJobView) -> None:
        self._views.set(self._rank[name], name, view)

    def _decide(self, now_s: float) -> None:
        obs = self.observe(now_s)
        self.decision_due = False
        policy = self.policy
        try:
            raw = policy.decide(obs)
        except Exception as exc:  # noqa: BLE001 - a user's plugin may raise anything
            detail = f"decide() raised {type(exc).__name__}: {exc}".splitlines()[0]
            raise _policy_error(policy, exc, detail) from exc  # type: ignore[arg-type]
        decision = validate_decision(raw, obs, policy, self._by_name, self._active_names, self._bad)
        idle = obs.jobs and not decision.allocations and obs.total_gpus > 0
        pending = self._next_arrival < len(self.jobs)
        self._stalled = self._stalled + 1 if idle and not pending else 0
        if self._stalled >= STALL_DECISIONS:
            self.stalled = True
        wake = decision.wake_after_s
        self.wake_at_s = math.inf if wake is None else now_s + max(wake, MIN_WAKE_S)
        allocations = decision.allocation_map()
        batches = decision.batch_map()
        holding, push, known = self._holding, self._events.push, self._events.known
        for job in self._named(allocations, batches):
            name = job.name
            if name not in holding:
                job.advance(now_s)  # a waiting job is brought to the present only now
            target = job.batch_target
            job.set_batch(batches.get(name))
            placement = allocations.get(name, ())
            if placement is not job.placement and placement != job.placement:  # else a no-op
                before = job.placement, job.batch_size
                job.reallocate(placement, now_s)
                if (job.placement, job.batch_size) != before:
                    self._timeline(now_s, job)
            elif name in holding and job.batch_target == target:
                push(job, known.get(name))  # unchanged since observe(), which knew its due
                continue  # it keeps its GPUs and batch: the sets above stay
            push(job)
            self._track(job)
        self._log(now_s, len(obs.jobs), decision)

    def _log(self, now_s: float, active: int, decision: ClusterDecision) -> None:
        """Count the decision and, where kept, record it with the batches it set."""
        self.decision_count += 1
        if self._keep_decisions or self._on_decision is not None:
            trained = tuple((n, self._by_name[n].batch_size) for n, _ in decision.allocations)
            record = ClusterDecisionRecord(now_s, active, decision, trained)
            if self._keep_decisions:
                self.decisions.append(record)
            if self._on_decision is not None:
                self._on_decision(record)

    def _named(self, allocations: dict[str, Placement], batches: dict[str, int]) -> list:
        """The jobs a decision can change, in arrival order (the order of its effects).

        Every active job but one that holds no GPUs, gets none, is not given a batch and
        already trains with its requested one: for it ``set_batch(None)`` and
        ``reallocate(())`` change nothing, so it is skipped.
        """
        if self._polls:
            return list(self.active)
        others = self._own_batch.union(allocations, batches)
        others.difference_update(self._holding)
        if not others:  # the common case: the holding jobs, kept in arrival order
            return self._held[:]
        by_name = self._by_name
        names = others.union(self._holding)
        return [by_name[name] for name in sorted(names, key=self._rank.__getitem__)]

    def _timeline(self, t: float, job: ClusterJob) -> None:
        if self._record_timeline:
            self.timeline.append((t, job.name, job.gpus, len(job.placement), job.batch_size))
        if self._on_change is not None:
            self._on_change(t, job.name, job.placement, job.batch_size)

    def decision_log(self) -> list[tuple[float, int, tuple, tuple, float | None]]:
        """``(time_s, active jobs, allocations, batch sizes, wake_after_s)`` per decision."""
        return [
            (
                r.time_s,
                r.active_jobs,
                r.decision.allocations,
                r.decision.batch_sizes,
                r.decision.wake_after_s,
            )
            for r in self.decisions
        ]

    # -- results --------------------------------------------------------------------------

    def run_to_end(self, horizon_s: float = math.inf) -> float:
        """Drive the loop on a plain (non-SimPy) clock until nothing is left; end time."""
        now = 0.0
        while True:
            nxt = self.turn(now, horizon_s)
            if nxt == math.inf or nxt > horizon_s:
                return now
            now = max(nxt, now)

    def result(self, wall_time_s: float = 0.0) -> ClusterResult:
        """Per-job rows and the summary."""
        rows = [job.result() for job in self.jobs]
        result = summarize_jobs(
            rows, self.num_nodes * self.gpus_per_node, self.decision_count, wall_time_s
        )
        return dataclasses.replace(result, timeline=tuple(self.timeline))
