"""The loop's mechanism choices as values: pure functions return actions, one applier acts.

What the loop does when capacity drops, when a drop is announced, when a warned node's
leave time comes, and how many spot nodes it may hold, are decisions of the same kind
as a policy's: they depend only on numbers the loop already has.  So they are written
as pure functions that return :data:`Action` values, and :meth:`JobLoop._apply
<elasim.jobmodel.loop.JobLoop>` is the one place that carries actions out (it calls
the actuator, records events, and keeps the planned leaves and caps).  This is torch
elastic's rendezvous pattern: a side-effect-free state handler returns an ``_Action``
and one executor performs it.  Tests check the choices as values, without a loop or an
actuator.

The actions are named tuples, not dataclasses: :class:`Hold` is made at every turn of
the simulator, and a tuple is several times cheaper to build; they are as immutable.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from elasim.policies import Decision, EventKind, EventRecord

from .options import RescaleMode
from .rules import leave_lead_s

__all__ = [
    "Action",
    "Cap",
    "Hold",
    "PlanLeave",
    "Preempt",
    "Warn",
    "caps_in_force",
    "hold",
    "hold_spot",
    "members_lost",
    "on_capacity",
    "on_leave",
    "on_notice",
]

#: Time tolerance of the loop (trace seconds).
EPS_S = 1e-9


class Hold(NamedTuple):
    """Hold ``spot_nodes`` + ``on_demand_nodes`` (the actuator's ``apply``).

    Attributes:
        spot_nodes: spot nodes to hold (already within capacity and caps).
        on_demand_nodes: on-demand nodes to hold.
        time_s: when (trace seconds).
        fresh: a decision or a capacity change happened since the last hold (a
            restart-mode group retries a failed restart only then).
    """

    spot_nodes: int
    on_demand_nodes: int
    time_s: float
    fresh: bool


class Preempt(NamedTuple):
    """Take ``victims`` spot nodes, nodes still starting first (the actuator's ``preempt``).

    Attributes:
        victims: spot nodes to take.
        graceful: they leave at a step boundary (warned) rather than being killed.
        time_s: when (trace seconds).
        drop_s: when the warned nodes actually go (graceful only).
    """

    victims: int
    graceful: bool
    time_s: float
    drop_s: float | None = None


class Warn(NamedTuple):
    """Record a preemption notice that concerns held nodes; a decision is due.

    Attributes:
        event: the ``preempt_notice`` event.
        drop_s: when the drop comes (the policy sees it as the event's deadline).
    """

    event: EventRecord
    drop_s: float


class PlanLeave(NamedTuple):
    """Warned victims leave gracefully at ``leave_s``, ahead of the drop at ``drop_s``.

    Attributes:
        leave_s: when they leave (the drop less the lead a graceful leave needs).
        drop_s: when the capacity drops.
        available: spot nodes available after the drop.
    """

    leave_s: float
    drop_s: float
    available: int


class Cap(NamedTuple):
    """Hold no more than ``available`` spot nodes until ``until_s``.

    Capacity given up under a notice is not taken back before the drop.
    """

    until_s: float
    available: int


#: What the pure functions here return and the loop's applier carries out.
Action = Hold | Preempt | Warn | PlanLeave | Cap


def members_lost(victims: int, paid_spot: int, member_spot: int) -> int:
    """Group members among ``victims`` spot nodes taken, nodes still starting first.

    Both actuators take starting nodes first (a node that is not training yet costs
    nothing to lose), so members lose only what the starting ones cannot cover.

    Args:
        victims: spot nodes taken.
        paid_spot: spot nodes paid for (members and starting ones).
        member_spot: spot nodes in the training group.
    """
    return max(member_spot - max(paid_spot - victims, 0), 0)


def on_capacity(available: int, paid_spot: int, time_s: float) -> tuple[Action, ...]:
    """Capacity is now ``available``: without notice, nodes beyond it are killed."""
    if paid_spot > available:
        return (Preempt(paid_spot - available, False, time_s),)
    return ()


def on_notice(
    *,
    time_s: float,
    drop_s: float,
    available: int,
    paid_spot: int,
    member_spot: int,
    member_on_demand: int,
    step_s: float,
    checkpoint_write_s: float,
    mode: RescaleMode,
    margin_s: float,
) -> tuple[Action, ...]:
    """A drop to ``available`` at ``drop_s`` is announced at ``time_s``.

    The notice is recorded when it concerns nodes held now.  A graceful leave is
    planned when the notice is long enough for one (:func:`~.rules.leave_lead_s`, the
    one graceful-leave rule), even when the job holds none of the doomed nodes yet:
    it may acquire them before the drop, and it was warned all the same.
    """
    before = member_spot + member_on_demand
    after = before - members_lost(max(paid_spot - available, 0), paid_spot, member_spot)
    actions: list[Action] = []
    if available < paid_spot:
        actions.append(Warn(EventRecord(time_s, EventKind.PREEMPT_NOTICE, before, after), drop_s))
    lead_s = leave_lead_s(
        step_s=step_s,
        checkpoint_write_s=checkpoint_write_s,
        survivors=after,
        mode=mode,
        margin_s=margin_s,
    )
    if drop_s - time_s >= lead_s - EPS_S:
        actions.append(PlanLeave(max(drop_s - lead_s, time_s), drop_s, available))
    return tuple(actions)


def on_leave(leave: PlanLeave, leave_s: float, paid_spot: int) -> tuple[Action, ...]:
    """A planned leave is due at ``leave_s``: cap spot until the drop, and let go.

    The victims are the nodes held beyond what stays available; they leave
    gracefully, told when the drop comes.
    """
    actions: list[Action] = [Cap(leave.drop_s, leave.available)]
    if paid_spot > leave.available:
        actions.append(Preempt(paid_spot - leave.available, True, leave_s, leave.drop_s))
    return tuple(actions)


def caps_in_force(caps: Iterable[Cap], now_s: float) -> list[Cap]:
    """The caps whose drop has not come yet at ``now_s``."""
    return [cap for cap in caps if cap.until_s > now_s + EPS_S]


def hold(target: Decision, available: int, caps: Iterable[Cap], time_s: float, fresh: bool) -> Hold:
    """What to hold for the policy's ``target``: within capacity and every cap in force."""
    return Hold(hold_spot(target, available, caps), target.on_demand_nodes, time_s, fresh)


def hold_spot(target: Decision, available: int, caps: Iterable[Cap]) -> int:
    """The spot nodes of :func:`hold`: the one rule, for the loop that holds every turn.

    The loop calls this and the actuator directly: building a :class:`Hold` at every
    turn only to unpack it took about 3% of a long simulation.
    """
    spot = target.spot_nodes
    if available < spot:
        spot = available
    for cap in caps:
        if cap.available < spot:
            spot = cap.available
    return spot
