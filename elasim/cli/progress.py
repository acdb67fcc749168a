"""Showing the library's progress records (:mod:`elasim.progress`) in the CLI.

Nothing is shown for calls that finish within :data:`QUIET_S`: most answers come in
milliseconds and need no bar.  After that, a rich progress bar on stderr when stdout
is a terminal, else plain lines on stderr (at most one a second), so that ``--json``
keeps stdout to its one object.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from elasim.progress import PROGRESS_LOGGER

__all__ = ["QUIET_S", "show_progress"]

#: Seconds after the command starts during which progress stays quiet.
QUIET_S = 2.0


class _Handler(logging.Handler):
    """Turns progress records into a bar (terminal) or plain lines (not a terminal)."""

    def __init__(self, console: Any, terminal: bool) -> None:
        super().__init__(logging.INFO)
        self.console, self.terminal = console, terminal
        self.started = time.monotonic()
        self.last_line = -1.0
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}

    def emit(self, record: logging.LogRecord) -> None:
        progress = getattr(record, "progress", None)
        now = time.monotonic()
        if progress is None or now - self.started < QUIET_S:
            return
        done, total = progress
        what = str(record.args[0]) if isinstance(record.args, tuple) and record.args else ""
        if not self.terminal:
            if now - self.last_line >= 1.0 or done >= total:
                self.console.print(record.getMessage(), highlight=False, soft_wrap=True)
                self.last_line = now
            return
        if self.bar is None:
            from rich.progress import Progress

            self.bar = Progress(console=self.console, transient=True)
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
        if self.bar is not None:
            self.bar.stop()
        super().close()


def show_progress(err_console: Any, out_console: Any) -> None:
    """Show progress records from now on, until the process ends (see the module)."""
    import atexit

    handler = _Handler(err_console, terminal=out_console.is_terminal)
    PROGRESS_LOGGER.addHandler(handler)
    PROGRESS_LOGGER.setLevel(logging.INFO)
    atexit.register(handler.close)
