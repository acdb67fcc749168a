"""Writing results: ``summary.json``, ``events.parquet``, ``timeline.parquet``, plots.

The simulator and the executor write through these functions so their outputs share
one schema (the columns are :data:`elasim.policies.EVENT_COLUMNS`).  Every file is
written atomically (temporary file, fsync, rename; :func:`elasim.atomic.atomic_write`,
re-exported here): an interrupted run never leaves a half-written result next to good
ones, and a new file gets the permissions the umask allows, as any other file.  No
simpy, no torch here; pandas only inside the functions that build frames, since
``json_ready`` serves every ``--json`` answer and importing pandas was a third of a
short ``elasim simulate`` (issue 23).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elasim.atomic import atomic_write
from elasim.policies import EVENT_COLUMNS, EventKind, EventRecord

if TYPE_CHECKING:  # pandas (and pyarrow) load only where a frame is built or written:
    import pandas as pd  # a simulation that prints its summary needs neither

__all__ = [
    "atomic_write",
    "events_frame",
    "json_ready",
    "plot_timeline",
    "timeline_figure",
    "write_json",
    "write_parquet",
]


def json_ready(value: Any) -> Any:
    """Replace NaN/inf by None and numpy scalars by Python ones, recursively."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: str | Path, data: Mapping[str, Any]) -> Path:
    """Atomically write ``data`` as pretty, key-ordered JSON (stable bytes)."""
    text = json.dumps(json_ready(data), indent=2, sort_keys=False) + "\n"
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_parquet(path: str | Path, frame: pd.DataFrame) -> Path:
    """Atomically write a DataFrame as parquet (pyarrow)."""
    return atomic_write(path, lambda tmp: frame.to_parquet(tmp, engine="pyarrow", index=False))


def events_frame(
    events: Iterable[EventRecord], extra: Mapping[str, Sequence[Any]] | None = None
) -> pd.DataFrame:
    """Events as a DataFrame with the shared columns (and optional extra columns)."""
    import pandas as pd

    rows = [event.as_row() for event in events]
    frame = pd.DataFrame(rows, columns=list(EVENT_COLUMNS))
    frame = frame.astype(
        {
            "time_s": "float64",
            "kind": "string",
            "nodes_before": "int64",
            "nodes_after": "int64",
            "pause_s": "float64",
            "lost_work_h": "float64",
            "lost_samples": "float64",
            "lost_steps": "int64",
        }
    )
    for column, values in (extra or {}).items():
        frame[column] = list(values)
    return frame


def plot_timeline(
    path: str | Path,
    timeline: pd.DataFrame,
    events: pd.DataFrame,
    *,
    title: str = "",
    time_column: str = "time_s",
    deadline_s: float | None = None,
    policy: str | None = None,
) -> Path:
    """Write :func:`timeline_figure` as a PNG (atomically); the arguments are its own.

    Args:
        path: PNG to write.
        timeline: needs ``time_s``, ``spot_available``, ``nodes_held``, ``progress``.
        events: ``events.parquet`` rows.
        title: figure title.
        time_column: column of ``timeline`` / ``events`` holding seconds.
        deadline_s: the job's deadline, seconds after its start (a dashed line).
        policy: the policy's name, for its colour (:mod:`elasim.palette`).
    """
    fig = timeline_figure(
        timeline,
        events,
        title=title,
        time_column=time_column,
        deadline_s=deadline_s,
        policy=policy,
    )

    def save(tmp: Path) -> None:
        fig.savefig(tmp, format="png")

    return atomic_write(path, save)


