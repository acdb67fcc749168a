"""Figures for the notebooks (``plot_*``), each returning its figure.

matplotlib is imported inside the functions only, so importing
:mod:`elasim.analysis` stays cheap.  Figures are created through pyplot (so a
notebook shows them) and returned; the caller closes them.  Colours are fixed per
policy (:func:`policy_colors`, from :mod:`elasim.palette`, the one palette the
timeline uses too) so one policy looks the same in every figure.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from elasim.palette import policy_colors

if TYPE_CHECKING:  # pragma: no cover - typing only
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

from .answers import JOB_OUTCOMES, RUN_KEYS, group_label, identical_classes, run_cost
from .checkpoint import YoungDaly, best_interval_s, interval_curve
from .grids import WASTE_COMPONENTS
from .sweep_tables import sweep_groups
from .tables import _cost_axis, pareto_front, pareto_table

__all__ = [
    "plot_checkpoint_sweep",
    "plot_convergence_cost",
    "plot_deadline_hit_rate",
    "plot_notice_and_mechanism",
    "pareto_figure",
    "plot_pareto",
    "plot_pareto_ax",
    "plot_pareto_panels",
    "plot_waste",
    "plot_waste_panels",
    "policy_colors",
]

_WASTE_COLORS = ("tab:red", "tab:orange", "tab:blue", "tab:gray")

#: pareto.png's resolution.  With :func:`pareto_figure`'s 10-inch width the PNG is
#: 1,000 px wide, which ``report.html`` (a 70em column) shows as drawn, unscaled.
PARETO_DPI = 100


def _panels(
    count: int, width: float = 5.2, height: float = 4.0, most_cols: int = 2
) -> tuple[Figure, list[Axes]]:
    import matplotlib.pyplot as plt

    cols = min(count, most_cols)
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols, height * rows), squeeze=False, constrained_layout=True
    )
    flat = list(axes.ravel())
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]


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


def _pareto_panel(ax: Axes, rows: pd.DataFrame, colors: dict[str, Any], title: str) -> None:
    """One trace's runs (dots) and medians (large markers), and the front of the medians.

    Policies whose runs were identical share one marker, labelled with all their
    names, so none hides under another; each other policy has its own colour and
    shape, so near-equal medians stay told apart.
    """
    cost, unit = run_cost(rows)
    runs = rows.assign(cost=cost).dropna(subset=["completion_time_h"])
    shapes = itertools.cycle("DosP^vXph*")
    medians = []
    for names in identical_classes(rows, JOB_OUTCOMES, RUN_KEYS):
        mine = runs[runs["policy"] == names[0]]
        if mine.empty:  # no run finished: nothing to place
            continue
        color, shape = colors[names[0]], next(shapes)
        ax.scatter(mine["completion_time_h"], mine["cost"], s=16, alpha=0.4, color=color)
        point = (float(mine["completion_time_h"].median()), float(mine["cost"].median()))
        ax.scatter(
            *point,
            s=110,
            marker=shape,
            color=color,
            edgecolor="black",
            zorder=3,
            label=" = ".join(names) + (" (identical)" if len(names) > 1 else ""),
        )
        medians.append({"completion_time_h": point[0], "cost_usd": point[1]})
    if len(medians) > 1:
        front = pareto_front(pd.DataFrame(medians))
        ax.plot(front["completion_time_h"], front["cost_usd"], "k--", lw=1, label="Pareto front")
    ax.set_xlabel("completion time (h)")
    ax.set_ylabel(f"cost ({unit})")
    ax.set_title(title, fontsize=12)
    ax.legend(fontsize=10, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def pareto_figure(frame: pd.DataFrame, by: Sequence[str] | None = None) -> Figure:
    """Cost vs completion time, one panel per trace (as the sweep's table): runs and medians.

    A policy's runs (dots) and its median (the large, black-edged marker) share its
    colour, the same in every plot (:func:`policy_colors`).  Why one panel per trace:
    the table and the answers are per trace, and medians pooled over traces answer
    no question.  The legends sit beside the panels, over no point.  One panel a row,
    10 inches wide, with 10-point legends: two a row, shrunk to the report's width,
    left the legends about 6 px high.

    Args:
        frame: a sweep frame, one row per run.
        by: the columns a panel is per (default :func:`~.sweep_tables.sweep_groups`).
    """
    by = tuple(by or sweep_groups(frame))
    groups = list(frame.groupby(list(by) if len(by) > 1 else by[0], sort=True))
    fig, axes = _panels(max(len(groups), 1), width=10.0, height=4.8, most_cols=1)
    colors = policy_colors(sorted(frame["policy"].unique()))
    for ax, (key, rows) in zip(axes, groups, strict=False):
        _pareto_panel(ax, rows, colors, group_label(by, key))
    fig.suptitle("cost vs completion time (dots: runs; large markers: medians per policy)")
    return fig


def plot_pareto(frame: pd.DataFrame, path: str | Path, by: Sequence[str] | None = None) -> Path:
    """Write :func:`pareto_figure` as a PNG (atomically, Agg backend); returns ``path``."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from elasim.output import atomic_write

    fig = pareto_figure(frame, by)
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=PARETO_DPI))
    finally:
        plt.close(fig)
