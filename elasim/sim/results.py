"""Turning a :class:`~elasim.sim.config.SimResult` into files.

pandas is imported when a result is written, not with the simulator: ``elasim
simulate`` without ``--out`` never needs it, and importing it was a third of that
whole process (issue 23: every run in <= 2 s).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import SimResult

if TYPE_CHECKING:  # pandas loads only when a result is written (or framed)
    import pandas as pd

__all__ = ["timeline_frame", "write_result"]


def timeline_frame(result: SimResult) -> pd.DataFrame:
    """The timeline as a DataFrame, with the executor's columns in the executor's order.

    ``step`` is 0: the fluid model has no steps.
    """
    import pandas as pd

    from elasim.jobmodel import TimelineRow

    columns = dict(result.timeline.as_columns())
    columns["step"] = (0,) * len(columns["time_s"])
    order = [*TimelineRow._fields, "nodes_held"]
    return pd.DataFrame({name: columns[name] for name in order})


def write_result(
    result: SimResult,
    out_dir: str | Path,
    *,
    plot: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``summary.json``, ``events.parquet``, ``timeline.parquet`` and ``timeline.png``.

    ``summary.json`` holds only deterministic figures, so the same inputs and seed
    give the same bytes; wall-clock measurements belong in the caller's run info.
    ``extra`` adds deterministic figures computed beside the run (the yardstick's
    ``cost_vs_on_demand`` and ``gap_closed``), before the inputs.
    """
    from elasim.output import events_frame, plot_timeline, write_json, write_parquet

    out = Path(out_dir)
    summary = result.summary()
    if extra:
        tail = {key: summary.pop(key) for key in ("simulator", "inputs")}
        summary.update(extra)
        summary.update(tail)
    events = events_frame(result.events)
    timeline = timeline_frame(result)
    paths = {
        "summary": write_json(out / "summary.json", summary),
        "events": write_parquet(out / "events.parquet", events),
        "timeline": write_parquet(out / "timeline.parquet", timeline),
    }
    if plot:
        spec = result.spec
        title = f"{spec.policy} on {spec.trace} ({dict(result.simulator).get('job_model', '')})"
        paths["plot"] = plot_timeline(
            out / "timeline.png",
            timeline,
            events,
            title=title,
            deadline_s=spec.deadline_s,
            policy=str(spec.policy),
        )
    return paths
