"""What the controller drives and how: the worker-group interface and its settings.

The actuator (:mod:`.actuator`) and the controller (:mod:`.controller`) both need
them; here, neither imports the other for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from .group import GroupEvent, GroupProgress

__all__ = ["ControllerConfig", "WorkerGroup"]


class WorkerGroup(Protocol):
    """What the controller applies decisions to (real processes, or a fake)."""

    def held(self) -> tuple[int, int]:
        """``(spot, on_demand)`` nodes in the group now."""

    def apply(
        self, spot: int, on_demand: int, *, wait_ready_s: float | None = None
    ) -> list[GroupEvent]:
        """Move to this membership; blocks until the change is done."""

    def preempt(
        self, count: int, *, graceful: bool, kill_at_real_s: float | None = None
    ) -> list[GroupEvent]:
        """Take ``count`` spot nodes away, gracefully or by SIGKILL.

        ``kill_at_real_s`` (graceful leaves only) is the drop on the group's clock.
        """

    def checkpoint(self, tag: str = "interval") -> list[GroupEvent]:
        """Write a checkpoint now (no-op without checkpoints)."""

    def poll(self) -> list[GroupEvent]:
        """Handle crashes and failed collectives on its own; report what it did."""

    def wait(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s`` real seconds, or until something happens."""

    def progress(self) -> GroupProgress:
        """Training progress."""

    def step_time_by_world(self) -> dict[int, float]:
        """Median real step time per world size measured so far."""

    def typical_step_s(self, world: int | None = None) -> float | None:
        """Median real step time at ``world`` (default: now)."""

    def finish(self) -> None:
        """Training is over; release what is left."""

    @property
    def global_batch(self) -> int | None:
        """Samples per optimizer step (None until known)."""

    @property
    def done(self) -> bool:
        """Whether training reached its end."""


@dataclass(frozen=True)
class ControllerConfig:
    """What the controller adds to the job's spec: its clock, its priors, its bounds.

    The job itself (trace, policy, nodes, mechanism, notice, checkpoints, deadline,
    window, prices) is the :class:`~elasim.jobmodel.JobSpec` the controller is
    given; these are the real side's own settings.

    Attributes:
        time_scale: trace seconds per real second.
        max_steps: the job's work, in optimizer steps (progress = steps / max_steps).
        max_nodes: most nodes the actuator's tables cover (the spec's, within the
            slots there are).
        throughput_samples_per_s: fixed table (samples per *trace* second, index =
            nodes, entry 0 = 0) instead of measuring.
        statistical_efficiency: fixed efficiency table instead of 1.0 everywhere
            (the executor's fixed global batch).
        rescale_cost_trace_s: fixed ``Observation.rescale_cost_s`` instead of the
            median measured pause.
        global_batch: samples per step when no worker has reported it yet.
        prior_step_real_s: step time assumed before any measurement.
        rescale_cost_prior_real_s: pause assumed before any measurement.
        graceful_margin_real_s: the controller's latency, added to the graceful-leave
            lead (:func:`elasim.jobmodel.leave_lead_s`).
        checkpoint_write_prior_real_s: checkpoint write assumed before any measurement.
        max_wall_real_s: give up after this long.
        idle_poll_real_s: longest wait between two looks at the world.
        timeline_interval_real_s: least time between timeline rows that differ only in
            progress.
    """

    time_scale: float = 60.0
    max_steps: int = 300
    max_nodes: int = 4
    throughput_samples_per_s: tuple[float, ...] | None = None
    statistical_efficiency: tuple[float, ...] | None = None
    rescale_cost_trace_s: float | None = None
    global_batch: int = 64
    prior_step_real_s: float = 0.01
    rescale_cost_prior_real_s: float = 0.1
    graceful_margin_real_s: float = 0.25
    checkpoint_write_prior_real_s: float = 0.05
    max_wall_real_s: float = 600.0
    idle_poll_real_s: float = 0.05
    timeline_interval_real_s: float = 0.25

    def __post_init__(self) -> None:
        if not (math.isfinite(self.time_scale) and self.time_scale > 0):
            raise ValueError(f"time_scale must be > 0, got {self.time_scale}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.max_nodes < 1:
            raise ValueError(f"max_nodes must be >= 1, got {self.max_nodes}")
        if not self.prior_step_real_s > 0:
            raise ValueError(f"prior_step_real_s must be > 0, got {self.prior_step_real_s}")
        for name in ("throughput_samples_per_s", "statistical_efficiency"):
            table = getattr(self, name)
            if table is not None and len(table) != self.max_nodes + 1:
                raise ValueError(f"{name} needs max_nodes + 1 entries")
