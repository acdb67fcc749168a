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
   (a bad answer is a :class:`~elasim.jobmodel.PolicyError` naming the policy) and
   logged, and each job whose placement or batch changes is reallocated;
4. the next time: the next arrival, the earliest job event, the wake-up.

The decision log (:attr:`ClusterLoop.decisions`) is a list of frozen records, equal
bit for bit for the same inputs, whichever shell ran the loop.  A run that needs no
log keeps none (``keep_decisions=False``: on the full Philly trace the log was most of
the memory, 138,588 decisions naming hundreds of jobs each); ``on_decision`` gets each
record as it is made, to stream it to disk.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from elasim.jobmodel import PolicyError, RescaleMode, pause_for
from elasim.jobmodel.loop import MIN_WAKE_S, _policy_error
from elasim.policies.cluster import (
    ClusterDecision,
    ClusterDecisionRecord,
    ClusterJobView,
    ClusterObservation,
    ClusterPolicy,
    JobViews,
    Placement,
)
from elasim.traces.cluster import WorkloadJob

from .application import Application
from .job import ClusterJob, model_job
from .results import ClusterResult, JobResult, summarize_jobs

__all__ = ["ClusterLoop"]

_EPS = 1e-9
#: Decisions in a row that leave usable GPUs idle while jobs wait and nothing else can
#: change (no arrival to come): the policy will never run them, and the loop stops
#: rather than ask it forever.
STALL_DECISIONS = 1000
#: Jobs per chunk of the observation's :class:`JobViews` (by arrival rank): a decision
#: rebuilds the chunks of the jobs whose views changed and shares the rest.
VIEW_CHUNK = 256


