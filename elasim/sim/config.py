"""Simulation settings and results (frozen dataclasses, units in the names)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from elasim.jobmodel import JobSpec, RescaleMode, RunSummary, young_daly_interval_s
from elasim.policies import DecisionRecord, EventRecord

__all__ = ["RescaleMode", "SimConfig", "SimResult", "Timeline", "young_daly_interval_s"]


@dataclass(frozen=True)
class SimConfig:
    """What only the simulator has; the job itself is a :class:`~elasim.jobmodel.JobSpec`.

    Attributes:
        max_sim_time_s: give up after this much simulated time (``None``: 400 days).
        cluster_gpus: size of the shared cluster when the trace is a job trace (the
            capacity the elastic job can use is what its background jobs leave).
        cluster_price_per_hour: what a node of the shared cluster costs per hour.
        record_timeline: keep the per-change timeline (off in benchmarks).
        time_scale: simulate a replay at this many trace seconds per second, as the
            executor's ``--time-scale`` replays it (``elasim compare`` simulates a
            real run in its real seconds): the trace and the spec's times are
            compressed by it, and ``auto`` checkpointing's constants, which are in
            the trace's seconds, are divided by it.
    """

    max_sim_time_s: float | None = None
    cluster_gpus: int | None = None
    cluster_price_per_hour: float = 0.0
    record_timeline: bool = True
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.max_sim_time_s is not None and not self.max_sim_time_s > 0:
            raise ValueError(f"max_sim_time_s must be > 0, got {self.max_sim_time_s}")
        if not self.cluster_price_per_hour >= 0:
            price = self.cluster_price_per_hour
            raise ValueError(f"cluster_price_per_hour must be >= 0, got {price}")
        if not (math.isfinite(self.time_scale) and self.time_scale > 0):
            raise ValueError(f"--time-scale must be > 0, got {self.time_scale}")
        if self.cluster_gpus is not None and self.cluster_gpus < 1:
            raise ValueError(f"--cluster-gpus must be >= 1, got {self.cluster_gpus}")


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
        spec: the job as simulated (resolved: its start offset, node bounds, names).
        simulator: what only the simulator states (the training job's model, the
            resolved checkpoint cost, the shared cluster, the oracle's plan, ...).
    """

    events: tuple[EventRecord, ...] = field(repr=False, default=())
    decisions: tuple[DecisionRecord, ...] = field(repr=False, default=())
    timeline: Timeline = field(repr=False, default_factory=lambda: Timeline())
    spec: JobSpec = field(default_factory=JobSpec)
    simulator: tuple[tuple[str, Any], ...] = ()

    #: Keys of :meth:`summary`, in order; they are also the ``--json`` keys.
    SUMMARY_KEYS = RunSummary.keys()

    def summary(self) -> dict[str, Any]:
        """The deterministic summary (``summary.json``): same inputs, same bytes.

        ``inputs`` is the spec (the same keys as a real run's), ``simulator`` what
        only a simulation has.
        """
        out = self.summary_fields()
        out["simulator"] = dict(self.simulator)
        out["inputs"] = self.spec.as_inputs()
        return out
