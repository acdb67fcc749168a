"""Files of a cluster run or sweep: per-job rows, the allocation timeline, plots.

``elasim cluster simulate --out DIR`` and ``elasim cluster sweep --out DIR`` write
through these functions, so one run and a whole sweep share one schema:

* ``jobs.parquet``: one row per job (:data:`JOB_COLUMNS`), with the ``workload`` and
  ``policy`` it ran under.
* ``allocations.parquet``: every change of a job's allocation
  (:data:`ALLOCATION_COLUMNS`); a job's GPUs are constant between its rows and 0
  after its last (completion).
* ``decisions.parquet``: every decision of one run (:data:`DECISION_COLUMNS`),
  streamed to disk in row groups while the run goes (:func:`stream_decisions`), so
  the log is never held in memory.
* ``summary.json``: the headline numbers (and the inputs).
* ``jct_cdf.png``: the distribution of job completion times, one curve per policy.
* ``gpus_per_job.png``: GPUs held over time, one band per job (per application when
  there are too many jobs to tell apart).

Every file is written atomically (:func:`elasim.atomic.atomic_write`); plots use
matplotlib's Agg backend and :func:`elasim.analysis.plots.policy_colors`.  pandas and
matplotlib stay out of :mod:`elasim.cluster` (standard library only).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from elasim.output import atomic_write, write_json, write_parquet
from elasim.policies.cluster import ClusterDecisionRecord

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elasim.cluster import ClusterResult

__all__ = [
    "ALLOCATION_COLUMNS",
    "DECISION_COLUMNS",
    "JOB_COLUMNS",
    "allocations_frame",
    "jobs_frame",
    "plot_gpus_per_job",
    "plot_jct_cdf",
    "stream_decisions",
    "write_cluster_outputs",
    "write_decisions",
]

#: Columns of ``jobs.parquet`` (times in seconds from the workload's start).
JOB_COLUMNS = (
    "workload",
    "policy",
    "name",
    "application",
    "arrival_s",
    "start_s",
    "finish_s",
    "jct_s",
    "gpu_s",
    "rescales",
    "final_batch_size",
    "running_s",
    "rescale_s",
)
#: Columns of ``allocations.parquet``.
ALLOCATION_COLUMNS = ("workload", "policy", "time_s", "job", "gpus", "nodes", "batch_size")
#: Columns of ``decisions.parquet``: ``allocations`` is JSON ``[[job, [[node, gpus],
#: ...]], ...]``, ``batch_sizes`` JSON ``[[job, batch], ...]`` (0: adaptive);
#: ``wake_after_s`` is null when the policy asked for no wake-up; ``trained_batches``
#: JSON ``[[job, batch], ...]``: the batch each placed job trains with once applied.
DECISION_COLUMNS = (
    "time_s",
    "active_jobs",
    "allocations",
    "batch_sizes",
    "wake_after_s",
    "trained_batches",
)
#: Decisions per row group of ``decisions.parquet`` (what a writer holds at most).
DECISIONS_PER_GROUP = 4096
#: Above this many jobs, ``gpus_per_job.png`` stacks applications, not jobs.
MAX_JOB_BANDS = 200
_GRID_POINTS = 1500


def jobs_frame(result: ClusterResult, workload: str, policy: str) -> pd.DataFrame:
    """One row per job (:data:`JOB_COLUMNS`), unfinished jobs with NaN times."""
    rows = [
        {"workload": workload, "policy": policy, **{k: getattr(job, k) for k in JOB_COLUMNS[2:]}}
        for job in result.jobs
    ]
    frame = pd.DataFrame(rows, columns=list(JOB_COLUMNS))
    for column in ("start_s", "finish_s", "jct_s"):
        frame[column] = frame[column].astype("float64")
    return frame


def allocations_frame(result: ClusterResult, workload: str, policy: str) -> pd.DataFrame:
    """Every allocation change of the run (:data:`ALLOCATION_COLUMNS`), in time order."""
    frame = pd.DataFrame(list(result.timeline), columns=list(ALLOCATION_COLUMNS[2:]))
    frame.insert(0, "policy", policy)
    frame.insert(0, "workload", workload)
    return frame.astype({"time_s": "float64", "gpus": "int64", "nodes": "int64"})


class _DecisionWriter:
    """Appends decision records to a parquet file, in row groups.

    Call it with each record, then :meth:`close`; it holds at most
    :data:`DECISIONS_PER_GROUP` records.
    """

    def __init__(self, path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa = pa
        self._schema = pa.schema(
            [
                ("time_s", pa.float64()),
                ("active_jobs", pa.int64()),
                ("allocations", pa.string()),
                ("batch_sizes", pa.string()),
                ("wake_after_s", pa.float64()),
                ("trained_batches", pa.string()),
            ]
        )
        self._writer = pq.ParquetWriter(path, self._schema)
        self._rows: list[list[Any]] = [[] for _ in DECISION_COLUMNS]

    def __call__(self, record: ClusterDecisionRecord) -> None:
        decision = record.decision
        allocations = [[name, list(map(list, cells))] for name, cells in decision.allocations]
        row = (
            record.time_s,
            record.active_jobs,
            json.dumps(allocations, separators=(",", ":")),
            json.dumps([list(pair) for pair in decision.batch_sizes], separators=(",", ":")),
            decision.wake_after_s,
            json.dumps([list(pair) for pair in record.trained_batches], separators=(",", ":")),
        )
        for column, value in zip(self._rows, row, strict=True):
            column.append(value)
        if len(self._rows[0]) >= DECISIONS_PER_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self._rows[0]:
            batch = self._pa.record_batch(self._rows, schema=self._schema)
            self._writer.write_batch(batch)
            self._rows = [[] for _ in DECISION_COLUMNS]

    def close(self) -> None:
        self._flush()
        self._writer.close()


_T = TypeVar("_T")


def stream_decisions(
    path: str | Path, run: Callable[[Callable[[ClusterDecisionRecord], None]], _T]
) -> _T:
    """``run(sink)``, writing each record ``sink`` gets to ``decisions.parquet`` at ``path``.

    Why streamed: the full Philly trace on 1,024 GPUs makes 138,588 decisions naming
    hundreds of jobs each, and keeping them for one write at the end was most of the
    run's memory.  The file is written atomically: complete once ``run`` returns,
    absent (or the old one) if it raises.

    Returns:
        What ``run`` returned.
    """
    out: list[_T] = []

    def write(tmp: Path) -> None:
        writer = _DecisionWriter(tmp)
        try:
            out.append(run(writer))
        finally:
            writer.close()

    atomic_write(path, write, suffix=".parquet")
    return out[0]


def write_decisions(path: str | Path, records: Iterable[ClusterDecisionRecord]) -> Path:
    """Write a decision log already in memory (a run on real workers) as ``decisions.parquet``."""

    def run(sink: Callable[[ClusterDecisionRecord], None]) -> None:
        for record in records:
            sink(record)

    stream_decisions(path, run)
    return Path(path)


def plot_jct_cdf(jobs: pd.DataFrame, path: str | Path, title: str | None = None) -> Path:
    """The empirical CDF of JCT (hours, log axis) per policy, from ``jobs.parquet`` rows.

    Why a CDF and not a bar of means: Pollux's gains are in the tail and the bulk
    (short jobs waiting less), which a mean hides.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from elasim.analysis.plots import policy_colors

    done = jobs.dropna(subset=["jct_s"])
    policies = sorted(done["policy"].unique())
    colors = policy_colors(policies)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for policy in policies:
        hours = np.sort(done.loc[done["policy"] == policy, "jct_s"].to_numpy()) / 3600.0
        share = np.arange(1, hours.size + 1) / hours.size
        label = f"{policy} ({hours.mean():.2f} h)"
        ax.step(hours, share, where="post", color=colors[policy], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (h, log scale)")
    ax.set_ylabel("share of completed jobs")
    ax.set_ylim(0, 1.01)
    ax.grid(True, alpha=0.3)
    ax.set_title(title or "JCT CDF per policy (legend: mean JCT)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _gpu_matrix(
    allocations: pd.DataFrame, keys: pd.Series, grid: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """GPUs held per key (a job or an application) at each grid time."""
    labels = sorted(keys.unique())
    index = {label: i for i, label in enumerate(labels)}
    out = np.zeros((len(labels), grid.size))
    for _, rows in allocations.groupby("job", sort=True):
        times = rows["time_s"].to_numpy()
        gpus = rows["gpus"].to_numpy()
        at = np.searchsorted(times, grid, side="right") - 1
        held = np.where(at >= 0, gpus[np.clip(at, 0, None)], 0)
        out[index[keys.loc[rows.index[0]]]] += held
    return labels, out


def plot_gpus_per_job(
    allocations: pd.DataFrame,
    applications: Mapping[str, str],
    total_gpus: int,
    path: str | Path,
    title: str | None = None,
) -> Path:
    """GPUs held over time, stacked: one band per job, coloured by application.

    Above :data:`MAX_JOB_BANDS` jobs the bands are the applications (thousands of
    hairline bands show nothing).  The dashed line is the cluster's size.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib import colormaps
    from matplotlib.patches import Patch

    frame = allocations.sort_values(["job", "time_s"], kind="stable")
    end_s = float(frame["time_s"].max()) if len(frame) else 1.0
    grid = np.linspace(0.0, max(end_s, 1.0), _GRID_POINTS)
    apps = frame["job"].map(applications)
    per_job = frame["job"].nunique() <= MAX_JOB_BANDS
    labels, matrix = _gpu_matrix(frame, frame["job"] if per_job else apps, grid)
    app_names = sorted(set(applications.values()))
    palette = dict(zip(app_names, colormaps["tab10"].colors, strict=False))
    colors = [palette[applications[label] if per_job else label] for label in labels]
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    if len(labels):
        ax.stackplot(grid / 3600.0, matrix, colors=colors, linewidth=0.2, edgecolor="white")
    ax.axhline(total_gpus, color="black", ls="--", lw=1)
    ax.set_xlabel("time (h)")
    ax.set_ylabel("GPUs")
    ax.set_ylim(0, total_gpus * 1.05)
    what = "one band per job" if per_job else "per application"
    ax.set_title(title or f"GPUs held over time ({what}; dashed: cluster size)")
    handles = [Patch(color=palette[a], label=a) for a in app_names]
    ax.legend(handles=handles, fontsize=7, loc="upper right", ncol=3)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig: Any, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"), suffix=".png")
    finally:
        plt.close(fig)


def write_cluster_outputs(
    out_dir: str | Path,
    runs: Sequence[tuple[str, str, ClusterResult]],
    *,
    total_gpus: int,
    summary: Mapping[str, Any],
) -> dict[str, Path]:
    """Write every file of the module docstring for one or more (workload, policy, result).

    Everything is computed before the first file is written, so a failure in the
    middle (a plot that cannot be drawn) leaves no half set of new files.

    Returns:
        The written paths by file kind.
    """
    out = Path(out_dir)
    jobs = pd.concat([jobs_frame(r, w, p) for w, p, r in runs], ignore_index=True)
    allocations = pd.concat([allocations_frame(r, w, p) for w, p, r in runs], ignore_index=True)
    paths = {
        "jobs": write_parquet(out / "jobs.parquet", jobs),
        "allocations": write_parquet(out / "allocations.parquet", allocations),
        "summary": write_json(out / "summary.json", summary),
        "jct_cdf": plot_jct_cdf(jobs, out / "jct_cdf.png"),
    }
    if len(runs) == 1:
        workload, policy, _ = runs[0]
        apps = dict(zip(jobs["name"], jobs["application"], strict=True))
        paths["gpus_per_job"] = plot_gpus_per_job(
            allocations,
            apps,
            total_gpus,
            out / "gpus_per_job.png",
            title=f"{workload} under {policy}: GPUs held over time",
        )
    return paths
