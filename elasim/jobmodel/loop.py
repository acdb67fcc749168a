"""The life of one elastic job: the observe -> decide -> apply loop, once, for both clocks.

:class:`JobLoop` owns everything that defines the job's life: the trace replay and its
notices, the decision step (observe, decide, clamp), the graceful-leave rule, the
checkpoint schedule (Young/Daly ``auto`` included), the cost and node-hour meter, the
books of lost work, rescale, checkpoint and idle time, and the decision log.  What it
drives is an :class:`~elasim.jobmodel.actuator.Actuator`: the fluid model in the
simulator, real worker processes in the executor.

The loop never waits.  A *shell* supplies the clock: it calls :meth:`JobLoop.turn`
with the current trace time and gets back the trace time at which the loop next has
work; it then waits until then, or until something happens (SimPy's environment, or
real time scaled by ``--time-scale``).  This is SimPy's own pattern
(``RealtimeEnvironment`` swaps the clock and keeps the logic), with the decisions kept
side-effect free as torch elastic's rendezvous keeps them: the policy returns a value,
and only the actuator acts.

Within one turn at time ``t``, in this order:

1. trace items due (notices, capacity changes) and graceful leaves, each at its own
   time, with the books brought up to that time first;
2. what the actuator reports on its own (a crashed worker);
3. a decision if one is due (the start, a capacity change, a notice that concerns
   held nodes, an event the actuator reported, the policy's own ``wake_after_s``);
4. reconcile holdings with the decision; pauses that end; a periodic checkpoint if
   due; nodes that finished booting join; the policy's wake-up;
5. a timeline row, and the next time the loop has work.

An actuator may take time to act (a real restart waits for its workers' cold start,
while the trace goes on).  When a command returns later than the time it was given
(:meth:`~.actuator.Actuator.acted_until_s`), the loop's clock catches up at once: the
time is booked (the actuator's measured pause moves it from training to rescale), the
timeline shows the world as starting from the command on, and the trace items that
fell due meanwhile are carried out then, late, each event keeping the trace time it
answered (:attr:`JobLoop.event_due_s`), with one warning line per late item.  An
actuator that acts at once (the fluid model) never makes the loop catch up.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from elasim.policies import (
    Decision,
    DecisionRecord,
    EventKind,
    EventRecord,
    JobState,
    Observation,
    ObservedEvent,
    Policy,
    clamp,
)

from .actions import (
    Action,
    Cap,
    Hold,
    PlanLeave,
    Preempt,
    Warn,
    caps_in_force,
    hold_spot,
    on_capacity,
    on_leave,
    on_notice,
)
from .actuator import Actuator
from .errors import PolicyError, _policy_error
from .options import JobRules
from .replay import CapacityReplay, ReplayItem
from .rules import CheckpointSchedule, checkpoint_timer_after
from .timeline import TimelineRow
from .zones import ZoneMoves

__all__ = ["JobLoop", "PolicyError", "TimelineRow"]

log = logging.getLogger(__name__)

_EPS = 1e-9
#: The earliest a policy's ``wake_after_s`` can ask to be asked again (trace seconds).
MIN_WAKE_S = 1e-3


class JobLoop:
    """One elastic job under one policy, driven by any clock (see the module docstring).

    Args:
        policy: the scaling policy.
        actuator: the environment's side of the job.
        rules: the job's rules (trace seconds).
        replay: where capacity comes from: the capacity trace, or anything with the
            same ``initial`` / ``prior_mtbf_s`` / ``next_time_s`` / ``pop_due`` (the
            simulator's shared cluster); None for a constant ``initial``.
        initial: ``(available, price)`` at the start without a replay.
        prior_mtbf_s: the capacity source's mean time between drops without a replay.
        timeline_every_s: least trace time between two timeline rows that differ only
            in time and progress (0: a row at every turn).
        record_timeline: keep timeline rows at all.
        zones: a job in several zones: where it is and its moves (:mod:`.zones`), over
            ``replay``, the zones' replay; None: one zone.
    """

    def __init__(
        self,
        policy: Policy,
        actuator: Actuator,
        rules: JobRules,
        *,
        replay: CapacityReplay | None = None,
        initial: tuple[int, float] = (0, 0.0),
        prior_mtbf_s: float = math.inf,
        timeline_every_s: float = 0.0,
        record_timeline: bool = True,
        zones: ZoneMoves | None = None,
    ) -> None:
        if zones is not None and zones.replay is not replay:
            raise ValueError("a job in several zones reads its zones' replay (zones.replay)")
        self.policy = policy
        self.zones = zones
        self.actuator = actuator
        self.meter = actuator.meter
        self.estimates = actuator.estimates
        self.rules = rules
        self.replay = replay
        self.available, self.price = replay.initial if replay is not None else initial
        prior = replay.prior_mtbf_s if replay is not None else prior_mtbf_s
        self.schedule = CheckpointSchedule(rules.checkpoint_interval_s, prior, rules.trace_scale)
        self.books = actuator.books
        self._od_price = rules.on_demand_price_per_hour
        self.decisions: list[DecisionRecord] = []
        self.events: list[EventRecord] = []
        self._rows: list[tuple[Any, ...]] = []  # TimelineRow fields, as plain tuples
        self._recent: list[ObservedEvent] = []
        self._leaves: list[PlanLeave] = []  # in leave-time order
        self._caps: list[Cap] = []  # capacity given up under a notice: no taking back
        self.target = Decision(0, 0)
        self.decision_due = True
        self._fresh = True
        self.wake_at_s = math.inf
        self._last_s = 0.0
        self._replay_next_s = -math.inf  # the trace's next item (cached between pops)
        self._replay_due_s = -math.inf  # ... less the tolerance of pop_due
        self._polls = actuator.polls
        self._acted_until = actuator.acted_until_s
        #: the trace time each event answered, by the event's identity, where it was
        #: carried out later (an actuator that was busy); absent: on time
        self.event_due_s: dict[int, float] = {}
        self._due_s: float | None = None  # while a late item is carried out
        self._horizon_s = rules.horizon_s
        self._since_checkpoint_s = 0.0
        self.checkpoint_interval_s = self.schedule.current_interval_s(
            self.estimates.checkpoint_write_s(), 0.0, 0
        )
        self.turns = 0
        #: what the policy saw at the start (the summary's ``deadline_feasible``)
        self.first_observation: Observation | None = None
        self.finished = False
        self.done_s: float | None = None
        self._timeline_every_s = timeline_every_s
        self._record_timeline = record_timeline

    # -- the turn -------------------------------------------------------------------------

    def turn(self, now_s: float) -> float:
        """Do everything due at ``now_s``; return when the loop next has work (trace s).

        Returns ``inf`` when only an outside event (a worker's report) can make more
        work, and after the job has finished (:attr:`finished`).
        """
        self.turns += 1
        if self.finished:
            return math.inf
        actuator, meter = self.actuator, self.meter
        if self._leaves or now_s >= self._replay_due_s:
            if self._inputs(now_s):
                return math.inf
        elif self._advance_to(now_s):  # the common case: only time has passed
            return math.inf
        if self._polls and self._poll(now_s):
            return math.inf
        while True:
            now_s = self._last_s if self._last_s > now_s else now_s  # after a catch-up
            if self.decision_due:
                self._decide(now_s)
            now_s = self._reconcile(now_s)  # later, when the actuator took time to act
            if self.done_s is not None:  # finished meanwhile
                return math.inf
            settled = actuator.settle(now_s)
            if settled:  # (progress moves only with time: done is checked on advancing)
                self._record(settled)
                if meter.finished(now_s):
                    self._done(now_s)
                    return math.inf
            if meter.training and self._since_checkpoint_s >= self.checkpoint_interval_s - 1e-6:
                self._checkpoint(now_s)
            admitted = actuator.admit(now_s)
            if admitted:
                self._record(admitted)
            if now_s >= self.wake_at_s - _EPS:
                self.wake_at_s = math.inf
                self.decision_due = True
            if not self.decision_due:
                break
        if self._record_timeline:
            self._snapshot(now_s, every=True)
        if now_s >= self._horizon_s - _EPS:
            self.finished = True
            return math.inf
        # the next work: a wake-up, the trace, a leave, the actuator, the checkpoint timer
        best = min(self.wake_at_s, self._horizon_s, actuator.next_due_s(now_s))
        if self.replay is not None:
            if self._replay_next_s == -math.inf:
                self._set_replay_next(self.replay.next_time_s())
            if self._replay_next_s < best:
                best = self._replay_next_s
        if self._leaves and self._leaves[0].leave_s < best:
            best = self._leaves[0].leave_s
        interval = self.checkpoint_interval_s
        if meter.training and interval < math.inf:
            due = now_s + max(interval - self._since_checkpoint_s, 0.0)
            if due < best:
                best = due
        return best if self.zones is None else self.zones.next_s(best)  # or an arrival

    def _inputs(self, now_s: float) -> bool:
        """Trace items and leaves due by ``now_s``, each at its own time; True: done."""
        replay = self.replay
        items = []
        if replay is not None and now_s >= self._replay_due_s:
            items = replay.pop_due(now_s)
            self._set_replay_next(replay.next_time_s())
        leaves = self._leaves
        for item in items:
            t = item.time_s if item.time_s > self._last_s else self._last_s
            if leaves and self._leaves_due(t):
                return True
            if t > self._last_s and self._advance_to(t):
                return True
            t = self._last_s if self._last_s > t else t  # a leave's actuator was busy
            self._due_s = self._late(item.time_s, t, "notice" if item.notice else "change")
            if item.notice:
                self._on_notice(item, t)
            else:
                if self._due_s is not None:
                    self._backdate(item)
                self._on_capacity(item, t)
            self._due_s = None
            if self.done_s is not None:
                return True
        if leaves and self._leaves_due(now_s):
            return True
        return now_s > self._last_s and self._advance_to(now_s)

    @staticmethod
    def _late(due_s: float, t: float, what: str) -> float | None:
        """``due_s`` when the item is carried out at ``t`` noticeably later (and say so)."""
        if t - due_s <= 1e-6 * max(1.0, abs(t)):
            return None
        late = "the capacity %s due at trace %.0f s was carried out at %.0f s (%.0f s late)"
        log.warning(
            late + ": the workers were busy (a restart waits for a cold start)",
            what,
            due_s,
            t,
            t - due_s,
        )
        return due_s

    def _backdate(self, item: ReplayItem) -> None:
        """A late capacity change still shows on the timeline at its own trace time.

        Why: the trace changed then, whatever the workers were doing; the world as it was
        (the row before) gets the new capacity, and so do the rows recorded since.
        """
        if not self._record_timeline:
            return
        rows, at = self._rows, item.time_s
        k = next((i for i in range(len(rows)) if rows[i][0] > at), len(rows))
        if k == 0:  # nothing recorded before it
            return
        for i in range(k, len(rows)):
            row = rows[i]
            rows[i] = (row[0], item.available, *row[2:5], item.price_per_hour, *row[6:])
        prev = rows[k - 1]
        rows.insert(k, (at, item.available, *prev[2:5], item.price_per_hour, *prev[6:]))

    def _poll(self, now_s: float) -> bool:
        polled = self.actuator.poll(now_s)
        if not polled:
            return False
        self._record(polled)
        self.decision_due = self._fresh = True
        return self._check_done(now_s)

    def _advance_to(self, t: float) -> bool:
        """Bill and integrate up to ``t``; True if the job finished meanwhile."""
        dt = t - self._last_s
        if dt <= 0:
            return self.done_s is not None
        self._last_s = t
        meter = self.meter
        spot, od = meter.paid()
        self.books.bill(dt, spot, od, self.price, self._od_price)
        if meter.training:
            self._since_checkpoint_s += dt
        self.actuator.advance(t, self.books)
        if meter.finished(t):
            self._done(t)
            return True
        return False

    def _check_done(self, t: float) -> bool:
        if self.done_s is not None:
            return True
        if not self.meter.finished(t):
            return False
        self._done(t)
        return True

    def _done(self, t: float) -> None:
        """The target was reached at ``t``: the last event, and no more turns."""
        if self.done_s is not None:
            return
        spot, od = self.meter.members()
        self.finished = True
        self.done_s = t
        self._record([EventRecord(t, EventKind.DONE, spot + od, spot + od)])

    # -- trace items ----------------------------------------------------------------------

    def _on_notice(self, item: ReplayItem, t: float) -> None:
        """A drop to ``item.available`` at ``item.drop_s`` (:func:`~.actions.on_notice`)."""
        member_spot, member_od = self.meter.members()
        actions = on_notice(
            time_s=t,
            drop_s=float(item.drop_s if item.drop_s is not None else t),
            available=item.available,
            paid_spot=self.meter.paid()[0],
            member_spot=member_spot,
            member_on_demand=member_od,
            step_s=self.estimates.step_s(),
            checkpoint_write_s=self.estimates.checkpoint_write_s(),
            mode=self.rules.rescale,
            margin_s=self.estimates.leave_margin_s,
        )
        self._apply(actions)

    def _leaves_due(self, t: float) -> bool:
        """Warned victims leave gracefully at their leave time; True if the job finished."""
        while self._leaves and self._leaves[0].leave_s <= t + _EPS:
            leave = self._leaves.pop(0)
            leave_s = max(leave.leave_s, self._last_s)
            if self._advance_to(leave_s):
                return True
            self._due_s = self._late(leave.leave_s, leave_s, "graceful leave")
            self._apply(on_leave(leave, leave_s, self.meter.paid()[0]))
            self._due_s = None
            if self.done_s is not None:
                return True
        return False

    def _on_capacity(self, item: ReplayItem, t: float) -> None:
        self.available, self.price = item.available, item.price_per_hour
        self.decision_due = self._fresh = True
        actions = on_capacity(item.available, self.meter.paid()[0], t)
        if actions:
            self._apply(actions)
        if self._record_timeline:
            self._snapshot(self._last_s if self._last_s > t else t)

    def _apply(self, actions: tuple[Action, ...]) -> None:
        """Carry out actions in order (:meth:`_carry_out`), none after the job finished."""
        for action in actions:
            if self.done_s is not None:
                return
            self._carry_out(action)

    def _carry_out(self, action: Action) -> None:
        """The one place where the loop's choices (:mod:`.actions`) take effect."""
        kind = type(action)
        if kind is Hold:  # (each turn's own hold is carried out by _reconcile)
            events = self.actuator.apply(*action)
        elif kind is Preempt:
            events = self.actuator.preempt(*action)
            if events:  # a failure only if unwarned or lossy
                self._took(events, warned=action.graceful)
            return
        elif kind is Warn:
            self._record([action.event], action.drop_s)
            self.decision_due = True
            return
        elif kind is PlanLeave:
            self._leaves.append(action)
            self._leaves.sort()
            return
        elif kind is Cap:
            self._caps.append(action)
            return
        else:
            raise TypeError(f"not an action: {action!r}")
        if events:
            self._took(events)

    def _took(self, events: list[EventRecord], warned: bool = False) -> None:
        """Record what a command did, and catch up if it took time (:meth:`_catch_up`).

        ``warned``: the events come of a leave warned in time (:meth:`Accounting.count`).
        """
        self._record(events, warned=warned)
        self._catch_up()

    def _catch_up(self) -> None:
        """The actuator acted past the loop's time: book up to then (module docstring).

        The world was starting from the command on, so the timeline shows it so: a row
        at the command's time with the nodes paid for, none training, rescaling.
        """
        t = self._acted_until(self._last_s)
        if t - self._last_s <= 1e-6 * max(1.0, abs(t)):
            return
        if self._record_timeline:
            spot, od, _, progress, _, step = self.meter.view()
            row = (self.available, spot, od, 0, self.price, progress, "rescaling", step)
            self._rows.append((self._last_s, *row))
        self._advance_to(t)

    # -- deciding and applying ------------------------------------------------------------

    def observe(self, now_s: float) -> Observation:
        """The immutable snapshot the policy sees."""
        meter, estimates = self.meter, self.estimates
        spot, od = meter.paid()
        rules = self.rules
        obs = Observation(
            now_s=now_s,
            spot_available=self.available,
            spot_held=spot,
            on_demand_held=od,
            spot_price_per_hour=self.price,
            on_demand_price_per_hour=self._od_price,
            progress=meter.progress(),
            remaining_samples=meter.remaining_samples(),
            throughput_samples_per_s=estimates.throughput_table(),
            statistical_efficiency=estimates.efficiency_table(),
            rescale_cost_s=estimates.rescale_cost_s(),
            resume_cost_s=estimates.resume_cost_s(),
            deadline_s=rules.deadline_s,
            min_nodes=rules.min_nodes,
            max_nodes=rules.max_nodes,
            recent_events=tuple(self._recent),
            spent_usd=self.books.spot_cost_usd + self.books.on_demand_cost_usd,
            on_demand_spent_usd=self.books.on_demand_cost_usd,
            checkpoint_interval_s=self.checkpoint_interval_s,
            checkpoint_write_s=estimates.checkpoint_write_s(),
            checkpoint_schedule=self.schedule,
            preemptions=self.books.failures,
        )
        return obs if self.zones is None else self.zones.observed(obs, self.available, self.price)

    def _decide(self, now_s: float) -> None:
        obs = self.observe(now_s)
        if self.first_observation is None:
            self.first_observation = obs
        self._recent.clear()
        policy = self.policy
        try:
            raw = policy.decide(obs)
        except Exception as exc:  # noqa: BLE001 - a user's plugin may raise anything
            detail = f"decide() raised {type(exc).__name__}: {exc}".splitlines()[0]
            raise _policy_error(policy, exc, detail) from exc
        if not isinstance(raw, Decision):
            detail = f"decide() returned {type(raw).__name__} {raw!r:.60}, not a Decision"
            raise _policy_error(policy, None, detail)
        decision = clamp(raw, obs)
        if not self.rules.allow_on_demand and decision.on_demand_nodes:
            decision = clamp(
                Decision(decision.spot_nodes, 0, decision.wake_after_s, decision.zone), obs
            )
        self.decisions.append(
            DecisionRecord(
                obs.now_s, obs.spot_available, obs.spot_held, obs.on_demand_held, decision
            )
        )
        self.target = decision
        wake = decision.wake_after_s
        # a wake-up closer than the loop's time tolerance would be due at once, forever
        self.wake_at_s = math.inf if wake is None else now_s + max(wake, MIN_WAKE_S)
        self.decision_due = False
        self._fresh = True

    def _reconcile(self, now_s: float) -> float:
        """Hold what the target allows; returns the time after (later: the actuator's)."""
        if self._caps:
            self._caps = caps_in_force(self._caps, now_s)
        fresh, self._fresh = self._fresh, False
        # a Hold (:func:`~.actions.hold`), carried out here rather than built and passed
        # through _carry_out: every turn holds
        target = self.target
        if self.zones is not None and self.zones.moving(target):
            if self._move(target, now_s):  # arrived: the policy is asked again
                return now_s
            spot, on_demand, fresh = 0, 0, True  # on the way: nothing held
        else:
            spot, on_demand = hold_spot(target, self.available, self._caps), target.on_demand_nodes
        events = self.actuator.apply(spot, on_demand, now_s, fresh)
        if events:
            self._took(events)
        return self._last_s if self._last_s > now_s else now_s

    def _move(self, target: Decision, now_s: float) -> bool:
        """A move between zones (:mod:`.zones`) under way or named; True: arrived now."""
        zones = self.zones
        assert zones is not None
        if target.zone is not None:  # depart: the leaves and caps concern old nodes
            self.target = Decision(target.spot_nodes, target.on_demand_nodes, target.wake_after_s)
            self.available, self.price = zones.depart(target.zone, now_s)
            self._leaves.clear()
            self._caps.clear()
        if not zones.arrive(now_s):
            return False
        self.actuator.moved(now_s)  # its nodes start afresh in the new zone
        self.decision_due = True
        return True

    def _checkpoint(self, now_s: float) -> None:
        """A periodic checkpoint is due (the timer restarts even if none was written)."""
        self._record(self.actuator.checkpoint(now_s))
        self._since_checkpoint_s = 0.0

    # -- records --------------------------------------------------------------------------

    def _record(
        self, events: list[EventRecord], deadline_s: float | None = None, warned: bool = False
    ) -> None:
        due = self._due_s
        for event in events:
            self.events.append(event)
            if due is not None:
                self.event_due_s[id(event)] = due
            self.books.count(event, warned)
            kind = event.kind
            self._recent.append(
                ObservedEvent(event.time_s, kind, event.nodes_before, event.nodes_after, deadline_s)
            )
            restart, self.checkpoint_interval_s = checkpoint_timer_after(
                kind,
                self.schedule,
                self.checkpoint_interval_s,
                write_s=self.estimates.checkpoint_write_s(),
                elapsed_s=event.time_s,
                failures=self.books.failures,
            )
            if restart:
                self._since_checkpoint_s = 0.0

    def _snapshot(self, t: float, every: bool = False) -> None:
        if not self._record_timeline:
            return
        spot, od, group, progress, state, step = self.meter.view()
        row = (t, self.available, spot, od, group, self.price, progress, state, step)
        rows = self._rows
        if every and self._timeline_every_s > 0 and rows:
            last = rows[-1]
            if last[1:6] == row[1:6] and last[7] == state and t - last[0] < self._timeline_every_s:
                return
        rows.append(row)

    @property
    def timeline(self) -> list[TimelineRow]:
        """The rows recorded so far (kept as plain tuples while running: they are many)."""
        return [TimelineRow._make(row) for row in self._rows]

    def timeline_columns(self) -> list[tuple[Any, ...]]:
        """The rows as columns, in :class:`TimelineRow`'s field order."""
        from operator import itemgetter

        rows = self._rows
        return [tuple(map(itemgetter(i), rows)) for i in range(len(TimelineRow._fields))]

    def _set_replay_next(self, next_s: float) -> None:
        self._replay_next_s = next_s
        self._replay_due_s = next_s - 1e-9 * max(1.0, abs(next_s)) if next_s < math.inf else next_s

    def close(self, now_s: float) -> None:
        """Bring the books up to ``now_s`` (the end of the run) and record the last row."""
        self._advance_to(now_s)
        self._snapshot(now_s)

    @property
    def state(self) -> JobState:
        """The job's state (the actuator's)."""
        return self.meter.state
