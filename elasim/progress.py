"""Progress of long library calls, as log records for whoever wants to show them.

Library code never prints.  A call that may take seconds (the offline optimum, the
deadline yardstick) logs ``INFO`` records on the ``elasim.progress`` logger, each with
``extra={"progress": (done, total)}``.  The logger does not propagate, and nothing is
shown unless someone attaches a handler: the CLI shows them as a progress bar on a
terminal and as plain lines otherwise (:mod:`elasim.cli.progress`); a library user
may attach any handler.
"""

from __future__ import annotations

import logging

__all__ = ["PROGRESS_LOGGER", "report"]

#: The logger progress records go to (not propagated to the root logger).
PROGRESS_LOGGER = logging.getLogger("elasim.progress")
PROGRESS_LOGGER.propagate = False


def report(what: str, done: int, total: int) -> None:
    """One progress record: ``done`` of about ``total`` steps of ``what``."""
    if PROGRESS_LOGGER.isEnabledFor(logging.INFO):
        PROGRESS_LOGGER.info(
            "%s: %d of about %d", what, done, total, extra={"progress": (done, total)}
        )
