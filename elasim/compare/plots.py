"""The figure of ``elasim compare``: both timelines stacked, and the pause scatter."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from elasim.compare.events import CompareResult, EventPair


def _training_workers(
    pairs: Sequence[EventPair], side: str, end_s: float | None
) -> tuple[list[float], list[int]]:
    """Step function of the training group's size from one side's membership events."""
    events = sorted(
        (t, p.nodes_after)
        for p in pairs
        if (t := (p.real_time_s if side == "real" else p.sim_time_s)) is not None
    )
    times, sizes = [0.0], [0]
    for t, after in events:
        times.append(t)
        sizes.append(after)
    if end_s is not None and end_s > times[-1]:
        times.append(end_s)
        sizes.append(sizes[-1])
    return times, sizes


def compare_figure(
    result: CompareResult,
    real_timeline: pd.DataFrame | None,
    sim_timeline: pd.DataFrame | None,
    *,
    real_time_column: str = "real_time_s",
) -> Any:
    """Measured and simulated timelines stacked, and a sim-vs-real pause scatter."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 7), dpi=110)
    grid = fig.add_gridspec(2, 2, width_ratios=(2.2, 1))
    ax_real = fig.add_subplot(grid[0, 0])
    ax_sim = fig.add_subplot(grid[1, 0], sharex=ax_real)
    ax_pause = fig.add_subplot(grid[:, 1])
    for ax, frame, label, column, side in (
        (ax_real, real_timeline, "measured", real_time_column, "real"),
        (ax_sim, sim_timeline, "simulated", "time_s", "sim"),
    ):
        end_s = result.real_completion_s if side == "real" else result.sim_completion_s
        if frame is not None and len(frame) and "spot_available" in frame:
            col = column if column in frame else "time_s"
            ax.step(
                frame[col], frame["spot_available"], where="post", color="0.6", label="available"
            )
        # workers training, from each side's own membership events (the same rule for both)
        times, sizes = _training_workers(result.pairs, side, end_s)
        ax.step(times, sizes, where="post", label=f"{label}: training", color="tab:blue")
        ax.set_ylabel(f"{label}\nworkers")
        ax.legend(loc="upper right", fontsize=8)
    ax_sim.set_xlabel("real time (s)")
    matched = [p for p in result.pairs if p.matched and p.real_pause_s is not None]
    if matched:
        real = [p.real_pause_s for p in matched]
        sim = [p.sim_pause_s for p in matched]
        ax_pause.scatter(real, sim, s=30, alpha=0.8)
        top = max(max(real), max(sim)) * 1.1 or 1.0
        ax_pause.plot([0, top], [0, top], "k--", lw=1, label="sim = real")
        ax_pause.set_xlim(0, top)
        ax_pause.set_ylim(0, top)
        ax_pause.legend(fontsize=8)
    ax_pause.set_xlabel("measured pause (s)")
    ax_pause.set_ylabel("simulated pause (s)")
    err = result.median_pause_rel_error
    ax_pause.set_title(
        f"{result.events_matched} events matched; median error "
        + ("-" if err is None else f"{100 * err:.0f}%")
    )
    fig.tight_layout()
    return fig


def plot_compare(
    result: CompareResult,
    real_timeline: pd.DataFrame | None,
    sim_timeline: pd.DataFrame | None,
    path: str | Path,
    *,
    real_time_column: str = "real_time_s",
) -> Path:
    """Write :func:`compare_figure` to ``path`` (PNG, atomically)."""
    from elasim.output import atomic_write

    fig = compare_figure(result, real_timeline, sim_timeline, real_time_column=real_time_column)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
