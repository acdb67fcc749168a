"""Where the elastic job's capacity comes from: a replayed spot trace or a shared cluster.

Both sources cap what they report at the job's ``max_nodes``: capacity the job can
never use is not a change the job (or its policy) needs to hear about, and skipping
those changes is what keeps the full Philly trace fast.

A capacity source is a SimPy process that calls ``sink.on_capacity(available, price)``
whenever the nodes obtainable by the elastic job (or their price) change, and
``sink.on_notice(drop_time_s, available_after)`` ahead of a drop when the provider
gives notice.  The job never looks at the trace itself; that keeps the job model the
same for spot markets and shared clusters.

Assumptions (also in the README):

* **Spot traces** are step functions: from a row's ``time_s`` on, ``available`` nodes
  can be held at ``price_per_hour``.  When the job outlasts the trace, the trace
  repeats from its start.  A notice for a drop is delivered ``notice_s`` before it
  (the trace is known in advance, the policy only sees the notice).
* **Shared clusters**: background jobs from a job trace are scheduled FIFO with
  head-of-line blocking on ``cluster_gpus`` GPUs.  The elastic job is the lowest
  priority tenant: it may hold whatever the background jobs leave free and loses it,
  without notice, when they need it back.  Background jobs larger than the cluster
  are skipped (counted in ``skipped_jobs``).  When the arrivals run out, they repeat
  shifted by the trace span.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterator
from typing import Protocol

import numpy as np
import simpy

from elasim.traces.model import CapacityTrace, JobTrace

__all__ = ["CapacitySink", "ClusterSource", "SpotTraceSource"]


class CapacitySink(Protocol):
    """What a capacity source talks to (the simulated job)."""

    def on_capacity(self, available: int, price_per_hour: float) -> None:
        """Obtainable nodes or their price changed."""

    def on_notice(self, drop_time_s: float, available_after: int) -> None:
        """Capacity will drop to ``available_after`` at ``drop_time_s``."""


class SpotTraceSource:
    """Replays a capacity trace, from ``start_offset_s``, repeating it forever."""

    def __init__(
        self,
        trace: CapacityTrace,
        *,
        start_offset_s: float = 0.0,
        notice_s: float = 0.0,
        default_price_per_hour: float = 0.0,
        cap_nodes: int | None = None,
    ) -> None:
        self.trace = trace
        self.period_s = float(trace.duration_s)
        self.start_offset_s = float(start_offset_s) % self.period_s
        self.notice_s = float(notice_s)
        self._times = [float(t) for t in trace.time_s]
        cap = cap_nodes if cap_nodes is not None else int(np.max(trace.available, initial=0))
        self._available = [min(int(a), cap) for a in trace.available]
        if trace.price_per_hour is None:
            self._prices = [float(default_price_per_hour)] * len(self._times)
        else:
            self._prices = [float(p) for p in trace.price_per_hour]

        available = np.asarray(self._available)
        drops = int(np.count_nonzero(np.diff(available) < 0))
        if available[-1] > available[0]:  # the wrap-around is a drop too
            drops += 1
        #: Mean time between capacity drops in the trace (a prior for Young/Daly).
        self.prior_mtbf_s = self.period_s / drops if drops else math.inf

    def initial(self) -> tuple[int, float]:
        """Capacity and price at the job's start."""
        index = int(np.searchsorted(self._times, self.start_offset_s, side="right")) - 1
        return self._available[index], self._prices[index]

    def _changes(self) -> Iterator[tuple[float, int, float]]:
        """Rows after the start, as (sim time, available, price), across repetitions."""
        times, offset = self._times, self.start_offset_s
        first = int(np.searchsorted(times, offset, side="right"))
        cycle = 0
        while True:
            base = cycle * self.period_s - offset
            for i in range(first if cycle == 0 else 0, len(times)):
                yield base + times[i], self._available[i], self._prices[i]
            cycle += 1

    def _schedule(self) -> Iterator[tuple[float, int, int, float]]:
        """Capacity rows merged with notices: (time, order, available, price).

        ``order`` is 0 for a notice and 1 for a row so a notice at the same instant as
        its drop (``notice_s`` = 0 is never scheduled) is seen first.
        """
        previous = self.initial()[0]
        rows = ((t, 1, a, p) for t, a, p in self._changes())
        if self.notice_s <= 0 or math.isinf(self.prior_mtbf_s):
            # no notice, or a trace that never drops (nothing to give notice of)
            yield from rows
            return

        def notices() -> Iterator[tuple[float, int, int, float]]:
            last = previous
            for t, a, _p in self._changes():
                if a < last:
                    yield max(t - self.notice_s, 0.0), 0, a, t
                last = a

        yield from heapq.merge(rows, notices())

    def process(self, env: simpy.Environment, sink: CapacitySink) -> Iterator[simpy.Event]:
        """The SimPy process: sleep to the next change, tell the sink, repeat."""
        last = self.initial()
        for time_s, order, available, value in self._schedule():
            delay = time_s - env.now
            if delay > 0:
                yield env.timeout(delay)
            if order == 0:
                sink.on_notice(value, available)
            elif (available, value) != last:
                last = (available, value)
                sink.on_capacity(available, value)


class ClusterSource:
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
        span = float(trace.span_s) if hasattr(trace, "span_s") else 0.0
        last = float(submit.max()) if len(submit) else 0.0
        self.period_s = max(span, last + 1.0)
        self.start_offset_s = float(start_offset_s) % self.period_s
        self.used_gpus = 0
        self.running_jobs = 0
        self.started_jobs = 0
        self._queue: deque[tuple[float, int]] = deque()
        self._env: simpy.Environment | None = None
        self._sink: CapacitySink | None = None
        self._last_available = self._available()

    @property
    def prior_mtbf_s(self) -> float:
        """No a-priori failure rate for a cluster: the job learns it online."""
        return math.inf

    def initial(self) -> tuple[int, float]:
        """The cluster starts empty of background work."""
        return self._available(), self.price_per_hour

    def _available(self) -> int:
        return min((self.cluster_gpus - self.used_gpus) // self.gpus_per_node, self.cap_nodes)

    def _publish(self) -> None:
        available = self._available()
        if available != self._last_available and self._sink is not None:
            self._last_available = available
            self._sink.on_capacity(available, self.price_per_hour)

    def _finish(self, gpus: int) -> None:
        self.used_gpus -= gpus
        self.running_jobs -= 1
        self._start_queued()
        self._publish()

    def _start_queued(self) -> None:
        env = self._env
        assert env is not None
        queue = self._queue
        while queue and queue[0][1] <= self.cluster_gpus - self.used_gpus:
            duration_s, gpus = queue.popleft()
            self.used_gpus += gpus
            self.running_jobs += 1
            self.started_jobs += 1
            done = env.timeout(duration_s)
            done.callbacks.append(lambda _ev, g=gpus: self._finish(g))

    def process(self, env: simpy.Environment, sink: CapacitySink) -> Iterator[simpy.Event]:
        """Arrivals: queue each job, start what fits, publish leftover capacity."""
        self._env, self._sink = env, sink
        submit, duration, gpus = self._submit, self._duration, self._gpus
        if not submit:
            return
        first = int(np.searchsorted(submit, self.start_offset_s, side="left"))
        cycle = 0
        while True:
            base = cycle * self.period_s - self.start_offset_s
            for i in range(first if cycle == 0 else 0, len(submit)):
                delay = base + submit[i] - env.now
                if delay > 0:
                    yield env.timeout(delay)
                self._queue.append((duration[i], gpus[i]))
                self._start_queued()
                self._publish()
            cycle += 1
