"""Sim vs real: match a measured run's events with a simulation's, event by event.

Both sides write the same schema (``summary.json`` and ``events.parquet`` with
:data:`elasim.policies.EVENT_COLUMNS`), so the comparison is a join, not a
translation.  Times are compared in the executor's *real* seconds: the simulation to
compare with is run on the trace compressed by the executor's time scale
(:func:`scale_trace`), with a profile measured on the same machine.

Matching: membership changes (``scale_up``, ``scale_down``, ``resume``) and
preemptions are matched in order, by kind and node counts, each with the first
unmatched simulated event of the same signature whose time lies within the window;
an event without a partner is reported as unmatched rather than forced onto another.

Only runs of the same job are compared: :func:`compare_runs` first checks that both
summaries state the same job, trace, policy, time scale and trace window
(:mod:`elasim.run_identity`) and raises :class:`RunMismatchError` otherwise, and a
matching that pairs no event at all is logged as a warning.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elasim.policies import PAUSE_COMPONENTS
from elasim.run_identity import RunMismatchError, check_same_run, recorded_checkpoint_interval
from elasim.traces.model import CapacityTrace

__all__ = [
    "MATCHED_KINDS",
    "CompareResult",
    "RunMismatchError",
    "FIDELITY_GOALS",
    "EventPair",
    "compare_figure",
    "compare_model_variants",
    "compare_repeats",
    "fidelity_summary",
    "model_variants",
    "compare_frames",
    "compare_runs",
    "load_timeline",
    "plot_compare",
    "run_and_simulate",
    "run_to_run_errors",
    "scale_trace",
    "simulate_run",
    "summarize_pairs",
]

log = logging.getLogger(__name__)

#: The fidelity goals: completion time and median per-event pause, relative error.
FIDELITY_GOALS: dict[str, float] = {
    "completion_time_rel_error": 0.05,
    "median_pause_rel_error": 0.20,
}

#: Event kinds that carry a pause worth comparing.
MATCHED_KINDS: tuple[str, ...] = ("scale_up", "scale_down", "resume", "preempt")


def scale_trace(trace: CapacityTrace, time_scale: float) -> CapacityTrace:
    """The same trace replayed ``time_scale`` times faster (trace seconds per real second)."""
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
    return CapacityTrace(
        name=f"{trace.name} (x{time_scale:g})",
        time_s=np.asarray(trace.time_s, dtype=float) / time_scale,
        available=trace.available,
        price_per_hour=trace.price_per_hour,
        metadata=trace.metadata,
        duration_s=float(trace.duration_s) / time_scale,
    )


@dataclass(frozen=True)
class EventPair:
    """One matched event (or an unmatched one, with the other side ``None``)."""

    kind: str
    nodes_before: int
    nodes_after: int
    real_time_s: float | None
    sim_time_s: float | None
    real_pause_s: float | None
    sim_pause_s: float | None
    real_components: tuple[tuple[str, float], ...] = ()
    sim_components: tuple[tuple[str, float], ...] = ()

    @property
    def matched(self) -> bool:
        """Both sides present."""
        return self.real_time_s is not None and self.sim_time_s is not None

    @property
    def abs_error_s(self) -> float | None:
        """Simulated minus measured pause."""
        if not self.matched or self.real_pause_s is None or self.sim_pause_s is None:
            return None
        return self.sim_pause_s - self.real_pause_s

    @property
    def rel_error(self) -> float | None:
        """``|sim - real| / real`` (None when the measured pause is zero)."""
        err = self.abs_error_s
        if err is None or not self.real_pause_s:
            return None
        return abs(err) / self.real_pause_s

    def as_record(self) -> dict[str, Any]:
        """The pair as one flat record (``compare.json`` and :func:`summarize_pairs`)."""
        return {
            "kind": self.kind,
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "real_time_s": self.real_time_s,
            "sim_time_s": self.sim_time_s,
            "real_pause_s": self.real_pause_s,
            "sim_pause_s": self.sim_pause_s,
            "abs_error_s": self.abs_error_s,
            "rel_error": self.rel_error,
        }


@dataclass(frozen=True)
class CompareResult:
    """Everything ``elasim compare`` reports."""

    pairs: tuple[EventPair, ...]
    real_completion_s: float | None
    sim_completion_s: float | None
    real_summary: dict[str, Any] = field(default_factory=dict)
    sim_summary: dict[str, Any] = field(default_factory=dict)

    @property
    def events_matched(self) -> int:
        """Events with a partner on both sides."""
        return sum(1 for p in self.pairs if p.matched)

    @property
    def completion_time_rel_error(self) -> float | None:
        """``|sim - real| / real`` of the completion time."""
        if not self.real_completion_s or self.sim_completion_s is None:
            return None
        return abs(self.sim_completion_s - self.real_completion_s) / self.real_completion_s

    @property
    def median_pause_rel_error(self) -> float | None:
        """Median over matched events with a measured pause of the relative pause error."""
        errors = [p.rel_error for p in self.pairs if p.rel_error is not None]
        return statistics.median(errors) if errors else None

    def component_errors(self) -> dict[str, float | None]:
        """Median of simulated minus measured, per pause component, over matched changes.

        Over the matched membership changes (a preemption's pause is on the change
        that follows it), in seconds: which part of a pause the model gets wrong.
        """
        out: dict[str, float | None] = {}
        for name in PAUSE_COMPONENTS:
            diffs = [
                dict(p.sim_components).get(name, 0.0) - dict(p.real_components).get(name, 0.0)
                for p in self.pairs
                if p.matched and p.real_components and p.kind != "preempt"
            ]
            out[name] = statistics.median(diffs) if diffs else None
        return out

    def totals(self) -> dict[str, tuple[float | None, float | None]]:
        """Whole-run figures side by side: ``name -> (measured, simulated)``.

        Durations are in real seconds: a measured run's summary hours are trace hours
        (divided by its time scale here), a simulation of the scaled trace's are real.
        ``samples_processed`` counts redone work too; the work completed is the same
        on both sides by construction (the simulation's target is the run's samples).
        """
        scale = float(self.real_summary.get("time_scale", 1.0) or 1.0)

        def get(summary: dict[str, Any], key: str, factor: float = 1.0) -> float | None:
            value = summary.get(key)
            return None if value is None else float(value) * factor

        out: dict[str, tuple[float | None, float | None]] = {}
        for key in ("lost_work_h", "rescale_overhead_h", "checkpoint_overhead_h", "idle_h"):
            name = key[:-2] + "_s"
            out[name] = (
                get(self.real_summary, key, 3600.0 / scale),
                get(self.sim_summary, key, 3600.0),
            )
        for key in ("samples_processed", "rescales", "preemptions", "checkpoints"):
            source = "raw_samples" if key == "samples_processed" else key
            out[key] = (get(self.real_summary, source), get(self.sim_summary, source))
        return out

    def to_json(self) -> dict[str, Any]:
        """``compare.json``."""
        return {
            "completion_time_rel_error": self.completion_time_rel_error,
            "median_pause_rel_error": self.median_pause_rel_error,
            "events_matched": self.events_matched,
            "events_real": sum(1 for p in self.pairs if p.real_time_s is not None),
            "events_sim": sum(1 for p in self.pairs if p.sim_time_s is not None),
            "real_completion_s": self.real_completion_s,
            "sim_completion_s": self.sim_completion_s,
            "median_component_error_s": self.component_errors(),
            "steps_completed": self.real_summary.get("steps"),
            "totals": {
                name: {"real": real, "sim": sim} for name, (real, sim) in self.totals().items()
            },
            "events": [p.as_record() for p in self.pairs],
        }


def _rows(frame: pd.DataFrame, time_column: str) -> list[dict[str, Any]]:
    keep = frame[frame["kind"].isin(MATCHED_KINDS)].sort_values(time_column, kind="stable")
    rows = []
    for row in keep.to_dict(orient="records"):
        rows.append(
            {
                "kind": str(row["kind"]),
                "before": int(row["nodes_before"]),
                "after": int(row["nodes_after"]),
                "time": float(row[time_column]),
                "pause": float(row["pause_s"]),
                "components": tuple(
                    (name, float(row[name])) for name in PAUSE_COMPONENTS if name in row
                ),
            }
        )
    return rows


def _pair(real: dict[str, Any] | None, sim: dict[str, Any] | None) -> EventPair:
    """The pair of two matched :func:`_rows` rows, or of one unmatched row (other ``None``)."""
    row = real if real is not None else sim
    assert row is not None
    return EventPair(
        row["kind"],
        row["before"],
        row["after"],
        None if real is None else real["time"],
        None if sim is None else sim["time"],
        None if real is None else real["pause"],
        None if sim is None else sim["pause"],
        () if real is None else real["components"],
        () if sim is None else sim["components"],
    )


def _partner(
    event: dict[str, Any], sim: list[dict[str, Any]], used: list[bool], start: int, window_s: float
) -> int | None:
    """The first unused simulated row from ``start`` on with ``event``'s kind and nodes."""
    signature = (event["kind"], event["before"], event["after"])
    for j in range(start, len(sim)):
        candidate = sim[j]
        if used[j] or (candidate["kind"], candidate["before"], candidate["after"]) != signature:
            continue
        if abs(candidate["time"] - event["time"]) > window_s:
            continue
        return j
    return None


