"""Analysis behind the notebooks: policy grids, waste tables, deadline hit rates, checkpoint sweeps.

The notebooks in ``notebooks/`` hold parameters, calls into this module, plots and
prose; every number they show is computed here, where it is unit-tested
(``tests/test_analysis.py``).  Everything goes through the public API: grids through
:func:`elasim.sweep.run_sweep`, single runs through :func:`elasim.sim.simulate`, traces
through :mod:`elasim.traces`.

Three groups of functions:

* **Policy grids** (:func:`run_grid`) and the tables drawn from them:
  :func:`waste_breakdown`, :func:`deadline_hit_rate`, :func:`paired_effect`.
* **Checkpoint intervals**: :func:`checkpoint_interval_sweep`, :func:`interval_curve`,
  :func:`young_daly_optimum`, :func:`experienced_mtbf_s` and the clearly labelled
  SYNTHETIC :func:`synthetic_failure_trace`.
* **Plots** (``plot_*``).  matplotlib is imported inside them only, so importing this
  module stays cheap; figures are created through pyplot (so a notebook shows them)
  and returned; the caller closes them.

Library code: nothing here prints, reads the environment or writes files.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover - typing only
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from elasim.job import JobSpec
    from elasim.traces import CapacityTrace, JobTrace

__all__ = [
    "GRID_KEYS",
    "WASTE_COMPONENTS",
    "YoungDaly",
    "best_interval_s",
    "capacity_trace_names",
    "checkpoint_summary",
    "check_quoted",
    "checkpoint_interval_sweep",
    "deadline_hit_rate",
    "describe_traces",
    "experienced_mtbf_s",
    "interval_curve",
    "interval_grid",
    "job_trace_names",
    "mean_background_gpus",
    "mean_time_between_drops_s",
    "median_table",
    "paired_effect",
    "pareto_table",
    "plot_checkpoint_sweep",
    "plot_convergence_cost",
    "plot_deadline_hit_rate",
    "plot_notice_and_mechanism",
    "plot_pareto_ax",
    "plot_pareto_panels",
    "plot_waste",
    "plot_waste_panels",
    "policy_colors",
    "resolve_policies",
    "resolve_seeds",
    "resolve_traces",
    "run_grid",
    "subset",
    "synthetic_failure_trace",
    "uninterrupted_completion_h",
    "waste_breakdown",
    "young_daly_optimum",
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

_WASTE_COLORS = ("tab:red", "tab:orange", "tab:blue", "tab:gray")


# -- grids -------------------------------------------------------------------------------


def resolve_policies(policies: str | Sequence[str]) -> tuple[str, ...]:
    """Policy specs from ``"all"``, a comma-separated string or a sequence.

    ``"all"`` is every registered policy (:func:`elasim.policies.policy_names`), so a
    policy added later shows up in the notebooks without editing them.
    """
    from elasim.policies import policy_names

    if isinstance(policies, str):
        if policies.strip() == "all":
            return tuple(policy_names())
        names = [p.strip() for p in policies.split(",")]
    else:
        names = [str(p).strip() for p in policies]
    names = [n for n in names if n]
    if not names:
        raise ValueError("no policies given")
    return tuple(names)


def resolve_seeds(seeds: int | Sequence[int]) -> tuple[int, ...]:
    """``5`` means seeds ``0..4``; a sequence is taken as it is."""
    if isinstance(seeds, int | np.integer):
        if seeds < 1:
            raise ValueError(f"need at least one seed, got {seeds}")
        return tuple(range(int(seeds)))
    out = tuple(int(s) for s in seeds)
    if not out:
        raise ValueError("no seeds given")
    return out


def resolve_traces(traces: str | Sequence[str]) -> tuple[str, ...]:
    """Trace names from ``"all"`` (every bundled trace), a comma-separated string or a list."""
    if isinstance(traces, str):
        if traces.strip() == "all":
            return (*capacity_trace_names(), *job_trace_names())
        names = [t.strip() for t in traces.split(",")]
    else:
        names = [str(t).strip() for t in traces]
    names = [n for n in names if n]
    if not names:
        raise ValueError("no traces given")
    return tuple(names)


def capacity_trace_names() -> list[str]:
    """Bundled capacity (spot) traces, sorted."""
    from elasim.traces import bundled_traces

    return [info.name for info in bundled_traces() if info.kind == "capacity"]


def job_trace_names() -> list[str]:
    """Bundled shared-cluster job traces, sorted."""
    from elasim.traces import bundled_traces

    return [info.name for info in bundled_traces() if info.kind == "jobs"]


def _job(job: str | JobSpec, max_nodes: int | None = None) -> JobSpec:
    from elasim.job import load_job

    spec = load_job(job) if isinstance(job, str) else job
    return spec if max_nodes is None else spec.with_nodes(max_nodes=max_nodes)


def uninterrupted_completion_h(job: str | JobSpec, max_nodes: int | None = None) -> float:
    """Hours the job takes on its fastest node count with no interruption at all.

    This is the lower bound every run is measured against: the job's work divided by
    the best goodput it can reach (no boots, no rescales, no checkpoints).  The
    notebooks set deadlines as a multiple of it, the way Can't Be Late sets a deadline
    as the job's length plus slack.
    """
    spec = _job(job, max_nodes)
    best = max(spec.goodput(n) for n in range(spec.nodes.min, spec.nodes.max + 1))
    return spec.target_samples / best / 3600.0


def mean_background_gpus(trace: str | JobTrace) -> float:
    """Mean GPUs a job trace asks for: GPU-hours over the span of its submissions.

    The yardstick for choosing ``cluster_gpus``: a cluster much larger than this
    leaves the elastic job alone, one close to it makes the job compete.
    """
    from elasim.traces import JobTrace, load_trace

    loaded = load_trace(trace) if isinstance(trace, str) else trace
    if not isinstance(loaded, JobTrace):
        raise ValueError(f"{getattr(loaded, 'name', trace)} is not a job trace")
    return float(loaded.gpu_hours / loaded.span_h)


def describe_traces(
    traces: Sequence[str], job: str | JobSpec = "resnet50_v100", max_nodes: int | None = None
) -> pd.DataFrame:
    """One row per trace: what a job of ``job``'s size sees in it.

    Capacity traces are capped at the job's ``max_nodes`` (or ``max_nodes`` when
    given; the simulator does the same), so ``drops`` and ``mtbf_h`` count only the
    drops that can hit the job.

    Returns:
        ``trace``, ``kind``, ``duration_h`` (capacity: length; jobs: span of
        submissions), ``mean_available`` and ``availability_fraction`` (share of time
        with at least one node; capacity only), ``drops``, ``mtbf_h``, ``priced``,
        ``on_demand_price_per_hour``, and for job traces ``jobs``, ``gpu_hours`` and
        ``mean_background_gpus``.
    """
    from elasim.traces import CapacityTrace, load_trace

    cap = _job(job, max_nodes).nodes.max
    rows: list[dict[str, Any]] = []
    for name in traces:
        trace = load_trace(name)
        if isinstance(trace, CapacityTrace):
            available = np.minimum(trace.available, cap)
            widths = np.diff(np.append(trace.time_s, trace.duration_s))
            mtbf_s, drops = mean_time_between_drops_s(trace, cap)
            rows.append(
                {
                    "trace": name,
                    "kind": "capacity",
                    "duration_h": trace.duration_h,
                    "mean_available": float(np.sum(available * widths) / trace.duration_s),
                    "availability_fraction": float(
                        np.sum(widths[available > 0]) / trace.duration_s
                    ),
                    "drops": drops,
                    "mtbf_h": mtbf_s / 3600.0,
                    "priced": trace.price_per_hour is not None,
                    "on_demand_price_per_hour": trace.metadata.on_demand_price_per_hour,
                }
            )
        else:
            rows.append(
                {
                    "trace": name,
                    "kind": "jobs",
                    "duration_h": trace.span_h,
                    "priced": False,
                    "jobs": trace.num_jobs,
                    "gpu_hours": trace.gpu_hours,
                    "mean_background_gpus": mean_background_gpus(trace),
                }
            )
    return pd.DataFrame(rows)


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
) -> pd.DataFrame:
    """Simulate every trace x policy x seed x notice x mechanism; one tidy row each.

    A thin layer over :class:`elasim.sweep.SweepSpec` and :func:`elasim.sweep.run_sweep`
    (each seed draws a random start offset in the trace, the Can't Be Late
    methodology), which adds the columns the notebooks need.

    Args:
        traces: trace names or paths; job traces need ``cluster_gpus``.
        policies: ``"all"``, a comma-separated string or a sequence of specs.
        seeds: a count (``5`` is seeds 0..4) or explicit seeds.
        job: job preset or TOML path.
        notice_s: preemption notices to try (job traces ignore them: the shared
            cluster preempts without notice).
        rescale: mechanisms to try (``inplace``, ``restart``).
        max_nodes: overrides the job's ``max_nodes``.
        cluster_gpus: shared-cluster size for job traces.
        deadline_h: deadline for every run (``None``: no deadline, and
            ``deadline_met`` is missing).
        checkpoint_interval_s: ``None`` is *auto* (Young/Daly).
        checkpoint_cost_s: ``None`` is the job's own figure.
        start_offset_s: ``None`` (the default) draws each run's start in the trace
            from its seed; a number starts every run there.
        workers: processes (``None``: one per CPU, ``1``: in this process).

    Returns:
        The sweep's columns (summary keys per row) plus ``trace_kind`` (``capacity``
        or ``jobs``), ``priced`` (whether ``cost_usd`` means anything: capacity
        traces with a price column), ``node_hours`` (spot plus on-demand),
        ``waste_h`` (the sum of :data:`WASTE_COMPONENTS`) and ``deadline_h``.

    Raises:
        ValueError: a job trace without ``cluster_gpus``, or bad names (before any
            simulation starts).
    """
    from elasim.sweep import SweepSpec, run_sweep
    from elasim.traces import CapacityTrace, load_trace

    loaded = {name: load_trace(name) for name in traces}
    kinds = {
        name: ("capacity" if isinstance(t, CapacityTrace) else "jobs") for name, t in loaded.items()
    }
    if cluster_gpus is None and "jobs" in kinds.values():
        jobs = ", ".join(n for n, k in kinds.items() if k == "jobs")
        raise ValueError(f"job traces ({jobs}) need cluster_gpus")
    spec = SweepSpec(
        traces=tuple(traces),
        policies=resolve_policies(policies),
        seeds=resolve_seeds(seeds),
        job=job,
        max_nodes=max_nodes,
        deadline_h=deadline_h,
        checkpoint_interval_s=checkpoint_interval_s,
        checkpoint_cost_s=checkpoint_cost_s,
        notice_s=tuple(float(n) for n in notice_s),
        rescale=tuple(rescale),
        start_offset_s=start_offset_s,
        cluster_gpus=cluster_gpus,
    )
    spec.validate()
    log.info("running %d simulations", spec.size)
    frame = run_sweep(spec, workers=workers)
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


# -- tables --------------------------------------------------------------------------------


def _aggregate(grouped: Any, stat: str) -> pd.DataFrame:
    if stat == "median":
        return grouped.median()
    if stat == "mean":
        return grouped.mean()
    raise ValueError(f"stat must be 'median' or 'mean', got {stat!r}")


def waste_breakdown(
    frame: pd.DataFrame,
    by: Sequence[str] = ("trace", "policy"),
    stat: str = "median",
) -> pd.DataFrame:
    """Where each policy's time went: the waste components and convergence cost.

    Each component is aggregated on its own over the runs of a group (the median by
    default: it is robust to the one start offset that lands in a long outage).  The
    medians of the parts need not add up to the median of the whole, so
    ``waste_h`` is the *sum of the aggregated components* (what a stacked bar shows),
    not the aggregate of each run's sum.

    Returns:
        One row per group: ``by`` columns, each column of :data:`WASTE_COMPONENTS`,
        ``waste_h``, ``convergence_cost_h``, ``completion_time_h``, ``largest``
        (the column of the largest component), ``runs`` and ``completed_share``.
    """
    parts = [c for c, _ in WASTE_COMPONENTS]
    columns = [*parts, "convergence_cost_h", "completion_time_h"]
    grouped = frame.groupby(list(by), sort=True)
    out = _aggregate(grouped[columns], stat)
    out.insert(len(parts), "waste_h", out[parts].sum(axis=1))
    out["largest"] = out[parts].idxmax(axis=1)
    out["runs"] = grouped.size()
    out["completed_share"] = grouped["completed"].mean().astype(float)
    return out.reset_index()


def deadline_hit_rate(frame: pd.DataFrame, by: Sequence[str] = ("trace", "policy")) -> pd.DataFrame:
    """Share of runs that finished by their deadline, per group.

    A run that never completes misses its deadline.  Runs without a deadline
    (``deadline_met`` missing) are left out.

    Raises:
        ValueError: no run in ``frame`` had a deadline.
    """
    has = frame["deadline_met"].notna()
    if not has.any():
        raise ValueError("no run has a deadline (pass deadline_h to run_grid)")
    runs = frame[has].copy()
    runs["hit"] = runs["deadline_met"].astype(bool)
    grouped = runs.groupby(list(by), sort=True)["hit"]
    out = pd.DataFrame({"hits": grouped.sum().astype(int), "runs": grouped.size()})
    out["hit_rate"] = out["hits"] / out["runs"]
    return out.reset_index()


def paired_effect(
    frame: pd.DataFrame,
    factor: str,
    baseline: Any,
    alternative: Any,
    metric: str,
    by: Sequence[str] = ("trace",),
    tolerance: float = 1e-9,
) -> pd.DataFrame:
    """How ``metric`` changes when ``factor`` goes from ``baseline`` to ``alternative``.

    Runs are paired on every other grid key (same trace, policy, seed, and so the
    same start offset), so the comparison is between the same situations and not
    between two noisy samples.

    Args:
        frame: a :func:`run_grid` frame containing both settings of ``factor``.
        factor: a grid key, e.g. ``"rescale"`` or ``"notice_s"``.
        baseline: the reference value (``"inplace"``, ``0.0``).
        alternative: the value compared with it.
        metric: the column compared, e.g. ``"lost_work_h"``.
        by: groups of pairs.
        tolerance: differences within it count as ties.

    Returns:
        One row per group: ``pairs``, ``baseline_median``, ``alternative_median``,
        ``baseline_mean``, ``alternative_mean``, ``median_difference`` (alternative
        minus baseline, per pair), ``share_higher`` and ``share_lower`` (share of
        pairs where the alternative is above / below the baseline).

    Raises:
        ValueError: ``factor`` is not a grid key, or no pairs exist.
    """
    if factor not in GRID_KEYS:
        raise ValueError(f"factor must be one of {', '.join(GRID_KEYS)}, got {factor!r}")
    keys = [k for k in GRID_KEYS if k != factor]
    a = frame[frame[factor] == baseline].set_index(keys)[metric]
    b = frame[frame[factor] == alternative].set_index(keys)[metric]
    pairs = pd.concat({"baseline": a, "alternative": b}, axis=1, join="inner").reset_index()
    if pairs.empty:
        raise ValueError(f"no pairs of {factor}={baseline!r} and {factor}={alternative!r}")
    pairs["difference"] = pairs["alternative"] - pairs["baseline"]
    pairs["higher"] = pairs["difference"] > tolerance
    pairs["lower"] = pairs["difference"] < -tolerance
    grouped = pairs.groupby(list(by), sort=True)
    out = pd.DataFrame(
        {
            "pairs": grouped.size(),
            "baseline_median": grouped["baseline"].median(),
            "alternative_median": grouped["alternative"].median(),
            "baseline_mean": grouped["baseline"].mean(),
            "alternative_mean": grouped["alternative"].mean(),
            "median_difference": grouped["difference"].median(),
            "share_higher": grouped["higher"].mean(),
            "share_lower": grouped["lower"].mean(),
        }
    )
    return out.reset_index()


def pareto_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Each policy's median completion time and cost per trace, and whether it is on the front.

    The cost is ``cost_usd`` on priced traces and ``node_hours`` on the others (whose
    dollar cost is 0 by construction); ``cost_metric`` says which.  A policy is on the
    front when no other policy's medians are at least as fast *and* strictly cheaper
    (:func:`elasim.sweep.pareto_front`).
    """
    from elasim.sweep import pareto_front

    tables = []
    for trace, rows in frame.groupby("trace", sort=True):
        cost, _ = _cost_axis(rows)
        done = rows.dropna(subset=["completion_time_h"])
        medians = (
            done.groupby("policy", sort=True)[["completion_time_h", cost]]
            .median()
            .rename(columns={cost: "cost"})
            .reset_index()
        )
        front = pareto_front(medians.rename(columns={"cost": "cost_usd"}))
        medians["on_front"] = medians["policy"].isin(front["policy"])
        medians.insert(0, "trace", trace)
        medians["cost_metric"] = cost
        tables.append(medians)
    return pd.concat(tables, ignore_index=True)


