"""Cluster run vs cluster simulation: per-job completion times, joined by job name.

``elasim compare`` matches one real run's events with a simulation's; a cluster run
has many jobs, and what a cluster scheduler is judged by is each job's completion
time (JCT).  Both sides produce the same rows (:class:`elasim.cluster.JobResult`,
times in workload seconds), so the comparison is a join on the job's name:
:func:`compare_jobs` gives, per job, the real and the simulated start, finish and
JCT and the JCT's relative error, and :func:`jct_errors` the summary
(average-JCT error, median and worst per-job error).

The simulation to compare with is ``elasim cluster simulate`` of the setup the run's
loop ran (``ClusterRunResult.setup``): the same workload, policy and cluster shape,
with the application profiles measured for the executor's job on the same machine
(:mod:`elasim.executor.cluster_profile`) and, where the profile folder has one, the
measured pause of each transition (``pauses.json``, :mod:`.pauses`), as any
simulation with those profiles prices it.  Standard library and the simulator only
(no torch).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_AVG_JCT_ERROR",
    "MAX_MEDIAN_JOB_ERROR",
    "JobComparison",
    "compare_jobs",
    "explain_gap",
    "jct_errors",
]


@dataclass(frozen=True)
class JobComparison:
    """One job, real and simulated (workload seconds; None: it did not finish).

    Attributes:
        name: the job.
        arrival_s: its arrival.
        real_start_s: first GPUs on real workers.
        sim_start_s: first GPUs in the simulation.
        real_jct_s: real completion time minus arrival.
        sim_jct_s: simulated completion time minus arrival.
        error: ``sim / real - 1`` of the JCT.
        real_rescales: reallocations on real workers.
        sim_rescales: reallocations in the simulation.
    """

    name: str
    arrival_s: float
    real_start_s: float | None
    sim_start_s: float | None
    real_jct_s: float | None
    sim_jct_s: float | None
    error: float | None
    real_rescales: int
    sim_rescales: int


def compare_jobs(real: Sequence[Any], sim: Sequence[Any]) -> list[JobComparison]:
    """Join the per-job rows of a real run and a simulation by job name.

    Raises:
        ValueError: the two sides do not hold the same jobs.
    """
    by_sim = {row.name: row for row in sim}
    names = [row.name for row in real]
    if sorted(names) != sorted(by_sim):
        raise ValueError("the real run and the simulation have different jobs")
    out = []
    for r in real:
        s = by_sim[r.name]
        error = None
        if r.jct_s and s.jct_s is not None:
            error = s.jct_s / r.jct_s - 1.0
        out.append(
            JobComparison(
                name=r.name,
                arrival_s=r.arrival_s,
                real_start_s=r.start_s,
                sim_start_s=s.start_s,
                real_jct_s=r.jct_s,
                sim_jct_s=s.jct_s,
                error=error,
                real_rescales=r.rescales,
                sim_rescales=s.rescales,
            )
        )
    return out


def jct_errors(rows: Sequence[JobComparison]) -> dict[str, float]:
    """Average JCT of each side, the error of the average, median and worst per-job error.

    Only jobs that finished on both sides count (``jobs_compared``).
    """
    both = [r for r in rows if r.real_jct_s is not None and r.sim_jct_s is not None]
    if not both:
        return {"jobs_compared": 0}
    real_avg = statistics.fmean(r.real_jct_s for r in both)  # type: ignore[misc]
    sim_avg = statistics.fmean(r.sim_jct_s for r in both)  # type: ignore[misc]
    errors = [abs(r.error) for r in both if r.error is not None and math.isfinite(r.error)]
    return {
        "jobs_compared": len(both),
        "real_avg_jct_s": real_avg,
        "sim_avg_jct_s": sim_avg,
        "avg_jct_error": sim_avg / real_avg - 1.0 if real_avg else math.nan,
        "median_abs_job_error": statistics.median(errors) if errors else math.nan,
        "max_abs_job_error": max(errors) if errors else math.nan,
    }


#: the comparison's bounds (issue 22): beyond either, ``cluster run --compare`` says so
MAX_AVG_JCT_ERROR = 0.10
MAX_MEDIAN_JOB_ERROR = 0.15


def explain_gap(
    rows: Sequence[JobComparison],
    real: Sequence[Any],
    sim: Sequence[Any],
    *,
    load_avg: float | None = None,
    cores: int | None = None,
) -> str | None:
    """One line when the errors exceed the bounds, saying where the gap is and why (None: within).

    The JCTs of the jobs compared are split into waiting (arrival to first GPUs),
    pauses (``rescale_s``: starts and re-formations) and training (``running_s``),
    summed on each side; of pauses and training, the one with the larger difference is
    named (waiting only when both are within 5 % of their real sum, since a
    later job's waiting follows the earlier jobs' pauses and training), with what
    usually causes it: cold starts slower than measured alone, steps slower or faster
    than calibrated (the load average during the run against the cores), or a policy
    that decided otherwise because the jobs' progress differed.
    """
    errors = jct_errors(rows)
    if not errors.get("jobs_compared"):
        return None
    avg, median = errors["avg_jct_error"], errors["median_abs_job_error"]
    if abs(avg) <= MAX_AVG_JCT_ERROR and median <= MAX_MEDIAN_JOB_ERROR:
        return None
    names = {r.name for r in rows if r.real_jct_s is not None and r.sim_jct_s is not None}
    parts = {"waiting": [0.0, 0.0], "pauses": [0.0, 0.0], "training": [0.0, 0.0]}
    for side, jobs in enumerate((real, sim)):
        for job in jobs:
            if job.name in names:
                parts["waiting"][side] += (job.start_s or job.arrival_s) - job.arrival_s
                parts["pauses"][side] += job.rescale_s
                parts["training"][side] += job.running_s
    # a job waits for the jobs before it: a slower training or pause shows in the
    # waiting of the later jobs too, so the cause is named first where there is one
    part = max(("pauses", "training"), key=lambda k: abs(parts[k][1] - parts[k][0]))
    own_s = parts["pauses"][0] + parts["training"][0]
    if abs(parts[part][1] - parts[part][0]) < 0.05 * own_s:
        part = "waiting"
    real_s, sim_s = parts[part]
    load = ""
    if load_avg is not None and cores:
        load = f"; load average {load_avg:.1f} on {cores} cores during the run"
    why = {
        "pauses": "cold starts and re-formations took another time than calibrated "
        "(workers started together share the cores; the profile measured each start alone)",
        "training": "steps ran at another speed than calibrated (other load on the host, "
        "or another --sample-delay-s or --job-set than the profile's)",
        "waiting": "the jobs waited otherwise: the policy decided differently "
        "once the jobs' progress differed",
    }[part]
    return (
        f"the simulation is off by more than the bounds (avg JCT {avg:+.0%}, bound "
        f"{MAX_AVG_JCT_ERROR:.0%}; median per-job {median:.0%}, bound "
        f"{MAX_MEDIAN_JOB_ERROR:.0%}): most of the gap is {part}, {real_s:.1f} s real vs "
        f"{sim_s:.1f} s simulated over the jobs: {why}{load}"
    )
