"""The simulator's shell around :class:`elasim.cluster.ClusterLoop`: SimPy's clock, nothing else.

All of cluster mode's logic is in the loop; this process only waits until the time
the loop says it next has work, exactly as :mod:`elasim.sim.driver` does for one job.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import simpy

from elasim.cluster import ClusterLoop, ClusterResult, ClusterSetup, build_loop
from elasim.policies.cluster import ClusterDecisionRecord

__all__ = ["run_cluster_loop", "simulate_cluster"]


def run_cluster_loop(loop: ClusterLoop, horizon_s: float = math.inf) -> simpy.Environment:
    """Drive ``loop`` on a SimPy environment until it has nothing left to do."""
    env = simpy.Environment()

    def clock():
        while True:
            nxt = loop.turn(env.now, horizon_s)
            if nxt == math.inf or nxt > horizon_s:
                return
            yield env.timeout(max(nxt - env.now, 0.0))

    env.process(clock())
    env.run()
    return env


def simulate_cluster(
    setup: ClusterSetup,
    *,
    record_timeline: bool = True,
    on_decision: Callable[[ClusterDecisionRecord], None] | None = None,
) -> ClusterResult:
    """Build, run and summarise one cluster simulation (wall time included).

    A capacity trace (``setup.capacity``) repeats with its duration, as the
    single-job simulator's replay does (:func:`elasim.traces.capacity_rows`).
    The decision log is not kept (the result counts the decisions); ``on_decision``
    gets each record as it is made, for a writer that streams it to disk.
    """
    from elasim.traces import capacity_rows

    start = time.perf_counter()
    rows, period = capacity_rows(setup.capacity)
    loop = build_loop(
        setup,
        record_timeline=record_timeline,
        capacity=rows,
        capacity_period_s=period,
        keep_decisions=False,
        on_decision=on_decision,
    )
    run_cluster_loop(loop)
    return loop.result(wall_time_s=time.perf_counter() - start)
