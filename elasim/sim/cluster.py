"""The simulator's shell around :class:`elasim.cluster.ClusterLoop`: SimPy's clock, nothing else.

All of cluster mode's logic is in the loop; this process only waits until the time
the loop says it next has work, exactly as :mod:`elasim.sim.driver` does for one job.
"""

from __future__ import annotations

import math
import time

import simpy

from elasim.cluster import ClusterLoop, ClusterResult, ClusterSetup, build_loop

__all__ = ["run_cluster_loop", "simulate_cluster"]


def run_cluster_loop(loop: ClusterLoop, horizon_s: float = math.inf) -> simpy.Environment:
    """Drive ``loop`` on a SimPy environment until it has nothing left to do."""
    env = simpy.Environment()

    def clock():
        while True:
            nxt = loop.turn(env.now)
            if nxt == math.inf or nxt > horizon_s:
                return
            yield env.timeout(max(nxt - env.now, 0.0))

    env.process(clock())
    env.run()
    return env


def simulate_cluster(setup: ClusterSetup, *, record_timeline: bool = True) -> ClusterResult:
    """Build, run and summarise one cluster simulation (wall time included)."""
    start = time.perf_counter()
    loop = build_loop(setup, record_timeline=record_timeline)
    run_cluster_loop(loop)
    return loop.result(wall_time_s=time.perf_counter() - start)