def median_table(
    frame: pd.DataFrame, metric: str, index: str = "trace", columns: str = "policy"
) -> pd.DataFrame:
    """Medians of ``metric`` with ``index`` values as rows and ``columns`` values as columns."""
    return frame.pivot_table(index=index, columns=columns, values=metric, aggfunc="median")


def check_quoted(
    table: pd.DataFrame | pd.Series,
    quoted: Mapping[Any, float],
    rel_tol: float = 0.01,
    abs_tol: float = 0.005,
) -> None:
    """Check numbers quoted in prose against the table they were read from.

    A notebook's prose quotes numbers from its full-size run; calling this next to
    the prose makes a re-run with different results fail instead of leaving the
    text stale.

    Args:
        table: a DataFrame (keys are ``(row, column)`` pairs) or a Series (keys are
            labels).
        quoted: the numbers as quoted, by key.
        rel_tol: relative tolerance (quoted numbers are rounded).
        abs_tol: absolute tolerance.

    Raises:
        AssertionError: listing every quoted number that no longer matches.
    """
    wrong = []
    for key, expected in quoted.items():
        actual = float(
            table.loc[key] if isinstance(table, pd.Series) else table.loc[key[0], key[1]]
        )
        if not math.isclose(actual, expected, rel_tol=rel_tol, abs_tol=abs_tol):
            wrong.append(f"{key}: quoted {expected:g}, now {actual:.4g}")
    if wrong:
        raise AssertionError("prose is stale: " + "; ".join(wrong))


