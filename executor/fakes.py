"""Deterministic stand-ins for tests and for the simulator parity check.

* :class:`FakeWorkerGroup` implements the controller's
  :class:`~elasim.executor.controller.WorkerGroup` protocol without processes: changes
  are instantaneous, training progresses as a fluid at a given step time per world
  size on an injected (fake) clock.  Unit tests of the controller use it.
* :class:`FluidWorkerGroup` is the simulator's own fluid model
  (:class:`elasim.jobmodel.FluidJob`) with a fake clock to sleep on.  Driven by the
  controller, it must give the simulator's decision log bit for bit: the two shells
  differ only in their clock, which is what the parity test shows.  Neither needs
  torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from elasim.jobmodel import FluidJob, JobRules, JobSpec
from elasim.policies import EventKind, EventRecord, PauseComponents

from .actuator import GroupActuator
from .controller import Controller, ControllerConfig, FakeClock
from .group import GroupEvent, GroupProgress, split_preempt

__all__ = ["FakePooledJob", "FakeWorkerGroup", "FluidWorkerGroup", "fluid_controller"]


class FakeWorkerGroup:
    """An instant worker group whose steps take ``step_time_s(n)`` fake seconds.

    Attributes:
        calls: every ``apply``/``preempt``/``checkpoint`` call, for assertions.
    """

    def __init__(
        self,
        clock: object,
        *,
        step_time_s: Callable[[int], float] | Mapping[int, float] = 0.01,  # type: ignore[assignment]
        global_batch: int = 64,
        max_steps: int = 300,
        pause: PauseComponents | None = None,
    ) -> None:
        self.clock = clock
        if isinstance(step_time_s, Mapping):
            table = dict(step_time_s)
            self._step_time = lambda n: table[n]
        elif callable(step_time_s):
            self._step_time = step_time_s
        else:
            constant = float(step_time_s)
            self._step_time = lambda n: constant
        self._global_batch = int(global_batch)
        self.max_steps = int(max_steps)
        self.pause = pause or PauseComponents()
        self.spot = 0
        self.on_demand = 0
        self._steps = 0.0
        self._units = 0.0  # gain-weighted steps (see GroupProgress.progress)
        self._gain = 1.0
        self.max_progress = 0.0  # 0: max_steps alone
        self._last = clock.now()  # type: ignore[attr-defined]
        self._ckpt_steps = 0.0
        self.calls: list[tuple[str, int, int]] = []

    # -- time -------------------------------------------------------------------------------

    def _advance(self) -> None:
        now = self.clock.now()  # type: ignore[attr-defined]
        dt, self._last = now - self._last, now
        n = self.spot + self.on_demand
        if n > 0 and dt > 0 and not self._finished():
            before = self._steps
            self._steps = min(self._steps + dt / self._step_time(n), float(self.max_steps))
            self._units += (self._steps - before) * self._gain
            if self.max_progress and self._units > self.max_progress:  # stops at the target
                self._steps -= (self._units - self.max_progress) / self._gain
                self._units = self.max_progress

    def _finished(self) -> bool:
        target = self.max_progress
        return self._steps >= self.max_steps - 1e-9 or bool(target and self._units >= target - 1e-9)

    def set_batch(self, global_batch: int, gain: float) -> None:
        """Steps from now on take this batch and count ``gain`` (no re-formation needed)."""
        self._advance()
        self._global_batch, self._gain = int(global_batch), float(gain)

    # -- protocol ---------------------------------------------------------------------------

    @property
    def global_batch(self) -> int:
        """Samples per step."""
        return self._global_batch

    @property
    def done(self) -> bool:
        """Whether ``max_steps`` (or ``max_progress``) were reached."""
        self._advance()
        return self._finished()

    def held(self) -> tuple[int, int]:
        """Current membership."""
        return self.spot, self.on_demand

    def _event(self, kind: EventKind, before: int, after: int, lost: int = 0) -> GroupEvent:
        step = self._step_time(max(before, 1))
        return GroupEvent(
            kind,
            self.clock.now(),  # type: ignore[attr-defined]
            before,
            after,
            self.pause if after and before else PauseComponents(),
            lost_steps=lost,
            lost_samples=float(lost * self._global_batch),
            lost_real_s=lost * step,
        )

    def apply(
        self, spot: int, on_demand: int, *, wait_ready_s: float | None = None
    ) -> list[GroupEvent]:
        """Instant change of membership (``wait_ready_s`` is ignored)."""
        self._advance()
        self.calls.append(("apply", spot, on_demand))
        before = self.spot + self.on_demand
        if (spot, on_demand) == (self.spot, self.on_demand):
            return []
        up = spot > self.spot or on_demand > self.on_demand
        self.spot, self.on_demand = spot, on_demand
        after = spot + on_demand
        if after == 0:
            return [self._event(EventKind.PAUSE, before, 0)]
        kind = EventKind.SCALE_UP if up else EventKind.SCALE_DOWN
        if before == 0 and self._steps > 0:
            kind = EventKind.RESUME
        return [self._event(kind, before, after)]

    def preempt(
        self, count: int, *, graceful: bool, kill_at_real_s: float | None = None
    ) -> list[GroupEvent]:
        """Instant loss of ``count`` spot nodes; a hard one loses the step in flight."""
        self._advance()
        self.calls.append(("preempt_graceful" if graceful else "preempt", count, 0))
        take = min(count, self.spot)
        if take <= 0:
            return []
        before = self.spot + self.on_demand
        self.spot -= take
        after = self.spot + self.on_demand
        lost = 0
        if not graceful:
            lost = 1 if after else int(math.floor(self._steps - self._ckpt_steps)) + 1
            rolled = self._steps - (max(self._steps - 1, 0.0) if after else self._ckpt_steps)
            self._steps -= rolled
            self._units -= rolled * self._gain
        events = [self._event(EventKind.PREEMPT, before, after, lost)]
        if after == 0:
            events.append(self._event(EventKind.PAUSE, before, 0))
        return split_preempt(events)

    def checkpoint(self, tag: str = "interval") -> list[GroupEvent]:
        """Instant checkpoint."""
        self._advance()
        self.calls.append(("checkpoint", 0, 0))
        n = self.spot + self.on_demand
        if not n:
            return []
        self._ckpt_steps = self._steps
        return [self._event(EventKind.CHECKPOINT, n, n)]

    def poll(self) -> list[GroupEvent]:
        """Nothing happens on its own."""
        self._advance()
        return []

    def wait(self, timeout_s: float) -> None:
        """Advance the fake clock."""
        self.clock.sleep(timeout_s)  # type: ignore[attr-defined]
        self._advance()

    def progress(self) -> GroupProgress:
        """Whole steps done."""
        self._advance()
        steps = int(math.floor(self._steps + 1e-9))
        done = self.done
        return GroupProgress(steps, steps * self._global_batch, 0.0, done, progress=self._units)

    def step_time_by_world(self) -> dict[int, float]:
        """The configured step times for the sizes used so far."""
        n = self.spot + self.on_demand
        return {n: self._step_time(n)} if n else {}

    def typical_step_s(self, world: int | None = None) -> float | None:
        """Configured step time."""
        n = world if world is not None else self.spot + self.on_demand
        return self._step_time(n) if n else None

    def finish(self) -> None:
        """Nothing to release."""


class FluidWorkerGroup(FluidJob):
    """The simulator's fluid model, driven by the controller on a fake clock.

    It is an actuator already (trace seconds in, events out), so the controller drives
    it directly; :meth:`wait` sleeps on the fake clock in real seconds.
    """

    def __init__(self, job: object, rules: object, clock: object, **kwargs: object) -> None:
        super().__init__(job, rules, **kwargs)  # type: ignore[arg-type]
        self.clock = clock

    def wait(self, real_s: float) -> None:
        """Advance the fake clock."""
        self.clock.sleep(real_s)  # type: ignore[attr-defined]


def fluid_controller(
    spec: JobSpec,
    trace: object,
    policy: object,
    job: object,
    config: ControllerConfig,
) -> Controller:
    """A :class:`~.controller.Controller` over the fluid model of ``job``, on a fake clock.

    The loop is built from ``spec`` exactly as for real workers
    (:func:`elasim.jobmodel.build_job_loop`); only the actuator is the model.
    """
    clock = FakeClock()

    def make(rules: JobRules) -> FluidWorkerGroup:
        cost = spec.checkpoint_cost_s
        return FluidWorkerGroup(job, rules, clock, checkpoint_cost_s=cost)

    return Controller(spec, trace, policy, clock, config, make_actuator=make)  # type: ignore[arg-type]


class FakePooledJob(GroupActuator):
    """A :class:`~.pooled.PooledJob` without processes, for tests without torch.

    The one-job actuator over a :class:`FakeWorkerGroup`, with the pool's quota calls
    recorded: it drives :class:`~.cluster.WorkerTraining` (the real side of
    ``cluster run``) on a fake clock.
    """

    def __init__(self, group: FakeWorkerGroup, config: object, origin: object) -> None:
        super().__init__(group, config, origin)  # type: ignore[arg-type]
        self.per_launcher: dict[int, int] | None = None
        self.quotas: list[tuple[int, dict[int, int] | None]] = []
        self.released = False
        self.closed = False

    def apply(self, spot: int, on_demand: int, now_s: float, fresh: bool) -> list[EventRecord]:
        """Record the quota the pool would get, then apply."""
        self.quotas.append((spot + on_demand, self.per_launcher))
        return super().apply(spot, on_demand, now_s, fresh)

    def release(self) -> None:
        """The job is done."""
        self.released = True

    def close(self) -> None:
        """Nothing to stop."""
        self.closed = True
