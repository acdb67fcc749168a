"""Checkpoint intervals: the Young/Daly optimum against a simulated sweep.

:func:`checkpoint_interval_sweep` runs one job over many periodic intervals on the
same start offsets (common random numbers); :func:`interval_curve` and
:func:`checkpoint_summary` reduce it to the U-shaped curve and how far Daly's interval
and the simulator's ``auto`` land from its bottom.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elasim.job import TrainingJob
    from elasim.sim import SimResult
    from elasim.traces import CapacityTrace

from elasim.jobmodel import JobSpec
from elasim.sim import SimConfig, simulate

from .resolve import _capacity, _job, resolve_seeds
from .trace_stats import mean_time_between_drops_s

__all__ = [
    "YoungDaly",
    "best_interval_s",
    "checkpoint_interval_sweep",
    "checkpoint_summary",
    "experienced_mtbf_s",
    "interval_curve",
    "interval_grid",
    "young_daly_optimum",
]


def interval_grid(
    min_s: float, max_s: float, points: int, extra: Iterable[float] = ()
) -> list[float]:
    """``points`` log-spaced intervals from ``min_s`` to ``max_s`` (whole seconds), plus ``extra``.

    Checkpoint overhead goes as ``1 / interval`` and lost work roughly as the
    interval, so the U is symmetric on a log axis; ``extra`` adds exact points such
    as the Young/Daly interval itself.
    """
    if not (0 < min_s <= max_s) or points < 1:
        raise ValueError("need 0 < min_s <= max_s and points >= 1")
    grid = np.geomspace(min_s, max_s, points) if points > 1 else np.array([min_s])
    values = {float(round(v)) for v in grid} | {float(v) for v in extra}
    return sorted(v for v in values if v > 0)


@dataclass(frozen=True)
class YoungDaly:
    """The Young/Daly checkpoint interval for one failure rate and checkpoint cost.

    Attributes:
        label: where ``mtbf_s`` came from (for legends).
        mtbf_s: mean time between failures used.
        checkpoint_cost_s: time to write one checkpoint.
        young_s: Young's first-order optimum ``sqrt(2 C M)``.
        daly_s: Daly's higher-order refinement
            (:func:`elasim.sim.young_daly_interval_s`), the simulator's ``auto``.
    """

    label: str
    mtbf_s: float
    checkpoint_cost_s: float
    young_s: float
    daly_s: float


def young_daly_optimum(
    checkpoint_cost_s: float,
    *,
    trace: str | CapacityTrace | None = None,
    max_nodes: int | None = None,
    mtbf_s: float | None = None,
    label: str | None = None,
) -> YoungDaly:
    """Young's and Daly's optimal intervals for a trace's failure rate (or a given MTBF).

    Args:
        checkpoint_cost_s: time to write one checkpoint.
        trace: take the MTBF from :func:`mean_time_between_drops_s` of this trace.
        max_nodes: the job's node cap for that count.
        mtbf_s: use this MTBF instead (e.g. :func:`experienced_mtbf_s`).
        label: legend text; defaults to where the MTBF came from.

    Raises:
        ValueError: neither or both of ``trace`` and ``mtbf_s``, or no failures.
    """
    from elasim.sim import young_daly_interval_s

    if (trace is None) == (mtbf_s is None):
        raise ValueError("give exactly one of trace and mtbf_s")
    if trace is not None:
        mtbf_s, _ = mean_time_between_drops_s(trace, max_nodes)
        label = label or "trace MTBF"
    assert mtbf_s is not None
    if not (math.isfinite(mtbf_s) and mtbf_s > 0):
        raise ValueError(f"no failures to optimise for (mtbf_s={mtbf_s})")
    return YoungDaly(
        label=label or "given MTBF",
        mtbf_s=float(mtbf_s),
        checkpoint_cost_s=float(checkpoint_cost_s),
        young_s=math.sqrt(2.0 * checkpoint_cost_s * mtbf_s),
        daly_s=young_daly_interval_s(checkpoint_cost_s, mtbf_s),
    )


def checkpoint_interval_sweep(
    trace: str | CapacityTrace,
    job: str | TrainingJob,
    intervals_s: Iterable[float | None],
    checkpoint_cost_s: float | None = None,
    *,
    policy: str = "greedy",
    policy_options: Mapping[str, Any] | None = None,
    seeds: int | Sequence[int] = 5,
    rescale: str = "restart",
    notice_s: float = 0.0,
    max_nodes: int | None = None,
    start_offset_s: float | None = None,
) -> pd.DataFrame:
    """Completion time against the periodic checkpoint interval, one row per run.

    Every interval is run from the same start offsets (one per seed), so the curve
    compares intervals on the same failures (common random numbers).  The default
    ``rescale="restart"`` is torchrun's semantics: any preemption without notice
    rolls back to the last checkpoint, which is what the interval trades against.

    Args:
        trace: a capacity trace, or its name or path.
        job: job preset, TOML path or spec.
        intervals_s: periodic intervals; ``None`` is ``auto`` (Daly's, updated online).
        checkpoint_cost_s: ``None`` is the job's own ``size / write bandwidth``.
        policy: policy spec.
        policy_options: policy options.
        seeds: a count or explicit seeds; each draws a start offset.
        rescale: mechanism.
        notice_s: preemption notice.
        max_nodes: overrides the job's ``max_nodes``.
        start_offset_s: ``None`` draws each seed's start in the trace.

    Returns:
        Columns ``interval_s`` (NaN for auto), ``auto``, ``seed``, the run's summary
        figures (:func:`_sweep_row`), ``exposed_h`` (completion time minus idle time:
        the time the job held nodes and so could be hit) and ``checkpoint_cost_s``.
    """
    loaded = _capacity(trace)
    training = _job(job, max_nodes)
    config = SimConfig(record_timeline=False)
    base = JobSpec(
        trace=trace if isinstance(trace, str) else loaded.name,
        policy=policy,
        policy_options=policy_options or {},
        rescale=rescale,
        notice_s=notice_s,
        checkpoint_cost_s=checkpoint_cost_s,
        start_offset_s=start_offset_s,
    )
    rows = []
    for interval in intervals_s:
        every_s = None if interval is None else float(interval)
        for seed in resolve_seeds(seeds):
            spec = dataclasses.replace(base, checkpoint_interval_s=every_s, seed=seed)
            result = simulate(spec, config, trace=loaded, job=training)
            rows.append(_sweep_row(interval, seed, result))
    return pd.DataFrame(rows)


def _sweep_row(interval: float | None, seed: int, result: SimResult) -> dict[str, Any]:
    """One row of :func:`checkpoint_interval_sweep`: the run's figures, named as below."""
    details = dict(result.simulator)
    completion = result.completion_time_h
    return {
        "interval_s": math.nan if interval is None else float(interval),
        "auto": interval is None,
        "seed": seed,
        "start_offset_s": result.spec.start_offset_s,
        "completed": result.completed,
        "completion_time_h": math.nan if completion is None else completion,
        "lost_work_h": result.lost_work_h,
        "checkpoint_overhead_h": result.checkpoint_overhead_h,
        "rescale_overhead_h": result.rescale_overhead_h,
        "idle_h": result.idle_h,
        "preemptions": result.preemptions,
        "checkpoints": result.checkpoints,
        "exposed_h": result.sim_time_h - result.idle_h,
        "checkpoint_cost_s": details["checkpoint_cost_s"],
    }


def interval_curve(sweep: pd.DataFrame) -> pd.DataFrame:
    """Per fixed interval: mean completion time (the quantity Young/Daly minimise) and more.

    Returns:
        One row per interval (auto excluded), sorted: ``interval_s``, ``runs``,
        ``completion_mean_h``, ``completion_sem_h`` (standard error of the mean),
        ``completion_median_h``, ``lost_work_mean_h``, ``checkpoint_overhead_mean_h``,
        ``rescale_overhead_mean_h``.
    """
    fixed = sweep[~sweep["auto"]]
    grouped = fixed.groupby("interval_s", sort=True)
    runs = grouped.size()
    std = grouped["completion_time_h"].std(ddof=1).fillna(0.0)
    out = pd.DataFrame(
        {
            "runs": runs,
            "completion_mean_h": grouped["completion_time_h"].mean(),
            "completion_sem_h": std / np.sqrt(runs),
            "completion_median_h": grouped["completion_time_h"].median(),
            "lost_work_mean_h": grouped["lost_work_h"].mean(),
            "checkpoint_overhead_mean_h": grouped["checkpoint_overhead_h"].mean(),
            "rescale_overhead_mean_h": grouped["rescale_overhead_h"].mean(),
        }
    )
    return out.reset_index()


def best_interval_s(curve: pd.DataFrame) -> float:
    """The interval with the lowest mean completion time in an :func:`interval_curve`."""
    return float(curve.loc[curve["completion_mean_h"].idxmin(), "interval_s"])


def checkpoint_summary(sweep: pd.DataFrame, optimum: YoungDaly) -> pd.Series:
    """How the swept intervals, Daly's interval and ``auto`` compare, as excess over the best.

    ``*_excess`` is the mean completion time at that point divided by the best swept
    mean, minus one (0.05: 5 % slower than the best interval found).  Daly's point is
    the swept interval closest to ``optimum.daly_s`` on a log scale (sweep it exactly
    with ``interval_grid(..., extra=[optimum.daly_s])``).

    Returns:
        ``best_interval_s``, ``best_completion_mean_h``, ``daly_s``,
        ``daly_swept_interval_s``, ``daly_excess``, ``shortest_interval_s``,
        ``shortest_excess``, ``longest_interval_s``, ``longest_excess``,
        ``auto_excess`` (NaN without auto runs).
    """
    curve = interval_curve(sweep)
    means = curve.set_index("interval_s")["completion_mean_h"]
    best = float(means.min())
    intervals = means.index.to_numpy(dtype=float)
    closest = float(intervals[np.argmin(np.abs(np.log(intervals / optimum.daly_s)))])
    auto = sweep[sweep["auto"]]["completion_time_h"]
    return pd.Series(
        {
            "best_interval_s": float(means.idxmin()),
            "best_completion_mean_h": best,
            "daly_s": optimum.daly_s,
            "daly_swept_interval_s": closest,
            "daly_excess": float(means[closest]) / best - 1.0,
            "shortest_interval_s": float(intervals.min()),
            "shortest_excess": float(means.iloc[0]) / best - 1.0,
            "longest_interval_s": float(intervals.max()),
            "longest_excess": float(means.iloc[-1]) / best - 1.0,
            "auto_excess": float(auto.mean()) / best - 1.0 if len(auto) else math.nan,
        }
    )


def experienced_mtbf_s(sweep: pd.DataFrame) -> float:
    """Mean time between the preemptions the job actually suffered, pooled over runs.

    Exposed time (nodes held) divided by preemptions.  It differs from the trace's
    mean time between drops because the job is not exposed while it holds nothing,
    and a drop that only takes nodes still booting is not a preemption.
    """
    preemptions = float(sweep["preemptions"].sum())
    if preemptions <= 0:
        return math.inf
    return float(sweep["exposed_h"].sum()) * 3600.0 / preemptions
