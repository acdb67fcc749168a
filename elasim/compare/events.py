"""Matching a measured run's events with a simulation's, in order, by signature.

Membership changes (``scale_up``, ``scale_down``, ``resume``) and preemptions are
matched in order, by kind and node counts, each with the first unmatched simulated
event of the same signature whose time lies within the window; an event without a
partner is reported as unmatched rather than forced onto another.

A job in several zones adds its **moves** (``kind == "move"``, rows with the
``zone_from`` and ``zone_to`` columns): a move matches the simulated move between the
same two zones, whatever the nodes it left; its pause is the checkpoint's transfer,
departure to arrival.  The executor replays the transfer as a pause of the trace, so
a move's error is how late the real controller saw the arrival, not a pause the model
predicts: moves are shown and counted, but left out of the median pause error.
"""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from elasim.policies import PAUSE_COMPONENTS

log = logging.getLogger(__name__)

#: The fidelity goals: completion time and median per-event pause, relative error.
FIDELITY_GOALS: dict[str, float] = {
    "completion_time_rel_error": 0.05,
    "median_pause_rel_error": 0.20,
}

#: Event kinds that are matched (``move``: a job's move between zones).
MATCHED_KINDS: tuple[str, ...] = ("scale_up", "scale_down", "resume", "preempt", "move")

#: Matched kinds whose pause the model predicts (the median pause error's).
_MODELLED_KINDS: tuple[str, ...] = ("scale_up", "scale_down", "resume", "preempt")


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
    zone_from: str | None = None
    zone_to: str | None = None

    @property
    def label(self) -> str:
        """What a table shows: ``scale_up 1->2``, or ``move a->b`` for a zone move."""
        if self.kind == "move":
            return f"move {self.zone_from}->{self.zone_to}"
        return f"{self.kind} {self.nodes_before}->{self.nodes_after}"

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
            "zone_from": self.zone_from,
            "zone_to": self.zone_to,
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
        """Median over matched events with a measured pause of the relative pause error.

        Over the kinds whose pause the model predicts: a zone move's transfer is
        replayed by the executor, so its error would only pull the median down.
        """
        errors = [
            p.rel_error for p in self.pairs if p.rel_error is not None and p.kind in _MODELLED_KINDS
        ]
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
                if p.matched and p.real_components and p.kind not in ("preempt", "move")
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
            "moves_matched": sum(1 for p in self.pairs if p.matched and p.kind == "move"),
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
        move = row["kind"] == "move"
        pause = float(row["pause_s"])
        rows.append(
            {
                "kind": str(row["kind"]),
                "before": int(row["nodes_before"]),
                "after": int(row["nodes_after"]),
                "time": float(row[time_column]),
                "pause": None if math.isnan(pause) else pause,  # a move still on its way
                "components": ()
                if move
                else tuple((name, float(row[name])) for name in PAUSE_COMPONENTS if name in row),
                "zones": (str(row["zone_from"]), str(row["zone_to"])) if move else (None, None),
            }
        )
    return rows


def _signature(row: dict[str, Any]) -> tuple[Any, ...]:
    """What two matched rows share: kind and nodes, or a move's two zones."""
    if row["kind"] == "move":
        return (row["kind"], *row["zones"])
    return (row["kind"], row["before"], row["after"])


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
        *row["zones"],
    )


def _partner(
    event: dict[str, Any], sim: list[dict[str, Any]], used: list[bool], start: int, window_s: float
) -> int | None:
    """The first unused simulated row from ``start`` on with ``event``'s signature."""
    signature = _signature(event)
    for j in range(start, len(sim)):
        candidate = sim[j]
        if used[j] or _signature(candidate) != signature:
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
    Zone moves are rows of kind ``move`` (:func:`elasim.compare.runs.move_rows`).
    """
    if real_time_column not in real_events:
        real_time_column = "time_s"
    real = _rows(real_events, real_time_column)
    sim = _rows(sim_events, sim_time_column)
    used = [False] * len(sim)
    pairs: list[EventPair] = []
    # moves keep an order of their own: a move and the preemption that caused it share
    # a moment, which either side may log first
    start = {False: 0, True: 0}
    for event in real:
        track = event["kind"] == "move"
        partner = _partner(event, sim, used, start[track], window_s)
        if partner is None:
            pairs.append(_pair(event, None))
            continue
        used[partner] = True
        start[track] = partner + 1
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
