"""Cluster run vs cluster simulation: per-job completion times, joined by job name.

``elasim compare`` matches one real run's events with a simulation's; a cluster run
has many jobs, and what a cluster scheduler is judged by is each job's completion
time (JCT).  Both sides produce the same rows (:class:`elasim.cluster.JobResult`,
times in workload seconds), so the comparison is a join on the job's name:
:func:`compare_jobs` gives, per job, the real and the simulated start, finish and
JCT and the JCT's relative error, and :func:`jct_errors` the summary
(average-JCT error, median and worst per-job error).

The simulation to compare with is the same workload, policy and cluster shape, with
the application profiles measured for the executor's job on the same machine
(:mod:`elasim.executor.cluster_profile`) and, where the profile folder has one, the
measured pause of each transition (``pauses.json``) as the pause model
(:func:`measured_pause_job`).  Standard library and the simulator only (no torch).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasim.cluster.job import model_job

__all__ = [
    "PAUSES_FILE",
    "JobComparison",
    "compare_jobs",
    "jct_errors",
    "measured_pause_job",
    "simulate_like",
]

#: measured pause components per transition, in an application profile folder
PAUSES_FILE = "pauses.json"


def measured_pause_job(preset: str, applications: str | Path | None, names: Sequence[str]) -> Any:
    """The pause model: ``preset`` with the measured pause table of the applications.

    Every ``<applications>/<name>/pauses.json`` found is read (rows of ``mode``,
    ``before``, ``after``, ``failure`` and the pause components, real seconds); a
    transition measured for several applications keeps the first one's figures (in
    name order).  Without any such file the preset is returned as it is.

    Raises:
        ValueError: a ``pauses.json`` that cannot be read (one line, naming it).
    """
    from elasim.job import load_job
    from elasim.policies import PAUSE_COMPONENTS, PauseComponents

    job = load_job(preset)
    if applications is None:
        return job
    table: dict[tuple[str, int, int, bool], Any] = {}
    for name in sorted(names):
        path = Path(applications) / name / PAUSES_FILE
        if not path.is_file():
            continue
        try:
            rows = json.loads(path.read_text())
            for row in rows:
                before, after = int(row["before"]), int(row["after"])
                key = (str(row["mode"]), before, after, bool(row["failure"]))
                comps = PauseComponents(**{c: float(row[c]) for c in PAUSE_COMPONENTS})
                table.setdefault(key, comps)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a pause table ({type(exc).__name__}: {exc})") from None
    if not table:
        return job
    return dataclasses.replace(job, pause_table=tuple(sorted(table.items())))


def simulate_like(
    *,
    workload: str,
    policy: str,
    options: dict[str, str],
    num_nodes: int,
    gpus_per_node: int,
    rescale: Any,
    pause_job: str,
    applications: str | None,
    capacity: str | None = None,
    keeps_batch: bool = True,
) -> Any:
    """Simulate what a cluster run ran: same workload, policy, shape, profiles and capacity.

    The pause model is the measured one (:func:`measured_pause_job`), as the run's
    loop used it, and every job keeps its requested batch (``keeps_batch``, the
    default of ``--compare``); ``keeps_batch=False`` lets the policy choose batches, as
    real jobs now take them (``benchmarks/bench_coadapt.py``).  The loop is driven on
    its own plain clock (:meth:`~elasim.cluster.ClusterLoop.run_to_end`), so the
    executor's CLI needs no SimPy.  Returns the :class:`~elasim.cluster.ClusterResult`.
    """
    from elasim.cluster import ClusterSetup, build_loop
    from elasim.traces.workloads import load_workload

    names = sorted({job.application for job in load_workload(workload)})
    setup = ClusterSetup(
        workload=workload,
        policy=policy,
        options=options,
        num_nodes=num_nodes,
        gpus_per_node=gpus_per_node,
        rescale=rescale,
        pause_job=measured_pause_job(pause_job, applications, names),
        applications=applications,
        capacity=capacity,
    )
    from elasim.traces import capacity_rows

    rows, period = capacity_rows(capacity)
    loop = build_loop(
        setup,
        job_factory=functools.partial(model_job, keeps_batch=keeps_batch),
        capacity=rows,
        capacity_period_s=period,
    )
    loop.run_to_end()
    return loop.result()


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
