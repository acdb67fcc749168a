"""The run's journal: what happened, appended to ``--out`` while the run goes.

``write_run`` writes the Parquet files at the end.  A controller that is killed before
then would lose everything; the journal keeps what happened up to that point, flushed
a few times a second:

* ``events.partial.jsonl``, ``steps.partial.jsonl`` and ``timeline.partial.jsonl``
  (one JSON object per line, the columns of ``events.parquet``, ``steps.parquet``
  and ``timeline.parquet``);
* ``summary.partial.json``: the books so far (the shared summary fields, ``steps``,
  ``lost_steps``, ``wall_time_s`` and the segments), replaced atomically.

Times are *run* time: a segment resumed after a dead controller (:mod:`.resume`)
writes its rows shifted by ``offset_trace_s``, after the earlier segments' rows, so
``--resume`` can be repeated.  ``write_run`` removes the partial files once the
Parquet files are safely written.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["BOOKS_FILE", "PARTIAL_FILES", "RunJournal", "read_rows"]

#: The books so far (replaced at every flush).
BOOKS_FILE = "summary.partial.json"
#: What a killed run leaves behind (and a finished one removes).
PARTIAL_FILES = (
    "events.partial.jsonl",
    "steps.partial.jsonl",
    "timeline.partial.jsonl",
    BOOKS_FILE,
)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a partial file; a line cut short by a kill is left out."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # the last line of a writer killed mid-write
    return rows


class RunJournal:
    """Appends the controller's new events, steps and timeline rows (a turn hook).

    Args:
        out_dir: the run's output folder.
        every_s: least real time between two flushes.
        offset_trace_s: run time at which this segment started (0: a fresh run).
        books: ``(controller) -> dict``, the books so far (None: not written).
    """

    def __init__(
        self,
        out_dir: str | Path,
        every_s: float = 0.25,
        *,
        offset_trace_s: float = 0.0,
        books: Callable[[Any], Mapping[str, Any]] | None = None,
    ) -> None:
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.every_s = every_s
        self.offset_trace_s = offset_trace_s
        self.books = books
        self._events = 0
        self._steps = 0
        self._timeline = 0
        self._last = -float("inf")

    def __call__(self, controller: Any, *, force: bool = False) -> None:
        """Write what is new since the last call (at most every ``every_s``)."""
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        self._write_events(controller)
        self._write_steps(controller)
        rows = controller.loop.timeline
        if len(rows) > self._timeline:
            out = [row._asdict() for row in rows[self._timeline :]]
            for row in out:
                row["time_s"] += self.offset_trace_s
            self._append("timeline.partial.jsonl", out)
            self._timeline = len(rows)
        if self.books is not None:
            self._replace(BOOKS_FILE, json.dumps(dict(self.books(controller)), allow_nan=True))

    def _write_events(self, controller: Any) -> None:
        events = controller.loop.events
        if len(events) <= self._events:
            return
        measured = getattr(controller.actuator, "measured", {})
        scale = controller.config.time_scale
        rows = []
        for event in events[self._events :]:
            real_s, interval_s = measured.get(id(event), (event.time_s / scale, None))
            row = event.as_row()
            row["time_s"] += self.offset_trace_s
            row["real_time_s"] = real_s + self.offset_trace_s / scale
            row["interval_s"] = math.nan if interval_s is None else interval_s
            rows.append(row)
        self._append("events.partial.jsonl", rows)
        self._events = len(events)

    def _write_steps(self, controller: Any) -> None:
        records = getattr(controller.group, "step_records", None)
        if records is None:
            return
        steps = records()
        if len(steps) <= self._steps:
            return
        t0 = controller._t0  # noqa: SLF001 - the run's origin on the clock
        scale = controller.config.time_scale
        shift = self.offset_trace_s / scale
        rows = [
            {
                "time_s": r.real_s - t0 + shift,
                "trace_time_s": (r.real_s - t0 + shift) * scale,
                "step": r.step,
                "world_size": r.world_size,
                "loss": r.loss,
                "samples": r.samples,
                "gen": r.gen,
                "epoch": r.epoch,
                "samples_total": r.samples_total,
                "grad_sq_local": r.grad_sq_local,
                "grad_sq_global": r.grad_sq_global,
                "local_batch": r.local_batch,
            }
            for r in steps[self._steps :]
        ]
        self._append("steps.partial.jsonl", rows)
        self._steps = len(steps)

    def append_events(self, events: Any, real_s: float) -> None:
        """Append events that happened outside the loop (a resumed run's dead controller).

        ``events`` are in run time already; ``real_s`` is their run-time real second.
        """
        rows = [{**e.as_row(), "real_time_s": real_s, "interval_s": math.nan} for e in events]
        self._append("events.partial.jsonl", rows)

    def _append(self, name: str, rows: list[dict[str, Any]]) -> None:
        with open(self.out / name, "a", encoding="utf-8") as handle:
            handle.write("".join(json.dumps(row, allow_nan=True) + "\n" for row in rows))
            handle.flush()

    def _replace(self, name: str, text: str) -> None:
        """Temporary file and rename: a kill leaves the old books or the new, never half.

        No fsync: the journal guards against a dead process, not a dead machine, and
        four fsyncs a second would cost the run more than it protects.
        """
        tmp = self.out / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.out / name)

    def remove(self) -> None:
        """The Parquet files are written: the partial files are no longer needed."""
        for name in PARTIAL_FILES:
            (self.out / name).unlink(missing_ok=True)
