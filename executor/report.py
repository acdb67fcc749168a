"""``step_done()``: the one optional line a user's torchrun script adds for elasim.

``elasim run --script train.py`` starts an unmodified ``torchrun`` script and must see
its steps from the outside: each pause is measured from the moment the processes are
started to the script's first completed step, and ``steps.parquet`` is written from
the steps the script reports.  A script reports a step by calling::

    from elasim.executor import step_done

    step_done(step, loss=loss.item(), samples=global_batch)

on every rank after each optimizer step.  Outside elasim (under plain ``torchrun``,
or on the ranks elasim does not listen to) it does nothing, so the script runs
unchanged everywhere.

Why it reads an environment variable, which library code otherwise never does: this
is worker-side code running *inside the user's process*, which elasim reaches only
through the environment it started the process with (as torchrun reaches it through
``RANK`` and ``MASTER_PORT``).  elasim sets :data:`STEP_FILE_ENV` for rank 0 only, to a
file of its own; each call appends one JSON line with the wall-clock time.

Why a module of its own: it imports only the standard library (no torch, no numpy),
so ``from elasim.executor import step_done`` costs nothing in a user's script.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import IO

__all__ = ["STEP_FILE_ENV", "step_done"]

#: The environment variable naming the file rank 0's step reports are appended to.
STEP_FILE_ENV = "ELASIM_STEP_FILE"

_handle: IO[str] | None = None
_handle_path: str | None = None


def step_done(
    step: int | None = None, *, loss: float | None = None, samples: int | None = None
) -> None:
    """Report one completed optimizer step to elasim (a no-op outside elasim).

    Args:
        step: the step number after this step (1-based), as the script counts it.
            With it, elasim sees where the script resumed after a restart, and so the
            work a restart threw away; without it, elasim counts the calls and cannot
            tell (it reports no lost steps).
        loss: the step's training loss (``steps.parquet``; NaN when not given).
        samples: samples in the step's global batch (elasim's throughput estimates;
            without it, the run's ``global_batch`` default stands in).
    """
    global _handle, _handle_path
    path = os.environ.get(STEP_FILE_ENV)
    if not path:
        return
    if _handle is None or _handle_path != path:
        _handle = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - kept open
        _handle_path = path
    record = {
        "wall_s": time.time(),
        "step": None if step is None else int(step),
        "loss": None if loss is None or not math.isfinite(float(loss)) else float(loss),
        "samples": None if samples is None else int(samples),
    }
    _handle.write(json.dumps(record) + "\n")  # one write per line: the reader never splits it
