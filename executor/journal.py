"""The run's journal: events and steps appended to ``--out`` while the run goes.

``write_run`` writes the Parquet files at the end.  A controller that is killed before
then would lose everything; the journal keeps what happened up to that point in
``events.partial.jsonl`` and ``steps.partial.jsonl`` (one JSON object per line, the
columns of ``events.parquet`` and ``steps.parquet``), flushed a few times a second.
``write_run`` removes them once the Parquet files are safely written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

__all__ = ["PARTIAL_FILES", "RunJournal"]

#: What a killed run leaves behind (and a finished one removes).
PARTIAL_FILES = ("events.partial.jsonl", "steps.partial.jsonl")


class RunJournal:
    """Appends the controller's new events and the group's new steps (a turn hook).

    Args:
        out_dir: the run's output folder.
        every_s: least real time between two flushes.
    """

    def __init__(self, out_dir: str | Path, every_s: float = 0.25) -> None:
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.every_s = every_s
        self._events = 0
        self._steps = 0
        self._last = -float("inf")
        self._t0: float | None = None

    def __call__(self, controller: Any, *, force: bool = False) -> None:
        """Write what is new since the last call (at most every ``every_s``)."""
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        events = controller.loop.events
        if len(events) > self._events:
            rows = [event.as_row() for event in events[self._events :]]
            self._append("events.partial.jsonl", rows)
            self._events = len(events)
        records = getattr(controller.group, "step_records", None)
        if records is not None:
            steps = records()
            if len(steps) > self._steps:
                t0 = controller._t0  # noqa: SLF001 - the run's origin on the clock
                scale = controller.config.time_scale
                rows = [
                    {
                        "time_s": r.real_s - t0,
                        "trace_time_s": (r.real_s - t0) * scale,
                        "step": r.step,
                        "world_size": r.world_size,
                        "loss": r.loss,
                        "samples": r.samples,
                        "gen": r.gen,
                        "epoch": r.epoch,
                    }
                    for r in steps[self._steps :]
                ]
                self._append("steps.partial.jsonl", rows)
                self._steps = len(steps)

    def _append(self, name: str, rows: list[dict[str, Any]]) -> None:
        with open(self.out / name, "a", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, allow_nan=True) + "\n")
            handle.flush()

    def remove(self) -> None:
        """The Parquet files are written: the partial files are no longer needed."""
        for name in PARTIAL_FILES:
            (self.out / name).unlink(missing_ok=True)