def timeline_figure(
    timeline: pd.DataFrame,
    events: pd.DataFrame,
    *,
    title: str = "",
    time_column: str = "time_s",
    deadline_s: float | None = None,
    policy: str | None = None,
) -> Any:
    """Availability vs nodes held vs progress, with preemptions and rescales marked.

    Why a figure apart from :func:`plot_timeline`: tests read its artists (ticks,
    lines, the legend's place) rather than pixels.  Built without pyplot, so no
    global figure is left open.  What a reader must be able to trust: the node axis
    counts whole nodes; the deadline, when there is one, is a line; the legend sits
    below the axes, so it hides no marker; the policy wears the colour it has in
    every other plot (grey and black are for what is not the policy's).
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from elasim.palette import policy_color

    fig = Figure(figsize=(11, 5.2), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    color = policy_color(policy) if policy else "black"
    handles = _draw_timeline(ax, timeline, time_column, color) if len(timeline) else []
    if len(events):
        _mark_events(ax, events, time_column)
    if deadline_s is not None:
        hours = deadline_s / 3600.0
        ax.axvline(hours, color="black", ls="--", lw=1.2, label=f"deadline ({hours:g} h)")
    ax.set_xlabel("time (h)")
    ax.set_ylabel("nodes")
    ax.margins(y=0.08)  # a marker at the top count clears the frame
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # no 0.25 of a node
    ax.set_title(title)
    entries = ax.get_legend_handles_labels()[0] + handles
    if entries:
        fig.legend(handles=entries, loc="outside lower center", ncol=5, fontsize=8, frameon=False)
    return fig


#: How :func:`plot_timeline` marks each event kind: colour, marker, legend label
#: (neutral colours: a policy's colour means the policy).
_EVENT_MARKS: dict[str, tuple[str, str, str]] = {
    EventKind.PREEMPT.value: ("black", "x", "preemption"),
    EventKind.SCALE_UP.value: ("0.35", "^", "scale up"),
    EventKind.SCALE_DOWN.value: ("0.35", "v", "scale down"),
    EventKind.RESUME.value: ("0.35", ">", "resume"),
}


def _draw_timeline(ax: Any, timeline: pd.DataFrame, time_column: str, color: Any) -> list[Any]:
    """Availability and nodes held on ``ax``, progress on a twin axis (its handles)."""
    hours = timeline[time_column].to_numpy() / 3600.0
    ax.fill_between(
        hours, timeline["spot_available"], step="post", color="0.87", label="spot available"
    )
    ax.step(hours, timeline["nodes_held"], where="post", color=color, lw=1.6, label="nodes held")
    if "on_demand_held" in timeline and timeline["on_demand_held"].any():
        ax.fill_between(
            hours,
            timeline["on_demand_held"],
            step="post",
            color=color,
            alpha=0.3,
            lw=0,
            label="on-demand held",
        )
    _shade_restarts(ax, hours, timeline)
    ax2 = ax.twinx()
    ax2.plot(
        hours,
        100.0 * timeline["progress"].to_numpy(),
        color="0.45",
        ls="-.",
        lw=1.3,
        label="progress (%)",
    )
    ax2.set_ylabel("progress (%)")
    ax2.set_ylim(0, 105)
    return ax2.get_legend_handles_labels()[0]


def _shade_restarts(ax: Any, hours: Any, timeline: pd.DataFrame) -> None:
    """Shade the stretches the job spent rescaling (a real run's cold starts included).

    Why: nodes held are paid for from the start of a restart, but no step is done until
    its workers are up; without the shade that time looks like training.
    """
    if "state" not in timeline or not len(hours):
        return
    states = timeline["state"].to_numpy()
    label = "restarting"
    for i, state in enumerate(states):
        if state != "rescaling":
            continue
        end = hours[i + 1] if i + 1 < len(hours) else hours[i]
        if end > hours[i]:
            ax.axvspan(hours[i], end, color="tab:purple", alpha=0.12, lw=0, label=label)
            label = "_nolegend_"


def _mark_events(ax: Any, events: pd.DataFrame, time_column: str) -> None:
    """One marker per membership event, at the node count it left."""
    for kind, (color, marker, label) in _EVENT_MARKS.items():
        rows = events[events["kind"] == kind]
        if len(rows):
            ax.scatter(
                rows[time_column] / 3600.0,
                rows["nodes_after"],
                color=color,
                marker=marker,
                s=28,
                zorder=5,
                label=label,
            )
