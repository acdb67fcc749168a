"""Sim vs real: match a measured run's events with a simulation's, event by event.

Both sides write the same schema (``summary.json`` and ``events.parquet`` with
:data:`elasim.policies.EVENT_COLUMNS`), so the comparison is a join, not a
translation.  Times are compared in the executor's *real* seconds: the simulation to
compare with is run on the trace compressed by the executor's time scale
(:func:`scale_trace`), with a profile measured on the same machine.

Matching: membership changes (``scale_up``, ``scale_down``, ``resume``) and
preemptions are matched in order, by kind and node counts, each with the first
unmatched simulated event of the same signature whose time lies within the window;
an event without a partner is reported as unmatched rather than forced onto another.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elasim.policies import PAUSE_COMPONENTS
from elasim.traces.model import CapacityTrace

__all__ = [
    "MATCHED_KINDS",
    "CompareResult",
    "EventPair",
    "compare_frames",
    "compare_runs",
    "plot_compare",
    "scale_trace",
]

#: Event kinds that carry a pause worth comparing.
MATCHED_KINDS: tuple[str, ...] = ("scale_up", "scale_down", "resume", "preempt")


def scale_trace(trace: CapacityTrace, time_scale: float) -> CapacityTrace:
    """The same trace replayed ``time_scale`` times faster (trace seconds per real second)."""
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
    return CapacityTrace(
        name=f"{trace.name} (x{time_scale:g})",
        time_s=np.asarray(trace.time_s, dtype=float) / time_scale,
        available=trace.available,
        price_per_hour=trace.price_per_hour,
        metadata=trace.metadata,
        duration_s=float(trace.duration_s) / time_scale,
    )


@dataclass(frozen=True)
class EventPair:
    """One matched event (or an unmatched one, with the other side ``None``)."""

    kind: str
    nodes_before: int
    nodes_after: int
    real_time_s: float | None
    sim_time_s: float | None
    real_pause_s: float | None
    sim_pause_s: float | None
    real_components: tuple[tuple[str, float], ...] = ()
    sim_components: tuple[tuple[str, float], ...] = ()

    @property
    def matched(self) -> bool:
        """Both sides present."""
        return self.real_time_s is not None and self.sim_time_s is not None

    @property
    def abs_error_s(self) -> float | None:
        """Simulated minus measured pause."""
        if not self.matched or self.real_pause_s is None or self.sim_pause_s is None:
            return None
        return self.sim_pause_s - self.real_pause_s

    @property
    def rel_error(self) -> float | None:
        """``|sim - real| / real`` (None when the measured pause is zero)."""
        err = self.abs_error_s
        if err is None or not self.real_pause_s:
            return None
        return abs(err) / self.real_pause_s


@dataclass(frozen=True)
class CompareResult:
    """Everything ``elasim compare`` reports."""

    pairs: tuple[EventPair, ...]
    real_completion_s: float | None
    sim_completion_s: float | None
    real_summary: dict[str, Any] = field(default_factory=dict)
    sim_summary: dict[str, Any] = field(default_factory=dict)

    @property
    def events_matched(self) -> int:
        """Events with a partner on both sides."""
        return sum(1 for p in self.pairs if p.matched)

    @property
    def completion_time_rel_error(self) -> float | None:
        """``|sim - real| / real`` of the completion time."""
        if not self.real_completion_s or self.sim_completion_s is None:
            return None
        return abs(self.sim_completion_s - self.real_completion_s) / self.real_completion_s

    @property
    def median_pause_rel_error(self) -> float | None:
        """Median over matched events with a measured pause of the relative pause error."""
        errors = [p.rel_error for p in self.pairs if p.rel_error is not None]
        return statistics.median(errors) if errors else None

    def component_errors(self) -> dict[str, float | None]:
        """Median absolute error per pause component over matched events (seconds)."""
        out: dict[str, float | None] = {}
        for name in PAUSE_COMPONENTS:
            diffs = [
                dict(p.sim_components).get(name, 0.0) - dict(p.real_components).get(name, 0.0)
                for p in self.pairs
                if p.matched and p.real_components
            ]
            out[name] = statistics.median(diffs) if diffs else None
        return out

    def to_json(self) -> dict[str, Any]:
        """``compare.json``."""

        def count(summary: dict[str, Any], key: str) -> Any:
            return summary.get(key)

        return {
            "completion_time_rel_error": self.completion_time_rel_error,
            "median_pause_rel_error": self.median_pause_rel_error,
            "events_matched": self.events_matched,
            "events_real": sum(1 for p in self.pairs if p.real_time_s is not None),
            "events_sim": sum(1 for p in self.pairs if p.sim_time_s is not None),
            "real_completion_s": self.real_completion_s,
            "sim_completion_s": self.sim_completion_s,
            "median_component_error_s": self.component_errors(),
            "steps": {
                "real": count(self.real_summary, "steps"),
                "sim": count(self.sim_summary, "steps"),
            },
            "lost_work_h": {
                "real": count(self.real_summary, "lost_work_h"),
                "sim": count(self.sim_summary, "lost_work_h"),
            },
            "rescales": {
                "real": count(self.real_summary, "rescales"),
                "sim": count(self.sim_summary, "rescales"),
            },
            "events": [
                {
                    "kind": p.kind,
                    "nodes_before": p.nodes_before,
                    "nodes_after": p.nodes_after,
                    "real_time_s": p.real_time_s,
                    "sim_time_s": p.sim_time_s,
                    "real_pause_s": p.real_pause_s,
                    "sim_pause_s": p.sim_pause_s,
                    "abs_error_s": p.abs_error_s,
                    "rel_error": p.rel_error,
                }
                for p in self.pairs
            ],
        }


def _rows(frame: pd.DataFrame, time_column: str) -> list[dict[str, Any]]:
    keep = frame[frame["kind"].isin(MATCHED_KINDS)].sort_values(time_column, kind="stable")
    rows = []
    for row in keep.to_dict(orient="records"):
        rows.append(
            {
                "kind": str(row["kind"]),
                "before": int(row["nodes_before"]),
                "after": int(row["nodes_after"]),
                "time": float(row[time_column]),
                "pause": float(row["pause_s"]),
                "components": tuple(
                    (name, float(row[name])) for name in PAUSE_COMPONENTS if name in row
                ),
            }
        )
    return rows


def compare_frames(
    real_events: pd.DataFrame,
    sim_events: pd.DataFrame,
    *,
    real_time_column: str = "real_time_s",
    sim_time_column: str = "time_s",
    window_s: float = math.inf,
) -> list[EventPair]:
    """Match events of a measured run and a simulation (see the module docstring)."""
    if real_time_column not in real_events:
        real_time_column = "time_s"
    real = _rows(real_events, real_time_column)
    sim = _rows(sim_events, sim_time_column)
    used = [False] * len(sim)
    pairs: list[EventPair] = []
    start = 0
    for event in real:
        partner = None
        for j in range(start, len(sim)):
            candidate = sim[j]
            if used[j]:
                continue
            if (candidate["kind"], candidate["before"], candidate["after"]) != (
                event["kind"],
                event["before"],
                event["after"],
            ):
                continue
            if abs(candidate["time"] - event["time"]) > window_s:
                continue
            partner = j
            break
        if partner is None:
            pairs.append(
                EventPair(
                    event["kind"],
                    event["before"],
                    event["after"],
                    event["time"],
                    None,
                    event["pause"],
                    None,
                    event["components"],
                    (),
                )
            )
            continue
        used[partner] = True
        start = partner + 1
        other = sim[partner]
        pairs.append(
            EventPair(
                event["kind"],
                event["before"],
                event["after"],
                event["time"],
                other["time"],
                event["pause"],
                other["pause"],
                event["components"],
                other["components"],
            )
        )
    for j, other in enumerate(sim):
        if not used[j]:
            pairs.append(
                EventPair(
                    other["kind"],
                    other["before"],
                    other["after"],
                    None,
                    other["time"],
                    None,
                    other["pause"],
                    (),
                    other["components"],
                )
            )
    return pairs


def _completion_s(summary: dict[str, Any]) -> float | None:
    hours = summary.get("completion_time_h")
    return None if hours is None else float(hours) * 3600.0


def compare_runs(
    real_dir: str | Path,
    sim_dir: str | Path,
    *,
    time_scale: float | None = None,
    window_s: float | None = None,
) -> CompareResult:
    """Compare a measured run directory with a simulation directory.

    The measured run's completion is its ``completion_time_h`` (trace time) divided by
    the time scale, i.e. real seconds; the simulation's is its ``completion_time_h``
    (already real seconds when it was simulated on the scaled trace).
    """
    real_dir, sim_dir = Path(real_dir), Path(sim_dir)
    real_summary = json.loads((real_dir / "summary.json").read_text())
    sim_summary = json.loads((sim_dir / "summary.json").read_text())
    real_events = pd.read_parquet(real_dir / "events.parquet")
    sim_events = pd.read_parquet(sim_dir / "events.parquet")
    scale = time_scale or float(real_summary.get("time_scale", 1.0) or 1.0)
    real_completion = _completion_s(real_summary)
    if real_completion is not None:
        real_completion /= scale
    sim_completion = _completion_s(sim_summary)
    if window_s is None:
        span = max(real_completion or 0.0, sim_completion or 0.0, 1.0)
        window_s = max(0.2 * span, 5.0)
    pairs = compare_frames(real_events, sim_events, window_s=window_s)
    return CompareResult(
        pairs=tuple(pairs),
        real_completion_s=real_completion,
        sim_completion_s=sim_completion,
        real_summary=real_summary,
        sim_summary=sim_summary,
    )


def plot_compare(
    result: CompareResult,
    real_timeline: pd.DataFrame | None,
    sim_timeline: pd.DataFrame | None,
    path: str | Path,
    *,
    real_time_column: str = "real_time_s",
) -> Path:
    """Measured and simulated timelines stacked, and a sim-vs-real pause scatter."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from elasim.output import atomic_write

    fig = plt.figure(figsize=(12, 7), dpi=110)
    grid = fig.add_gridspec(2, 2, width_ratios=(2.2, 1))
    ax_real = fig.add_subplot(grid[0, 0])
    ax_sim = fig.add_subplot(grid[1, 0], sharex=ax_real)
    ax_pause = fig.add_subplot(grid[:, 1])
    for ax, frame, label, column in (
        (ax_real, real_timeline, "measured", real_time_column),
        (ax_sim, sim_timeline, "simulated", "time_s"),
    ):
        if frame is not None and len(frame):
            col = column if column in frame else "time_s"
            held = frame["world_size"] if "world_size" in frame else frame["nodes_held"]
            ax.step(frame[col], held, where="post", label=f"{label}: workers", color="tab:blue")
            if "spot_available" in frame:
                ax.step(
                    frame[col],
                    frame["spot_available"],
                    where="post",
                    color="0.6",
                    label="available",
                )
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
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)


def summarize_pairs(pairs: Sequence[EventPair]) -> pd.DataFrame:
    """The matched events as a table (for notebooks and the CLI)."""
    return pd.DataFrame(
        [
            {
                "kind": p.kind,
                "nodes": f"{p.nodes_before}->{p.nodes_after}",
                "real_time_s": p.real_time_s,
                "sim_time_s": p.sim_time_s,
                "real_pause_s": p.real_pause_s,
                "sim_pause_s": p.sim_pause_s,
                "abs_error_s": p.abs_error_s,
                "rel_error": p.rel_error,
            }
            for p in pairs
        ]
    )
