"""What ``elasim run`` shows while it runs and when it ends.

Why a module apart from :mod:`.run`: the command checks flags and drives the run;
this module only displays.  Progress is a live line on a terminal and plain log
lines otherwise (a run piped to a file used to show nothing for a minute); the
summary table shows labels, ``-`` for what was not measured and yes/no, not
``None``, ``True`` or raw keys; and the list of files is read from the folder the
run wrote, not kept by hand (it had missed ``timeline.parquet``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["LiveProgress", "LogProgress", "SUMMARY_ROWS", "cell", "summary_table", "written"]

#: The summary's rows: key, label (units named; hours are trace hours).
SUMMARY_ROWS: tuple[tuple[str, str], ...] = (
    ("completed", "finished"),
    ("completion_time_h", "completion time (trace h)"),
    ("cost_usd", "cost (USD)"),
    ("spot_node_hours", "spot node-hours"),
    ("on_demand_node_hours", "on-demand node-hours"),
    ("mean_nodes", "mean nodes held"),
    ("rescales", "rescales"),
    ("preemptions", "preemptions"),
    ("checkpoints", "checkpoints"),
    ("lost_steps", "lost steps"),
    ("lost_work_h", "lost work (trace h)"),
    ("rescale_overhead_h", "rescale overhead (trace h)"),
    ("median_pause_s", "median pause (real s)"),
    ("max_pause_s", "longest pause (real s)"),
    ("steps", "steps"),
    ("final_loss", "final loss"),
    ("final_accuracy", "final accuracy"),
    ("target_accuracy", "target accuracy"),
    ("wall_time_s", "training loop (real s)"),
    ("command_wall_time_s", "whole command (real s)"),
)


def cell(value: Any) -> str:
    """A summary value as a person reads it: ``-`` for none, yes/no, 4 digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def summary_table(summary: dict[str, Any]) -> Any:
    """The run's summary as a two-column rich table of labelled rows."""
    from rich.table import Table

    table = Table(title="elasim run (hours are trace hours)", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, label in SUMMARY_ROWS:
        if key in summary:
            table.add_row(label, cell(summary[key]))
    return table


def written(out: Path) -> str:
    """Every file the run left in ``out``: its files by name, each folder with a count.

    Why read from the folder: a hand-kept list goes stale (it had missed
    ``timeline.parquet`` and ``run.json``).
    """
    parts = []
    for path in sorted(Path(out).iterdir()):
        if path.is_dir():
            count = sum(1 for p in path.rglob("*") if p.is_file())
            parts.append(f"{path.name}/ ({count} file{'s' if count != 1 else ''})")
        else:
            parts.append(path.name)
    return f"wrote {out}/: " + ", ".join(parts)


def _status(controller: Any, max_steps: int) -> tuple[str, int]:
    """One line of progress, and the world size it shows."""
    progress = controller.group.progress()
    spot, od = controller.group.held()
    loss = "-" if math.isnan(progress.loss) else f"{progress.loss:.4f}"
    pause = getattr(controller, "last_pause_s", None)
    pause_text = "-" if pause is None else f"{pause * 1000:.0f} ms"
    hours = controller.now_s() / 3600.0
    line = (
        f"step {progress.step}/{max_steps} | trace {hours:.2f} h | available "
        f"{controller.available} | world {spot + od} ({spot} spot, {od} on-demand) | "
        f"loss {loss} | last pause {pause_text}"
    )
    return line, spot + od


class LogProgress:
    """Progress as plain lines, for output that is not a terminal (a file, a pipe).

    A line at the first turn, then every ``every_real_s`` seconds and whenever the
    world size changes; no terminal codes.  ``write`` takes one line (the CLI's
    stderr), ``clock`` returns real seconds (injected by tests).
    """

    def __init__(
        self,
        max_steps: int,
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        every_real_s: float = 5.0,
    ) -> None:
        self.max_steps = max_steps
        self.write = write
        self.clock = clock
        self.every_real_s = every_real_s
        self._last_s: float | None = None
        self._world: int | None = None

    def __call__(self, controller: Any) -> None:
        """Called after each turn of the controller's loop: write a line when due."""
        now = self.clock()
        line, world = _status(controller, self.max_steps)
        due = self._last_s is None or now - self._last_s >= self.every_real_s
        if due or world != self._world:
            self.write(f"elasim run: {line}")
            self._last_s, self._world = now, world


class LiveProgress:
    """A one-line live status on a terminal (rich), refreshed at most 8 times a second."""

    def __init__(self, max_steps: int) -> None:
        from rich.console import Console
        from rich.live import Live

        self.max_steps = max_steps
        self.live = Live(console=Console(stderr=True), refresh_per_second=8, transient=False)
        self._last = 0.0

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def __call__(self, controller: Any) -> None:
        """Called after each turn of the controller's loop: refresh the line."""
        now = time.monotonic()
        if now - self._last < 0.125:
            return
        self._last = now
        from rich.text import Text

        line, _ = _status(controller, self.max_steps)
        self.live.update(Text(line))
