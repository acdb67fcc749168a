"""What a cluster run produced: one row per job and the summary the CLI prints."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

__all__ = ["ClusterResult", "ClusterSummary", "JobResult", "summarize_jobs"]


@dataclass(frozen=True)
class JobResult:
    """One job's outcome.

    Attributes:
        name: job name.
        application: its application.
        arrival_s: arrival.
        start_s: first time it got GPUs (None: never).
        finish_s: completion (None: not finished).
        jct_s: completion less arrival (None: not finished).
        gpu_s: GPU-seconds held (pauses included).
        rescales: reallocations after its first start.
        final_batch_size: global batch at the end.
        running_s: seconds trained.
        rescale_s: seconds paused re-forming its group.
        preemptions: times its GPUs were taken (capacity drops).
        lost_work_h: training time lost to preemptions.
    """

    name: str
    application: str
    arrival_s: float
    start_s: float | None
    finish_s: float | None
    jct_s: float | None
    gpu_s: float
    rescales: int
    final_batch_size: int
    running_s: float
    rescale_s: float
    preemptions: int = 0
    lost_work_h: float = 0.0


@dataclass(frozen=True)
class ClusterSummary:
    """The headline numbers (``--json`` prints these keys).

    Attributes:
        avg_jct_s: mean JCT of the completed jobs.
        p50_jct_s: median JCT.
        p99_jct_s: 99th percentile JCT (nearest rank).
        makespan_s: last completion less first arrival.
        jobs: jobs in the workload.
        jobs_completed: jobs that finished.
        gpu_utilization: GPU-seconds held / (GPUs x makespan).
        rescales: reallocations after first starts, all jobs.
        decisions: policy decisions made.
        wall_time_s: wall-clock seconds the run took.
        preemptions: jobs preempted by capacity drops, all jobs.
        lost_work_h: training time those preemptions lost, all jobs.
    """

    avg_jct_s: float
    p50_jct_s: float
    p99_jct_s: float
    makespan_s: float
    jobs: int
    jobs_completed: int
    gpu_utilization: float
    rescales: int
    decisions: int
    wall_time_s: float
    preemptions: int = 0
    lost_work_h: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        """Plain dict, for JSON."""
        return asdict(self)


@dataclass(frozen=True)
class ClusterResult:
    """A whole run.

    Attributes:
        summary: the headline numbers.
        jobs: one row per job, in arrival order.
    """

    summary: ClusterSummary
    jobs: tuple[JobResult, ...]


def _rank(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    idx = max(math.ceil(q * len(sorted_values)) - 1, 0)
    return sorted_values[min(idx, len(sorted_values) - 1)]


def summarize_jobs(
    rows: list[JobResult], total_gpus: int, decisions: int, wall_time_s: float
) -> ClusterResult:
    """Summarise per-job rows (JCT percentiles by nearest rank)."""
    jcts = sorted(r.jct_s for r in rows if r.jct_s is not None)
    finishes = [r.finish_s for r in rows if r.finish_s is not None]
    first = min((r.arrival_s for r in rows), default=0.0)
    makespan = (max(finishes) - first) if finishes else 0.0
    gpu_s = sum(r.gpu_s for r in rows)
    summary = ClusterSummary(
        avg_jct_s=sum(jcts) / len(jcts) if jcts else math.nan,
        p50_jct_s=_rank(jcts, 0.5),
        p99_jct_s=_rank(jcts, 0.99),
        makespan_s=makespan,
        jobs=len(rows),
        jobs_completed=len(jcts),
        gpu_utilization=gpu_s / (total_gpus * makespan) if makespan > 0 else 0.0,
        rescales=sum(r.rescales for r in rows),
        decisions=decisions,
        wall_time_s=wall_time_s,
        preemptions=sum(r.preemptions for r in rows),
        lost_work_h=sum(r.lost_work_h for r in rows),
    )
    return ClusterResult(summary, tuple(rows))
