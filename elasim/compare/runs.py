"""Two runs' files: the same-run check, the comparison, and simulating a measured run.

Only runs of the same job are compared: both ``summary.json`` files record their
:class:`~elasim.jobmodel.JobSpec` as ``inputs`` (the same keys in ``simulate`` and
``run``), and :func:`check_same_run` refuses two runs whose specs differ, whose time
scales differ, or whose work differs, naming the first field.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path
from typing import Any

import pandas as pd

from elasim.compare.events import CompareResult, compare_frames
from elasim.jobmodel import JobSpec, SpecMismatchError

log = logging.getLogger(__name__)

#: Two runs of one job: same spec but for what each shell leaves to itself
#: (the executor's job options, a measured checkpoint cost, the job's own minimum).
_NOT_COMPARED = ("job_options", "checkpoint_cost_s", "min_nodes")


def _time_scale(summary: dict[str, Any]) -> float:
    """Trace seconds per second of a run (its executor's) or a simulation (its own)."""
    scale = summary.get("time_scale") or (summary.get("simulator") or {}).get("time_scale")
    return float(scale or 1.0)


def _work(summary: dict[str, Any]) -> tuple[str, float] | None:
    """What a run had to do: its steps (a real run) or samples (a simulation of one)."""
    executor = summary.get("executor") or {}
    steps = executor.get("max_steps", (summary.get("inputs") or {}).get("max_steps"))
    if steps is not None:  # (runs before the spec recorded it with their inputs)
        return "steps", float(steps)
    target = (summary.get("simulator") or {}).get("target_samples")
    if target is not None:
        return "samples", float(target)
    return None


def check_same_run(
    a: dict[str, Any], b: dict[str, Any], *, names: tuple[str, str] = ("real run", "simulation")
) -> None:
    """Raise :class:`~elasim.jobmodel.SpecMismatchError` unless two summaries are one run.

    The specs (``inputs``) must agree but for what each shell leaves to itself, and
    so must the time scales; the work must agree too: the steps of two real runs,
    or a simulation's samples and the samples the real run trained.

    Raises:
        SpecMismatchError: one line naming the first field that differs, both values,
            and ``--force``.
    """
    spec_a = JobSpec.from_inputs(a.get("inputs") or {})
    spec_b = JobSpec.from_inputs(b.get("inputs") or {})
    ignore = _NOT_COMPARED
    if spec_a.trace and spec_b.trace and Path(spec_a.trace).name == Path(spec_b.trace).name:
        ignore = (*ignore, "trace")  # the same file, named by another path
    spec_a.check_same(spec_b, names, ignore=ignore)
    facts = {
        "time_scale": (_time_scale(a), _time_scale(b)),
        "work": (_work(a), _work(b)),
    }
    if facts["work"][0] and facts["work"][1] and facts["work"][0][0] != facts["work"][1][0]:
        real, sim = (a, b) if facts["work"][0][0] == "steps" else (b, a)
        facts["work"] = (("samples", float(real.get("samples") or 0.0)), _work(sim))
    for field_name, (x, y) in facts.items():
        if x is None or y is None or x == y:
            continue
        if isinstance(x, tuple) and math.isclose(x[1], y[1], rel_tol=1e-9):
            continue
        shown = [v if not isinstance(v, tuple) else f"{v[1]:g} {v[0]}" for v in (x, y)]
        raise SpecMismatchError(
            f"not the same run: {field_name} differs ({names[0]}: {shown[0]}, {names[1]}: "
            f"{shown[1]}); compare anyway with --force (force=True)"
        )


def move_rows(summary: dict[str, Any], events: pd.DataFrame, scale: float = 1.0) -> pd.DataFrame:
    """A run's zone moves as event rows (``kind == "move"``), for :func:`compare_frames`.

    A summary lists its moves (``executor`` or ``simulator`` section) as ``[time_s,
    from, to]``, and their transfers (``move_transfer_s``), in its own clock's
    seconds; divided by ``scale`` they are real seconds (``real_time_s``), the axis
    the events are compared on.  A move's nodes are those the job held when it left
    (the last event's before it), and its pause is the transfer (NaN: still on its
    way at the end, or a summary from before transfers were stated).
    """
    section = summary.get("executor") or summary.get("simulator") or {}
    moves = section.get("moves") or ()
    transfers = list(section.get("move_transfer_s") or ())
    transfers += [None] * (len(moves) - len(transfers))
    rows = []
    for (time_s, zone_from, zone_to), transfer in zip(moves, transfers, strict=True):
        transfer_s = math.nan if transfer is None else transfer
        before = events[events["time_s"] <= time_s]
        held = int(before["nodes_after"].iloc[-1]) if len(before) else 0
        rows.append(
            {
                "time_s": float(time_s),
                "real_time_s": float(time_s) / scale,
                "kind": "move",
                "nodes_before": held,
                "nodes_after": 0,
                "pause_s": float(transfer_s) / scale,
                "zone_from": str(zone_from),
                "zone_to": str(zone_to),
            }
        )
    return pd.DataFrame(rows)


def _with_moves(summary: dict[str, Any], events: pd.DataFrame, scale: float) -> pd.DataFrame:
    """``events`` and the run's zone moves (:func:`move_rows`), if it made any."""
    moves = move_rows(summary, events, scale)
    if moves.empty:
        return events
    if "real_time_s" not in events:  # a simulation: its own time is the axis
        moves = moves.drop(columns="real_time_s")
    return pd.concat([events, moves], ignore_index=True)


def _completion_s(summary: dict[str, Any]) -> float | None:
    hours = summary.get("completion_time_h")
    return None if hours is None else float(hours) * 3600.0


def compare_runs(
    real_dir: str | Path,
    sim_dir: str | Path,
    *,
    time_scale: float | None = None,
    window_s: float | None = None,
    force: bool = False,
) -> CompareResult:
    """Compare a measured run directory with a simulation directory.

    The measured run's completion is its ``completion_time_h`` (trace time) divided by
    the time scale, i.e. real seconds; the simulation's is its ``completion_time_h``
    (already real seconds when it was simulated on the scaled trace).

    Args:
        real_dir: an ``elasim run --out`` directory (or any run directory).
        sim_dir: a simulation directory (:func:`simulate_run`, ``elasim simulate``).
        time_scale: overrides the measured run's time scale.
        window_s: how far apart in time two events may be and still match
            (default: a fifth of the longer completion time, at least 5 s).
        force: compare even when the two summaries describe different runs.

    Raises:
        SpecMismatchError: (a ``ValueError``) not the same run (:func:`check_same_run`),
            unless ``force``.
    """
    real_dir, sim_dir = Path(real_dir), Path(sim_dir)
    real_summary = json.loads((real_dir / "summary.json").read_text())
    sim_summary = json.loads((sim_dir / "summary.json").read_text())
    if not force:
        check_same_run(real_summary, sim_summary, names=(str(real_dir), str(sim_dir)))
    scale = time_scale or float(real_summary.get("time_scale", 1.0) or 1.0)
    real_events = _with_moves(real_summary, pd.read_parquet(real_dir / "events.parquet"), scale)
    sim_events = _with_moves(sim_summary, pd.read_parquet(sim_dir / "events.parquet"), 1.0)
    real_completion = _completion_s(real_summary)
    if real_completion is not None:
        real_completion /= scale
    sim_completion = _completion_s(sim_summary)
    if window_s is None:
        span = max(real_completion or 0.0, sim_completion or 0.0, 1.0)
        window_s = max(0.2 * span, 5.0)
    pairs = compare_frames(real_events, sim_events, window_s=window_s)
    return CompareResult(
        pairs=tuple(pairs),
        real_completion_s=real_completion,
        sim_completion_s=sim_completion,
        real_summary=real_summary,
        sim_summary=sim_summary,
    )


def load_timeline(run_dir: str | Path, time_scale: float | None = None) -> pd.DataFrame | None:
    """A run's ``timeline.parquet`` (None if absent), with ``real_time_s`` for a real run.

    A measured run's timeline is in trace seconds; dividing by its time scale puts it
    on the real-seconds axis of the simulation it is compared with.
    """
    file = Path(run_dir) / "timeline.parquet"
    if not file.exists():
        return None
    frame = pd.read_parquet(file)
    if time_scale and "time_s" in frame:
        frame = frame.assign(real_time_s=frame["time_s"] / time_scale)
    return frame


def simulate_run(
    real_dir: str | Path,
    job: Any,
    out_dir: str | Path,
    *,
    trace: str | None = None,
) -> Path:
    """Simulate what a measured run did: the run's own spec, at the run's time scale.

    The run's ``summary.json`` records its :class:`~elasim.jobmodel.JobSpec` as its
    ``inputs``; the simulation runs that very spec (no key is translated), on the
    trace compressed by the run's time scale (``SimConfig.time_scale``), with the
    measured run's work as the job's target.

    Args:
        real_dir: an ``elasim run --out`` directory.
        job: a :class:`elasim.profile.Profile` (its measurements become the job) or a
            ready :class:`elasim.job.TrainingJob`.
        out_dir: where the simulation's files go.
        trace: the trace file, if the run's recorded one cannot be found.

    Returns:
        ``out_dir``.
    """
    from elasim.profile import Profile, apply_profile
    from elasim.sim import SimConfig, simulate, write_result

    summary = json.loads((Path(real_dir) / "summary.json").read_text())
    spec = JobSpec.from_inputs(summary.get("inputs", {}))
    scale = float(summary.get("time_scale", 1.0) or 1.0)
    samples = float(summary.get("samples") or 0.0) or None
    if isinstance(job, Profile):
        job = apply_profile(job, target_samples=samples)
    elif samples is not None:  # a TrainingJob: the measured run's work
        job = dataclasses.replace(job, target_samples=samples)
    nodes = min(spec.max_nodes or job.nodes.max, job.nodes.max)
    spec = spec.replace(trace=trace or spec.trace, min_nodes=None, max_nodes=nodes, job_options=())
    sim = simulate(spec, SimConfig(time_scale=scale), job=job)
    write_result(sim, out_dir)
    return Path(out_dir)


def run_and_simulate(
    spec: JobSpec,
    profile: Any,
    out_dir: str | Path,
    *,
    time_scale: float = 600.0,
    max_steps: int = 3000,
) -> tuple[Path, Path]:
    """Run ``spec`` on real workers (the executor), then simulate the same run.

    Needs the ``executor`` extra (torch).  Writes ``out_dir/real`` and
    ``out_dir/sim`` and returns them; the simulation is :func:`simulate_run` of the
    real one, so both summaries state the same spec.
    """
    from elasim.executor.config import RunConfig
    from elasim.executor.run import run_trace
    from elasim.executor.run_output import write_run

    out = Path(out_dir)
    result = run_trace(RunConfig(spec=spec, time_scale=time_scale, max_steps=max_steps))
    write_run(result, out / "real")
    return out / "real", simulate_run(out / "real", profile, out / "sim")
