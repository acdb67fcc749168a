"""Workloads x cluster policies, run on the sweep backends (local processes or Ray).

Each grid point is one deterministic cluster simulation
(:func:`elasim.sim.cluster.simulate_cluster`), so the grid runs on the same machinery
as ``elasim sweep`` (:func:`elasim.tasks.run_tasks`): batches, a process pool or Ray
tasks, results in grid order whatever the order of completion.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elasim.cluster import ClusterResult, ClusterSetup

__all__ = [
    "SUMMARY_COLUMNS",
    "ClusterSweepSpec",
    "policy_means",
    "run_cluster_sweep",
    "run_setup",
    "sweep_frame",
]

#: Per-run figures of the sweep table, in order.
SUMMARY_COLUMNS = (
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "makespan_s",
    "jobs",
    "jobs_completed",
    "gpu_utilization",
    "rescales",
    "decisions",
    "wall_time_s",
)


@dataclass(frozen=True)
class ClusterSweepSpec:
    """The grid: every workload under every cluster policy, on one cluster shape.

    Attributes:
        workloads: workload specs (bundled names, paths or ``philly[...]``).
        policies: cluster policy names or ``file.py:Class`` specs.
        options: ``--set`` options; each policy gets those its ``Config`` has.
        num_nodes: nodes.
        gpus_per_node: GPUs per node.
        rescale: ``restart`` or ``inplace``.
        pause_job: job preset (or TOML) whose pause figures apply.
        applications: folder of application profiles (None: bundled).
        capacity: a capacity trace of usable nodes over time (None: all nodes).
    """

    workloads: tuple[str, ...]
    policies: tuple[str, ...]
    options: tuple[tuple[str, str], ...] = ()
    num_nodes: int = 16
    gpus_per_node: int = 4
    rescale: str = "restart"
    pause_job: str = "resnet50_v100"
    applications: str | None = None
    capacity: str | None = None

    @property
    def size(self) -> int:
        """Number of simulations."""
        return len(self.workloads) * len(self.policies)

    def setups(self) -> list[ClusterSetup]:
        """One setup per grid point, workload-major (the table's order)."""
        from elasim.cluster import ClusterSetup
        from elasim.jobmodel import RescaleMode
        from elasim.policies.registry import CLUSTER_KIND
        from elasim.sweep import _options_for

        return [
            ClusterSetup(
                workload=workload,
                policy=policy,
                options=dict(_options_for(policy, self.options, CLUSTER_KIND)),
                num_nodes=self.num_nodes,
                gpus_per_node=self.gpus_per_node,
                rescale=RescaleMode(self.rescale),
                pause_job=self.pause_job,
                applications=self.applications,
                capacity=self.capacity,
            )
            for workload, policy in itertools.product(self.workloads, self.policies)
        ]

    def validate(self) -> None:
        """Load every workload and build every policy once: bad input fails before the pool.

        Raises:
            ValueError, TraceError, PolicyLoadError, PolicyConfigError: one line each.
        """
        import elasim.policies.cluster  # noqa: F401 - registers the built-ins
        from elasim.cluster.setup import load_applications, pause_jobs
        from elasim.jobmodel import RescaleMode
        from elasim.policies.registry import CLUSTER_KIND, make_policy
        from elasim.sweep import _options_for
        from elasim.traces.cluster import bundled_application_names
        from elasim.traces.workloads import load_workload

        if self.num_nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("--nodes and --gpus-per-node must be >= 1")
        RescaleMode(self.rescale)
        if self.capacity is not None:
            from elasim.traces import load_trace

            load_trace(self.capacity)
        used: set[str] = set()
        for policy in self.policies:
            options = _options_for(policy, self.options, CLUSTER_KIND)
            used.update(key for key, _ in options)
            make_policy(policy, dict(options), kind=CLUSTER_KIND)
        unused = sorted({key for key, _ in self.options} - used)
        if unused:
            raise ValueError(f"--set {unused[0]}: none of the cluster policies has that option")
        known = None if self.applications else set(bundled_application_names())
        for workload in self.workloads:
            apps = {job.application for job in load_workload(workload, known)}
            load_applications(apps, self.applications)
            pause_jobs(self.pause_job, sorted(apps), self.applications)


def run_setup(setup: ClusterSetup) -> ClusterResult:
    """One grid point (module-level: pool processes and Ray workers import it by name)."""
    from elasim.sim.cluster import simulate_cluster

    return simulate_cluster(setup)


def run_cluster_sweep(
    spec: ClusterSweepSpec,
    *,
    workers: int | None = None,
    on_done: Callable[[], None] | None = None,
    backend: str = "local",
    address: str | None = None,
) -> list[tuple[ClusterSetup, ClusterResult]]:
    """Run the grid; (setup, result) per point in grid order (see :func:`elasim.tasks.run_tasks`).

    Raises:
        ValueError: a bad backend; a failing point's own exception as it is (a policy
            that raises is a :class:`~elasim.jobmodel.PolicyError` naming it).
    """
    from elasim.tasks import run_tasks

    setups = spec.setups()
    results = run_tasks(
        run_setup, setups, workers=workers, on_done=on_done, backend=backend, address=address
    )
    return list(zip(setups, results, strict=True))


def sweep_frame(runs: list[tuple[ClusterSetup, ClusterResult]]) -> pd.DataFrame:
    """One row per run: workload, policy, :data:`SUMMARY_COLUMNS` and ``gpu_hours``.

    ``gpu_hours`` is the GPU-time the jobs held (pauses included): what a bill per
    GPU-hour charges, so the sweep can name the cheapest policy, not only the fastest.
    """
    rows: list[dict[str, Any]] = []
    for setup, result in runs:
        summary = result.summary.as_dict()
        row: dict[str, Any] = {"workload": setup.workload, "policy": setup.policy}
        row.update({key: summary[key] for key in SUMMARY_COLUMNS})
        row["gpu_hours"] = sum(job.gpu_s for job in result.jobs) / 3600.0
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["workload", "policy", *SUMMARY_COLUMNS, "gpu_hours"])
    for key in ("avg_jct_s", "p50_jct_s", "p99_jct_s"):
        frame[key] = frame[key].astype("float64")
    return frame


def policy_means(frame: pd.DataFrame) -> pd.DataFrame:
    """Per policy, the mean over workloads of each figure (NaN-free columns only)."""
    figures = [c for c in SUMMARY_COLUMNS if c not in ("jobs", "wall_time_s")]
    means = frame.groupby("policy", sort=False)[figures].mean()
    return means.loc[[p for p in dict.fromkeys(frame["policy"]) if p in means.index]]
