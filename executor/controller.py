"""The executor's shell: the job model (:mod:`elasim.jobmodel`) on a real, scaled clock.

The controller is the simulator's driver with another clock and another actuator:

* the **job loop** is the very :class:`~elasim.jobmodel.JobLoop` the simulator runs:
  trace replay and notices, decisions, the graceful-leave rule, the checkpoint
  schedule (``auto`` by default: Young/Daly, as in the simulator), the books;
* the **clock** is real time: trace seconds are real seconds times ``time_scale``
  (injected, :class:`RealClock` for runs, :class:`FakeClock` for tests);
* the **actuator** is a worker group (:class:`~.actuator.GroupActuator` around real
  processes or :class:`~.fakes.FakeWorkerGroup`), or, for the parity test, the
  simulator's fluid model itself (:class:`~.fakes.FluidWorkerGroup`).

So everything the policy sees (``now_s``, throughput, rescale cost, deadline) is in
*trace* seconds, and a policy cannot tell a replay from a simulation.  Settings that
exist in both times say which: ``_trace_s`` or ``_real_s``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from elasim.jobmodel import JobRules, JobSpec, TimelineRow, build_job_loop, summarize
from elasim.policies import DecisionRecord, EventRecord, Policy
from elasim.traces.model import on_demand_price_of

from .actuator import GroupActuator
from .controls import ControllerConfig, WorkerGroup
from .group import GroupProgress

__all__ = [
    "Clock",
    "Controller",
    "ControllerConfig",
    "ControllerResult",
    "FakeClock",
    "RealClock",
    "TimelineRow",
    "TraceClock",
    "WorkerGroup",
    "drive",
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


class TraceClock:
    """Trace seconds on a real (or fake) clock: ``(now - t0) x time_scale``.

    When a shell slept towards a known trace time (:meth:`aim`) and the clock lands
    within rounding of it, that exact time is returned, so a fake clock reproduces
    the simulator's times bit for bit.  Shared by the one-job controller and the
    cluster shell (:mod:`.cluster`), which differ only in what they turn.
    """

    def __init__(self, clock: Clock, time_scale: float) -> None:
        self.clock = clock
        self.time_scale = time_scale
        self.t0 = clock.now()
        self._snap: float | None = None

    def now_s(self) -> float:
        """Trace seconds since :attr:`t0`."""
        t = (self.clock.now() - self.t0) * self.time_scale
        snap = self._snap
        if snap is not None and abs(t - snap) <= 1e-9 * max(1.0, abs(snap)):
            return snap
        return t

    def real_s(self) -> float:
        """Real seconds since :attr:`t0`."""
        return self.clock.now() - self.t0

    def aim(self, wake_s: float) -> None:
        """The shell is about to sleep towards trace time ``wake_s`` (inf: no target)."""
        self._snap = wake_s if math.isfinite(wake_s) else None


class Turnable(Protocol):
    """What a shell drives: a job loop, or the cluster's loop of many jobs."""

    finished: bool

    def turn(self, now_s: float) -> float:
        """Do what is due at ``now_s``; return when there is work next (trace s)."""


def drive(
    loop: Turnable,
    clock: TraceClock,
    wait: Callable[[float], None],
    *,
    max_wall_real_s: float,
    idle_poll_real_s: float,
    on_turn: Callable[[], None] | None = None,
) -> float:
    """Turn ``loop`` on ``clock`` until it finishes or the wall budget is spent.

    Between turns it waits (``wait(real_s)``, which may return early when a worker
    has news) until the loop's next work, but never longer than
    ``idle_poll_real_s``: real workers report through polling.  Returns the trace
    time at the end.
    """
    scale = clock.time_scale
    while True:
        wake = loop.turn(clock.now_s())
        if on_turn is not None:
            on_turn()
        if loop.finished or clock.real_s() >= max_wall_real_s:
            break
        now = clock.now_s()
        if math.isfinite(wake) and wake - now <= _EPS:
            continue
        wait_real = min(max((wake - now) / scale, 0.0), idle_poll_real_s)
        clock.aim(wake)
        wait(wait_real)
    return clock.now_s()


@dataclass(frozen=True)
class ControllerResult:
    """What the loop did.

    Attributes:
        summary: the shared summary fields (:class:`elasim.jobmodel.RunSummary`),
            hour figures in trace hours.
        completion_time_s: trace seconds until done (None if not completed).
        end_time_s: trace seconds at the end of the loop.
        wall_time_s: real seconds the loop ran.
        decisions: the decision log.
        events: event records (``time_s`` in trace seconds, pauses in real seconds).
        event_real_s: real seconds (since the start) of each event.
        event_interval_s: raw pause interval of each event (real s; None: not measured).
        event_due_s: the trace time each event answered: its own ``time_s``, or the
            earlier time of the trace item it was carried out for late (the workers
            were busy restarting).
        timeline: the world over time.
        progress: final progress of the group.
        gave_up: the run stopped at ``max_wall_real_s`` before the job finished.
    """

    summary: dict[str, Any]
    completion_time_s: float | None
    end_time_s: float
    wall_time_s: float
    decisions: tuple[DecisionRecord, ...]
    events: tuple[EventRecord, ...]
    event_real_s: tuple[float, ...]
    event_interval_s: tuple[float | None, ...]
    event_due_s: tuple[float, ...]
    timeline: tuple[TimelineRow, ...]
    progress: GroupProgress = field(default_factory=GroupProgress)
    gave_up: bool = False

    @property
    def completed(self) -> bool:
        """Whether training reached its end."""
        return bool(self.summary["completed"])