def compare_frames(
    real_events: pd.DataFrame,
    sim_events: pd.DataFrame,
    *,
    real_time_column: str = "real_time_s",
    sim_time_column: str = "time_s",
    window_s: float = math.inf,
) -> list[EventPair]:
    """Match events of a measured run and a simulation (see the module docstring).

    No event matched at all is logged as a warning: two runs of the same job share at
    least their first scale-up, so it means the runs (or their time axes) differ.
    """
    if real_time_column not in real_events:
        real_time_column = "time_s"
    real = _rows(real_events, real_time_column)
    sim = _rows(sim_events, sim_time_column)
    used = [False] * len(sim)
    pairs: list[EventPair] = []
    start = 0
    for event in real:
        partner = _partner(event, sim, used, start, window_s)
        if partner is None:
            pairs.append(_pair(event, None))
            continue
        used[partner] = True
        start = partner + 1
        pairs.append(_pair(event, sim[partner]))
    if not any(used):
        log.warning(
            "0 events matched (%d measured, %d simulated): are these runs of the same job, "
            "trace window and time scale?",
            len(real),
            len(sim),
        )
    pairs.extend(_pair(None, other) for j, other in enumerate(sim) if not used[j])
    return pairs


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
        RunMismatchError: (a ``ValueError``) the summaries state a different job,
            trace, policy, time scale or trace window, unless ``force``.
    """
    real_dir, sim_dir = Path(real_dir), Path(sim_dir)
    real_summary = json.loads((real_dir / "summary.json").read_text())
    sim_summary = json.loads((sim_dir / "summary.json").read_text())
    if not force:
        check_same_run(real_summary, sim_summary, names=(str(real_dir), str(sim_dir)))
    real_events = pd.read_parquet(real_dir / "events.parquet")
    sim_events = pd.read_parquet(sim_dir / "events.parquet")
    scale = time_scale or float(real_summary.get("time_scale", 1.0) or 1.0)
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
    """Simulate what a measured run did: the same trace, scaled the same, same policy.

    Args:
        real_dir: an ``elasim run --out`` directory (its ``summary.json`` inputs say
            which trace, policy, time scale, start offset, workers and mechanism).
        job: a :class:`elasim.profile.Profile` (its measurements become the job) or a
            ready :class:`elasim.job.TrainingJob`.
        out_dir: where the simulation's files go.
        trace: the trace file, if the run's recorded one cannot be found.

    Returns:
        ``out_dir``.
    """
    from elasim.policies import make_policy
    from elasim.profile import Profile, apply_profile
    from elasim.sim import RescaleMode, SimConfig, simulate, write_result
    from elasim.traces import load_capacity_trace

    summary = json.loads((Path(real_dir) / "summary.json").read_text())
    inputs = summary.get("inputs", {})
    scale = float(summary.get("time_scale", 1.0) or 1.0)
    workers = int(inputs.get("workers_max", 4))
    samples = float(summary.get("samples") or 0.0) or None
    if isinstance(job, Profile):
        job = apply_profile(job, target_samples=samples)
    elif samples is not None:  # a TrainingJob: the measured run's work
        job = dataclasses.replace(job, target_samples=samples)
    job = job.with_nodes(max_nodes=min(workers, job.nodes.max))
    loaded = load_capacity_trace(trace or inputs.get("trace_file") or inputs["trace"])
    notice_s = float(inputs.get("notice_s") or 0.0)
    policy = str(inputs.get("policy", "greedy"))
    sim = simulate(
        scale_trace(loaded, scale),
        make_policy(policy, dict(inputs.get("policy_options") or {})),
        job,
        SimConfig(
            checkpoint_interval_s=recorded_checkpoint_interval(inputs, scale),
            notice_s=notice_s / scale,
            trace_scale=scale,
            rescale=RescaleMode(str(inputs.get("rescale", "inplace"))),
            start_offset_s=float(inputs.get("trace_start_s") or 0.0) / scale,
        ),
        trace_name=f"{loaded.name} (x{scale:g})",
        policy_spec=policy,
    )
    # the simulation ran on the compressed trace: say by how much, for compare_runs
    sim = dataclasses.replace(sim, metadata=(*sim.metadata, ("time_scale", scale)))
    write_result(sim, out_dir)
    return Path(out_dir)


def run_and_simulate(
    trace: str,
    policy: str,
    profile: Any,
    out_dir: str | Path,
    *,
    time_scale: float = 600.0,
    max_steps: int = 3000,
    max_nodes: int = 4,
    rescale: str = "inplace",
    notice_s: float = 0.0,
    start_offset_s: float = 0.0,
    checkpoint_interval_s: float | None = math.inf,
    on_demand_price_per_hour: float | None = None,
    policy_options: dict[str, Any] | None = None,
) -> tuple[Path, Path]:
    """Replay ``trace`` on real workers (the executor), then simulate the same run.

    Needs the ``executor`` extra (torch).  Writes ``out_dir/real`` and
    ``out_dir/sim`` and returns them.  Times (``notice_s``, ``start_offset_s``,
    ``checkpoint_interval_s``: None is ``auto``, ``inf`` is ``off``, the default here
    because the comparison is about pauses) are trace seconds, as on the command line.
    """
    from elasim.executor.run import RunConfig, run_trace, write_run
    from elasim.jobmodel import RescaleMode

    out = Path(out_dir)
    result = run_trace(
        RunConfig(
            trace=trace,
            policy=policy,
            policy_options=dict(policy_options or {}),
            time_scale=time_scale,
            max_nodes=max_nodes,
            rescale=RescaleMode(rescale),
            notice_trace_s=notice_s,
            max_steps=max_steps,
            start_offset_trace_s=start_offset_s,
            checkpoint_interval_trace_s=checkpoint_interval_s,
            on_demand_price_per_hour=on_demand_price_per_hour,
        )
    )
    write_run(result, out / "real")
    return out / "real", simulate_run(out / "real", profile, out / "sim", trace=trace)


def _training_workers(
    pairs: Sequence[EventPair], side: str, end_s: float | None
) -> tuple[list[float], list[int]]:
    """Step function of the training group's size from one side's membership events."""
    events = sorted(
        (t, p.nodes_after)
        for p in pairs
        if (t := (p.real_time_s if side == "real" else p.sim_time_s)) is not None
    )
    times, sizes = [0.0], [0]
    for t, after in events:
        times.append(t)
        sizes.append(after)
    if end_s is not None and end_s > times[-1]:
        times.append(end_s)
        sizes.append(sizes[-1])
    return times, sizes


def compare_figure(
    result: CompareResult,
    real_timeline: pd.DataFrame | None,
    sim_timeline: pd.DataFrame | None,
    *,
    real_time_column: str = "real_time_s",
) -> Any:
    """Measured and simulated timelines stacked, and a sim-vs-real pause scatter."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 7), dpi=110)
    grid = fig.add_gridspec(2, 2, width_ratios=(2.2, 1))
    ax_real = fig.add_subplot(grid[0, 0])
    ax_sim = fig.add_subplot(grid[1, 0], sharex=ax_real)
    ax_pause = fig.add_subplot(grid[:, 1])
    for ax, frame, label, column, side in (
        (ax_real, real_timeline, "measured", real_time_column, "real"),
        (ax_sim, sim_timeline, "simulated", "time_s", "sim"),
    ):
        end_s = result.real_completion_s if side == "real" else result.sim_completion_s
        if frame is not None and len(frame) and "spot_available" in frame:
            col = column if column in frame else "time_s"
            ax.step(
                frame[col], frame["spot_available"], where="post", color="0.6", label="available"
            )
        # workers training, from each side's own membership events (the same rule for both)
        times, sizes = _training_workers(result.pairs, side, end_s)
        ax.step(times, sizes, where="post", label=f"{label}: training", color="tab:blue")
        ax.set_ylabel(f"{label}\nworkers")
        ax.legend(loc="upper right", fontsize=8)
    ax_sim.set_xlabel("real time (s)")
    matched = [p for p in result.pairs if p.matched and p.real_pause_s is not None]
    if matched:
        real = [p.real_pause_s for p in matched]
        sim = [p.sim_pause_s for p in matched]
        ax_pause.scatter(real, sim, s=30, alpha=0.8)
        top = max(max(real), max(sim)) * 1.1 or 1.0
        ax_pause.plot([0, top], [0, top], "k--", lw=1, label="sim = real")
        ax_pause.set_xlim(0, top)
        ax_pause.set_ylim(0, top)
        ax_pause.legend(fontsize=8)
    ax_pause.set_xlabel("measured pause (s)")
    ax_pause.set_ylabel("simulated pause (s)")
    err = result.median_pause_rel_error
    ax_pause.set_title(
        f"{result.events_matched} events matched; median error "
        + ("-" if err is None else f"{100 * err:.0f}%")
    )
    fig.tight_layout()
    return fig


