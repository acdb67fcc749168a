"""Where lost work comes from: preemptions that leave survivors, and those that take every node.

Why this exists: a grid row gives a run's lost work as one total, but the rescale
mechanism changes the two kinds of preemption in opposite directions.  One that
leaves survivors costs an in-place job the step in flight and a restart job a roll
back to its last checkpoint.  One that takes every node rolls both back to their last
checkpoint, and restart's is usually the younger, because restart writes one before
every planned rescale.  Which mechanism loses more over a run therefore depends on the
mix of the two, which only the events show: :func:`preemption_losses` reruns the
runs with their events and splits the loss.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elasim.sim import SimResult

from .grids import grid_spec

__all__ = ["LOSS_COLUMNS", "preemption_loss_table", "preemption_losses"]

#: The per-run columns :func:`preemption_loss_table` averages.
LOSS_COLUMNS: tuple[str, ...] = (
    "lost_work_h",
    "partial_lost_work_h",
    "total_lost_work_h",
    "other_lost_work_h",
    "preemptions",
    "total_preemptions",
    "checkpoints",
    "rescales",
)


def preemption_losses(
    traces: Sequence[str],
    seeds: int | Sequence[int] = 5,
    *,
    job: str = "resnet50_v100",
    policy: str = "greedy",
    policy_options: Mapping[str, Any] | None = None,
    rescale: Sequence[str] = ("inplace", "restart"),
    notice_s: float = 0.0,
    cluster_gpus: int | None = None,
    max_nodes: int | None = None,
    start_offset_s: float | None = None,
    checkpoint_interval_s: float | None = None,
    checkpoint_cost_s: float | None = None,
) -> pd.DataFrame:
    """Each run's lost work split by the kind of preemption that lost it, one row per run.

    The runs are those of :func:`elasim.analysis.run_grid` with the same arguments
    (one ``policy`` with its ``policy_options``, one notice): the same grid points
    (:func:`~elasim.analysis.grids.grid_spec`), simulated again through
    :func:`elasim.sweep.simulate_point` because a grid row keeps no events.

    Returns:
        Columns ``trace``, ``seed``, ``rescale``, ``start_offset_s``, ``completed``,
        ``lost_work_h`` (the run's total), ``partial_lost_work_h`` (lost at
        preemptions that left survivors), ``total_lost_work_h`` (at preemptions that
        took every node), ``other_lost_work_h`` (the rest, e.g. at a notice),
        ``preemptions``, ``total_preemptions``, ``checkpoints`` and ``rescales``.

    Raises:
        ValueError: a job trace without ``cluster_gpus``.
    """
    from elasim.jobmodel import JobSpec
    from elasim.sweep import simulate_point

    base = JobSpec(
        job=job,
        max_nodes=max_nodes,
        checkpoint_interval_s=checkpoint_interval_s,
        checkpoint_cost_s=checkpoint_cost_s,
        start_offset_s=start_offset_s,
        policy_options={k: str(v) for k, v in (policy_options or {}).items()},
    )
    spec, _ = grid_spec(traces, (policy,), seeds, base, (notice_s,), rescale, cluster_gpus)
    rows = [  # in the grid's order: trace, seed, mechanism
        {
            "trace": p.trace,
            "seed": p.spec.seed,
            "rescale": p.spec.rescale.value,
            **_split(simulate_point(p)),
        }
        for p in spec.points()
    ]
    return pd.DataFrame(rows)


def _split(result: SimResult) -> dict[str, Any]:
    """One run's losses by kind of preemption (:func:`preemption_losses` lists them)."""
    from elasim.policies import EventKind

    partial_h = total_h = 0.0
    total = 0
    for event in result.events:
        if event.kind is not EventKind.PREEMPT:
            continue
        if event.nodes_after == 0:
            total_h += event.lost_work_h
            total += 1
        else:
            partial_h += event.lost_work_h
    return {
        "start_offset_s": result.spec.start_offset_s,
        "completed": result.completed,
        "lost_work_h": result.lost_work_h,
        "partial_lost_work_h": partial_h,
        "total_lost_work_h": total_h,
        "other_lost_work_h": result.lost_work_h - partial_h - total_h,
        "preemptions": result.preemptions,
        "total_preemptions": total,
        "checkpoints": result.checkpoints,
        "rescales": result.rescales,
    }


def preemption_loss_table(losses: pd.DataFrame) -> pd.DataFrame:
    """Means per trace and mechanism of :func:`preemption_losses`' columns.

    Adds ``total_share``: the share of the mean lost work lost at preemptions that
    took every node (NaN where nothing was lost).
    """
    table = losses.groupby(["trace", "rescale"])[list(LOSS_COLUMNS)].mean()
    lost = table["lost_work_h"].where(table["lost_work_h"] > 0)
    return table.assign(total_share=table["total_lost_work_h"] / lost)
