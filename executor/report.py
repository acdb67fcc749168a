"""``step_done()`` and ``batch_plan()``: the optional lines a torchrun script adds for elasim.

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

A cluster policy may also change a job's global batch.  A script learns its batch
at every (re)start, the only time it changes (a script restarts at every
re-formation), with::

    from elasim.executor import batch_plan

    plan = batch_plan(default=64)          # BatchPlan(global_batch, lr_gain)
    lr = base_lr * plan.lr_gain            # AdaScale's gain, as elasim's own workers use

Outside elasim it returns ``default`` and a gain of 1.  elasim's own workers get the
same two numbers with each generation (:meth:`.group.ProcessWorkerGroup.set_batch`;
:meth:`.script.ScriptWorkerGroup.set_batch` is the same call for a script).

Why a module of its own: it imports only the standard library (no torch, no numpy),
so ``from elasim.executor import step_done`` costs nothing in a user's script.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from typing import IO

__all__ = ["BATCH_ENV", "GAIN_ENV", "STEP_FILE_ENV", "BatchPlan", "batch_plan", "step_done"]

#: The environment variable naming the file rank 0's step reports are appended to.
STEP_FILE_ENV = "ELASIM_STEP_FILE"
#: The global batch of the world being started (set only when a policy chose one).
BATCH_ENV = "ELASIM_GLOBAL_BATCH"
#: The AdaScale gain that goes with it (the learning rate's factor).
GAIN_ENV = "ELASIM_LR_GAIN"


@dataclass(frozen=True)
class BatchPlan:
    """The global batch a script trains with in this world, and its learning-rate gain.

    Attributes:
        global_batch: samples per optimizer step across all ranks.
        lr_gain: AdaScale's gain at that batch: multiply the base learning rate by it.
    """

    global_batch: int
    lr_gain: float = 1.0


def batch_plan(default: int) -> BatchPlan:
    """The batch elasim chose for this world (``default`` and gain 1 when none was).

    Args:
        default: the script's own global batch.
    """
    batch = os.environ.get(BATCH_ENV)
    gain = os.environ.get(GAIN_ENV)
    return BatchPlan(int(batch) if batch else int(default), float(gain) if gain else 1.0)


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