def plot_compare(
    result: CompareResult,
    real_timeline: pd.DataFrame | None,
    sim_timeline: pd.DataFrame | None,
    path: str | Path,
    *,
    real_time_column: str = "real_time_s",
) -> Path:
    """Write :func:`compare_figure` to ``path`` (PNG, atomically)."""
    from elasim.output import atomic_write

    fig = compare_figure(result, real_timeline, sim_timeline, real_time_column=real_time_column)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))


def summarize_pairs(pairs: Sequence[EventPair]) -> pd.DataFrame:
    """The matched events as a table (for notebooks and the CLI)."""
    rows = []
    for p in pairs:
        record = p.as_record()
        before, after = record.pop("nodes_before"), record.pop("nodes_after")
        rows.append({"kind": record.pop("kind"), "nodes": f"{before}->{after}", **record})
    return pd.DataFrame(rows)


def fidelity_summary(result: CompareResult) -> pd.Series:
    """Headline numbers of a comparison, and whether each fidelity goal is met."""
    completion = result.completion_time_rel_error
    pause = result.median_pause_rel_error
    return pd.Series(
        {
            "measured completion (s)": result.real_completion_s,
            "simulated completion (s)": result.sim_completion_s,
            "completion time error": completion,
            "completion goal met (<= 5%)": completion is not None
            and completion <= FIDELITY_GOALS["completion_time_rel_error"],
            "median per-event pause error": pause,
            "pause goal met (<= 20%)": pause is not None
            and pause <= FIDELITY_GOALS["median_pause_rel_error"],
            "events matched": result.events_matched,
            "measured events": sum(1 for p in result.pairs if p.real_time_s is not None),
            "simulated events": sum(1 for p in result.pairs if p.sim_time_s is not None),
        },
        dtype=object,
    )