class Controller:
    """The job loop over a trace and a worker group, on a real (or fake) clock.

    Args:
        spec: the job, resolved (its start offset and node bounds; its ``max_nodes``
            within the slots there are).
        trace: the capacity trace.
        policy: the scaling policy.
        clock: real (or fake) seconds.
        config: the controller's own settings.
        group: the worker group, wrapped in a :class:`~.actuator.GroupActuator`.
        make_actuator: instead of ``group``, builds the actuator from the loop's rules
            (the parity test's fluid model, :func:`~.fakes.fluid_controller`).
        on_turn: called after each loop turn (progress display, the journal).
    """

    def __init__(
        self,
        spec: JobSpec,
        trace: Any,
        policy: Policy,
        clock: Clock,
        config: ControllerConfig,
        *,
        group: Any = None,
        make_actuator: Callable[[JobRules], Any] | None = None,
        on_turn: Callable[[Controller], None] | None = None,
    ) -> None:
        if (group is None) == (make_actuator is None):
            raise ValueError("give the controller a worker group or an actuator maker")
        self.spec = spec
        self.trace = trace
        self.policy = policy
        self.clock = clock
        self.config = config
        self.on_turn = on_turn
        self._t0 = clock.now()
        if make_actuator is None:

            def make_actuator(rules: JobRules) -> Any:
                return GroupActuator(
                    group, config, lambda: self._t0, rescale=rules.rescale, now=clock.now
                )

        self.loop = build_job_loop(
            spec,
            trace,
            policy,
            make_actuator,
            on_demand_price_per_hour=on_demand_price_of(trace, spec.on_demand_price_per_hour),
            horizon_s=config.max_wall_real_s * config.time_scale,
            timeline_every_s=config.timeline_interval_real_s * config.time_scale,
        )
        self.actuator = self.loop.actuator
        #: what progress and ``finish`` are read from (the actuator, for a fluid one)
        self.group = group if group is not None else self.actuator
        self._trace = TraceClock(clock, config.time_scale)

    # -- what the progress display reads ----------------------------------------------------

    @property
    def available(self) -> int:
        """Spot nodes available now."""
        return self.loop.available

    @property
    def last_pause_s(self) -> float | None:
        """The last measured pause (real seconds)."""
        return getattr(self.actuator, "last_pause_s", None)

    @property
    def decisions(self) -> list[DecisionRecord]:
        """The decision log so far."""
        return self.loop.decisions

    def now_s(self) -> float:
        """Trace seconds since the start of the run (see :class:`TraceClock`)."""
        return self._trace.now_s()

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> ControllerResult:
        """Replay the trace until the job is done (or ``max_wall_real_s`` passes)."""
        cfg, loop = self.config, self.loop
        self._trace = TraceClock(self.clock, cfg.time_scale)
        self._t0 = self._trace.t0

        def turned() -> None:
            if self.on_turn is not None:
                self.on_turn(self)

        end = drive(
            loop,
            self._trace,
            self.actuator.wait,
            max_wall_real_s=cfg.max_wall_real_s,
            idle_poll_real_s=cfg.idle_poll_real_s,
            on_turn=turned,
        )
        loop.close(end)
        gave_up = False
        if loop.done_s is None:
            gave_up = True
            log.info("stopped after %.1f real seconds", self.clock.now() - self._t0)
        if hasattr(self.group, "finish"):
            self.group.finish()
        return self._result(end, gave_up)

    def _result(self, end: float, gave_up: bool) -> ControllerResult:
        loop, actuator = self.loop, self.actuator
        measured: dict[int, tuple[float, float | None]] = getattr(actuator, "measured", {})
        scale = self.config.time_scale
        real = [measured.get(id(e), (e.time_s / scale, None)) for e in loop.events]
        summary = summarize(loop, end)
        if loop.zones is not None:  # a job in several zones: its moves
            summary["zones"] = loop.zones.details()
        return ControllerResult(
            summary=summary,
            completion_time_s=loop.done_s,
            end_time_s=end,
            wall_time_s=self.clock.now() - self._t0,
            decisions=tuple(loop.decisions),
            events=tuple(loop.events),
            event_real_s=tuple(r for r, _ in real),
            event_interval_s=tuple(i for _, i in real),
            event_due_s=tuple(loop.event_due_s.get(id(e), e.time_s) for e in loop.events),
            timeline=tuple(loop.timeline),
            progress=_progress_of(self.group),
            gave_up=gave_up and loop.done_s is None,
        )


def _progress_of(group: Any) -> GroupProgress:
    progress = getattr(group, "progress", None)
    if callable(progress):
        value = progress()
        if isinstance(value, GroupProgress):
            return value
    return GroupProgress()