def _jobs_of(
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
            (default :func:`~.job.model_job`: a :class:`ClusterJob` the application
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
            jobs on the lost nodes without notice.  None: every node, always.
        capacity_period_s: repeat the capacity rows with this period (a trace's
            duration); None: the last row holds forever.
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
    ) -> None:
        if num_nodes < 1 or gpus_per_node < 1:
            raise ValueError("a cluster needs at least one node and one GPU per node")
        self.policy = policy
        self.num_nodes = num_nodes
        self.gpus_per_node = gpus_per_node
        self.mode = mode
        self._pause_job = pause_job
        self.jobs = _jobs_of(workload, applications, pause_job, mode, gpus_per_node, job_factory)
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
        self.now_s = 0.0
        self.turns = 0
        self._rescale_estimate_s = self._estimate_rescale_s()
        self._init_capacity(capacity, capacity_period_s)
        self._stalled = 0
        #: the loop gave up on a policy that leaves every job waiting (see STALL_DECISIONS)
        self.stalled = False

    def _init_incremental_state(self) -> None:
        """The caches and queues that keep a turn's work proportional to what changed.

        What keeps a decision O(jobs that hold or change GPUs), not O(active jobs), on
        an overloaded cluster whose queue holds tens of thousands of waiting jobs: a
        job without GPUs neither moves nor changes its view until a decision names it.
        """
        # each active job's last view, in chunks of VIEW_CHUNK arrival ranks (see
        # JobViews): chunk -> its active jobs' views in order, the tuple last built of
        # it, chunks to rebuild
        self._chunk_views: dict[int, dict[str, ClusterJobView]] = {}
        self._chunk_tuples: dict[int, tuple[ClusterJobView, ...]] = {}
        self._stale_chunks: set[int] = set()
        self._holding: set[str] = set()  # active jobs with a placement
        self._dirty: set[str] = set()  # jobs whose view may have changed since observe()
        self._own_batch: set[str] = set()  # jobs whose batch target is not the requested one
        self._events: list[tuple[float, int, str]] = []  # (due, seq, job): lazy heap
        self._seq = 0
        self._queued: dict[str, float] = {}  # the due time last pushed, per job

    def _init_capacity(
        self, capacity: Sequence[tuple[float, int]] | None, period_s: float | None
    ) -> None:
        """The spot-capacity replay: its rows, where it stands, and what it preempted.

        Raises:
            ValueError: the capacity rows do not start at time 0.
        """
        self._capacity = tuple(capacity or ())
        if self._capacity and self._capacity[0][0] > 0:
            raise ValueError("a capacity trace starts at time 0")
        self._cap_period_s = period_s
        self._cap_index = 0
        self._cap_cycle = 0
        self.available_nodes: int | None = None
        self.preemptions = 0

    def _estimate_rescale_s(self) -> float:
        if not self.jobs:
            return 0.0
        pause_job = self._pause_job
        if isinstance(pause_job, dict):
            pause_job = pause_job[self.jobs[0].spec.application]
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

    def turn(self, now_s: float) -> float:
        """Do everything due at ``now_s``; return when the loop next has work (inf: done)."""
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
            self._set_view(job.name, job.view())
            self.decision_due = True
        if now_s >= self.wake_at_s - _EPS:
            self.wake_at_s = math.inf
            self.decision_due = True
        if self.decision_due:
            self._decide(now_s)
        return self.next_time_s()

    @property
    def finished(self) -> bool:
        """Every job has arrived and finished, or the loop stalled (a shell stops turning)."""
        return self.stalled or (self._next_arrival >= len(self.jobs) and not self.active)

    def _next_capacity_s(self) -> float:
        rows = self._capacity
        if not rows:
            return math.inf
        if self._cap_index >= len(rows):
            if not self._cap_period_s:
                return math.inf
            self._cap_index = 0
            self._cap_cycle += 1
        return rows[self._cap_index][0] + self._cap_cycle * (self._cap_period_s or 0.0)

    def _capacity_change(self, now_s: float) -> None:
        """The next capacity row is due: jobs on nodes now gone are preempted."""
        available = min(max(int(self._capacity[self._cap_index][1]), 0), self.num_nodes)
        self._cap_index += 1
        if available == self.available_nodes:
            return
        self.available_nodes = available
        self.decision_due = True
        for job in self._movers():
            if any(node >= available for node, _ in job.placement):
                job.advance(now_s)
                if job.done:
                    self._complete(job)
                    continue
                if job.preempt(now_s) is not None:
                    self.preemptions += 1
                    self._timeline(now_s, job)
                self._track(job)

    def next_time_s(self) -> float:
        """The next arrival, job event or wake-up (inf when nothing is left to happen)."""
        if self.stalled:
            return math.inf
        best = self.wake_at_s if self.active else math.inf
        if self.active or self._next_arrival < len(self.jobs):
            best = min(best, self._next_capacity_s())
        if self._next_arrival < len(self.jobs):
            best = min(best, self.jobs[self._next_arrival].spec.arrival_s)
        events = self._events
        while events:
            due, _, name = events[0]
            job = self._by_name[name]
            if job.done or abs(job.next_due_s() - due) > _EPS * max(1.0, abs(due)):
                heapq.heappop(events)  # stale: the job changed since
                self._unqueue(name, due)
                continue
            best = min(best, due)
            break
        return best

    def _push(self, job: ClusterJob) -> None:
        due = job.next_due_s()
        if due < math.inf and due != self._queued.get(job.name):
            self._queued[job.name] = due
            self._seq += 1
            heapq.heappush(self._events, (due, self._seq, job.name))

    def _unqueue(self, name: str, due: float) -> None:
        if self._queued.get(name) == due:
            del self._queued[name]

    def _due_jobs(self, now_s: float) -> None:
        events = self._events
        while events and events[0][0] <= now_s + _EPS * max(1.0, abs(now_s)):
            due, _, name = heapq.heappop(events)
            self._unqueue(name, due)
            job = self._by_name[name]
            if job.done or abs(job.next_due_s() - due) > _EPS * max(1.0, abs(due)):
                continue
            job.advance(max(due, job.last_s))
            if job.done:
                self._complete(job)
            else:
                self._push(job)

    def _complete(self, job: ClusterJob) -> None:
        rank = self._rank
        index = bisect_left(self.active, rank[job.name], key=lambda j: rank[j.name])
        del self.active[index]  # O(log n) to find: ``active`` stays in arrival order
        chunk = rank[job.name] // VIEW_CHUNK
        del self._chunk_views[chunk][job.name]
        self._stale_chunks.add(chunk)
        self._holding.discard(job.name)
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
        if self._polls:
            return list(self.active)
        by_name = self._by_name
        return [by_name[name] for name in sorted(self._holding, key=self._rank.__getitem__)]

    def _track(self, job: ClusterJob) -> None:
        """Note what a change to ``job`` (not finished) did to the sets above."""
        name = job.name
        if job.placement:
            self._holding.add(name)
        else:
            self._holding.discard(name)
        if job.batch_target != min(job.spec.requested_batch_size, job.app.max_batch):
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
        for job in movers:
            job.advance(now_s)
            if job.done:
                self._complete(job)
        by_name = self._by_name
        for name in self._dirty.union(self._holding):
            self._set_view(name, by_name[name].view())
        if self._polls:
            for job in movers:
                if not job.done:
                    self._set_view(job.name, job.view())
        self._dirty.clear()
        held = sorted(self._holding, key=self._rank.__getitem__)
        return ClusterObservation(
            now_s=now_s,
            num_nodes=self.num_nodes,
            gpus_per_node=self.gpus_per_node,
            jobs=self._job_views(),
            rescale_cost_s=self._rescale_estimate_s,
            available_nodes=self.available_nodes,
            held=tuple(map(self._view_of, held)),
        )

    def _view_of(self, name: str) -> ClusterJobView | None:
        """The active job's last view (None: not an active job)."""
        rank = self._rank.get(name)
        if rank is None:
            return None
        return self._chunk_views.get(rank // VIEW_CHUNK, {}).get(name)

    def _set_view(self, name: str, view: ClusterJobView) -> None:
        """Keep ``view`` as the job's view (an arrival is appended in arrival order)."""
        chunk = self._rank[name] // VIEW_CHUNK
        members = self._chunk_views.setdefault(chunk, {})
        if members.get(name) is not view:
            members[name] = view
            self._stale_chunks.add(chunk)

    def _job_views(self) -> JobViews:
        """Every active job's view in arrival order; only changed chunks are rebuilt."""
        tuples, chunk_views = self._chunk_tuples, self._chunk_views
        for chunk in sorted(self._stale_chunks):
            members = chunk_views[chunk]
            if members:
                tuples[chunk] = tuple(members.values())
            else:
                del chunk_views[chunk]
                tuples.pop(chunk, None)
        # ``tuples`` stays in chunk order: jobs join in rank order, so a chunk is first
        # built (or built again after it emptied) only when no later chunk exists yet
        self._stale_chunks.clear()
        return JobViews(tuples.values())

    def _decide(self, now_s: float) -> None:
        obs = self.observe(now_s)
        self.decision_due = False
        policy = self.policy
        try:
            raw = policy.decide(obs)
        except Exception as exc:  # noqa: BLE001 - a user's plugin may raise anything
            detail = f"decide() raised {type(exc).__name__}: {exc}".splitlines()[0]
            raise _policy_error(policy, exc, detail) from exc  # type: ignore[arg-type]
        decision = self._validate(raw, obs)
        self._log(ClusterDecisionRecord(now_s, len(obs.jobs), decision))
        idle = obs.jobs and not decision.allocations and obs.total_gpus > 0
        pending = self._next_arrival < len(self.jobs)
        self._stalled = self._stalled + 1 if idle and not pending else 0
        if self._stalled >= STALL_DECISIONS:
            self.stalled = True
        wake = decision.wake_after_s
        self.wake_at_s = math.inf if wake is None else now_s + max(wake, MIN_WAKE_S)
        allocations = decision.allocation_map()
        batches = decision.batch_map()
        for job in self._named(allocations, batches):
            if job.name not in self._holding:
                job.advance(now_s)  # a waiting job is brought to the present only now
            job.set_batch(batches.get(job.name))
            before = job.placement, job.batch_size
            job.reallocate(allocations.get(job.name, ()), now_s)
            if (job.placement, job.batch_size) != before:
                self._timeline(now_s, job)
            self._push(job)
            self._track(job)

    def _log(self, record: ClusterDecisionRecord) -> None:
        self.decision_count += 1
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
        names = self._holding.union(allocations, batches, self._own_batch)
        by_name = self._by_name
        return [by_name[name] for name in sorted(names, key=self._rank.__getitem__)]

    def _validate(self, raw: object, obs: ClusterObservation) -> ClusterDecision:
        """The decision, or a :class:`PolicyError` saying what is wrong with it."""
        policy = self.policy

        def bad(detail: str) -> PolicyError:
            return _policy_error(policy, None, detail)  # type: ignore[arg-type]

        if not isinstance(raw, ClusterDecision):
            raise bad(f"decide() returned {type(raw).__name__} {raw!r:.60}, not a ClusterDecision")
        usable = obs.usable_nodes
        used = [0] * self.num_nodes
        for name, placement in raw.allocations:
            if self._view_of(name) is None:
                raise bad(f"allocated GPUs to {name!r}, which is not an active job")
            for node, gpus in placement:
                if not (isinstance(node, int) and 0 <= node < usable):
                    raise bad(f"placed {name!r} on node {node!r}; usable nodes are 0..{usable - 1}")
                if not (isinstance(gpus, int) and gpus > 0):
                    raise bad(f"gave {name!r} {gpus!r} GPUs on node {node}; must be an int > 0")
                used[node] += gpus
        for node, total in enumerate(used):
            if total > self.gpus_per_node:
                raise bad(f"node {node} given {total} GPUs; it has {self.gpus_per_node}")
        for name, batch in raw.batch_sizes:
            if self._view_of(name) is None:
                raise bad(f"set the batch size of {name!r}, which is not an active job")
            if not (isinstance(batch, int) and batch >= 0):
                raise bad(f"batch size of {name!r} is {batch!r}; must be an int >= 0")
        wake = raw.wake_after_s
        if wake is not None and not (isinstance(wake, (int, float)) and wake > 0):
            raise bad(f"wake_after_s is {wake!r}; must be a number > 0 or None")
        names = [name for name, _ in raw.allocations]
        if len(set(names)) != len(names):
            raise bad("allocated to the same job twice")
        return raw

    def _timeline(self, t: float, job: ClusterJob) -> None:
        if self._record_timeline:
            self.timeline.append((t, job.name, job.gpus, len(job.placement), job.batch_size))
        if self._on_change is not None:
            self._on_change(t, job.name, job.placement, job.batch_size)

    def decision_log(self) -> list[tuple[float, int, tuple, tuple, float | None]]:
        """The decisions as plain tuples: what two shells compare, bit for bit.

        Each is ``(time_s, active jobs, allocations, batch sizes, wake_after_s)``, fit
        for ``repr`` or JSON.
        """
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
            nxt = self.turn(now)
            if nxt == math.inf or nxt > horizon_s:
                return now
            now = max(nxt, now)

    def result(self, wall_time_s: float = 0.0) -> ClusterResult:
        """Per-job rows and the summary."""
        rows = []
        for job in self.jobs:
            finish = job.finish_s
            rows.append(
                JobResult(
                    name=job.name,
                    application=job.app.name,
                    arrival_s=job.spec.arrival_s,
                    start_s=job.start_s,
                    finish_s=finish,
                    jct_s=None if finish is None else finish - job.spec.arrival_s,
                    gpu_s=job.attained_gpu_s,
                    rescales=job.books.rescales,
                    final_batch_size=job.batch_size,
                    running_s=job.books.running_s,
                    rescale_s=job.books.rescale_s,
                    preemptions=job.books.preemptions,
                    lost_work_h=job.books.lost_s / 3600.0,
                )
            )
        result = summarize_jobs(
            rows, self.num_nodes * self.gpus_per_node, self.decision_count, wall_time_s
        )
        return dataclasses.replace(result, timeline=tuple(self.timeline))