def model_variants(profile: Any, target_samples: float | None = None) -> dict[str, Any]:
    """The measured model and simpler ones, to show what each modelled overhead buys.

    * ``elasim``: the profile as :func:`elasim.profile.apply_profile` uses it (measured
      pause table, cold starts, shared-host contention when measured on one host);
    * ``no shared-host contention``: the same, but a starting worker slows nobody and
      starts as fast as the measured batch of its size;
    * ``flat cold start``: every replacement ready after the time an interpreter
      takes to import torch (the model of profile version 1);
    * ``constant pause``: every change costs the median measured in-place pause and
      replacements are there at once, as a simulator with one flat reallocation
      cost (Pollux's 30 s, Parcae's swept constant) models it.

    Returns:
        Variant name -> :class:`elasim.job.TrainingJob`.
    """
    import statistics

    from elasim.profile import apply_profile

    full = apply_profile(profile, target_samples=target_samples)
    rescale = full.rescale
    no_share = dataclasses.replace(
        full, rescale=dataclasses.replace(rescale, shared_host_cores=0.0, cold_start_s=0.0)
    )
    flat = dataclasses.replace(
        full,
        rescale=dataclasses.replace(
            rescale,
            shared_host_cores=0.0,
            cold_start_table=(),
            cold_start_s=profile.worker_start_s,
        ),
    )
    inplace = [p.components.pause_s for p in profile.pauses if p.mechanism == "inplace"]
    constant_s = statistics.median(inplace) if inplace else 0.0
    constant = dataclasses.replace(
        full,
        pause_table=(),
        rescale=dataclasses.replace(
            rescale,
            detect_s=0.0,
            boot_s=0.0,
            rendezvous_base_s=constant_s,
            rendezvous_per_node_s=0.0,
            state_bandwidth_bytes_per_s=1e18,
            warmup_s=0.0,
            cold_start_s=0.0,
            cold_start_table=(),
            shared_host_cores=0.0,
        ),
        checkpoint=dataclasses.replace(full.checkpoint, read_bandwidth_bytes_per_s=1e18),
    )
    return {
        "elasim": full,
        "no shared-host contention": no_share,
        "flat cold start": flat,
        "constant pause": constant,
    }


