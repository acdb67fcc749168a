"""Simulation settings and results (frozen dataclasses, units in the names)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from elasim.jobmodel import RescaleMode, RunSummary, young_daly_interval_s
from elasim.policies import DecisionRecord, EventRecord

__all__ = ["RescaleMode", "SimConfig", "SimResult", "Timeline", "young_daly_interval_s"]


@dataclass(frozen=True)
class SimConfig:
    """Everything about a simulation that is not the trace, the job or the policy.

    Attributes:
        checkpoint_interval_s: running time between periodic checkpoints; ``None``
            means *auto* (Young/Daly from the observed mean time between failures);
            ``math.inf`` means no periodic checkpoints.
        checkpoint_cost_s: time to write one checkpoint; ``None`` uses the job's
            ``size_bytes / write_bandwidth_bytes_per_s``.
        notice_s: preemption notice (AWS gives 120 s, GCP 30 s); 0 means none.
        rescale: membership-change mechanism.
        deadline_s: the job's deadline from its start, or ``None``.
        seed: seeds everything random (the start offset when ``start_offset_s`` is None)
            and is handed to the policy.
        start_offset_s: where in the trace the job starts; ``None`` draws it uniformly
            from the trace with ``seed`` (the Can't Be Late methodology).
        max_sim_time_s: give up after this much simulated time (``None``: 400 days).
        on_demand_price_per_hour: overrides the trace's on-demand price.
        spot_price_per_hour: spot price for a capacity trace without a price column
            (such traces otherwise cost nothing: no price is invented).
        cluster_gpus: size of the shared cluster when the trace is a job trace.
        cluster_price_per_hour: what a node of the shared cluster costs per hour.
        record_timeline: keep the per-change timeline (off in benchmarks).
        trace_scale: the trace was compressed by this factor (``elasim compare``
            simulates a replay in real seconds): ``auto`` checkpointing's constants, which
            are in trace seconds, are divided by it, so it decides as the replay did.
    """

    checkpoint_interval_s: float | None = None
    checkpoint_cost_s: float | None = None
    notice_s: float = 0.0
    rescale: RescaleMode = RescaleMode.INPLACE
    deadline_s: float | None = None
    seed: int = 0
    start_offset_s: float | None = 0.0
    max_sim_time_s: float | None = None
    on_demand_price_per_hour: float | None = None
    spot_price_per_hour: float | None = None
    cluster_gpus: int | None = None
    cluster_price_per_hour: float = 0.0
    record_timeline: bool = True
    trace_scale: float = 1.0

    def __post_init__(self) -> None:
        def positive(name: str, value: float | None, allow_zero: bool = False) -> None:
            if value is None:
                return
            if math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
                bound = ">= 0" if allow_zero else "> 0"
                raise ValueError(f"{name} must be {bound}, got {value}")

        positive("checkpoint_interval_s", self.checkpoint_interval_s)
        positive("checkpoint_cost_s", self.checkpoint_cost_s, allow_zero=True)
        positive("notice_s", self.notice_s, allow_zero=True)
        positive("deadline_s", self.deadline_s)
        positive("start_offset_s", self.start_offset_s, allow_zero=True)
        positive("max_sim_time_s", self.max_sim_time_s)
        positive("on_demand_price_per_hour", self.on_demand_price_per_hour, allow_zero=True)
        positive("spot_price_per_hour", self.spot_price_per_hour, allow_zero=True)
        positive("cluster_price_per_hour", self.cluster_price_per_hour, allow_zero=True)
        if not (math.isfinite(self.trace_scale) and self.trace_scale > 0):
            raise ValueError(f"trace_scale must be > 0, got {self.trace_scale}")
        if self.cluster_gpus is not None and self.cluster_gpus < 1:
            raise ValueError(f"cluster_gpus must be >= 1, got {self.cluster_gpus}")
        if not isinstance(self.rescale, RescaleMode):
            object.__setattr__(self, "rescale", RescaleMode(self.rescale))


@dataclass(frozen=True)
class Timeline:
    """Column arrays of the job's state over time, one row per change."""

    time_s: tuple[float, ...] = ()
    spot_available: tuple[int, ...] = ()
    spot_held: tuple[int, ...] = ()
    on_demand_held: tuple[int, ...] = ()
    group_nodes: tuple[int, ...] = ()
    price_per_hour: tuple[float, ...] = ()
    progress: tuple[float, ...] = ()
    state: tuple[str, ...] = ()

    def as_columns(self) -> dict[str, tuple[Any, ...]]:
        """``{column: values}`` for a DataFrame."""
        return {
            "time_s": self.time_s,
            "spot_available": self.spot_available,
            "spot_held": self.spot_held,
            "on_demand_held": self.on_demand_held,
            "nodes_held": tuple(
                a + b for a, b in zip(self.spot_held, self.on_demand_held, strict=True)
            ),
            "group_nodes": self.group_nodes,
            "price_per_hour": self.price_per_hour,
            "progress": self.progress,
            "state": self.state,
        }


@dataclass(frozen=True)
class SimResult(RunSummary):
    """What one simulation found: the shared summary fields plus the run's records.

    The summary fields are :class:`~elasim.jobmodel.RunSummary`'s (hour figures are
    wall-clock hours of the job, ``loop_turns`` the job loop's turns).

    Attributes:
        events: every preemption, rescale and checkpoint.
        decisions: the decision log (for parity tests).
        timeline: state over time.
        metadata: inputs (trace, policy, job, config) for the summary.
    """

    events: tuple[EventRecord, ...] = field(repr=False, default=())
    decisions: tuple[DecisionRecord, ...] = field(repr=False, default=())
    timeline: Timeline = field(repr=False, default_factory=lambda: Timeline())
    metadata: tuple[tuple[str, Any], ...] = ()

    #: Keys of :meth:`summary`, in order; they are also the ``--json`` keys.
    SUMMARY_KEYS = RunSummary.keys()

    def summary(self) -> dict[str, Any]:
        """The deterministic summary (``summary.json``): same inputs, same bytes."""
        out = self.summary_fields()
        out["inputs"] = dict(self.metadata)
        return out
