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
from elasim.progress import report

__all__ = ["run_cluster_loop", "simulate_cluster"]


#: What the progress records of a cluster simulation count (jobs finished of all).
PROGRESS_WHAT = "simulating jobs"
#: Records per run at most: one each time another this share of the jobs finished.
PROGRESS_STEPS = 1000


def run_cluster_loop(loop: ClusterLoop, horizon_s: float = math.inf) -> simpy.Environment:
    """Drive ``loop`` on a SimPy environment until it has nothing left to do.

    It reports its progress (:func:`elasim.progress.report`: jobs finished of all,
    at most :data:`PROGRESS_STEPS` records) for whoever shows it.  Why: the full
    Philly trace on a large cluster takes minutes, and a run that says nothing for
    minutes looks hung (issue 23).
    """
    env = simpy.Environment()
    total = len(loop.jobs)
    step = max(total // PROGRESS_STEPS, 1)

    def clock():
        mark = 0
        report(PROGRESS_WHAT, 0, total)
        while True:
            nxt = loop.turn(env.now, horizon_s)
            if loop.jobs_done >= mark + step:
                mark = loop.jobs_done
                report(PROGRESS_WHAT, mark, total)
            if nxt == math.inf or nxt > horizon_s:
                if mark < total and loop.jobs_done == total:
                    report(PROGRESS_WHAT, total, total)
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