def _dirs(real_dirs: str | Path | Sequence[str | Path]) -> list[Path]:
    if isinstance(real_dirs, (str, Path)):
        return [Path(real_dirs)]
    dirs = [Path(d) for d in real_dirs]
    if not dirs:
        raise ValueError("no measured run given")
    return dirs


def compare_repeats(
    real_dirs: str | Path | Sequence[str | Path], sim_dir: str | Path, *, force: bool = False
) -> pd.DataFrame:
    """Compare measured repeats of one run (same inputs) with its one simulation.

    The simulation is deterministic and a measured run is one draw from a noisy
    machine, so besides each run's errors the last row compares the simulation with
    the *mean* of the repeats (``mean of runs``): what the simulator predicts is the
    expected completion time, not one run's.

    ``force`` is passed to :func:`compare_runs` (compare runs of another job too).

    Returns:
        One row per run, then ``mean of runs``: measured and simulated completion (s),
        completion time error, median per-event pause error, events matched.
    """
    rows = []
    for i, real_dir in enumerate(_dirs(real_dirs), start=1):
        result = compare_runs(real_dir, sim_dir, force=force)
        rows.append(
            {
                "run": f"run {i}",
                "measured completion (s)": result.real_completion_s,
                "simulated completion (s)": result.sim_completion_s,
                "completion time error": result.completion_time_rel_error,
                "median pause error": result.median_pause_rel_error,
                "events matched": result.events_matched,
            }
        )
    frame = pd.DataFrame(rows).set_index("run")
    mean_s = float(frame["measured completion (s)"].mean())
    sim_s = float(frame["simulated completion (s)"].iloc[0])
    frame.loc["mean of runs"] = {
        "measured completion (s)": mean_s,
        "simulated completion (s)": sim_s,
        "completion time error": abs(sim_s - mean_s) / mean_s,
        "median pause error": float(frame["median pause error"].median()),
        "events matched": float(frame["events matched"].median()),
    }
    return frame


