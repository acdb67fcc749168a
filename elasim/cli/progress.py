"""Showing the library's progress records (:mod:`elasim.progress`) in the CLI.

One mechanism for every command: progress is ``INFO`` records on the
``elasim.progress`` logger, each with ``(done, total)``; a handler here shows them as
a rich bar on a terminal and as plain lines on stderr otherwise, so that a piped or CI
run is not silent for minutes and ``--json`` keeps stdout to its result.

* :func:`show_progress` (``simulate``): the command's own steps and the library's long
  calls (the optimum, the yardstick).  Nothing for what finishes within
  :data:`QUIET_S`, most answers come in milliseconds; then a bar when stdout is a
  terminal, else a line at most once a second.  A step still under way when the
  quiet time ends is shown then, not at its next record: a step of minutes that
  reports rarely (one long pass of a large optimum) is not silent (issue 23:
  anything longer than 2 s shows progress).
* :func:`counted_progress` (``sweep``, ``cluster sweep``): a count of finished grid
  points.  A bar at once when stderr is a terminal; else a line every
  :data:`LINE_EVERY_S` seconds (done/total, elapsed, an estimate of the time left),
  and a last one when it ends, if it ran that long.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from elasim.progress import PROGRESS_LOGGER, report

__all__ = [
    "LINE_EVERY_S",
    "QUIET_S",
    "counted_progress",
    "duration",
    "progress_line",
    "show_progress",
]

#: Seconds after the command starts during which progress stays quiet.
QUIET_S = 2.0
#: Seconds between two plain progress lines of a sweep (not a terminal).
LINE_EVERY_S = 5.0


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 20 s``: a time as a user reads it."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


def progress_line(what: str, done: int, total: int, elapsed_s: float) -> str:
    """``simulating: 12/40 done, elapsed 10 s, about 23 s left``: one plain line.

    The estimate assumes the remaining items take as long as the finished ones did,
    so it comes once one has finished and not at the end.
    """
    if done <= 0:
        return f"{what}: {done}/{total}, elapsed {duration(elapsed_s)}"
    line = f"{what}: {done}/{total} done, elapsed {duration(elapsed_s)}"
    if done < total:
        line += f", about {duration(elapsed_s * (total - done) / done)} left"
    return line


class _Handler(logging.Handler):
    """Turns progress records into a bar (terminal) or plain lines (not a terminal).

    Each ``what`` is timed from its first record: its line's elapsed time and
    estimate are its own, not the command's (the yardstick's optimum starts seconds
    into a run).  The last record of every ``what`` still under way when the quiet
    time ends is shown then (a timer), so a long step is seen even between records.

    Args:
        console: where to show them (stderr).
        terminal: a bar if true, else lines.
        quiet_s: nothing is shown this long after the handler starts.
        every_s: at least this long between two lines of one ``what`` (its last one
            always comes).
        only: show only the records of this ``what`` (a sweep's count; the yardstick
            and optimum of its grid points log too, on the same logger).
    """

    def __init__(
        self,
        console: Any,
        terminal: bool,
        *,
        quiet_s: float = QUIET_S,
        every_s: float = 1.0,
        only: str | None = None,
    ) -> None:
        super().__init__(logging.INFO)
        self.console, self.terminal = console, terminal
        self.quiet_s, self.every_s, self.only = quiet_s, every_s, only
        self.started = time.monotonic()
        self.last_line: dict[str, float] = {}  # when each what's last line came
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        self.begun: dict[str, float] = {}  # when each unfinished what began
        self.pending: dict[str, tuple[int, int]] = {}  # its last record, while quiet
        self.timer: threading.Timer | None = None
        if quiet_s > 0:
            self.timer = threading.Timer(quiet_s, self._wake)
            self.timer.daemon = True
            self.timer.start()

    def emit(self, record: logging.LogRecord) -> None:
        progress = getattr(record, "progress", None)
        if progress is None:
            return
        done, total = progress
        what = str(record.args[0]) if isinstance(record.args, tuple) and record.args else ""
        if self.only is not None and what != self.only:
            return
        now = time.monotonic()
        self.begun.setdefault(what, now)
        if now - self.started < self.quiet_s:
            self.pending[what] = (done, total)
            if done >= total:  # done within the quiet time: never shown
                del self.pending[what], self.begun[what]
            return
        self._show(what, done, total, now)

    def _wake(self) -> None:
        """The quiet time is over: show what is still under way (the timer's thread)."""
        self.acquire()
        try:
            now = time.monotonic()
            for what, (done, total) in list(self.pending.items()):
                self._show(what, done, total, now)
            self.pending.clear()
        finally:
            self.release()

    def _show(self, what: str, done: int, total: int, now: float) -> None:
        """``what`` at ``done`` of ``total``: a bar, or a line (at most every ``every_s``)."""
        if not self.terminal:
            if now - self.last_line.get(what, -float("inf")) >= self.every_s or done >= total:
                elapsed = now - self.begun.get(what, now)
                line = progress_line(what, done, total, elapsed)
                self.console.print(line, highlight=False, soft_wrap=True)
                self.last_line[what] = now
        else:
            self._draw(what, done, total)
        if done >= total:
            self.begun.pop(what, None)

    def _draw(self, what: str, done: int, total: int) -> None:
        """The bar of ``what`` at ``done`` of ``total`` (gone when it is done)."""
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            columns = ("{task.description}", BarColumn(), MofNCompleteColumn())
            self.bar = Progress(*columns, TimeElapsedColumn(), console=self.console, transient=True)
            self.bar.start()
        if what not in self.tasks:
            self.tasks[what] = self.bar.add_task(what, total=total)
        self.bar.update(self.tasks[what], completed=done, total=total)
        if done >= total:  # finished: its bar goes, and the bar with the last one
            self.bar.remove_task(self.tasks.pop(what))
            if not self.tasks:
                self.bar.stop()
                self.bar = None

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        super().close()


@contextmanager
def show_progress(err_console: Any, out_console: Any) -> Iterator[None]:
    """Show progress records while the block runs (see the module).

    The quiet time, :data:`QUIET_S`, is read when called.  A handler an earlier call
    left is replaced, so no record is shown twice; the handler goes when the block
    ends, its timer with it, so nothing is shown after the command's own output.
    """
    for old in [h for h in PROGRESS_LOGGER.handlers if isinstance(h, _Handler)]:
        PROGRESS_LOGGER.removeHandler(old)
        old.close()
    handler = _Handler(err_console, terminal=out_console.is_terminal, quiet_s=QUIET_S)
    PROGRESS_LOGGER.addHandler(handler)
    PROGRESS_LOGGER.setLevel(logging.INFO)
    try:
        yield
    finally:
        PROGRESS_LOGGER.removeHandler(handler)
        handler.close()


@contextmanager
def counted_progress(
    console: Any, what: str, total: int, *, every_s: float | None = None
) -> Iterator[Callable[[], None]]:
    """Count finished items of ``what`` while the block runs; yields ``tick()``, one per item.

    Each tick is a progress record (:func:`elasim.progress.report`), shown by the
    same handler as :func:`show_progress`'s: a bar when ``console`` (stderr) is a
    terminal, else a plain line every ``every_s`` seconds (default
    :data:`LINE_EVERY_S`, read when called).  The handler goes when the block ends.
    """
    every_s = LINE_EVERY_S if every_s is None else every_s
    terminal = bool(console.is_terminal)
    handler = _Handler(
        console, terminal, quiet_s=0.0 if terminal else every_s, every_s=every_s, only=what
    )
    # a handler show_progress left (tests run commands in one process) steps aside
    others = [h for h in PROGRESS_LOGGER.handlers if isinstance(h, _Handler)]
    for other in others:
        PROGRESS_LOGGER.removeHandler(other)
    PROGRESS_LOGGER.addHandler(handler)
    PROGRESS_LOGGER.setLevel(logging.INFO)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        report(what, done, total)

    try:
        report(what, 0, total)
        yield tick
    finally:
        PROGRESS_LOGGER.removeHandler(handler)
        handler.close()
        for other in others:
            PROGRESS_LOGGER.addHandler(other)
