"""Simulation settings and results (frozen dataclasses, units in the names)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

from elasim.policies import DecisionRecord, EventRecord

__all__ = ["RescaleMode", "SimConfig", "SimResult", "Timeline", "young_daly_interval_s"]


class RescaleMode(str, enum.Enum):
    """How membership changes are implemented (fixed for a run, no transitions).

    * ``inplace``: survivors keep their processes and in-memory state and re-form the
      group; newcomers get the state by broadcast.  A failure without notice loses
      only the step in flight (Horovod Elastic, Bamboo, Oobleck style).
    * ``restart``: every change stops all workers, which restart from the last
      checkpoint (torchrun / TorchElastic semantics).  A planned change writes a
      checkpoint first, so it loses no work; a failure without notice rolls back.
    """

    INPLACE = "inplace"
    RESTART = "restart"


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
        if self.cluster_gpus is not None and self.cluster_gpus < 1:
            raise ValueError(f"cluster_gpus must be >= 1, got {self.cluster_gpus}")
        if not isinstance(self.rescale, RescaleMode):
            object.__setattr__(self, "rescale", RescaleMode(self.rescale))


def young_daly_interval_s(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Daly's (2006) higher-order refinement of Young's optimal checkpoint interval.

    ``sqrt(2 C M) * (1 + sqrt(C / 2M) / 3 + C / 18M) - C`` for ``C < 2M``, else ``M``.
    A zero-cost checkpoint would be taken continuously; we floor the interval at 1 s.
    """
    cost, mtbf = checkpoint_cost_s, mtbf_s
    if cost <= 0:
        return 1.0
    if cost >= 2 * mtbf:
        return max(mtbf, 1.0)
    root = math.sqrt(2 * cost * mtbf)
    return max(root * (1 + math.sqrt(cost / (2 * mtbf)) / 3 + cost / (18 * mtbf)) - cost, 1.0)


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
class SimResult:
    """What one simulation found.  Hour figures are wall-clock hours of the job.

    Attributes:
        completed: whether the job reached its target within ``max_sim_time_s``.
        completion_time_h: time to reach the target (``None`` if not completed).
        cost_usd: spot plus on-demand spend.
        spot_cost_usd: spot spend.
        on_demand_cost_usd: on-demand spend.
        spot_node_hours: spot node-hours paid for (booting nodes included).
        on_demand_node_hours: on-demand node-hours paid for.
        mean_nodes: time-averaged nodes held.
        rescales: group re-formations after the first start.
        preemptions: capacity drops that took at least one of the job's nodes.
        checkpoints: checkpoints written.
        lost_work_h: job hours whose work was thrown away.
        rescale_overhead_h: time spent forming groups (including waiting for boots).
        checkpoint_overhead_h: time spent writing checkpoints.
        idle_h: time holding no running group and not acquiring one.
        running_h: time training (including work later lost); ``running_h +
            rescale_overhead_h + checkpoint_overhead_h + idle_h == sim_time_h``.
        convergence_cost_h: running time whose samples the gradient-noise-scale model
            discounts (extra time caused by large global batches).
        convergence_cost_samples: the matching extra raw samples.
        raw_samples: samples processed (including later-lost ones).
        deadline_met: ``None`` without a deadline.
        events_processed: SimPy events processed.
        sim_time_h: simulated time at the end.
        events: every preemption, rescale and checkpoint.
        decisions: the decision log (for parity tests).
        timeline: state over time.
        metadata: inputs (trace, policy, job, config) for the summary.
    """

    completed: bool
    completion_time_h: float | None
    cost_usd: float
    spot_cost_usd: float
    on_demand_cost_usd: float
    spot_node_hours: float
    on_demand_node_hours: float
    mean_nodes: float
    rescales: int
    preemptions: int
    checkpoints: int
    lost_work_h: float
    rescale_overhead_h: float
    checkpoint_overhead_h: float
    idle_h: float
    running_h: float
    convergence_cost_h: float
    convergence_cost_samples: float
    raw_samples: float
    deadline_met: bool | None
    events_processed: int
    sim_time_h: float
    events: tuple[EventRecord, ...] = field(repr=False, default=())
    decisions: tuple[DecisionRecord, ...] = field(repr=False, default=())
    timeline: Timeline = field(repr=False, default_factory=Timeline)
    metadata: tuple[tuple[str, Any], ...] = ()

    #: Keys of :meth:`summary`, in order; they are also the ``--json`` keys.
    SUMMARY_KEYS = (
        "completed",
        "completion_time_h",
        "cost_usd",
        "spot_cost_usd",
        "on_demand_cost_usd",
        "spot_node_hours",
        "on_demand_node_hours",
        "mean_nodes",
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
        "deadline_met",
        "events_processed",
        "sim_time_h",
    )

    def summary(self) -> dict[str, Any]:
        """The deterministic summary (``summary.json``): same inputs, same bytes."""
        out: dict[str, Any] = {key: getattr(self, key) for key in self.SUMMARY_KEYS}
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = round(value, 9)
        out["inputs"] = dict(self.metadata)
        return out
