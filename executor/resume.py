"""``elasim run --resume DIR``: continue a run whose controller died.

Why: the controller is one process; if it is killed (OOM killer, a lost ssh session,
SIGKILL), its workers die with it (:mod:`.lifeline`) and the replay stops.  What it
leaves in ``--out`` is enough to go on:

* ``run.json``: the run's settings (:class:`~.config.RunConfig`, its spec with the
  start offset already drawn), written before any worker starts;
* the journal (:mod:`.journal`): events, steps and timeline rows appended as the
  run goes, and ``summary.partial.json``, the books so far, all in *run* time;
* the last checkpoint in the checkpoint folder (``<out>/checkpoints`` by default),
  atomic, so it is whole whatever the moment of the kill.

A resumed run is a new **segment**: it starts where the journal ends in trace time
(the trace does not move while no controller runs: the time between the death and
the resume is not replayed, nor paid for), its first group restores the checkpoint,
and it appends to the same journal; when it ends, the output files hold every
segment.  The books stay consistent: the death is booked as a ``preempt`` of every
member (the steps committed after the checkpoint are lost, as in a total loss),
followed by a ``pause``; sums (cost, hours, counts, lost work) add up over segments,
``steps`` is the last committed step, and ``summary.json`` lists the segments.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from elasim.atomic import atomic_write_text
from elasim.jobmodel.summary import deadline_met, mean_nodes
from elasim.policies import EventKind, EventRecord, PauseComponents

from .config import RunConfig
from .journal import BOOKS_FILE, read_rows
from .records import StepRecord

__all__ = [
    "RUN_FILE",
    "ResumePoint",
    "load_resume_point",
    "merge_books",
    "merge_segments",
    "save_run_config",
    "segment_of",
]

#: The run's settings, written when a run with ``--out`` starts.
RUN_FILE = "run.json"

#: Summary fields that add up over segments.
_SUMS = (
    "cost_usd",
    "spot_cost_usd",
    "on_demand_cost_usd",
    "spot_node_hours",
    "on_demand_node_hours",
    "rescales",
    "preemptions",
    "checkpoints",
    "lost_work_h",
    "rescale_overhead_h",
    "checkpoint_overhead_h",
    "idle_h",
    "running_h",
    "convergence_cost_h",
    "convergence_cost_samples",
    "raw_samples",
    "loop_turns",
    "sim_time_h",
    "wall_time_s",
    "lost_steps",
)


def save_run_config(out_dir: str | Path, config: RunConfig) -> Path:
    """Write ``run.json`` (atomically): what ``--resume`` restarts from."""
    body = {"version": 2, "config": config.to_json()}
    path = Path(out_dir) / RUN_FILE
    atomic_write_text(path, json.dumps(body, indent=1, allow_nan=True) + "\n")
    return path


@dataclass(frozen=True)
class ResumePoint:
    """Where a dead run stands, read from its ``--out`` folder.

    Attributes:
        out_dir: the run's output folder.
        config: the run's settings as first given.
        offset_trace_s: trace seconds the earlier segments replayed (the new segment
            starts there; real seconds are this over the time scale).
        last_step: the last committed step the journal saw.
        last_world: members of the group when the journal last saw it.
        checkpoint_step: step of the checkpoint the new segment restores (None: no
            usable checkpoint, it starts from the initial state).
        books: the books of the earlier segments (``summary.partial.json``).
        events: the earlier segments' events, with the death appended.
        steps: the earlier segments' step rows.
        timeline: the earlier segments' timeline rows.
    """

    out_dir: Path
    config: RunConfig
    offset_trace_s: float
    last_step: int
    last_world: int
    checkpoint_step: int | None
    books: Mapping[str, Any]
    events: tuple[Mapping[str, Any], ...]
    steps: tuple[Mapping[str, Any], ...]
    timeline: tuple[Mapping[str, Any], ...]

    @property
    def segments(self) -> list[dict[str, Any]]:
        """The earlier segments (from the books), as ``summary.json`` lists them."""
        return list(self.books.get("segments", []))

    def segment_config(self) -> RunConfig:
        """The new segment's settings: the trace from where the last one ended."""
        return self.config.resumed(self.offset_trace_s)

    def death_events(self) -> list[EventRecord]:
        """The controller's death as the books see it: every member lost, then a pause.

        Lost: the steps committed after the checkpoint (the journal's last step; a
        step committed in the last quarter second before the death is not known), and
        the trace time they took, from the checkpoint's step to the last one.
        """
        ckpt = self.checkpoint_step or 0
        lost = max(self.last_step - ckpt, 0)
        t = self.offset_trace_s
        lost_trace_s, lost_samples = 0.0, 0.0
        if lost and self.steps:
            last = self.steps[-1]
            since = [r for r in self.steps if int(r["step"]) <= ckpt]
            start = (
                float(since[-1]["trace_time_s"]) if since else float(self.steps[0]["trace_time_s"])
            )
            lost_trace_s = max(float(last["trace_time_s"]) - start, 0.0)
            lost_samples = float(lost * int(last["samples"]))
        return [
            EventRecord(
                t,
                EventKind.PREEMPT,
                self.last_world,
                0,
                lost_samples=lost_samples,
                lost_work_h=lost_trace_s / 3600.0,
                lost_steps=lost,
            ),
            EventRecord(t, EventKind.PAUSE, self.last_world, 0),
        ]

    def base_books(self) -> dict[str, Any]:
        """The earlier segments' books with the death added (what the new one adds to)."""
        books = dict(self.books)
        death = self.death_events()[0]
        for key, value in (
            ("lost_steps", death.lost_steps),
            ("lost_work_h", death.lost_work_h),
            ("preemptions", 1),
        ):
            books[key] = books.get(key, 0) + value
        segments = self.segments
        if segments:
            segments[-1] = {**segments[-1], "ended": "controller died"}
        books["segments"] = segments
        return books