def compare_model_variants(
    real_dirs: str | Path | Sequence[str | Path],
    profile: Any,
    out_dir: str | Path,
    *,
    trace: str | None = None,
) -> pd.DataFrame:
    """Simulate measured runs under every :func:`model_variants` entry and compare each.

    Args:
        real_dirs: one measured run, or repeats of it (same inputs).
        profile: the profile the variants are built from.
        out_dir: the simulations are written to ``out_dir/<n>``.
        trace: the trace file, if the runs' recorded one cannot be found.

    Returns:
        One row per variant: simulated completion, its error against the mean of the
        runs, the median over runs of the completion and median pause errors.
    """
    dirs = _dirs(real_dirs)
    summary = json.loads((dirs[0] / "summary.json").read_text())
    samples = float(summary.get("samples") or 0.0) or None
    rows = []
    for i, (name, job) in enumerate(model_variants(profile, samples).items()):
        sim_dir = simulate_run(dirs[0], job, Path(out_dir) / str(i), trace=trace)
        table = compare_repeats(dirs, sim_dir)
        runs = table.drop(index="mean of runs")
        rows.append(
            {
                "model": name,
                "simulated completion (s)": table.loc["mean of runs", "simulated completion (s)"],
                "error vs mean of runs": table.loc["mean of runs", "completion time error"],
                "median completion error": float(runs["completion time error"].median()),
                "median pause error": float(runs["median pause error"].median()),
            }
        )
    return pd.DataFrame(rows).set_index("model")


