"""The job's timing rules: when to checkpoint, and when a warned node can leave gracefully.

Both are pure functions of numbers, so the simulator's fluid model and the executor's
real workers obey the very same rule; only where the numbers come from differs (the
job spec's model, or measurements converted to trace seconds).
"""

from __future__ import annotations

from elasim.policies import EventKind
from elasim.policies.checkpoints import (
    DEFAULT_PRIOR_MTBF_S,
    MIN_AUTO_INTERVAL_S,
    CheckpointSchedule,
    young_daly_interval_s,
)

from .options import RescaleMode

__all__ = [
    "DEFAULT_PRIOR_MTBF_S",
    "LEAVE_STEPS",
    "MIN_AUTO_INTERVAL_S",
    "CheckpointSchedule",
    "checkpoint_timer_after",
    "leave_lead_s",
    "young_daly_interval_s",
]

#: Steps a graceful leave needs: one to reach a step boundary after the order lands,
#: one for the step in flight when it does.  The executor acts at step boundaries, so
#: the simulator, which has no steps, assumes the same.
LEAVE_STEPS = 2

_CHECKPOINT, _PAUSE, _PREEMPT = EventKind.CHECKPOINT, EventKind.PAUSE, EventKind.PREEMPT


def checkpoint_timer_after(
    kind: EventKind,
    schedule: CheckpointSchedule,
    interval_s: float,
    *,
    write_s: float,
    elapsed_s: float,
    failures: int,
) -> tuple[bool, float]:
    """The periodic checkpoint timer after an event: (restart it?, the interval from now).

    A checkpoint or a pause leaves the state durable, so the training time towards
    the next write starts over; a checkpoint or a preemption re-estimates the interval
    (``auto``'s Young/Daly, from the job's ``elapsed_s`` and its ``failures``: the
    preemptions not warned in time).  One rule for the single job's loop and every
    job of a cluster, which keep only their own clocks (training seconds summed, the
    books' running time marked): the cluster's copy of it once missed a change of
    what counts as a failure.
    """
    if kind is _CHECKPOINT or kind is _PREEMPT:
        interval_s = schedule.current_interval_s(write_s, elapsed_s, failures)
    return kind is _CHECKPOINT or kind is _PAUSE, interval_s


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
