"""The rules that define one elastic job's life, the same for both clocks.

Every time here is in *trace* seconds: the simulator's clock, and the executor's real
clock multiplied by ``--time-scale``.  A quantity that only exists in real time (a
wall-clock budget, a collective timeout) belongs to the executor's own settings and
says so with ``_real_s``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

__all__ = [
    "CHECKPOINT_AUTO",
    "CHECKPOINT_OFF",
    "JobRules",
    "RescaleMode",
    "describe_checkpoint_interval",
    "parse_checkpoint_interval",
]


class RescaleMode(str, enum.Enum):
    """How membership changes are implemented (fixed for a run: no transitions).

    * ``inplace``: survivors keep their processes and in-memory state and re-form the
      group; newcomers get the state by broadcast.  A failure without notice loses
      only the step in flight (Horovod Elastic, Bamboo, Oobleck style).
    * ``restart``: every change stops all workers, which restart from the last
      checkpoint (torchrun / TorchElastic semantics).  A planned change writes a
      checkpoint first, so it loses no work; a failure without notice rolls back.

    The values are the ``--rescale`` values of every command, so a simulated and a
    real run of the same mode can be joined.
    """

    INPLACE = "inplace"
    RESTART = "restart"


#: The shortest checkpoint interval a user may ask for: below a second a job would do
#: nothing but checkpoint (and a simulation would record millions of them).
MIN_CHECKPOINT_INTERVAL_S = 1.0

#: ``checkpoint_interval_s`` meaning "Young/Daly from the observed failure rate".
CHECKPOINT_AUTO: float | None = None
#: ``checkpoint_interval_s`` meaning "no periodic checkpoints".
CHECKPOINT_OFF = math.inf


def parse_checkpoint_interval(text: str | float | None, flag: str = "--checkpoint-interval-s"):
    """``auto``, ``off`` or seconds, as every command spells it, to the model's value.

    Returns:
        None for ``auto`` (the default), ``math.inf`` for ``off``, else seconds > 0.

    Raises:
        ValueError: anything else, in one line naming ``flag``.
    """
    if text is None:
        return CHECKPOINT_AUTO
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        word = str(text).strip().lower()
        if word in ("auto", ""):
            return CHECKPOINT_AUTO
        if word in ("off", "none", "never", "inf"):
            return CHECKPOINT_OFF
        try:
            value = float(word)
        except ValueError:
            raise ValueError(f"{flag} must be 'auto', 'off' or seconds, got {text!r}") from None
    if math.isinf(value) and value > 0:
        return CHECKPOINT_OFF
    if not (math.isfinite(value) and value >= MIN_CHECKPOINT_INTERVAL_S):
        raise ValueError(
            f"{flag} must be at least {MIN_CHECKPOINT_INTERVAL_S:g} s, 'auto' or 'off', "
            f"got {text!r}"
        )
    return value


def describe_checkpoint_interval(value: float | None) -> str | float:
    """The inverse of :func:`parse_checkpoint_interval`, for summaries."""
    if value is None:
        return "auto"
    if math.isinf(value):
        return "off"
    return float(value)


@dataclass(frozen=True)
class JobRules:
    """What the job loop needs to know of a :class:`~.spec.JobSpec`, resolved.

    Built only by :func:`~.build.job_rules` (node bounds and the on-demand price known;
    the notice is the replay's, which gives it).

    Attributes:
        min_nodes: the job cannot run on fewer nodes.
        max_nodes: nor on more (capacity above it is never reported).
        rescale: the membership-change mechanism.
        checkpoint_interval_s: running time between periodic checkpoints; None is
            ``auto`` (Young/Daly), ``math.inf`` is ``off``.
        deadline_s: the job's deadline from its start, or None.
        on_demand_price_per_hour: USD per on-demand node-hour; ``math.inf`` when the
            environment offers no on-demand nodes (requests are then clamped to 0).
        horizon_s: give up at this trace time.
        trace_scale: the clock runs this many times faster than the trace's own
            (a simulation of a compressed replay); the constants of ``auto``
            checkpointing, which are in the trace's seconds, are divided by it.
    """

    min_nodes: int = 1
    max_nodes: int = 4
    rescale: RescaleMode = RescaleMode.INPLACE
    checkpoint_interval_s: float | None = CHECKPOINT_AUTO
    deadline_s: float | None = None
    on_demand_price_per_hour: float = math.inf
    horizon_s: float = math.inf
    trace_scale: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_nodes <= self.max_nodes:
            raise ValueError(
                f"need 1 <= min_nodes <= max_nodes, got {self.min_nodes}, {self.max_nodes}"
            )
        if not isinstance(self.rescale, RescaleMode):
            object.__setattr__(self, "rescale", RescaleMode(self.rescale))
        interval = self.checkpoint_interval_s
        if interval is not None and not interval > 0:
            raise ValueError(f"checkpoint_interval_s must be > 0, got {interval}")
        if self.deadline_s is not None and not (
            math.isfinite(self.deadline_s) and self.deadline_s > 0
        ):
            raise ValueError(f"deadline_s must be > 0, got {self.deadline_s}")
        if not self.on_demand_price_per_hour >= 0:
            raise ValueError("on_demand_price_per_hour must be >= 0 (inf: not offered)")
        if not (math.isfinite(self.trace_scale) and self.trace_scale > 0):
            raise ValueError(f"trace_scale must be > 0, got {self.trace_scale}")
        if not self.horizon_s > 0:
            raise ValueError(f"horizon_s must be > 0, got {self.horizon_s}")

    @property
    def allow_on_demand(self) -> bool:
        """Whether on-demand nodes are offered at all."""
        return math.isfinite(self.on_demand_price_per_hour)
