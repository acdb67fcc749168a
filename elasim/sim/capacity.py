"""A shared GPU cluster as a capacity source (simulator only).

Spot traces are replayed by the job model itself
(:class:`elasim.jobmodel.CapacityReplay`, shared with the executor).  A shared
cluster's leftover capacity comes out of a simulation of the other tenants instead.
The elastic job never changes what they do (it only takes what they leave), so that
simulation is a stream computed ahead of the job: :class:`ClusterCapacity` offers the
same ``initial`` / ``next_time_s`` / ``pop_due`` as the replay, and the job loop reads
it the same way.  Its own events (arrivals, completions) are ordered as a SimPy
process would order them: by time, then by when they were scheduled.

It caps what it reports at the job's ``max_nodes``: capacity the job can never use is
not a change the job (or its policy) needs to hear about, and skipping those changes
is what keeps the full Philly trace fast.

Assumptions (also in the README):

* **Shared clusters**: background jobs from a job trace are scheduled FIFO with
  head-of-line blocking on ``cluster_gpus`` GPUs.  The elastic job is the lowest
  priority tenant: it may hold whatever the background jobs leave free and loses it,
  without notice, when they need it back.  Background jobs larger than the cluster
  are skipped (counted in ``skipped_jobs``).  When the arrivals run out, they repeat
  shifted by the trace span.
* **Start offsets**: a run that starts at an offset into the trace finds the cluster
  as the trace left it there: the cluster is replayed from the trace's start, so the
  jobs running at the offset hold their GPUs and the queued ones still wait.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections import deque

import numpy as np

from elasim.jobmodel import ReplayItem
from elasim.traces.model import JobTrace, trace_period_s

__all__ = ["ClusterCapacity"]

logger = logging.getLogger(__name__)

#: warn when the work that runs past the period (where copies overlap) is at least this
#: share of the trace's GPU-seconds: the bundled week of Philly has two single-GPU jobs
#: of 9.5 days (2.2 %), a small effect not worth a warning on every run
OVERLAP_WARN_SHARE = 0.05

#: (trace name, period) already warned of in this process: a sweep builds one cluster
#: per run, and one warning says it all
_WARNED_OVERLAP: set[tuple[str, float]] = set()


def _warn_if_copies_overlap(
    name: str, period_s: float, durations_s: list[float], gpus: list[int]
) -> None:
    """Warn once when jobs outlast the trace's period, so their repeated copies overlap.

    Why: the arrivals repeat every period (last submission + 1 s).  A short table of
    long jobs (a few pods submitted within a minute, running for hours) then loads
    the cluster many times over.  That is the model, but rarely what was meant, and
    the results alone do not show it.
    """
    if not durations_s or (name, period_s) in _WARNED_OVERLAP:
        return
    if max(durations_s) <= period_s:  # no copy overlaps the next (the sums below are 0)
        return
    work = sum(d * g for d, g in zip(durations_s, gpus, strict=True))
    past = sum(max(0.0, d - period_s) * g for d, g in zip(durations_s, gpus, strict=True))
    if work <= 0 or past / work < OVERLAP_WARN_SHARE:
        return
    _WARNED_OVERLAP.add((name, period_s))
    longest_s = max(durations_s)
    logger.warning(
        "%s: this job trace repeats every %g s (its last submission + 1 s) and %d of %d "
        "jobs run longer than that, so up to %d copies of one job run at once (%.0f%% of "
        "its GPU-hours overlap the next copy); use a trace whose submissions span its "
        "longest job (%g s), or leave the long jobs out when importing (--where on the "
        "duration column)",
        name,
        period_s,
        sum(1 for d in durations_s if d > period_s),
        len(durations_s),
        math.ceil(longest_s / period_s),
        100.0 * past / work,
        longest_s,
    )


class ClusterCapacity:
    """A shared GPU cluster running a job trace FIFO; the elastic job gets the leftovers."""

    def __init__(
        self,
        trace: JobTrace,
        *,
        cluster_gpus: int,
        gpus_per_node: int,
        price_per_hour: float = 0.0,
        start_offset_s: float = 0.0,
        cap_nodes: int | None = None,
    ) -> None:
        self.trace = trace
        self.cap_nodes = cap_nodes if cap_nodes is not None else cluster_gpus // gpus_per_node
        self.cluster_gpus = int(cluster_gpus)
        self.gpus_per_node = int(gpus_per_node)
        self.price_per_hour = float(price_per_hour)
        submit = np.asarray(trace.submit_time_s, dtype=float)
        durations = np.asarray(trace.duration_s, dtype=float)
        gpus = np.asarray(trace.num_gpus, dtype=np.int64)
        fits = gpus <= self.cluster_gpus
        self.skipped_jobs = int(np.count_nonzero(~fits))
        self._submit = submit[fits].tolist()
        self._duration = durations[fits].tolist()
        self._gpus = gpus[fits].tolist()
        self.period_s = trace_period_s(trace)
        _warn_if_copies_overlap(trace.name, self.period_s, self._duration, self._gpus)
        self.start_offset_s = float(start_offset_s) % self.period_s
        self.used_gpus = 0
        self.running_jobs = 0
        self.started_jobs = 0
        self._queue: deque[tuple[float, int]] = deque()
        #: the running jobs' ends: (time, order, GPUs); order counts every scheduling
        self._ends: list[tuple[float, int, int]] = []
        #: the next arrival's wake-up (time, order, index), kept out of the heap: the
        #: arrivals come in trace order, so only the ends need sorting
        self._wake: tuple[float, int, int] | None = None
        self._order = 0
        self._changes: deque[ReplayItem] = deque()
        self._last_available = self._available()
        self._next_arrival = 0  # the next arrival's index in the trace, ...
        self._cycle = 0  # ... in this repetition of it
        self._base_s = self._cycle * self.period_s - self.start_offset_s  # its start, job time
        if self.start_offset_s > 0:
            self._warm_up()
        self._last_available = self._available()
        self.initial = (self._last_available, self.price_per_hour)
        if self.start_offset_s == 0:
            self._schedule_arrivals(0.0)

    @property
    def prior_mtbf_s(self) -> float:
        """No a-priori failure rate for a cluster: the job learns it online."""
        return math.inf

    def _available(self) -> int:
        return min((self.cluster_gpus - self.used_gpus) // self.gpus_per_node, self.cap_nodes)

    def _warm_up(self) -> None:
        """Run the cluster from the trace's start to the offset, keeping its state.

        Why: at an offset the cluster is not empty.  The jobs submitted before it that
        are still running hold their GPUs, and those still queued wait ahead of later
        arrivals.  Starting empty instead (as this class once did) hands the elastic
        job a cluster that the trace never had: on the bundled week of Philly with 32
        GPUs, 42 h in (``--seed 2``), a 91.9 h run came out as 9.9 h.  The changes
        seen before the offset are not the job's to hear.
        """
        self._schedule_arrivals(-self.start_offset_s)
        self._run(warm_up=True)
        self._changes.clear()

    def _schedule_arrivals(self, now_s: float) -> None:
        """Admit every arrival due by ``now_s``; schedule a wake-up for the next one.

        Arrivals run from the trace's start across repetitions, at job time (trace
        time minus the offset: those before the offset are negative, and
        :meth:`_warm_up` replays them to fill the cluster).
        """
        submit = self._submit
        count = len(submit)
        if not count:
            return
        index = self._next_arrival
        while True:
            if index == count:  # the trace repeats, shifted by its period
                self._cycle += 1
                self._base_s = self._cycle * self.period_s - self.start_offset_s
                index = 0
            time_s = self._base_s + submit[index]
            self._next_arrival = index + 1
            if time_s - now_s > 0:
                self._order += 1
                self._wake = (time_s, self._order, index)
                return
            self._join_queue(index, now_s)
            index += 1

    def _join_queue(self, index: int, now_s: float) -> None:
        """Job ``index`` arrives: it queues, and starts if it is first in line and fits.

        Behind others it waits, and nothing else can change: every start leaves the
        head of the queue blocked (or the queue empty), and no GPU has been freed
        since (an end starts what fits at once).  A saturated cluster, as the full
        Philly trace on 512 GPUs mostly is, skips the start for most arrivals.
        """
        queue = self._queue
        queue.append((self._duration[index], self._gpus[index]))
        if len(queue) == 1:
            self._start_and_publish(now_s)

    def _start_and_publish(self, now_s: float) -> None:
        """Start the queued jobs that fit (FIFO, head of line blocking), then publish.

        The simulator's hottest path on a long job trace (one call per background
        event): plain locals, no helper calls.
        """
        queue, ends = self._queue, self._ends
        cluster, used = self.cluster_gpus, self.used_gpus
        while queue and queue[0][1] <= cluster - used:
            duration_s, gpus = queue.popleft()
            used += gpus
            self.running_jobs += 1
            self.started_jobs += 1
            self._order += 1
            heapq.heappush(ends, (now_s + duration_s, self._order, gpus))
        self.used_gpus = used
        available = (cluster - used) // self.gpus_per_node
        if available > self.cap_nodes:
            available = self.cap_nodes
        if available != self._last_available:
            self._last_available = available
            self._changes.append(ReplayItem(now_s, False, available, self.price_per_hour))

    def _run(self, *, warm_up: bool = False) -> float | None:
        """Process the cluster's events until the next change of the leftovers.

        Stops at a published change, when no event is left, or (see
        :meth:`next_time_s`) one trace period after the first event without a change,
        returning the time reached then (else None).  ``warm_up`` runs the events
        before job time 0 instead, whatever they publish.  The next event is the
        earlier of the first end and the arrival's wake-up (by time, then by when each
        was scheduled, as SimPy orders them).  It is the simulator's hottest loop on a
        long job trace.
        """
        ends, changes, period_s = self._ends, self._changes, self.period_s
        started_s = None
        while True:
            wake = self._wake
            arrival = wake is not None and (not ends or wake < ends[0])
            if not (arrival or ends):
                return None
            time_s = wake[0] if arrival else ends[0][0]  # type: ignore[index]
            if started_s is None:
                started_s = time_s
            if warm_up:
                if time_s >= 0:
                    return None
            elif changes:
                return None
            elif time_s - started_s > period_s:
                return time_s
            if arrival:  # an arrival's wake-up: admit it and those due with it
                self._wake = None
                self._join_queue(wake[2], time_s)  # type: ignore[index]
                self._schedule_arrivals(time_s)
            else:  # a job's end
                self.used_gpus -= heapq.heappop(ends)[2]
                self.running_jobs -= 1
                self._start_and_publish(time_s)

    def next_time_s(self) -> float:
        """Job time of the next change of the leftovers (``inf``: none).

        The trace repeats forever, so leftovers that never change (a cluster much
        larger than its load) would keep this search going forever.  After one trace
        period without a change it stops and returns the time it reached: a wake-up
        with nothing due, after which the next call goes on from there.
        """
        if not self._changes:
            reached_s = self._run()
            if reached_s is not None:
                return reached_s
        return self._changes[0].time_s if self._changes else math.inf

    def pop_due(self, now_s: float) -> list[ReplayItem]:
        """Every change due by ``now_s``, in order."""
        out: list[ReplayItem] = []
        limit = now_s + 1e-9 * max(1.0, abs(now_s))
        while self.next_time_s() <= limit and self._changes:
            out.append(self._changes.popleft())
        return out