# -- checkpoint intervals -----------------------------------------------------------------


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


def synthetic_failure_trace(
    mtbf_s: float,
    nodes: int,
    *,
    downtime_s: float = 120.0,
    failures: int = 400,
    seed: int = 0,
) -> CapacityTrace:
    """A SYNTHETIC capacity trace with Poisson failures of the whole job.

    ``nodes`` nodes are available; after an exponentially distributed up-time of
    mean ``mtbf_s`` every node is lost for ``downtime_s``, then all come back.  So a
    job holding them fails (and, holding nothing afterwards, rolls back to its last
    checkpoint) at a known rate of one per ``mtbf_s`` of up-time: the setting of
    Young's and Daly's analyses.  The metadata say ``synthetic: true`` and the
    source line says how it was generated, so it cannot pass for measured data.

    Args:
        mtbf_s: mean up-time between failures, seconds.
        nodes: nodes available while up.
        downtime_s: how long all nodes stay gone after a failure.
        failures: failures in one pass of the trace (it repeats past its end).
        seed: seeds the exponential draws.
    """
    from elasim.traces import CapacityTrace, TraceMetadata

    if not (mtbf_s > 0 and downtime_s > 0 and nodes >= 1 and failures >= 1):
        raise ValueError("need mtbf_s > 0, downtime_s > 0, nodes >= 1 and failures >= 1")
    rng = np.random.default_rng(seed)
    # a floor of 1 ms keeps the rows strictly increasing whatever the draw
    up_s = np.maximum(rng.exponential(mtbf_s, size=failures + 1), 1e-3)
    times = [0.0]
    available = [nodes]
    now = 0.0
    for up in up_s[:-1]:
        now += float(up)
        times.append(now)
        available.append(0)
        now += downtime_s
        times.append(now)
        available.append(nodes)
    duration_s = now + float(up_s[-1])
    source = (
        f"SYNTHETIC: Poisson failures generated by elasim.analysis.synthetic_failure_trace("
        f"mtbf_s={mtbf_s:g}, nodes={nodes}, downtime_s={downtime_s:g}, failures={failures}, "
        f"seed={seed}); not a measurement"
    )
    return CapacityTrace(
        name=f"SYNTHETIC_poisson_mtbf{mtbf_s:g}s",
        time_s=np.asarray(times, dtype=np.float64),
        available=np.asarray(available, dtype=np.int64),
        price_per_hour=None,
        metadata=TraceMetadata(source=source, synthetic=True),
        duration_s=duration_s,
    )


