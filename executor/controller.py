"""The controller: the simulator's observe -> decide -> apply loop, on real workers.

One loop, the same shape as :mod:`elasim.sim.driver`::

    while not done:
        handle what is due (trace rows, preemption notices, worker events)
        if a decision is due:
            obs = observe()                              # the shared Observation
            decision = clamp(policy.decide(obs), obs)    # the shared validation
            apply(decision)                              # spawn / re-form / kill
        wait until the next trace change, notice, wake-up or worker event

The policy is asked at the same *decision points* as in the simulator: the start,
every change of capacity or price, every preemption notice that concerns held
nodes, its own ``wake_after_s``, and (executor only) a worker that crashed on its
own.  That is what makes the two decision logs comparable
(:class:`~elasim.policies.DecisionRecord`).

**Time.**  The trace is replayed at ``time_scale`` trace seconds per real second;
everything the policy sees (``now_s``, throughput, rescale cost, deadline) is in
*trace* seconds, so a policy cannot tell a replay from the simulator.  The clock is
injected (:class:`Clock`): :class:`RealClock` for runs, :class:`FakeClock` for tests.

**Throughput table.**  If ``ControllerConfig.throughput_samples_per_s`` is given
(e.g. from a :class:`elasim.job.JobSpec`, in samples per trace second) it is used
as is.  Otherwise it is *measured*: ``global_batch / median step time`` per world
size, from the steps rank 0 reports, converted to trace seconds.  Sizes not seen
yet are extrapolated linearly from the nearest measured size (``thr(n) = thr(m) *
n / m``), and before any measurement ``prior_step_s`` stands in.  Statistical
efficiency is 1 everywhere: the executor keeps the global batch fixed.

**Preemption emulation.**  When the trace's ``available`` drops below the spot nodes
held, the controller picks victims (the newest spot members first, deterministic).
A notice is seen ``notice_s`` trace seconds before the drop (the replay knows the
trace; the policy only sees the notice).  If the notice, in real seconds, covers a
graceful leave (a couple of steps, plus a checkpoint write when nobody survives or
in ``restart`` mode, plus a margin), the victims leave gracefully at a step boundary
just before the drop; otherwise they are SIGKILLed at the drop.  On-demand nodes are
never preempted.
"""

from __future__ import annotations

import bisect
import heapq
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from elasim.policies import (
    Decision,
    DecisionRecord,
    EventKind,
    EventRecord,
    Observation,
    ObservedEvent,
    Policy,
    clamp,
)

from .group import GroupEvent, GroupProgress

__all__ = [
    "Clock",
    "Controller",
    "ControllerConfig",
    "ControllerResult",
    "FakeClock",
    "RealClock",
    "TimelineRow",
    "TraceReplay",
    "WorkerGroup",
]

log = logging.getLogger(__name__)
_EPS = 1e-9


class Clock(Protocol):
    """Real seconds, injected so the loop can run on a fake clock in tests."""

    def now(self) -> float:
        """Seconds on a monotonic clock."""

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds`` (a fake clock just advances)."""


class RealClock:
    """``time.monotonic`` / ``time.sleep``."""

    def now(self) -> float:
        """Monotonic seconds."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that only moves when someone sleeps (or calls :meth:`advance`)."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._t = float(start_s)

    def now(self) -> float:
        """Current fake time."""
        return self._t

    def sleep(self, seconds: float) -> None:
        """Advance instantly."""
        if seconds > 0:
            self._t += seconds

    def advance(self, seconds: float) -> None:
        """Move time forward without a sleeper."""
        self.sleep(seconds)