def run_to_run_errors(real_dirs: Sequence[str | Path], *, force: bool = False) -> pd.Series:
    """How far measured repeats of one run are from each other: the noise floor.

    The same two errors as sim vs real, between every pair of repeats (the earlier
    one as the reference), then the median over pairs.  No model can be expected to
    come closer to one run than the runs come to each other.

    Raises:
        RunMismatchError: two of the runs are not repeats of one run (unless
            ``force``).
    """
    import itertools

    completion, pause = [], []
    for a, b in itertools.combinations(_dirs(real_dirs), 2):
        sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
        if not force:
            check_same_run(sa, sb, names=(str(a), str(b)))
        ca, cb = _completion_s(sa), _completion_s(sb)
        if ca and cb:
            completion.append(abs(cb - ca) / ca)
        pairs = compare_frames(
            pd.read_parquet(a / "events.parquet"),
            pd.read_parquet(b / "events.parquet"),
            sim_time_column="real_time_s",
        )
        errors = [p.rel_error for p in pairs if p.rel_error is not None]
        if errors:
            pause.append(statistics.median(errors))
    return pd.Series(
        {
            "completion time error": statistics.median(completion) if completion else None,
            "median pause error": statistics.median(pause) if pause else None,
            "pairs of runs": len(completion),
        },
        dtype=object,
    )
