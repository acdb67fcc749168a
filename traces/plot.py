"""Summaries and plots of traces, for ``elasim traces show NAME``.

:func:`summarize` returns plain Python values (JSON-ready) so the CLI can print
them as a table or as JSON.  :func:`plot_trace` imports matplotlib lazily and
forces the non-interactive Agg backend, so importing :mod:`elasim.traces` stays
cheap and never needs a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from elasim.atomic import atomic_write

from .model import CapacityTrace, JobTrace

__all__ = ["plot_trace", "summarize"]


def _row_widths_s(trace: CapacityTrace) -> np.ndarray:
    return np.diff(np.append(trace.time_s, trace.duration_s))


def summarize(trace: CapacityTrace | JobTrace) -> dict[str, Any]:
    """Key statistics of a trace as a JSON-ready dict.

    Capacity traces (means are time-weighted over ``[0, duration_s)``):

    * ``rows``, ``duration_h``, ``mean_available``, ``min_available``,
      ``max_available``;
    * ``availability_fraction``: share of time with at least one node obtainable;
      ``full_availability_fraction``: share of time at ``max_available``;
    * ``drops``: rows where ``available`` falls (each is a preemption event for a
      job holding everything), ``nodes_dropped``: the sum of those falls;
    * ``mean_time_between_drops_h``: ``duration_h / drops`` (``None`` without
      drops), the MTBF a Young/Daly checkpoint interval would use;
    * ``price_min``/``price_mean``/``price_max`` (USD per node-hour; ``None``
      without a price column), ``on_demand_price_per_hour``.

    Job traces: ``jobs``, ``gpu_hours``, ``span_h`` (first to last submission),
    ``median_duration_h``, ``max_duration_h``, ``size_histogram``
    (``{num_gpus: jobs}``, sorted) and ``peak_gpus_if_unqueued`` (the most GPUs in
    use at once if every job started at its submit time: an upper bound on the
    demand, useful to pick ``--cluster-gpus``).
    """
    meta = trace.metadata
    common: dict[str, Any] = {
        "name": trace.name,
        "kind": trace.kind,
        "source": meta.source,
        "synthetic": meta.synthetic,
    }
    if isinstance(trace, CapacityTrace):
        return {**common, **_capacity_statistics(trace)}
    return {**common, **_job_statistics(trace)}


def _capacity_statistics(trace: CapacityTrace) -> dict[str, Any]:
    """The capacity-trace part of :func:`summarize`, in the order it is shown.

    Means are weighted by how long each row lasts, so a trace sampled unevenly is
    summarised as the simulator sees it.
    """
    meta = trace.metadata
    widths = _row_widths_s(trace)
    avail = trace.available
    total = trace.duration_s
    falls = np.diff(avail)
    drops = int(np.count_nonzero(falls < 0))
    duration_h = total / 3600.0
    out = {
        "rows": len(trace),
        "duration_h": duration_h,
        "instance_type": meta.instance_type,
        "gpus_per_node": meta.gpus_per_node,
        "region": meta.region,
        "mean_available": float(np.sum(avail * widths) / total),
        "min_available": int(avail.min()),
        "max_available": int(avail.max()),
        "availability_fraction": float(np.sum(widths[avail > 0]) / total),
        "full_availability_fraction": float(np.sum(widths[avail == avail.max()]) / total),
        "drops": drops,
        "nodes_dropped": int(-np.sum(falls[falls < 0])),
        "mean_time_between_drops_h": duration_h / drops if drops else None,
        "price_min": None,
        "price_mean": None,
        "price_max": None,
        "on_demand_price_per_hour": meta.on_demand_price_per_hour,
    }
    if trace.price_per_hour is not None:
        price = trace.price_per_hour
        out["price_min"] = float(price.min())
        out["price_mean"] = float(np.sum(price * widths) / total)
        out["price_max"] = float(price.max())
    return out


def _job_statistics(trace: JobTrace) -> dict[str, Any]:
    """The job-trace part of :func:`summarize`, in the order it is shown."""
    sizes, counts = np.unique(trace.num_gpus, return_counts=True)
    return {
        "rows": len(trace),
        "jobs": trace.num_jobs,
        "gpu_hours": trace.gpu_hours,
        "span_h": trace.span_h,
        "median_duration_h": float(np.median(trace.duration_s)) / 3600.0,
        "max_duration_h": float(np.max(trace.duration_s)) / 3600.0,
        "size_histogram": {int(s): int(c) for s, c in zip(sizes, counts, strict=True)},
        "peak_gpus_if_unqueued": _peak_gpus_if_unqueued(trace),
    }


def _peak_gpus_if_unqueued(trace: JobTrace) -> int:
    """The most GPUs in use at once if every job started at its submit time.

    An upper bound on the trace's demand, to pick ``--cluster-gpus`` by: a sweep over
    job starts (+GPUs) and ends (-GPUs), releases first at equal times.
    """
    starts = trace.submit_time_s
    ends = starts + trace.duration_s
    times = np.concatenate([starts, ends])
    delta = np.concatenate([trace.num_gpus, -trace.num_gpus])
    order = np.lexsort((delta, times))  # at equal times, releases (negative) first
    return int(np.max(np.cumsum(delta[order])))


def plot_trace(trace: CapacityTrace | JobTrace, path: str | Path) -> Path:
    """Draw a trace to an image file (format from the suffix), written atomically.

    Capacity: available nodes as a step function over hours, with the spot price
    (and the on-demand price, dashed) on a second axis.  Jobs: GPUs requested per
    hour of submissions, and the job-size histogram.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    target = Path(path)
    if isinstance(trace, CapacityTrace):
        fig = _draw_capacity(plt, trace)
    else:
        fig = _draw_jobs(plt, trace)
    try:
        # the temporary name keeps the suffix: savefig picks the format from it
        atomic_write(
            target,
            lambda tmp: fig.savefig(tmp, dpi=110),
            make_parents=False,
            suffix=target.suffix or ".png",
        )
    finally:
        plt.close(fig)
    return target