def _checkpoint_step(config: Any) -> int | None:
    """Step of the run's last checkpoint, if it loads (``weights_only=True``)."""
    if config.checkpoint_dir is None:
        return None
    from .checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint

    try:
        state = load_checkpoint(Path(config.checkpoint_dir) / CHECKPOINT_NAME)
    except CheckpointError:
        return None
    step = state.get("step")
    return int(step) if isinstance(step, int) else None


def load_resume_point(out_dir: str | Path) -> ResumePoint:
    """Read a dead run's folder (see the module docstring).

    Raises:
        ValueError: no ``run.json`` there, or it is not one of ours (one line).
    """
    out = Path(out_dir)
    path = out / RUN_FILE
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        config = RunConfig.from_json(body["config"])
    except FileNotFoundError:
        raise ValueError(
            f"{out}: nothing to resume (no {RUN_FILE}; was it run with --out?)"
        ) from None
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a run's settings: {exc}") from None
    if (out / "summary.json").exists() and not (out / BOOKS_FILE).exists():
        raise ValueError(f"{out}: this run finished (summary.json); nothing to resume")
    events = read_rows(out / "events.partial.jsonl")
    steps = read_rows(out / "steps.partial.jsonl")
    timeline = read_rows(out / "timeline.partial.jsonl")
    try:
        books = json.loads((out / BOOKS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        books = {}
    ends = [float(r["time_s"]) for r in (*events, *timeline)]
    ends += [float(r["trace_time_s"]) for r in steps]
    ends.append(float(books.get("sim_time_h", 0.0)) * 3600.0)
    last_world = int(timeline[-1]["group_nodes"]) if timeline else 0
    last_step = max((int(r["step"]) for r in steps), default=0)
    return ResumePoint(
        out_dir=out,
        config=config,
        offset_trace_s=max(ends),
        last_step=last_step,
        last_world=last_world,
        checkpoint_step=_checkpoint_step(config),
        books=books,
        events=tuple(events),
        steps=tuple(steps),
        timeline=tuple(timeline),
    )


def merge_books(
    earlier: Mapping[str, Any], segment: Mapping[str, Any], offset_trace_s: float
) -> dict[str, Any]:
    """The books of every segment: ``segment`` (run time from ``offset_trace_s``) after ``earlier``.

    Sums add up; the completion time moves by the offset; ``mean_nodes`` and the
    deadline are recomputed over the whole run; the rest is the segment's own.
    """
    out = dict(segment)
    if not earlier:
        return out
    for key in _SUMS:
        a, b = earlier.get(key), segment.get(key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            out[key] = a + b
    done_h = segment.get("completion_time_h")
    if done_h is not None:
        out["completion_time_h"] = done_h + offset_trace_s / 3600.0
    nodes_h = (out.get("spot_node_hours") or 0.0) + (out.get("on_demand_node_hours") or 0.0)
    out["mean_nodes"] = mean_nodes(nodes_h * 3600.0, (out.get("sim_time_h") or 0.0) * 3600.0)
    deadline = (segment.get("inputs") or {}).get("deadline_s")
    if deadline is not None and done_h is not None:
        out["deadline_met"] = deadline_met(out["completion_time_h"] * 3600.0, deadline)
    return out


def event_of(row: Mapping[str, Any]) -> EventRecord:
    """An ``events`` row (the journal's) back as a record."""
    pause = PauseComponents(
        **{k: float(row.get(k, 0.0)) for k in PauseComponents.__dataclass_fields__}
    )
    return EventRecord(
        float(row["time_s"]),
        EventKind(row["kind"]),
        int(row["nodes_before"]),
        int(row["nodes_after"]),
        pause,
        lost_samples=float(row.get("lost_samples", 0.0)),
        lost_work_h=float(row.get("lost_work_h", 0.0)),
        lost_steps=int(row.get("lost_steps", 0)),
    )


def step_of(row: Mapping[str, Any]) -> StepRecord:
    """A ``steps`` row (the journal's) back as a record (run-time ``real_s``)."""
    nan = math.nan
    return StepRecord(
        float(row["time_s"]),
        int(row["step"]),
        int(row["world_size"]),
        float(row["loss"]),
        int(row["samples"]),
        int(row["gen"]),
        int(row["epoch"]),
        int(row.get("samples_total", 0)),
        float(row.get("grad_sq_local", nan)),
        float(row.get("grad_sq_global", nan)),
        float(row.get("local_batch", nan)),
    )


def segment_of(
    summary: Mapping[str, Any], offset_trace_s: float, first_step: int, ended: str | None = None
) -> dict[str, Any]:
    """One segment of a run (one controller's life) as ``summary.json`` lists it."""
    if ended is None:
        ended = "completed" if summary.get("completed") else "gave up"
    return {
        "start_trace_s": offset_trace_s,
        "end_trace_s": offset_trace_s + float(summary.get("sim_time_h", 0.0)) * 3600.0,
        "first_step": first_step,
        "last_step": int(summary.get("steps", 0)),
        "wall_time_s": float(summary.get("wall_time_s", 0.0)),
        "ended": ended,
    }


def merge_segments(result: Any, point: ResumePoint, inputs: Mapping[str, Any]) -> Any:
    """A resumed segment's :class:`~.run.RunResult` with the earlier segments before it.

    Args:
        result: the new segment (its times from its own start).
        point: where the earlier segments stopped.
        inputs: the run's inputs as first given (``summary.json``'s ``inputs``).
    """
    from elasim.jobmodel import TimelineRow

    from .records import WorkerStart

    offset = point.offset_trace_s
    shift = offset / result.time_scale
    old_events = [event_of(r) for r in point.events] + point.death_events()
    old_real = [
        float(r.get("real_time_s", float(r["time_s"]) / result.time_scale)) for r in point.events
    ]
    old_real += [shift, shift]
    old_interval: list[float | None] = [None] * len(old_real)
    new_events = [replace(e, time_s=e.time_s + offset) for e in result.events]
    timeline = [TimelineRow(**r) for r in point.timeline]
    timeline += [row._replace(time_s=row.time_s + offset) for row in result.timeline]
    steps = [step_of(r) for r in point.steps]
    steps += [replace(r, real_s=r.real_s + shift) for r in result.steps]
    starts = [
        WorkerStart(w.wid, w.spawn_s + shift, None if w.ready_s is None else w.ready_s + shift)
        for w in result.worker_starts
    ]
    seg = dict(result.summary)
    first = point.checkpoint_step or 0
    base = point.base_books()
    summary = merge_books(base, seg, offset)
    summary["steps"] = seg["steps"]
    summary["inputs"] = dict(inputs)
    summary["segments"] = base["segments"] + [segment_of(seg, offset, first)]
    return replace(
        result,
        summary=summary,
        events=tuple(old_events + new_events),
        event_real_s=tuple(old_real) + tuple(r + shift for r in result.event_real_s),
        event_interval_s=tuple(old_interval) + tuple(result.event_interval_s),
        event_due_s=tuple(e.time_s for e in old_events)
        + tuple(d + offset for d in result.event_due_s),
        steps=tuple(steps),
        timeline=tuple(timeline),
        worker_starts=tuple(starts),
    )
