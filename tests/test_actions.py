"""The loop's mechanism choices as values (elasim.jobmodel.actions), and the group's victims.

The choices are pure functions, so they are tested without a loop or an actuator: what
each returns for given numbers.  The loop-level tests (parity, pinned results) check
that the one applier carries them out as before.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasim.jobmodel import RescaleMode
from elasim.jobmodel.actions import (
    Cap,
    Hold,
    PlanLeave,
    Preempt,
    Warn,
    caps_in_force,
    hold,
    members_lost,
    on_capacity,
    on_leave,
    on_notice,
)
from elasim.policies import Decision, EventKind, EventRecord

NOTICE = dict(
    step_s=1.0, checkpoint_write_s=10.0, mode=RescaleMode.INPLACE, margin_s=0.5
)  # a graceful leave with survivors needs 2 steps + the margin: 2.5 s


def test_a_drop_without_notice_kills_what_is_held_beyond_capacity() -> None:
    assert on_capacity(available=2, paid_spot=5, time_s=7.0) == (Preempt(3, False, 7.0),)
    assert on_capacity(available=5, paid_spot=5, time_s=7.0) == ()


def test_starting_nodes_are_taken_before_members() -> None:
    # 5 paid, 3 training: 2 are still starting, so taking 2 costs no member
    assert members_lost(victims=2, paid_spot=5, member_spot=3) == 0
    assert members_lost(victims=3, paid_spot=5, member_spot=3) == 1
    assert members_lost(victims=9, paid_spot=5, member_spot=3) == 3


@given(
    member=st.integers(0, 16),
    starting=st.integers(0, 16),
    victims=st.integers(0, 40),
)
def test_members_lost_is_what_the_starting_nodes_cannot_cover(member, starting, victims) -> None:
    lost = members_lost(victims, member + starting, member)
    assert 0 <= lost <= min(victims, member)
    # the starting nodes take the rest, as far as there are victims
    assert lost == max(min(victims, member + starting) - starting, 0)


def test_a_long_notice_warns_and_plans_a_graceful_leave() -> None:
    actions = on_notice(
        time_s=100.0, drop_s=220.0, available=1, paid_spot=3, member_spot=3,
        member_on_demand=1, **NOTICE,
    )  # fmt: skip
    assert actions == (
        Warn(EventRecord(100.0, EventKind.PREEMPT_NOTICE, 4, 2), 220.0),
        PlanLeave(217.5, 220.0, 1),
    )


def test_a_notice_shorter_than_a_leave_is_no_notice() -> None:
    actions = on_notice(
        time_s=100.0, drop_s=102.0, available=1, paid_spot=3, member_spot=3,
        member_on_demand=0, **NOTICE,
    )  # fmt: skip
    assert [type(a) for a in actions] == [Warn]


def test_nobody_surviving_or_restart_needs_a_checkpoint_first() -> None:
    alone = on_notice(
        time_s=0.0, drop_s=100.0, available=0, paid_spot=2, member_spot=2,
        member_on_demand=0, **NOTICE,
    )  # fmt: skip
    assert alone[-1] == PlanLeave(100.0 - 12.5, 100.0, 0)  # 2 steps + margin + write
    restart = on_notice(
        time_s=0.0, drop_s=100.0, available=1, paid_spot=2, member_spot=2,
        member_on_demand=0, **{**NOTICE, "mode": RescaleMode.RESTART},
    )  # fmt: skip
    assert restart[-1] == PlanLeave(87.5, 100.0, 1)


def test_a_notice_about_nodes_not_held_plans_a_leave_all_the_same() -> None:
    """The job may acquire the doomed nodes before the drop: it was warned."""
    actions = on_notice(
        time_s=0.0, drop_s=120.0, available=2, paid_spot=1, member_spot=1,
        member_on_demand=0, **NOTICE,
    )  # fmt: skip
    assert actions == (PlanLeave(117.5, 120.0, 2),)


def test_a_due_leave_caps_spot_until_the_drop_and_lets_the_victims_go() -> None:
    leave = PlanLeave(117.5, 120.0, 1)
    assert on_leave(leave, 117.5, paid_spot=3) == (
        Cap(120.0, 1),
        Preempt(2, True, 117.5, 120.0),
    )
    assert on_leave(leave, 117.5, paid_spot=1) == (Cap(120.0, 1),)


def test_holding_stays_within_capacity_and_the_caps_in_force() -> None:
    target = Decision(6, 2)
    assert hold(target, 4, [], 5.0, True) == Hold(4, 2, 5.0, True)
    caps = caps_in_force([Cap(10.0, 3), Cap(4.0, 0)], now_s=5.0)
    assert caps == [Cap(10.0, 3)]  # the drop at 4 s has come: its cap no longer holds
    assert hold(target, 4, caps, 5.0, False) == Hold(3, 2, 5.0, False)
    assert caps_in_force(caps, now_s=10.0) == []


@given(
    spot=st.integers(0, 64),
    available=st.integers(0, 64),
    caps=st.lists(st.integers(0, 64), max_size=4),
)
def test_hold_never_exceeds_the_target_capacity_or_a_cap(spot, available, caps) -> None:
    held = hold(Decision(spot, 0), available, [Cap(math.inf, c) for c in caps], 0.0, False)
    assert held.spot_nodes == min([spot, available, *caps])


def test_the_applier_refuses_what_is_not_an_action() -> None:
    from elasim.jobmodel import JobLoop

    bare = object.__new__(JobLoop)  # the applier reads nothing before it refuses
    with pytest.raises(TypeError, match="not an action"):
        bare._carry_out(("hold", 1, 0))  # type: ignore[arg-type]


def test_the_group_lets_its_newest_workers_go_first() -> None:
    pytest.importorskip("torch")
    from elasim.executor.workertable import newest

    assert newest([4, 1, 7, 3], 2) == [4, 7]
    assert newest([4, 1], 5) == [1, 4]
    assert newest([4, 1], 0) == [] and newest([4, 1], -1) == []
