"""The job's books: money, node-time, where the time went, and the enforced life cycle.

:class:`Accounting` is filled by the job loop (cost and node-time, counted from the
nodes *paid for*, booting ones included) and by the actuator (which activity the
time was spent on: only the actuator knows whether its group was training or paused).
:class:`JobStateMachine` enforces :class:`~elasim.policies.JobState`'s legal
transitions on both sides.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from elasim.policies import EventKind, EventRecord, JobState

__all__ = ["Accounting", "Activity", "JobStateMachine", "RESCALE_KINDS"]

#: Events that re-form the group (the first start included; ``rescales`` excludes it).
RESCALE_KINDS = frozenset({EventKind.SCALE_UP, EventKind.SCALE_DOWN, EventKind.RESUME})
_SCALE_UP, _SCALE_DOWN, _RESUME = EventKind.SCALE_UP, EventKind.SCALE_DOWN, EventKind.RESUME
_PREEMPT, _CHECKPOINT = EventKind.PREEMPT, EventKind.CHECKPOINT


class Activity(str, enum.Enum):
    """What the job spent a stretch of time on (the four add up to the run's length).

    * ``running``: training, including work later lost.
    * ``rescale``: forming groups, including waiting for nodes that are booting.
    * ``checkpoint``: writing checkpoints.
    * ``idle``: holding no running group and acquiring none.
    """

    RUNNING = "running"
    RESCALE = "rescale"
    CHECKPOINT = "checkpoint"
    IDLE = "idle"


@dataclass
class Accounting:
    """Running totals of one job (trace seconds, USD).  Mutable: the loop's ledger."""

    spot_cost_usd: float = 0.0
    on_demand_cost_usd: float = 0.0
    spot_node_s: float = 0.0
    on_demand_node_s: float = 0.0
    running_s: float = 0.0
    rescale_s: float = 0.0
    checkpoint_s: float = 0.0
    idle_s: float = 0.0
    convergence_s: float = 0.0
    convergence_samples: float = 0.0
    raw_samples: float = 0.0
    lost_s: float = 0.0
    rescale_events: int = 0
    preemptions: int = 0
    #: preemptions not warned in time, or that lost work all the same: the failures
    #: ``auto``'s checkpoint interval counts (a warned leave loses nothing, so it is
    #: no reason to write more often)
    failures: int = 0
    checkpoints: int = 0

    def bill(
        self, dt_s: float, spot: int, on_demand: int, price: float, on_demand_price: float
    ) -> None:
        """Pay for ``spot`` + ``on_demand`` nodes over ``dt_s`` seconds."""
        self.spot_cost_usd += spot * price * dt_s / 3600.0
        if on_demand:
            self.on_demand_cost_usd += on_demand * on_demand_price * dt_s / 3600.0
        self.spot_node_s += spot * dt_s
        self.on_demand_node_s += on_demand * dt_s

    def spend(self, activity: Activity, seconds: float) -> None:
        """Book ``seconds`` of the run on ``activity``."""
        if activity is Activity.RUNNING:
            self.running_s += seconds
        elif activity is Activity.RESCALE:
            self.rescale_s += seconds
        elif activity is Activity.CHECKPOINT:
            self.checkpoint_s += seconds
        else:
            self.idle_s += seconds

    def move(self, seconds: float, source: Activity, target: Activity) -> None:
        """Re-book time measured after the fact (a real pause reported as an event)."""
        available = {
            Activity.RUNNING: self.running_s,
            Activity.RESCALE: self.rescale_s,
            Activity.CHECKPOINT: self.checkpoint_s,
            Activity.IDLE: self.idle_s,
        }[source]
        amount = min(max(seconds, 0.0), available)
        self.spend(source, -amount)
        self.spend(target, amount)

    def count(self, event: EventRecord, warned: bool = False) -> None:
        """Tally an event: the counts in the summary are counts of event rows.

        ``warned``: the event comes of a leave warned in time (a graceful preemption).
        """
        kind = event.kind
        # identity tests, not set membership: an enum's hash is a Python-level call,
        # and the simulator counts every event
        if kind is _SCALE_UP or kind is _SCALE_DOWN or kind is _RESUME:
            self.rescale_events += 1
        elif kind is _PREEMPT:
            self.preemptions += 1
            if not warned or event.lost_work_h > 0.0:
                self.failures += 1
        elif kind is _CHECKPOINT:
            self.checkpoints += 1
        self.lost_s += event.lost_work_h * 3600.0

    @property
    def rescales(self) -> int:
        """Group re-formations after the first start."""
        return max(self.rescale_events - 1, 0)

    @property
    def elapsed_s(self) -> float:
        """Running + rescale + checkpoint + idle."""
        return self.running_s + self.rescale_s + self.checkpoint_s + self.idle_s


#: Every legal ``(from, to)`` pair of :meth:`JobState.can_become`, looked up without a
#: call: the simulator changes state twice per checkpoint.
_LEGAL = frozenset((a, b) for a in JobState for b in JobState if a.can_become(b))
_RUNNING, _RESCALING = JobState.RUNNING, JobState.RESCALING


class JobStateMachine:
    """The job's :class:`JobState`, changed only along the legal transitions.

    It also keeps when training last began and stopped, and when the re-formation
    under way began: the room a final checkpoint may take back (``Release``).
    Both job models read these times here, where every change of state passes, so
    the rule exists once (each model had kept them itself, and one of them took a
    periodic write's seconds for training).
    """

    __slots__ = ("state", "running_since_s", "running_until_s", "pause_start_s")

    def __init__(self, state: JobState = JobState.WAITING) -> None:
        self.state = state
        self.running_since_s = 0.0  # when training last began
        self.running_until_s = 0.0  # when it last stopped (read only while it does not run)
        self.pause_start_s = 0.0  # when the re-formation under way began

    def to(self, new: JobState, at_s: float) -> bool:
        """Move to ``new`` at ``at_s`` (a no-op if already there); True if it changed.

        Raises:
            RuntimeError: an illegal transition, which is a bug in the actuator.
        """
        old = self.state
        if new is old:
            return False
        if (old, new) not in _LEGAL:
            raise RuntimeError(f"illegal job transition {old.value} -> {new.value}")
        if old is _RUNNING:
            self.running_until_s = at_s
        elif new is _RUNNING:
            self.running_since_s = at_s
        self.state = new
        return True

    def reform(self, at_s: float) -> None:
        """A re-formation begins at ``at_s``, or begins again while one is under way."""
        self.to(_RESCALING, at_s)
        self.pause_start_s = at_s
