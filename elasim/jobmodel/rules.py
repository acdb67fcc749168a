"""The job's timing rules: when to checkpoint, and when a warned node can leave gracefully.

Both are pure functions of numbers, so the simulator's fluid model and the executor's
real workers obey the very same rule; only where the numbers come from differs (the
job spec's model, or measurements converted to trace seconds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .options import RescaleMode

__all__ = [
    "DEFAULT_PRIOR_MTBF_S",
    "LEAVE_STEPS",
    "MIN_AUTO_INTERVAL_S",
    "CheckpointSchedule",
    "leave_lead_s",
    "young_daly_interval_s",
]

#: ``auto`` never checkpoints more often than once a minute of trace time (a free
#: checkpoint would otherwise be taken continuously).
MIN_AUTO_INTERVAL_S = 60.0
#: Mean time between failures assumed for a source that gives no prior (a day).
DEFAULT_PRIOR_MTBF_S = 86400.0
#: Steps a graceful leave needs: one to reach a step boundary after the order lands,
#: one for the step in flight when it does.  The executor acts at step boundaries, so
#: the simulator, which has no steps, assumes the same.
LEAVE_STEPS = 2


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
class CheckpointSchedule:
    """Running time between periodic checkpoints, fixed or Young/Daly ``auto``.

    ``auto`` re-estimates the mean time between failures after every checkpoint and
    every preemption: the trace's mean time between drops counts as one
    pseudo-observation (a prior), the preemptions seen so far as the others.

    Attributes:
        interval_s: fixed trace seconds of running time, None for ``auto``,
            ``math.inf`` for ``off``.
        prior_mtbf_s: the capacity source's mean time between drops (``inf``: none).
        scale: divides the constants (the floor, the default prior), which are in the
            trace's own seconds, when the clock runs on a compressed trace.
    """

    interval_s: float | None
    prior_mtbf_s: float = math.inf
    scale: float = 1.0

    def __post_init__(self) -> None:
        # the constants of ``auto``, computed once (this runs after every checkpoint)
        prior = self.prior_mtbf_s
        if math.isinf(prior):
            prior = DEFAULT_PRIOR_MTBF_S / self.scale
        object.__setattr__(self, "_prior_s", prior)
        object.__setattr__(self, "_floor_s", MIN_AUTO_INTERVAL_S / self.scale)

    @property
    def auto(self) -> bool:
        """Whether the interval follows Young/Daly."""
        return self.interval_s is None

    def current_interval_s(self, checkpoint_cost_s: float, now_s: float, preemptions: int) -> float:
        """The interval to use from now on (trace seconds; ``inf``: never)."""
        if self.interval_s is not None:
            return self.interval_s
        mtbf = (self._prior_s + now_s) / (1 + preemptions)  # type: ignore[attr-defined]
        return max(young_daly_interval_s(checkpoint_cost_s, mtbf), self._floor_s)  # type: ignore[attr-defined]


def leave_lead_s(
    *,
    step_s: float,
    checkpoint_write_s: float,
    survivors: int,
    mode: RescaleMode,
    margin_s: float = 0.0,
) -> float:
    """Notice a graceful leave needs, in trace seconds: the one graceful-leave rule.

    Victims leave at a step boundary: :data:`LEAVE_STEPS` steps.  When nobody survives,
    or in ``restart`` mode (where every change restarts from a checkpoint), the state
    must be written first, so a checkpoint write is added.  ``margin_s`` is the
    actuator's control latency (zero for the fluid model; a real controller polls).
    A notice shorter than this is treated as no notice: the victims die at the drop.
    """
    need = LEAVE_STEPS * step_s + margin_s
    if survivors == 0 or mode is RescaleMode.RESTART:
        need += checkpoint_write_s
    return need
