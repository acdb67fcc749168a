"""Policy x trace x seed grids, run in parallel processes.

Each grid point is an independent, deterministic simulation, so the grid is
embarrassingly parallel: results are collected in grid order whatever the order of
completion, and the table is the same with 1 or N processes.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["SweepPoint", "SweepSpec", "plot_pareto", "run_point", "run_sweep"]


@dataclass(frozen=True)
class SweepPoint:
    """One simulation of the grid (picklable: names, not objects)."""

    trace: str
    policy: str
    seed: int
    notice_s: float
    rescale: str
    job: str
    max_nodes: int | None
    deadline_h: float | None
    checkpoint_interval_s: float | None
    checkpoint_cost_s: float | None
    start_offset_s: float | None
    cluster_gpus: int | None
    policy_options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SweepSpec:
    """The grid: every combination of traces, policies, seeds, notices and mechanisms."""

    traces: tuple[str, ...]
    policies: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    job: str = "resnet50_v100"
    max_nodes: int | None = None
    deadline_h: float | None = None
    checkpoint_interval_s: float | None = None
    checkpoint_cost_s: float | None = None
    notice_s: tuple[float, ...] = (0.0,)
    rescale: tuple[str, ...] = ("inplace",)
    start_offset_s: float | None = None
    cluster_gpus: int | None = None

    @property
    def size(self) -> int:
        """Number of simulations."""
        return (
            len(self.traces)
            * len(self.policies)
            * len(self.seeds)
            * len(self.notice_s)
            * len(self.rescale)
        )

    def points(self) -> Iterator[SweepPoint]:
        """Grid points in a fixed order (the order of the output table)."""
        for trace, policy, seed, notice, mode in itertools.product(
            self.traces, self.policies, self.seeds, self.notice_s, self.rescale
        ):
            yield SweepPoint(
                trace=trace,
                policy=policy,
                seed=seed,
                notice_s=notice,
                rescale=mode,
                job=self.job,
                max_nodes=self.max_nodes,
                deadline_h=self.deadline_h,
                checkpoint_interval_s=self.checkpoint_interval_s,
                checkpoint_cost_s=self.checkpoint_cost_s,
                start_offset_s=self.start_offset_s,
                cluster_gpus=self.cluster_gpus,
            )

    def validate(self) -> None:
        """Load every trace, policy and the job once, so bad input fails before the pool starts."""
        from elasim.job import load_job
        from elasim.policies import make_policy
        from elasim.sim import RescaleMode

        for trace in self.traces:
            _load_trace(trace)
        for policy in self.policies:
            make_policy(policy)
        for mode in self.rescale:
            RescaleMode(mode)
        spec = load_job(self.job)
        if self.max_nodes is not None:
            spec.with_nodes(max_nodes=self.max_nodes)


@functools.lru_cache(maxsize=32)
def _load_trace(name: str) -> Any:
    from elasim.traces import load_trace

    return load_trace(name)


@functools.lru_cache(maxsize=8)
def _load_job(name: str, max_nodes: int | None) -> Any:
    from elasim.job import load_job

    spec = load_job(name)
    return spec if max_nodes is None else spec.with_nodes(max_nodes=max_nodes)


def run_point(point: SweepPoint) -> dict[str, Any]:
    """Simulate one grid point and return one tidy row."""
    from elasim.policies import make_policy
    from elasim.sim import RescaleMode, SimConfig, simulate

    config = SimConfig(
        checkpoint_interval_s=point.checkpoint_interval_s,
        checkpoint_cost_s=point.checkpoint_cost_s,
        notice_s=point.notice_s,
        rescale=RescaleMode(point.rescale),
        deadline_s=None if point.deadline_h is None else point.deadline_h * 3600.0,
        seed=point.seed,
        start_offset_s=point.start_offset_s,
        cluster_gpus=point.cluster_gpus,
        record_timeline=False,
    )
    policy = make_policy(point.policy, dict(point.policy_options), seed=point.seed)
    result = simulate(
        _load_trace(point.trace),
        policy,
        _load_job(point.job, point.max_nodes),
        config,
        trace_name=point.trace,
        policy_spec=point.policy,
    )
    row: dict[str, Any] = {
        "trace": point.trace,
        "policy": point.policy,
        "seed": point.seed,
        "notice_s": point.notice_s,
        "rescale": point.rescale,
        "job": point.job,
    }
    summary = result.summary()
    summary.pop("inputs")
    row.update(summary)
    row["start_offset_s"] = dict(result.metadata)["start_offset_s"]
    return row


def run_sweep(
    spec: SweepSpec,
    *,
    workers: int | None = None,
    on_done: Callable[[], None] | None = None,
    backend: str = "local",
    address: str | None = None,
) -> pd.DataFrame:
    """Run the grid; ``workers=1`` runs in this process (no pool).

    ``backend="ray"`` (the ``ray`` extra) is not implemented yet.

    Returns:
        One row per grid point, in grid order, with the summary keys as columns.
    """
    if backend != "local":
        raise ValueError(f"unknown sweep backend {backend!r} (known: local)")
    del address
    points = list(spec.points())
    workers = workers or os.cpu_count() or 1
    rows: list[dict[str, Any] | None] = [None] * len(points)
    if workers <= 1 or len(points) <= 1:
        for i, point in enumerate(points):
            rows[i] = run_point(point)
            if on_done:
                on_done()
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(points))) as pool:
            futures = {pool.submit(run_point, point): i for i, point in enumerate(points)}
            for future in as_completed(futures):
                rows[futures[future]] = future.result()
                if on_done:
                    on_done()
    frame = pd.DataFrame([row for row in rows if row is not None])
    for column in ("completion_time_h", "deadline_met"):
        if column in frame:
            frame[column] = frame[column].astype(
                "float64" if column == "completion_time_h" else "object"
            )
    return frame


def pareto_front(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows not dominated in (completion time, cost), sorted by completion time."""
    done = frame.dropna(subset=["completion_time_h"]).sort_values(["completion_time_h", "cost_usd"])
    best_cost = math.inf
    keep = []
    for index, row in done.iterrows():
        if row["cost_usd"] < best_cost:
            keep.append(index)
            best_cost = row["cost_usd"]
    return done.loc[keep]


def plot_pareto(frame: pd.DataFrame, path: str | Path) -> Path:
    """Cost vs completion time, one colour per policy, Pareto front of the medians drawn."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from elasim.output import atomic_write

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    done = frame.dropna(subset=["completion_time_h"])
    for policy, rows in done.groupby("policy", sort=True):
        ax.scatter(rows["completion_time_h"], rows["cost_usd"], s=18, alpha=0.45, label=None)
        ax.scatter(
            rows["completion_time_h"].median(),
            rows["cost_usd"].median(),
            s=90,
            marker="D",
            edgecolor="black",
            label=str(policy),
        )
    medians = done.groupby("policy")[["completion_time_h", "cost_usd"]].median().reset_index()
    if len(medians):
        front = pareto_front(medians)
        ax.plot(front["completion_time_h"], front["cost_usd"], "k--", lw=1, label="Pareto front")
    ax.set_xlabel("completion time (h)")
    ax.set_ylabel("cost (USD)")
    ax.set_title("cost vs completion time (diamonds: medians)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)
