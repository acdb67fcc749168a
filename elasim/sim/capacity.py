"""A shared GPU cluster as a capacity source (simulator only).

Spot traces are replayed by the job model itself
(:class:`elasim.jobmodel.CapacityReplay`, shared with the executor).  A shared
cluster is different: its leftover capacity comes out of a simulation of the other
tenants, so it is a SimPy process that pushes every change of the nodes obtainable by
the elastic job into the job loop (``sink.on_capacity(available, price)``).  It caps
what it reports at the job's ``max_nodes``: capacity the job can never use is not a
change the job (or its policy) needs to hear about, and skipping those changes is what
keeps the full Philly trace fast.

Assumptions (also in the README):

* **Shared clusters**: background jobs from a job trace are scheduled FIFO with
  head-of-line blocking on ``cluster_gpus`` GPUs.  The elastic job is the lowest
  priority tenant: it may hold whatever the background jobs leave free and loses it,
  without notice, when they need it back.  Background jobs larger than the cluster
  are skipped (counted in ``skipped_jobs``).  When the arrivals run out, they repeat
  shifted by the trace span.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from typing import Protocol

import numpy as np
import simpy

from elasim.traces.model import JobTrace

__all__ = ["CapacitySink", "ClusterSource"]


class CapacitySink(Protocol):
    """What a capacity source talks to (the simulator's shell around the job loop)."""

    def on_capacity(self, available: int, price_per_hour: float) -> None:
        """Obtainable nodes or their price changed."""


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
