"""``write_run``: the files of a finished real run, in the simulator's schema.

Why a module apart from :mod:`.run`: running workers and writing what they did are
separate jobs.  :mod:`.run` drives processes and a controller to a
:class:`~.run.RunResult`; this module turns one into files (``elasim run``,
``elasim calibrate`` and ``elasim compare`` all write through it), with pandas and
the plotting code, which running does not need.

Outputs (:func:`write_run`), the simulator's files plus what only a real run has:

* ``summary.json``: the simulator's keys where they apply.  **Hour figures are in
  trace time** (real seconds x ``time_scale`` / 3600), so they compare with a
  simulation of the same trace; added are ``steps``, ``final_loss``,
  ``final_accuracy``, ``wall_time_s`` (real seconds of the training loop: from
  the first decision to the job's end, without starting torch and the workers or
  writing files) and the measured pause statistics; ``elasim run`` adds
  ``command_wall_time_s``, the whole command's real seconds (:func:`update_summary`).
* ``events.parquet``: the shared columns (:data:`elasim.policies.EVENT_COLUMNS`).
  ``time_s`` is trace seconds, but ``pause_s`` and its components (``detect_s``,
  ``acquire_s``, ``rendezvous_s``, ``state_s``, ``warmup_s``) are **real seconds**
  as measured, because a pause is a property of the machine, not of the trace (the
  calibration compares them with the simulator's pause model in real seconds).
  Extra columns: ``real_time_s`` (real seconds since the start), ``interval_s``
  (raw last-step-end-before to first-step-end-after, real seconds) and ``due_s``
  (trace seconds: the time of the trace item the event answered, earlier than
  ``time_s`` when the workers were busy restarting and it was carried out late).
* ``steps.parquet``: one row per committed step: ``time_s`` (real seconds since the
  start), ``trace_time_s``, ``step``, ``world_size``, ``loss``, ``samples``, ``gen``,
  ``epoch``, and the gradient noise scale (:func:`steps_frame`).  In ``restart``
  mode, steps rolled back and redone appear twice.
* ``workers.parquet``: one row per worker process: ``wid``, ``spawn_s`` and
  ``ready_s`` (real seconds since the start; negative for standbys started before
  it; NaN when it never became ready).  Profiles take the cold-start model from it.
* ``timeline.parquet`` / ``timeline.png``: availability, nodes held and progress over
  trace time, with preemptions and rescales marked.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .controller import TimelineRow
from .group import StepRecord
from .journal import RunJournal
from .run import RunResult

__all__ = ["steps_frame", "update_summary", "write_run"]


def steps_frame(steps: tuple[StepRecord, ...], time_scale: float) -> Any:
    """The ``steps.parquet`` table: one row per committed step.

    Besides time, size, loss and batch, each row carries the gradient noise scale
    measured in that step (:mod:`elasim.noise_scale`): the raw squared norms
    ``grad_sq_local`` and ``grad_sq_global`` with ``local_batch``, the step's
    unbiased estimates ``gns_grad_sq`` (``|G|^2``) and ``gns_noise_trace``
    (``tr(Sigma)``), and ``gns_b_noise``, the smoothed ``B_noise`` (samples) as of
    that step.  Steps on one worker have no estimate (NaN): there the local gradient
    is the global one.
    """
    import pandas as pd

    from elasim.noise_scale import smoothed_noise_scale, two_batch_estimates

    estimates = [
        two_batch_estimates(r.grad_sq_local, r.grad_sq_global, r.local_batch, r.samples)
        for r in steps
    ]
    grad_sq = [g for g, _ in estimates]
    noise_trace = [s for _, s in estimates]
    frame = pd.DataFrame(
        {
            "time_s": [r.real_s for r in steps],
            "trace_time_s": [r.real_s * time_scale for r in steps],
            "step": [r.step for r in steps],
            "world_size": [r.world_size for r in steps],
            "loss": [r.loss for r in steps],
            "samples": [r.samples for r in steps],
            "gen": [r.gen for r in steps],
            "epoch": [r.epoch for r in steps],
            "grad_sq_local": [r.grad_sq_local for r in steps],
            "grad_sq_global": [r.grad_sq_global for r in steps],
            "local_batch": [r.local_batch for r in steps],
            "gns_grad_sq": grad_sq,
            "gns_noise_trace": noise_trace,
            "gns_b_noise": smoothed_noise_scale(grad_sq, noise_trace),
        }
    )
    ints = ("step", "world_size", "samples", "gen", "epoch")
    return frame.astype({c: "int64" if c in ints else "float64" for c in frame.columns})


def write_run(result: RunResult, out_dir: str | Path, *, plot: bool = True) -> dict[str, Path]:
    """Write the run's files: summary, events, steps, workers and timeline (see above).

    Every file is written atomically (temporary file, fsync, rename).
    """
    import pandas as pd

    from elasim.output import events_frame, plot_timeline, write_json, write_parquet

    out = Path(out_dir)
    events = events_frame(
        result.events,
        extra={
            "real_time_s": list(result.event_real_s),
            "interval_s": [math.nan if v is None else v for v in result.event_interval_s],
            "due_s": _due_s(result),
        },
    )
    steps = steps_frame(result.steps, result.time_scale)
    workers = pd.DataFrame(
        {
            "wid": [w.wid for w in result.worker_starts],
            "spawn_s": [w.spawn_s for w in result.worker_starts],
            "ready_s": [math.nan if w.ready_s is None else w.ready_s for w in result.worker_starts],
        }
    ).astype({"wid": "int64", "spawn_s": "float64", "ready_s": "float64"})
    timeline = pd.DataFrame(list(result.timeline), columns=list(TimelineRow._fields))
    timeline["nodes_held"] = timeline["spot_held"] + timeline["on_demand_held"]
    paths = {
        "summary": write_json(out / "summary.json", dict(result.summary)),
        "events": write_parquet(out / "events.parquet", events),
        "steps": write_parquet(out / "steps.parquet", steps),
        "workers": write_parquet(out / "workers.parquet", workers),
        "timeline": write_parquet(out / "timeline.parquet", timeline),
    }
    RunJournal(out).remove()  # the journal of a run that was not killed
    if plot:
        inputs = result.summary.get("inputs", {})
        title = (
            f"{inputs.get('policy', '')} on {inputs.get('trace', '')} "
            f"(real run, {inputs.get('rescale', '')}, x{result.time_scale:g})"
        )
        deadline_s = inputs.get("deadline_s")
        paths["plot"] = plot_timeline(
            out / "timeline.png",
            timeline,
            events,
            title=title,
            deadline_s=None if deadline_s is None else float(deadline_s),
            policy=str(inputs.get("policy") or "") or None,
        )
    return paths


def _due_s(result: RunResult) -> list[float]:
    """The ``due_s`` column: each event's own time where the run did not say otherwise."""
    due = list(result.event_due_s)
    return due if len(due) == len(result.events) else [e.time_s for e in result.events]


def update_summary(out_dir: str | Path, fields: dict[str, Any]) -> Path:
    """Add ``fields`` to a written ``summary.json`` (atomically), keeping the rest.

    Why after :func:`write_run`: some figures, such as the command's whole wall time,
    are known only once every file is written.
    """
    import json

    from elasim.output import write_json

    path = Path(out_dir) / "summary.json"
    summary = json.loads(path.read_text(encoding="utf-8"))
    summary.update(fields)
    return write_json(path, summary)