def _draw_capacity(plt: Any, trace: CapacityTrace) -> Any:
    """A new figure of a capacity trace: nodes over hours, prices on a second axis.

    Why ``plt`` is passed in: :func:`plot_trace` imports matplotlib lazily and sets
    its backend first; nothing here imports it.
    """
    fig, ax = plt.subplots(figsize=(10, 4), constrained_layout=True)
    hours = np.append(trace.time_s, trace.duration_s) / 3600.0
    avail = np.append(trace.available, trace.available[-1])
    ax.step(hours, avail, where="post", color="tab:blue", label="available nodes")
    ax.set_xlabel("trace time (h)")
    ax.set_ylabel("available nodes")
    ax.set_ylim(bottom=0, top=max(1, trace.max_available) * 1.1)
    ax.set_xlim(0, hours[-1])
    if trace.price_per_hour is not None:
        ax2 = ax.twinx()
        price = np.append(trace.price_per_hour, trace.price_per_hour[-1])
        ax2.step(hours, price, where="post", color="tab:orange", label="spot $/node-h")
        od = trace.metadata.on_demand_price_per_hour
        if od is not None:
            ax2.axhline(od, color="tab:red", linestyle="--", label="on-demand $/node-h")
        ax2.set_ylabel("USD per node-hour")
        ax2.set_ylim(bottom=0)
        lines = ax.get_legend_handles_labels()
        lines2 = ax2.get_legend_handles_labels()
        ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="lower right")
    else:
        ax.legend(loc="lower right")
    title = trace.name
    if trace.metadata.instance_type:
        title += f" ({trace.metadata.instance_type})"
    ax.set_title(title)
    return fig


def _draw_jobs(plt: Any, trace: JobTrace) -> Any:
    """A new figure of a job trace: GPUs requested per hour, and the job-size histogram.

    ``plt`` is passed in for the reason given at :func:`_draw_capacity`.
    """
    fig, (ax, ax2) = plt.subplots(
        1, 2, figsize=(12, 4), constrained_layout=True, gridspec_kw={"width_ratios": [3, 1]}
    )
    hours = trace.submit_time_s / 3600.0
    bins = max(1, int(np.ceil(hours[-1])))
    ax.hist(hours, bins=bins, weights=trace.num_gpus, color="tab:blue")
    ax.set_xlabel("submit time (h)")
    ax.set_ylabel("GPUs requested per hour")
    ax.set_title(f"{trace.name}: {trace.num_jobs} jobs, {trace.gpu_hours:.0f} GPU-h")
    sizes, counts = np.unique(trace.num_gpus, return_counts=True)
    ax2.bar([str(s) for s in sizes], counts, color="tab:green")
    ax2.set_yscale("log")
    ax2.set_xlabel("GPUs per job")
    ax2.set_ylabel("jobs")
    return fig
