"""What the job loop drives, in three roles: commands, a meter, and estimates.

An actuator turns "hold ``s`` spot and ``d`` on-demand nodes" into membership
changes, and reports back what happened as :class:`~elasim.policies.EventRecord`
values in trace seconds.  It owns only what differs between the two environments:
how long a change takes and what it costs (modelled or measured), and how fast the
job trains.  Everything else about the job's life is in :mod:`.loop`.

The loop uses it in three roles, each a small protocol of its own:

* :class:`Actuator`, the commands: apply, preempt, checkpoint, moved (a job in
  several zones arrived in another), and what ends or happens on its own (settle,
  admit, poll);
* :class:`Meter`, what the job is doing now: state, holdings, progress (read only);
* :class:`Estimates`, what the policy's observation and the loop's rules need to
  know about the job: throughput, pauses, step and checkpoint-write times.

The simulator's fluid model plays all three (it is the model); the executor's
:class:`~elasim.executor.actuator.GroupActuator` is the commands and the meter, and
its :class:`~elasim.executor.estimates.MeasuredEstimates` learns the estimates from
the events.  An actuator names its meter and its estimates, which may be itself.
"""

from __future__ import annotations

from typing import Protocol

from elasim.policies import EventRecord, JobState

from .accounting import Accounting

__all__ = ["Actuator", "Estimates", "Meter"]


class Meter(Protocol):
    """What the job is doing now (read only)."""

    @property
    def state(self) -> JobState:
        """The job's state now."""

    @property
    def training(self) -> bool:
        """Whether the group is training now (the checkpoint timer runs)."""

    def paid(self) -> tuple[int, int]:
        """``(spot, on_demand)`` nodes paid for: members plus nodes still starting."""

    def members(self) -> tuple[int, int]:
        """``(spot, on_demand)`` nodes in the training group."""

    def finished(self, now_s: float) -> bool:
        """Whether the job reached its target (and is now DONE)."""

    def progress(self) -> float:
        """Effective samples done / target, in [0, 1]."""

    def remaining_samples(self) -> float:
        """Effective samples still to do."""

    def step_count(self) -> int:
        """Training steps committed so far (0 where steps are not simulated)."""

    def view(self) -> tuple[int, int, int, float, str, int]:
        """One timeline row's worth in one call.

        Returns:
            Spot and on-demand nodes paid for, group size, progress, state value, steps.
        """


class Estimates(Protocol):
    """What the loop knows about the job's speed and costs (trace seconds).

    Attributes:
        leave_margin_s: control latency added to the graceful-leave lead.
    """

    leave_margin_s: float

    def throughput_table(self) -> tuple[float, ...]:
        """Samples per trace second by node count (estimated or measured)."""

    def efficiency_table(self) -> tuple[float, ...]:
        """Effective samples per raw sample by node count."""

    def rescale_cost_s(self) -> float:
        """Pause of one planned membership change (estimated or measured)."""

    def resume_cost_s(self) -> float | None:
        """Pause of a start from no nodes (None: same as :meth:`rescale_cost_s`)."""

    def step_s(self) -> float:
        """One training step now, for the graceful-leave rule."""

    def checkpoint_write_s(self) -> float:
        """One checkpoint write, for the leave rule and Young/Daly."""


class Actuator(Protocol):
    """The environment side of one elastic job: the commands (times in trace seconds).

    Attributes:
        books: the job's ledger: the loop bills cost and node-time into it, the
            actuator books where the time went (it alone knows).
        polls: whether things happen without being asked (real workers crash), so the
            loop must :meth:`poll` every turn; the fluid model sets it False.
        meter: what the job is doing now.
        estimates: what the loop knows about the job's speed and costs.
    """

    books: Accounting
    polls: bool
    meter: Meter
    estimates: Estimates

    def advance(self, now_s: float, books: Accounting) -> None:
        """Integrate training and book the time since the last call on its activity."""

    def apply(self, spot: int, on_demand: int, now_s: float, fresh: bool) -> list[EventRecord]:
        """Move towards holding ``spot`` + ``on_demand`` nodes.

        ``fresh`` says that a decision or a capacity change happened since the last
        call (a real restart-mode group retries a failed restart only then).
        """

    def preempt(
        self, victims: int, graceful: bool, now_s: float, drop_s: float | None = None
    ) -> list[EventRecord]:
        """Take ``victims`` spot nodes (starting ones first): gracefully, or killed.

        ``drop_s`` is when a warned node actually goes (a graceful leave only): an
        actuator that stops processes it does not control (a user's script) kills
        whatever is left then.
        """

    def checkpoint(self, now_s: float) -> list[EventRecord]:
        """Write a periodic checkpoint now."""

    def moved(self, now_s: float) -> None:
        """The job's checkpoint arrived in another zone (:mod:`.zones`); nothing is held.

        The next :meth:`apply` starts the job there from nothing: an actuator that
        keeps anything of the old zone (warm slots, starts in flight) forgets it here.
        """

    def settle(self, now_s: float) -> list[EventRecord]:
        """What ends on its own at ``now_s`` (pauses, checkpoint writes)."""

    def admit(self, now_s: float) -> list[EventRecord]:
        """Nodes that finished starting join the group."""

    def poll(self, now_s: float) -> list[EventRecord]:
        """What happened without being asked (a real worker that crashed)."""

    def next_due_s(self, now_s: float) -> float:
        """When :meth:`settle`/:meth:`admit` next have work (``inf``: not before a poll)."""

    def acted_until_s(self, now_s: float) -> float:
        """Trace time after the last command (given ``now_s``, the loop's time: at least it).

        ``now_s`` itself for an actuator that acts at once (the fluid model); later for
        one whose command blocked while the trace went on (a real restart waits for its
        workers): the loop then catches up (:mod:`.loop`).
        """