class WorkerGroup(Protocol):
    """What the controller applies decisions to (real processes, or a fake)."""

    def held(self) -> tuple[int, int]:
        """``(spot, on_demand)`` nodes in the group now."""

    def apply(self, spot: int, on_demand: int) -> list[GroupEvent]:
        """Move to this membership; blocks until the change is done."""

    def preempt(self, count: int, *, graceful: bool) -> list[GroupEvent]:
        """Take ``count`` spot nodes away, gracefully or by SIGKILL."""

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
    """How to replay the trace and run the job.

    Attributes:
        time_scale: trace seconds per real second.
        max_steps: the job's work, in optimizer steps (progress = steps / max_steps).
        min_nodes: fewest nodes the job runs on.
        max_nodes: most nodes (``--workers-max``).
        notice_s: preemption notice, trace seconds (0: none).
        checkpoint_interval_s: trace seconds of running time between checkpoints the
            controller requests (None: none from the controller).
        deadline_s: the job's deadline in trace seconds from the start, or None.
        start_offset_s: where in the trace the run starts (trace seconds).
        on_demand_price_per_hour: overrides the trace metadata (None: use it; a trace
            without one makes on-demand unavailable, as in the simulator).
        spot_price_per_hour: price of a trace without a price column (None: 0).
        throughput_samples_per_s: fixed table (samples per *trace* second, index =
            nodes, entry 0 = 0) instead of measuring.
        statistical_efficiency: fixed efficiency table (index = nodes) instead of 1.0
            everywhere (the executor's fixed global batch); for parity with a
            ``scaled`` job spec.
        rescale_cost_s: fixed ``Observation.rescale_cost_s`` (trace seconds) instead of
            the median measured pause (e.g. the simulator's estimate, for parity).
        global_batch: samples per step when no worker has reported it yet.
        prior_step_s: real step time assumed before any measurement.
        rescale_cost_prior_s: real pause assumed before any measurement.
        graceful_margin_s: real seconds of slack required on top of the estimated
            graceful-leave time.
        checkpoint_write_prior_s: real write time assumed before any measurement.
        max_wall_s: give up after this many real seconds.
        idle_poll_s: longest real wait between two looks at the world.
        timeline_interval_s: real seconds between timeline rows when nothing happens.
        restart_mode: the group restarts on every change (graceful leaves then also
            need a checkpoint write).
    """

    time_scale: float = 60.0
    max_steps: int = 300
    min_nodes: int = 1
    max_nodes: int = 4
    notice_s: float = 0.0
    checkpoint_interval_s: float | None = None
    deadline_s: float | None = None
    start_offset_s: float = 0.0
    on_demand_price_per_hour: float | None = None
    spot_price_per_hour: float | None = None
    throughput_samples_per_s: tuple[float, ...] | None = None
    statistical_efficiency: tuple[float, ...] | None = None
    rescale_cost_s: float | None = None
    global_batch: int = 64
    prior_step_s: float = 0.01
    rescale_cost_prior_s: float = 0.1
    graceful_margin_s: float = 0.25
    checkpoint_write_prior_s: float = 0.05
    max_wall_s: float = 600.0
    idle_poll_s: float = 0.05
    timeline_interval_s: float = 0.25
    restart_mode: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.time_scale) and self.time_scale > 0):
            raise ValueError(f"time_scale must be > 0, got {self.time_scale}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if not 1 <= self.min_nodes <= self.max_nodes:
            raise ValueError(
                f"need 1 <= min_nodes <= max_nodes, got {self.min_nodes}, {self.max_nodes}"
            )
        if self.notice_s < 0:
            raise ValueError(f"notice_s must be >= 0, got {self.notice_s}")
        if not self.prior_step_s > 0:
            raise ValueError(f"prior_step_s must be > 0, got {self.prior_step_s}")
        if self.checkpoint_interval_s is not None and not self.checkpoint_interval_s > 0:
            raise ValueError("checkpoint_interval_s must be > 0 or None")
        if self.throughput_samples_per_s is not None:
            if len(self.throughput_samples_per_s) != self.max_nodes + 1:
                raise ValueError("throughput_samples_per_s needs max_nodes + 1 entries")
        if self.statistical_efficiency is not None:
            if len(self.statistical_efficiency) != self.max_nodes + 1:
                raise ValueError("statistical_efficiency needs max_nodes + 1 entries")


class TraceReplay:
    """A capacity trace as a stream of changes and notices, relative to the run start.

    Mirrors the simulator's ``SpotTraceSource``: rows after the start offset, across
    repetitions (the trace repeats from its start), yielding only real changes of
    ``(available, price)``; a notice for every drop is due ``notice_s`` before it.
    Capacity is capped at ``cap_nodes`` (what the job can use), so changes above the
    cap are not decision points, and a price-less trace reads as
    ``default_price_per_hour``, both as in the simulator.
    """

    def __init__(
        self,
        trace: Any,
        *,
        start_offset_s: float = 0.0,
        notice_s: float = 0.0,
        cap_nodes: int | None = None,
        default_price_per_hour: float = 0.0,
    ) -> None:
        self.trace = trace
        self.period_s = float(trace.duration_s)
        self.offset_s = float(start_offset_s) % self.period_s
        self.notice_s = float(notice_s)
        self._times = [float(t) for t in trace.time_s]
        cap = cap_nodes if cap_nodes is not None else max(int(a) for a in trace.available)
        self._available = [min(int(a), cap) for a in trace.available]
        prices = trace.price_per_hour
        self._prices = (
            [float(default_price_per_hour)] * len(self._times)
            if prices is None
            else [float(p) for p in prices]
        )
        index = bisect.bisect_right(self._times, self.offset_s + _EPS) - 1
        self.initial = (self._available[index], self._prices[index])
        self._heap: list[tuple[float, int, int, float]] = []
        self._rows = self._row_iter()
        self._row_next: tuple[float, int, float] | None = next(self._rows, None)
        self._last = self.initial
        self._last_available = self.initial[0]
        self._fill(0.0)

    def _row_iter(self) -> Iterator[tuple[float, int, float]]:
        first = bisect.bisect_right(self._times, self.offset_s + _EPS)
        cycle = 0
        while True:
            base = cycle * self.period_s - self.offset_s
            for i in range(first if cycle == 0 else 0, len(self._times)):
                yield base + self._times[i], self._available[i], self._prices[i]
            cycle += 1

    def _fill(self, horizon_s: float) -> None:
        """Move rows up to ``horizon_s + notice_s`` into the heap (with their notices)."""
        while self._row_next is not None and self._row_next[0] <= horizon_s + self.notice_s:
            t, available, price = self._row_next
            self._row_next = next(self._rows, None)
            if self.notice_s > 0 and available < self._last_available:
                heapq.heappush(self._heap, (max(t - self.notice_s, 0.0), 0, available, t))
            self._last_available = available
            heapq.heappush(self._heap, (t, 1, available, price))

    def next_time_s(self, now_s: float) -> float:
        """Trace time of the next row or notice after ``now_s``."""
        self._fill(now_s)
        if self._heap:
            return self._heap[0][0]
        return self._row_next[0] - self.notice_s if self._row_next else math.inf

    def pop_due(self, now_s: float) -> list[tuple[str, float, int, float]]:
        """Items due at ``now_s``, in time order.

        Each is ``("notice", t, available_after, drop_time)`` or ``("capacity", t,
        available, price)``; rows that change nothing are skipped.
        """
        self._fill(now_s)
        out: list[tuple[str, float, int, float]] = []
        while self._heap and self._heap[0][0] <= now_s + _EPS:
            t, order, available, value = heapq.heappop(self._heap)
            if order == 0:
                out.append(("notice", t, available, value))
            elif (available, value) != self._last:
                self._last = (available, value)
                out.append(("capacity", t, available, value))
            self._fill(now_s)
        return out


@dataclass(frozen=True)
class TimelineRow:
    """The world at one loop turn (trace seconds), for ``timeline.png``."""

    time_s: float
    spot_available: int
    spot_held: int
    on_demand_held: int
    price_per_hour: float
    progress: float
    step: int


@dataclass(frozen=True)
class ControllerResult:
    """What the loop did.

    Attributes:
        completed: training reached ``max_steps`` (or its target).
        completion_time_s: trace seconds until done (None if not completed).
        end_time_s: trace seconds at the end of the loop.
        wall_time_s: real seconds the loop ran.
        decisions: the decision log.
        events: event records (``time_s`` in trace seconds, pauses in real seconds).
        event_real_s: real seconds (since the start) of each event.
        event_interval_s: raw pause interval of each event (real s; None: not measured).
        timeline: the world over time.
        spot_cost_usd: spot spend.
        on_demand_cost_usd: on-demand spend.
        spot_node_s: spot node-seconds (trace).
        on_demand_node_s: on-demand node-seconds (trace).
        idle_s: trace seconds holding no node (neither a member nor one acquired and
            still starting).
        loop_turns: iterations of the loop.
        progress: final progress of the group.
    """

    completed: bool
    completion_time_s: float | None
    end_time_s: float
    wall_time_s: float
    decisions: tuple[DecisionRecord, ...]
    events: tuple[EventRecord, ...]
    event_real_s: tuple[float, ...]
    event_interval_s: tuple[float | None, ...]
    timeline: tuple[TimelineRow, ...]
    spot_cost_usd: float
    on_demand_cost_usd: float
    spot_node_s: float
    on_demand_node_s: float
    idle_s: float
    loop_turns: int
    progress: GroupProgress = field(default_factory=GroupProgress)


class Controller:
    """The observe -> decide -> apply loop over a trace and a worker group."""

    def __init__(
        self,
        trace: Any,
        policy: Policy,
        group: WorkerGroup,
        clock: Clock,
        config: ControllerConfig,
        *,
        on_turn: Callable[[Controller], None] | None = None,
    ) -> None:
        self.trace = trace
        self.policy = policy
        self.group = group
        self.clock = clock
        self.config = config
        self.on_turn = on_turn
        self.replay = TraceReplay(
            trace,
            start_offset_s=config.start_offset_s,
            notice_s=config.notice_s,
            cap_nodes=config.max_nodes,
            default_price_per_hour=config.spot_price_per_hour or 0.0,
        )
        self.available, self.price = self.replay.initial
        od = config.on_demand_price_per_hour
        if od is None:
            od = getattr(getattr(trace, "metadata", None), "on_demand_price_per_hour", None)
        self.od_price = math.inf if od is None else float(od)
        self.decisions: list[DecisionRecord] = []
        self.events: list[EventRecord] = []
        self.event_real_s: list[float] = []
        self.event_interval_s: list[float | None] = []
        self.timeline: list[TimelineRow] = []
        self._recent: list[ObservedEvent] = []
        self._leaves: list[tuple[float, float, int]] = []  # (leave at, drop at, available)
        self._t0 = 0.0
        self._last_s = 0.0
        self._spot_cost = 0.0
        self._od_cost = 0.0
        self._spot_node_s = 0.0
        self._od_node_s = 0.0
        self._idle_s = 0.0
        # nodes asked for at the last reconcile (spot, on-demand): paid for from then
        # on, like the simulator's booting nodes, even while their workers start
        self._acquired = (0, 0)
        self._running_since_ckpt_s = 0.0
        self._pauses_real_s: list[float] = []
        self._ckpt_write_s: list[float] = []
        self.last_pause_s: float | None = None
        self.turns = 0
        self._snap: float | None = None
        self._last_snapshot_real_s = 0.0
        self._caps: list[tuple[float, int]] = []
        self.target = Decision(0, 0)
        self._dirty = False

    # -- time ------------------------------------------------------------------------------

    def now_s(self) -> float:
        """Trace seconds since the start of the run.

        When the loop slept towards a known trace time (a row, a notice, a wake-up)
        and the clock lands within rounding of it, that exact time is returned, so a
        fake clock reproduces the simulator's event times bit for bit.
        """
        t = (self.clock.now() - self._t0) * self.config.time_scale
        snap = self._snap
        if snap is not None and abs(t - snap) <= 1e-9 * max(1.0, abs(snap)):
            return snap
        return t

    def _trace_time(self, real_s: float) -> float:
        return max((real_s - self._t0) * self.config.time_scale, 0.0)

    def _advance(self, now: float) -> None:
        """Integrate cost and node-time up to ``now`` (trace seconds)."""
        dt = now - self._last_s
        if dt <= 0:
            return
        self._last_s = now
        held_spot, held_od = self.group.held()
        # a node is held from its acquisition (booting, a worker cold-starting) until
        # it leaves, as in the simulator; members alone would make a resume idle time
        spot = max(held_spot, self._acquired[0])
        od = max(held_od, self._acquired[1])
        self._spot_cost += spot * self.price * dt / 3600.0
        if od:
            self._od_cost += od * self.od_price * dt / 3600.0
        self._spot_node_s += spot * dt
        self._od_node_s += od * dt
        if held_spot + held_od > 0:
            self._running_since_ckpt_s += dt  # training time: members only
        if spot + od == 0:
            self._idle_s += dt

    # -- observing ---------------------------------------------------------------------------

    def _throughput(self, global_batch: int) -> tuple[float, ...]:
        cfg = self.config
        if cfg.throughput_samples_per_s is not None:
            return tuple(cfg.throughput_samples_per_s)
        measured = self.group.step_time_by_world()
        table = [0.0]
        for n in range(1, cfg.max_nodes + 1):
            if n in measured and measured[n] > 0:
                real = global_batch / measured[n]
            elif measured:
                m = min(measured, key=lambda k: (abs(k - n), k))
                real = global_batch / measured[m] * n / m
            else:
                real = global_batch / cfg.prior_step_s * n
            table.append(real / cfg.time_scale)
        return tuple(table)

    def rescale_cost_s(self) -> float:
        """Median measured pause of the changes so far, in trace seconds."""
        if self.config.rescale_cost_s is not None:
            return self.config.rescale_cost_s
        real = statistics.median(self._pauses_real_s) if self._pauses_real_s else None
        if real is None:
            real = self.config.rescale_cost_prior_s
        return real * self.config.time_scale

    def observe(self) -> Observation:
        """The shared snapshot, built from the real state."""
        cfg = self.config
        progress = self.group.progress()
        batch = self.group.global_batch or cfg.global_batch
        spot, od = self.group.held()
        done_steps = min(progress.step, cfg.max_steps)
        return Observation(
            now_s=self.now_s(),
            spot_available=self.available,
            spot_held=spot,
            on_demand_held=od,
            spot_price_per_hour=self.price,
            on_demand_price_per_hour=self.od_price,
            progress=done_steps / cfg.max_steps,
            remaining_samples=float((cfg.max_steps - done_steps) * batch),
            throughput_samples_per_s=self._throughput(batch),
            statistical_efficiency=cfg.statistical_efficiency or (1.0,) * (cfg.max_nodes + 1),
            rescale_cost_s=self.rescale_cost_s(),
            deadline_s=cfg.deadline_s,
            min_nodes=cfg.min_nodes,
            max_nodes=cfg.max_nodes,
            recent_events=tuple(self._recent),
        )

    # -- recording ---------------------------------------------------------------------------

    def _record(self, events: list[GroupEvent]) -> None:
        if events:
            self._snapshot()
        scale = self.config.time_scale
        for ev in events:
            t = self._trace_time(ev.real_s)
            record = EventRecord(
                time_s=t,
                kind=ev.kind,
                nodes_before=ev.nodes_before,
                nodes_after=ev.nodes_after,
                pause=ev.pause,
                lost_samples=ev.lost_samples,
                lost_work_h=ev.lost_real_s * scale / 3600.0,
                lost_steps=ev.lost_steps,
            )
            self.events.append(record)
            self.event_real_s.append(ev.real_s - self._t0)
            self.event_interval_s.append(ev.interval_s)
            self._recent.append(ObservedEvent(t, ev.kind, ev.nodes_before, ev.nodes_after))
            if ev.kind is EventKind.CHECKPOINT:
                self._ckpt_write_s.append(ev.pause.state_s)
                self._running_since_ckpt_s = 0.0
            elif ev.pause.pause_s > 0 and ev.kind in (
                EventKind.SCALE_UP,
                EventKind.SCALE_DOWN,
                EventKind.PREEMPT,
                EventKind.RESUME,
            ):
                self.last_pause_s = ev.pause.pause_s
                if ev.kind in (EventKind.SCALE_UP, EventKind.SCALE_DOWN):
                    self._pauses_real_s.append(ev.pause.pause_s)

    def _snapshot(self) -> None:
        self._last_snapshot_real_s = self.clock.now() - self._t0
        spot, od = self.group.held()
        progress = self.group.progress()
        self.timeline.append(
            TimelineRow(
                self.now_s(),
                self.available,
                spot,
                od,
                self.price,
                min(progress.step / self.config.max_steps, 1.0),
                progress.step,
            )
        )

    # -- preemption emulation -------------------------------------------------------------------

    def graceful_leave_s(self, survivors: int) -> float:
        """Real seconds a graceful leave needs (see the module docstring)."""
        step = self.group.typical_step_s() or self.config.prior_step_s
        need = 2.0 * step + self.config.graceful_margin_s
        if survivors == 0 or self.config.restart_mode:
            writes = self._ckpt_write_s
            need += statistics.median(writes) if writes else self.config.checkpoint_write_prior_s
        return need

    def _on_notice(self, t: float, available_after: int, drop_s: float) -> bool:
        spot, od = self.group.held()
        victims = spot - available_after
        if victims <= 0:
            return False
        held = spot + od
        record = EventRecord(t, EventKind.PREEMPT_NOTICE, held, held - victims)
        self.events.append(record)
        self.event_real_s.append(t / self.config.time_scale)
        self.event_interval_s.append(None)
        self._recent.append(
            ObservedEvent(t, EventKind.PREEMPT_NOTICE, held, held - victims, drop_s)
        )
        lead_real = self.graceful_leave_s(held - victims)
        lead_trace = lead_real * self.config.time_scale
        if drop_s - t >= lead_trace - _EPS:
            self._leaves.append((max(drop_s - lead_trace, t), drop_s, available_after))
            self._leaves.sort()
        return True

    def _leave_due(self, now: float) -> None:
        while self._leaves and self._leaves[0][0] <= now + _EPS:
            _, drop_s, available_after = self._leaves.pop(0)
            # until the drop, do not take back the capacity we are giving up
            self._caps.append((drop_s, available_after))
            spot, _ = self.group.held()
            self._acquired = (min(self._acquired[0], available_after), self._acquired[1])
            if spot > available_after:
                self._record(self.group.preempt(spot - available_after, graceful=True))

    def _cap(self, now: float) -> float:
        """Spot nodes usable now: the trace, minus capacity left under a notice."""
        self._caps = [(d, a) for d, a in self._caps if d > now + _EPS]
        return min((a for _, a in self._caps), default=math.inf)

    def _reconcile(self, now: float) -> None:
        """Move the group towards the last decision, as the simulator does every turn.

        Newcomers that are still warming up join at a later turn (``wait_ready_s=0``),
        so the loop never blocks on a cold start.  A ``restart`` group restarts only
        when the target or the capacity changed (each attempt is a full restart).
        """
        target = self.target
        spot = int(min(target.spot_nodes, self.available, self._cap(now)))
        want = (spot, target.on_demand_nodes)
        self._acquired = want
        if self.group.held() == want:
            self._dirty = False
            return
        if self.config.restart_mode and not self._dirty:
            return
        self._dirty = False
        self._record(self.group.apply(want[0], want[1], wait_ready_s=0.0))

    def _on_capacity(self, available: int, price: float) -> None:
        self.available, self.price = available, price
        self._dirty = True
        self._acquired = (min(self._acquired[0], available), self._acquired[1])
        spot, _ = self.group.held()
        if spot > available:
            self._record(self.group.preempt(spot - available, graceful=False))

    # -- the loop ----------------------------------------------------------------------------

    def _decide(self) -> Decision:
        obs = self.observe()
        self._recent.clear()
        decision = clamp(self.policy.decide(obs), obs)
        if math.isinf(self.od_price) and decision.on_demand_nodes:
            decision = clamp(Decision(decision.spot_nodes, 0, decision.wake_after_s), obs)
        self.decisions.append(
            DecisionRecord(
                obs.now_s, obs.spot_available, obs.spot_held, obs.on_demand_held, decision
            )
        )
        return decision

    def run(self) -> ControllerResult:
        """Replay the trace until the job is done (or ``max_wall_s`` passes)."""
        cfg = self.config
        self._t0 = self.clock.now()
        decision_due = True
        wake_at = math.inf
        completed_s: float | None = None
        while True:
            self.turns += 1
            now = self.now_s()
            self._advance(now)
            for kind, t, available, value in self.replay.pop_due(now):
                if kind == "notice":
                    decision_due |= self._on_notice(t, available, value)
                else:
                    self._leave_due(t)
                    self._on_capacity(available, value)
                    decision_due = True
            self._leave_due(now)
            polled = self.group.poll()
            if polled:
                self._record(polled)
                decision_due = True
            if self.group.done:
                completed_s = self._finish_time()
                break
            if (
                cfg.checkpoint_interval_s is not None
                and self._running_since_ckpt_s >= cfg.checkpoint_interval_s - _EPS
            ):
                self._running_since_ckpt_s = 0.0
                self._record(self.group.checkpoint())
            if now >= wake_at - _EPS:
                wake_at = math.inf
                decision_due = True
            if decision_due:
                decision_due = False
                decision = self._decide()
                wake_at = (
                    math.inf
                    if decision.wake_after_s is None
                    else (self.now_s() + decision.wake_after_s)
                )
                self.target, self._dirty = decision, True
                self._reconcile(self.now_s())
                self._snapshot()
                if self.on_turn is not None:
                    self.on_turn(self)
                continue
            self._reconcile(now)
            if self.on_turn is not None:
                self.on_turn(self)
            real_elapsed = self.clock.now() - self._t0
            if real_elapsed - self._last_snapshot_real_s >= cfg.timeline_interval_s:
                self._snapshot()
            if real_elapsed >= cfg.max_wall_s:
                log.warning("giving up after %.1f real seconds", real_elapsed)
                break
            now = self.now_s()
            targets = [self.replay.next_time_s(now), wake_at]
            if self._leaves:
                targets.append(self._leaves[0][0])
            if cfg.checkpoint_interval_s is not None and sum(self.group.held()):
                targets.append(now + cfg.checkpoint_interval_s - self._running_since_ckpt_s)
            target = min(targets)
            wait_real = (target - now) / cfg.time_scale
            wait_real = min(max(wait_real, 0.0), cfg.idle_poll_s)
            if math.isfinite(target) and target - now <= _EPS:
                continue
            self._snap = target if math.isfinite(target) else None
            self.group.wait(wait_real)
        end = self.now_s()
        self._advance(end)
        if completed_s is not None:
            held = sum(self.group.held())
            self.events.append(EventRecord(completed_s, EventKind.DONE, held, held))
            self.event_real_s.append(completed_s / cfg.time_scale)
            self.event_interval_s.append(None)
        self._snapshot()
        self.group.finish()
        return ControllerResult(
            completed=completed_s is not None,
            completion_time_s=completed_s,
            end_time_s=end,
            wall_time_s=self.clock.now() - self._t0,
            decisions=tuple(self.decisions),
            events=tuple(self.events),
            event_real_s=tuple(self.event_real_s),
            event_interval_s=tuple(self.event_interval_s),
            timeline=tuple(self.timeline),
            spot_cost_usd=self._spot_cost,
            on_demand_cost_usd=self._od_cost,
            spot_node_s=self._spot_node_s,
            on_demand_node_s=self._od_node_s,
            idle_s=self._idle_s,
            loop_turns=self.turns,
            progress=self.group.progress(),
        )

    def _finish_time(self) -> float:
        """Trace time of the last step (when rank 0 finished)."""
        return self.now_s()