def _capacity(trace: str | CapacityTrace) -> CapacityTrace:
    from elasim.traces import CapacityTrace, load_trace

    loaded = load_trace(trace) if isinstance(trace, str) else trace
    if not isinstance(loaded, CapacityTrace):
        raise ValueError(f"{getattr(loaded, 'name', trace)} is not a capacity trace")
    return loaded


def mean_time_between_drops_s(
    trace: str | CapacityTrace, max_nodes: int | None = None
) -> tuple[float, int]:
    """The trace's mean time between capacity drops, as a job of ``max_nodes`` sees it.

    Availability is capped at ``max_nodes`` first (a drop from 30 to 20 nodes never
    touches a 16-node job), and the wrap-around from the last row to the first
    counts when it is a drop, because a replay repeats the trace.  This is the prior
    the simulator's ``auto`` interval starts from, and what
    :func:`elasim.traces.summarize` reports as ``mean_time_between_drops_h`` for an
    uncapped trace without a wrap-around drop.

    Returns:
        ``(mtbf_s, drops)``; ``mtbf_s`` is ``inf`` without drops.
    """
    loaded = _capacity(trace)
    available = loaded.available
    if max_nodes is not None:
        available = np.minimum(available, max_nodes)
    drops = int(np.count_nonzero(np.diff(available) < 0))
    if available[-1] > available[0]:
        drops += 1
    return (loaded.duration_s / drops if drops else math.inf), drops


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
    job: str | JobSpec,
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
        intervals_s: periodic intervals in seconds; ``None`` is the simulator's
            ``auto`` (Daly's interval, updated online).
        checkpoint_cost_s: ``None`` is the job's own ``size / write bandwidth``.
        policy: policy spec.
        policy_options: policy options.
        seeds: a count or explicit seeds; each draws a start offset.
        rescale: mechanism.
        notice_s: preemption notice.
        max_nodes: overrides the job's ``max_nodes``.
        start_offset_s: ``None`` draws each seed's start in the trace; a number
            starts every run there.

    Returns:
        Columns ``interval_s`` (NaN for auto), ``auto``, ``seed``, ``start_offset_s``,
        ``completed``, ``completion_time_h``, ``lost_work_h``,
        ``checkpoint_overhead_h``, ``rescale_overhead_h``, ``idle_h``,
        ``preemptions``, ``checkpoints``, ``exposed_h`` (completion time minus idle
        time: the time the job held nodes and so could be hit) and
        ``checkpoint_cost_s``.
    """
    from elasim.policies import make_policy
    from elasim.sim import RescaleMode, SimConfig, simulate

    loaded = _capacity(trace)
    spec = _job(job, max_nodes)
    mode = RescaleMode(rescale)
    rows: list[dict[str, Any]] = []
    for interval in intervals_s:
        for seed in resolve_seeds(seeds):
            config = SimConfig(
                checkpoint_interval_s=None if interval is None else float(interval),
                checkpoint_cost_s=checkpoint_cost_s,
                notice_s=notice_s,
                rescale=mode,
                seed=seed,
                start_offset_s=start_offset_s,
                record_timeline=False,
            )
            result = simulate(
                loaded, make_policy(policy, dict(policy_options or {}), seed=seed), spec, config
            )
            inputs = dict(result.metadata)
            completion = result.completion_time_h
            rows.append(
                {
                    "interval_s": math.nan if interval is None else float(interval),
                    "auto": interval is None,
                    "seed": seed,
                    "start_offset_s": inputs["start_offset_s"],
                    "completed": result.completed,
                    "completion_time_h": math.nan if completion is None else completion,
                    "lost_work_h": result.lost_work_h,
                    "checkpoint_overhead_h": result.checkpoint_overhead_h,
                    "rescale_overhead_h": result.rescale_overhead_h,
                    "idle_h": result.idle_h,
                    "preemptions": result.preemptions,
                    "checkpoints": result.checkpoints,
                    "exposed_h": result.sim_time_h - result.idle_h,
                    "checkpoint_cost_s": inputs["checkpoint_cost_s"],
                }
            )
    return pd.DataFrame(rows)


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


# -- plots -----------------------------------------------------------------------------------


def policy_colors(policies: Iterable[str] | None = None) -> dict[str, Any]:
    """One fixed colour per policy, the same in every plot.

    Registered policies get their colour from their position in
    :func:`elasim.policies.policy_names` (so ``greedy`` has the same colour in every
    notebook, whatever subset a figure shows); others follow.
    """
    from matplotlib import colormaps

    from elasim.policies import policy_names

    palette = colormaps["tab10"].colors
    names = list(policy_names())
    for name in policies or ():
        if name not in names:
            names.append(name)
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def _panels(count: int, width: float = 5.2, height: float = 4.0) -> tuple[Figure, list[Axes]]:
    import matplotlib.pyplot as plt

    cols = min(count, 2)
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols, height * rows), squeeze=False, constrained_layout=True
    )
    flat = list(axes.ravel())
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]


def _cost_axis(frame: pd.DataFrame) -> tuple[str, str]:
    """``cost_usd`` for priced traces, node-hours for the rest (their cost is 0)."""
    if "priced" not in frame or bool(frame["priced"].all()):
        return "cost_usd", "cost (USD)"
    return "node_hours", "node-hours held (trace has no price)"


def plot_pareto_ax(ax: Axes, frame: pd.DataFrame, title: str | None = None) -> pd.DataFrame:
    """Cost vs completion time on ``ax``: every run, each policy's median, their Pareto front.

    Traces without a price (``priced`` false) are drawn against node-hours instead
    of dollars: their ``cost_usd`` is 0 by construction.

    Returns:
        The :func:`pareto_table` of ``frame`` (medians per policy, ``on_front``).
    """
    if "trace" in frame and frame["trace"].nunique() > 1:
        raise ValueError("several traces in the frame: plot one per axis")
    cost, label = _cost_axis(frame)
    done = frame.dropna(subset=["completion_time_h"])
    colors = policy_colors(done["policy"].unique())
    for policy, rows in done.groupby("policy", sort=True):
        color = colors[str(policy)]
        ax.scatter(rows["completion_time_h"], rows[cost], s=14, alpha=0.35, color=color)
        ax.scatter(
            rows["completion_time_h"].median(),
            rows[cost].median(),
            s=80,
            marker="D",
            color=color,
            edgecolor="black",
            label=str(policy),
            zorder=3,
        )
    table = pareto_table(frame if "trace" in frame else frame.assign(trace=""))
    front = table[table["on_front"]].sort_values("completion_time_h")
    if len(front) > 1:
        ax.plot(front["completion_time_h"], front["cost"], "k--", lw=1, label="Pareto front")
    ax.set_xlabel("completion time (h)")
    ax.set_ylabel(label)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7)
    return table


def plot_pareto_panels(frame: pd.DataFrame) -> Figure:
    """One :func:`plot_pareto_ax` panel per trace."""
    traces = sorted(frame["trace"].unique())
    fig, axes = _panels(len(traces))
    for ax, trace in zip(axes, traces, strict=True):
        plot_pareto_ax(ax, frame[frame["trace"] == trace], title=str(trace))
    return fig


def plot_waste(ax: Axes, breakdown: pd.DataFrame, trace: str | None = None) -> None:
    """Stacked bars of the waste components per policy (one trace of a :func:`waste_breakdown`)."""
    rows = breakdown if trace is None else breakdown[breakdown["trace"] == trace]
    if "trace" in rows and rows["trace"].nunique() > 1:
        raise ValueError("several traces in the breakdown: pass trace=")
    rows = rows.sort_values("policy")
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for (column, label), color in zip(WASTE_COMPONENTS, _WASTE_COLORS, strict=True):
        values = rows[column].to_numpy(dtype=float)
        ax.bar(x, values, bottom=bottom, color=color, label=label, width=0.7)
        bottom += values
    ax.set_xticks(x, rows["policy"].tolist(), rotation=30, ha="right")
    ax.set_ylabel("hours (median over runs)")
    if trace is not None:
        ax.set_title(str(trace))
    ax.legend(fontsize=7)


def plot_waste_panels(breakdown: pd.DataFrame) -> Figure:
    """One :func:`plot_waste` panel per trace."""
    traces = sorted(breakdown["trace"].unique())
    fig, axes = _panels(len(traces))
    for ax, trace in zip(axes, traces, strict=True):
        plot_waste(ax, breakdown, trace)
    return fig


def _grouped_bars(
    ax: Axes,
    table: pd.DataFrame,
    value: str,
    groups: str = "trace",
    bars: str = "policy",
    legend: bool = True,
) -> None:
    """Bars of ``value``: one cluster per ``groups`` value, one bar per ``bars`` value."""
    group_names = sorted(table[groups].unique())
    bar_names = sorted(table[bars].unique())
    colors = policy_colors(bar_names) if bars == "policy" else {}
    width = 0.8 / max(len(bar_names), 1)
    for j, name in enumerate(bar_names):
        rows = table[table[bars] == name].set_index(groups)
        heights = [float(rows[value].get(g, np.nan)) for g in group_names]
        ax.bar(
            np.arange(len(group_names)) + (j - (len(bar_names) - 1) / 2) * width,
            heights,
            width=width,
            label=str(name),
            color=colors.get(name),
        )
    ax.set_xticks(np.arange(len(group_names)), [str(g) for g in group_names], fontsize=8)
    if legend:
        ax.legend(fontsize=7)


def _figure_legend(fig: Figure, ax: Axes) -> None:
    """One legend for the whole figure, above the panels (where it hides no bar)."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=max(len(labels), 1), fontsize=8)


def plot_convergence_cost(frame: pd.DataFrame) -> Figure:
    """Median convergence cost per trace and policy: in hours, and as a share of the run.

    The convergence cost is the running time whose samples the gradient-noise-scale
    model discounts: the price of a large global batch (only jobs with ``scaled``
    batch semantics have one).
    """
    import matplotlib.pyplot as plt

    table = frame.assign(convergence_share=frame["convergence_cost_h"] / frame["completion_time_h"])
    medians = (
        table.groupby(["trace", "policy"], sort=True)[["convergence_cost_h", "convergence_share"]]
        .median()
        .reset_index()
    )
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), constrained_layout=True)
    _grouped_bars(left, medians, "convergence_cost_h", legend=False)
    left.set_ylabel("convergence cost (h, median)")
    _grouped_bars(right, medians, "convergence_share", legend=False)
    _figure_legend(fig, left)
    right.set_ylabel("share of completion time (median)")
    return fig


