"""Policy grids: every trace x policy x seed x notice x mechanism, one tidy row each.

:func:`run_grid` is a thin layer over :func:`elasim.sweep.run_sweep` that adds the
columns the notebooks need (trace kind, whether a cost means anything, node-hours,
total waste); :data:`GRID_KEYS` and :data:`WASTE_COMPONENTS` name the columns the
tables and plots are built on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elasim.job import TrainingJob
    from elasim.traces import CapacityTrace, JobTrace

from elasim.jobmodel import JobSpec
from elasim.sweep import SweepSpec, run_sweep

from .resolve import _job, resolve_policies, resolve_seeds

__all__ = [
    "GRID_KEYS",
    "WASTE_COMPONENTS",
    "grid_spec",
    "run_grid",
    "subset",
    "uninterrupted_completion_h",
]

log = logging.getLogger(__name__)

#: Columns that identify one simulation of a :func:`run_grid` frame.
GRID_KEYS: tuple[str, ...] = ("trace", "policy", "seed", "notice_s", "rescale")

#: The parts of a run's wall-clock time that made no progress, in stacking order,
#: with their plot labels.  Convergence cost is kept apart: that time *does* process
#: samples, they are just worth less at a large global batch.
WASTE_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("lost_work_h", "lost work"),
    ("rescale_overhead_h", "rescale"),
    ("checkpoint_overhead_h", "checkpoint"),
    ("idle_h", "idle"),
)


def uninterrupted_completion_h(job: str | TrainingJob, max_nodes: int | None = None) -> float:
    """Hours the job takes on its fastest node count with no interruption at all.

    This is the lower bound every run is measured against: the job's work divided by
    the best goodput it can reach (no boots, no rescales, no checkpoints).  The
    notebooks set deadlines as a multiple of it, the way Can't Be Late sets a deadline
    as the job's length plus slack.
    """
    spec = _job(job, max_nodes)
    best = max(spec.goodput(n) for n in range(spec.nodes.min, spec.nodes.max + 1))
    return spec.target_samples / best / 3600.0


def run_grid(
    traces: Sequence[str],
    policies: str | Sequence[str] = "all",
    seeds: int | Sequence[int] = 5,
    *,
    job: str = "resnet50_v100",
    notice_s: Sequence[float] = (0.0,),
    rescale: Sequence[str] = ("inplace",),
    max_nodes: int | None = None,
    cluster_gpus: int | None = None,
    deadline_h: float | None = None,
    checkpoint_interval_s: float | None = None,
    checkpoint_cost_s: float | None = None,
    start_offset_s: float | None = None,
    workers: int | None = None,
    yardstick: bool = True,
) -> pd.DataFrame:
    """Simulate every trace x policy x seed x notice x mechanism; one tidy row each.

    :func:`elasim.sweep.run_sweep` (each seed draws a start offset in the trace, as
    Can't Be Late does) with the columns the notebooks need.

    Args:
        traces: trace names or paths; job traces need ``cluster_gpus``.
        policies: ``"all"``, a comma-separated string or a sequence of specs.
        seeds: a count (``5`` is seeds 0..4) or explicit seeds.
        job: job preset or TOML path.
        notice_s: notices to try (a job trace is run at notice 0 only).
        rescale: mechanisms to try (``inplace``, ``restart``).
        max_nodes: overrides the job's ``max_nodes``.
        checkpoint_interval_s: ``None`` is *auto* (Young/Daly).
        checkpoint_cost_s: ``None`` is the job's own figure.
        start_offset_s: ``None`` draws each run's start from its seed.
        cluster_gpus: shared-cluster size for job traces.
        deadline_h: every run's deadline (``None``: none, no ``deadline_met``).
        workers: processes (``None``: one per CPU, ``1``: in this process).
        yardstick: with a deadline, add :data:`elasim.sweep.YARDSTICK_COLUMNS`: each
            trace x seed x notice x mechanism also runs the on-demand plan, greedy
            with fallback and the offline optimum.

    Returns:
        The sweep's columns plus ``trace_kind`` (``capacity`` or ``jobs``), ``priced``
        (whether ``cost_usd`` means anything), ``node_hours`` (spot plus on-demand),
        ``waste_h`` (the sum of :data:`WASTE_COMPONENTS`) and ``deadline_h``.

    Raises:
        ValueError: a job trace without ``cluster_gpus``, or a bad name (before any run).
    """
    base = JobSpec(
        job=job,
        max_nodes=max_nodes,
        deadline_s=None if deadline_h is None else deadline_h * 3600.0,
        checkpoint_interval_s=checkpoint_interval_s,
        checkpoint_cost_s=checkpoint_cost_s,
        start_offset_s=start_offset_s,
    )
    grid = (traces, policies, seeds, base, notice_s, rescale, cluster_gpus)
    spec, loaded = grid_spec(*grid, yardstick=yardstick)
    log.info("running %d simulations", spec.size)
    return _with_grid_columns(run_sweep(spec, workers=workers), loaded, deadline_h)


def grid_spec(
    traces: Sequence[str],
    policies: str | Sequence[str],
    seeds: int | Sequence[int],
    base: JobSpec,
    notice_s: Sequence[float],
    rescale: Sequence[str],
    cluster_gpus: int | None,
    *,
    yardstick: bool = False,
) -> tuple[SweepSpec, dict[str, CapacityTrace | JobTrace]]:
    """The validated grid of :func:`run_grid` and its traces, loaded.

    Why one builder: :func:`elasim.analysis.preemptions.preemption_losses` reruns the
    grid's own points, so both must build the grid the same way.

    Raises:
        ValueError: a job trace without ``cluster_gpus``, or bad names.
    """
    loaded = load_grid_traces(traces, cluster_gpus)
    spec = SweepSpec(
        traces=tuple(traces),
        policies=resolve_policies(policies),
        seeds=resolve_seeds(seeds),
        notice_s=tuple(float(n) for n in notice_s),
        rescale=tuple(rescale),
        base=base,
        cluster_gpus=cluster_gpus,
        with_yardstick=yardstick,
    )
    spec.validate()
    return spec, loaded


def load_grid_traces(
    traces: Sequence[str], cluster_gpus: int | None
) -> dict[str, CapacityTrace | JobTrace]:
    """The grid's traces by name; a job trace needs a shared cluster's ``cluster_gpus``.

    Raises:
        ValueError: job traces without ``cluster_gpus`` (all of them named).
    """
    from elasim.traces import load_trace

    loaded = {name: load_trace(name) for name in traces}
    if cluster_gpus is None and (jobs := [n for n, t in loaded.items() if _kind(t) == "jobs"]):
        many = len(jobs) > 1
        raise ValueError(
            f"job trace{'s' if many else ''} {', '.join(jobs)} "
            f"need{'' if many else 's'} cluster_gpus"
        )
    return loaded


def _kind(trace: CapacityTrace | JobTrace) -> str:
    """``capacity`` or ``jobs``: the ``trace_kind`` column of a grid."""
    from elasim.traces import CapacityTrace

    return "capacity" if isinstance(trace, CapacityTrace) else "jobs"


def _with_grid_columns(
    frame: pd.DataFrame, loaded: Mapping[str, CapacityTrace | JobTrace], deadline_h: float | None
) -> pd.DataFrame:
    """Add the columns :func:`run_grid` documents beyond the sweep's own."""
    from elasim.traces import CapacityTrace

    kinds = {name: _kind(t) for name, t in loaded.items()}
    priced = {
        name: isinstance(t, CapacityTrace) and t.price_per_hour is not None
        for name, t in loaded.items()
    }
    frame["trace_kind"] = frame["trace"].map(kinds)
    frame["priced"] = frame["trace"].map(priced).astype(bool)
    frame["node_hours"] = frame["spot_node_hours"] + frame["on_demand_node_hours"]
    frame["waste_h"] = frame[[c for c, _ in WASTE_COMPONENTS]].sum(axis=1)
    frame["deadline_h"] = np.nan if deadline_h is None else float(deadline_h)
    return frame


def subset(frame: pd.DataFrame, **equals: Any) -> pd.DataFrame:
    """Rows whose columns equal the given values: ``subset(f, notice_s=0, rescale="inplace")``."""
    mask = pd.Series(True, index=frame.index)
    for column, value in equals.items():
        if column not in frame:
            raise KeyError(f"no column {column!r} (columns: {', '.join(frame.columns)})")
        mask &= frame[column] == value
    return frame[mask]