def plot_deadline_hit_rate(rates: pd.DataFrame, deadline_h: float | None = None) -> Figure:
    """Bars of :func:`deadline_hit_rate` per trace and policy."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4), constrained_layout=True)
    _grouped_bars(ax, rates, "hit_rate", legend=False)
    _figure_legend(fig, ax)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("deadline hit rate")
    if deadline_h is not None:
        ax.set_title(f"share of runs finished within {deadline_h:.1f} h")
    return fig


def plot_notice_and_mechanism(frame: pd.DataFrame, metric: str = "lost_work_h") -> Figure:
    """Median ``metric`` per policy for every (notice, mechanism) pair, one panel per trace."""
    table = frame.assign(
        setting=[
            f"{m}, notice {n:g} s" for m, n in zip(frame["rescale"], frame["notice_s"], strict=True)
        ]
    )
    medians = (
        table.groupby(["trace", "policy", "setting"], sort=True)[metric].median().reset_index()
    )
    traces = sorted(medians["trace"].unique())
    fig, axes = _panels(len(traces), width=6.0)
    for ax, trace in zip(axes, traces, strict=True):
        rows = medians[medians["trace"] == trace]
        _grouped_bars(ax, rows, metric, groups="policy", bars="setting", legend=False)
        ax.set_title(str(trace))
        ax.set_ylabel(f"{metric} (median)")
    _figure_legend(fig, axes[0])
    return fig


def plot_checkpoint_sweep(
    sweep: pd.DataFrame,
    optima: Sequence[YoungDaly] = (),
    title: str | None = None,
) -> Figure:
    """The U: mean completion time against the interval, with the Young/Daly intervals.

    Left: mean completion time (with its standard error) over the fixed intervals,
    the simulator's ``auto`` as a horizontal line when the sweep has it, and a
    vertical line per optimum.  Right: the two arms of the U, mean lost work (grows
    with the interval) and mean checkpoint overhead (shrinks with it).
    """
    import matplotlib.pyplot as plt

    curve = interval_curve(sweep)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), constrained_layout=True)
    x = curve["interval_s"].to_numpy(dtype=float)
    left.errorbar(
        x,
        curve["completion_mean_h"],
        yerr=curve["completion_sem_h"],
        marker="o",
        capsize=3,
        label="fixed interval (mean ± s.e.)",
    )
    best = best_interval_s(curve)
    left.axvline(best, color="black", lw=1, label=f"best swept: {best:g} s")
    styles = ("--", ":", "-.")
    for i, optimum in enumerate(optima):
        left.axvline(
            optimum.daly_s,
            color="tab:red",
            ls=styles[i % len(styles)],
            label=f"Daly, {optimum.label}: {optimum.daly_s:.0f} s",
        )
    auto = sweep[sweep["auto"]]
    if len(auto):
        left.axhline(
            float(auto["completion_time_h"].mean()),
            color="tab:green",
            lw=1,
            label="auto (online Daly), mean",
        )
    left.set_xscale("log")
    left.set_xlabel("checkpoint interval (s)")
    left.set_ylabel("completion time (h, mean over start offsets)")
    left.legend(fontsize=7)
    right.plot(x, curve["lost_work_mean_h"], marker="o", color="tab:red", label="lost work")
    right.plot(
        x, curve["checkpoint_overhead_mean_h"], marker="o", color="tab:blue", label="checkpointing"
    )
    right.set_xscale("log")
    right.set_xlabel("checkpoint interval (s)")
    right.set_ylabel("hours (mean)")
    right.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return fig
