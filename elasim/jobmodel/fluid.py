"""The fluid model of one elastic job: the simulator's actuator (standard library only).

It is an :class:`~elasim.jobmodel.actuator.Actuator` (and its own meter and estimates),
like the executor's real worker group, so one :class:`~elasim.jobmodel.loop.JobLoop`
drives both; it needs no SimPy, so the executor's controller drives it on a fake clock
in the parity test, which shows that the two shells run the same job model.

Model assumptions (also in docs/concepts/model.md):

* Training progress is a fluid: on ``n`` nodes the job makes ``goodput(n) =
  throughput(n) * efficiency(n)`` effective samples per second (see
  :mod:`elasim.job`).  Steps are not simulated one by one; the loop wakes only when
  something changes, which keeps an 11-day trace well under a second.
* New nodes boot for ``boot_s`` while the current group keeps training and are paid
  for from the request on; they join with a group re-formation.  Released and
  preempted nodes stop being paid for at once.
* A re-formation pauses training for ``detect + acquire + rendezvous + state +
  warmup`` (:class:`elasim.policies.PauseComponents`); see
  :func:`~elasim.jobmodel.pause.pause_for`.
* Preemption without (enough) notice: in-place survivors lose the step in flight;
  restart mode, or losing every node, rolls back to the last checkpoint.  A graceful
  leave (the loop's :func:`~elasim.jobmodel.rules.leave_lead_s` rule) loses nothing;
  when nobody survives, or every node is released on purpose (also while the group
  re-forms in place), a final checkpoint is written first if there is time.
* Periodic checkpoints (the loop's schedule) pause training; a loss mid-write voids it.

What survives a loss of nodes is :mod:`.durability`'s, by composition (the job holds a
:class:`~.durability.DurableProgress`, calls :func:`~.durability.final_checkpoint`).
"""

from __future__ import annotations

import math
from typing import Any

from elasim.policies import EventKind, EventRecord, JobState, PauseComponents

from .accounting import Accounting, Activity, JobStateMachine
from .actions import members_lost
from .durability import DurableProgress, Release, final_checkpoint
from .options import JobRules, RescaleMode
from .pause import pause_for, planned_rescale_estimate_s, resume_estimate_s

__all__ = ["FluidJob"]

_EPS = 1e-9
_NO_PAUSE = PauseComponents()  # immutable: one for every event without a pause
_RUNNING, _RESCALING, _CHECKPOINTING = JobState.RUNNING, JobState.RESCALING, JobState.CHECKPOINTING


class FluidJob:
    """The modelled job: holdings, booting nodes, pauses and fluid progress.

    Attributes:
        books: the job's ledger (the loop bills into it; this books time and samples).
        durable: what of the progress is durable (:mod:`.durability`).
    """

    leave_margin_s = 0.0
    polls = False  # nothing happens in the model without being asked: no polling

    def __init__(self, job: Any, rules: JobRules, *, checkpoint_cost_s: float | None = None):
        self.job, self.mode = job, rules.rescale
        self.min_nodes, self.max_nodes = rules.min_nodes, rules.max_nodes
        self.target_samples = float(job.target_samples)
        self._done_within = _EPS * max(self.target_samples, 1.0)  # samples left that count as done
        self._thr = job.throughput_table(self.max_nodes)
        self._eff = job.efficiency_table(self.max_nodes)
        self._good = tuple(t * e for t, e in zip(self._thr, self._eff, strict=True))
        self._step_s = (0.0,) + tuple(job.step_time_s(n) for n in range(1, self.max_nodes + 1))
        cost = checkpoint_cost_s
        self.ckpt_cost_s: float = job.checkpoint.write_s if cost is None else cost
        self._ckpt_pause = PauseComponents(state_s=self.ckpt_cost_s)  # every write's pause
        self.books = Accounting()
        self._sm = JobStateMachine()
        #: whether the group trains now (read often); kept in step with the state by :meth:`_to`
        self.training = False
        self.now = self._last_s = 0.0
        self.meter = self.estimates = self  # the model is its own (the actuator's roles)
        # holdings: nodes paid for; group: nodes training; booting: [ready, spot, od, asked]
        self.spot_held = self.od_held = self.group_spot = self.group_od = 0
        self.booting: list[list[float]] = []
        self._cold_until: list[float] = []  # ready times of killed slots (cold start)
        self._starting: list[float] = []  # ends of cold starts sharing the host's cores
        self._shared_host = job.rescale.shared_host_cores > 0
        self.pause_end_s = math.inf
        self.pause_ckpt_until_s = -math.inf  # part of a pause that is a checkpoint write
        self._pause_from_nodes = 0  # the group that trained before it
        self.started = self._moved = False  # _moved: see moved()
        self.progress_samples = 0.0
        self.durable = DurableProgress()
        self._next_due_s = -math.inf  # when settle/admit next have work (-inf: now)
        self._out: list[EventRecord] = []
        n, mode = self.max_nodes, self.mode
        self._rescale_estimate_s = planned_rescale_estimate_s(job, mode, n, self.ckpt_cost_s)
        self._resume_estimate_s = resume_estimate_s(job, mode, n)

    # -- what the loop reads ------------------------------------------------------------

    @property
    def state(self) -> JobState:
        """The job's state now."""
        return self._sm.state

    @property
    def group(self) -> int:
        """Nodes in the training group."""
        return self.group_spot + self.group_od

    def paid(self) -> tuple[int, int]:
        """Nodes paid for, booting ones included."""
        return self.spot_held, self.od_held

    def members(self) -> tuple[int, int]:
        """Nodes in the group."""
        return self.group_spot, self.group_od

    def progress(self) -> float:
        """Fraction of the target done."""
        return min(self.progress_samples / self.target_samples, 1.0)

    def remaining_samples(self) -> float:
        """Effective samples to go."""
        return max(self.target_samples - self.progress_samples, 0.0)

    def throughput_table(self) -> tuple[float, ...]:
        """The job spec's throughput by node count."""
        return self._thr

    def efficiency_table(self) -> tuple[float, ...]:
        """The job spec's statistical efficiency by node count."""
        return self._eff

    def rescale_cost_s(self) -> float:
        """Pause of a representative planned scale-up (estimate)."""
        return self._rescale_estimate_s

    def resume_cost_s(self) -> float | None:
        """Pause of a start from no nodes (estimate)."""
        return self._resume_estimate_s

    def step_s(self) -> float:
        """Step time of the current group (of one node when there is none)."""
        return self._step_s[max(self.group, 1)]

    def checkpoint_write_s(self) -> float:
        """The checkpoint cost."""
        return self.ckpt_cost_s

    def step_count(self) -> int:
        """Steps are not simulated."""
        return 0

    def view(self) -> tuple[int, int, int, float, str, int]:
        """A timeline row's worth (one call per turn: the simulator's hot path)."""
        progress = self.progress_samples / self.target_samples
        return (
            self.spot_held,
            self.od_held,
            self.group_spot + self.group_od,
            progress if progress < 1.0 else 1.0,
            self._sm.state._value_,
            0,
        )

    # -- time -----------------------------------------------------------------------------

    def advance(self, now_s: float, books: Accounting) -> None:
        """Integrate progress and book the time since the last call."""
        self.now = now_s
        dt = now_s - self._last_s
        if dt <= 0:
            return
        self._last_s = now_s
        state = self._sm.state
        rate = 1.0
        if self._shared_host and self._starting:
            # the loop wakes at every cold start's end, so the count is constant over dt
            rate = self._training_rate(now_s - dt)
            self._starting = [t for t in self._starting if t > now_s + _EPS]
        if state is _RUNNING:
            n = self.group_spot + self.group_od
            self.progress_samples += self._good[n] * rate * dt
            books.raw_samples += self._thr[n] * rate * dt
            self.durable.ran(dt)
            books.running_s += dt
            waste = 1.0 - self._eff[n]
            if waste > 0:
                books.convergence_s += waste * dt
                books.convergence_samples += self._thr[n] * rate * waste * dt
        elif state is _RESCALING:
            ckpt_part = min(max(self.pause_ckpt_until_s - (now_s - dt), 0.0), dt)
            books.checkpoint_s += ckpt_part
            books.rescale_s += dt - ckpt_part
        elif state is _CHECKPOINTING:
            books.checkpoint_s += dt
        elif state is JobState.WAITING:
            # waiting for booting nodes is part of the (re)start; otherwise the job idles
            books.spend(Activity.RESCALE if self.booting else Activity.IDLE, dt)

    def _training_rate(self, at_s: float) -> float:
        """Training speed relative to the step table while cold starts share the host."""
        if not self._shared_host:
            return 1.0
        starting = sum(1 for t in self._starting if t > at_s + _EPS)
        return self.job.rescale.training_rate(self.group, starting)

    def acted_until_s(self, now_s: float) -> float:
        """``now_s``: the model acts at once, the loop never catches up."""
        return now_s

    def next_due_s(self, now_s: float) -> float:
        """The next pause end, boot, cold-start end or completion."""
        best = math.inf
        state = self._sm.state
        if state is _RUNNING:
            remaining = self.target_samples - self.progress_samples
            rate = self._training_rate(now_s) if self._starting else 1.0
            n = self.group_spot + self.group_od
            best = now_s + max(remaining, 0.0) / (self._good[n] * rate)
        elif state is _RESCALING or state is _CHECKPOINTING:
            best = self.pause_end_s
        for batch in self.booting:
            if batch[0] > now_s + _EPS:
                best = min(best, batch[0])
        for end in self._starting:  # the training rate changes when a start ends
            if end > now_s + _EPS:
                best = min(best, end)
        self._next_due_s = best
        return best

    def finished(self, now_s: float) -> bool:
        """Reach DONE if the target is met (before anything else at the same instant)."""
        if not self.training:
            return self._sm.state is JobState.DONE
        remaining = self.target_samples - self.progress_samples
        good = self._good[self.group_spot + self.group_od]
        if remaining > self._done_within and remaining / good >= 1e-6:
            return False
        self.progress_samples = self.target_samples
        self._to(JobState.DONE)
        return True

    # -- events ---------------------------------------------------------------------------

    def _take(self) -> list[EventRecord]:
        out, self._out = self._out, []
        return out

    def _event(
        self,
        kind: EventKind,
        before: int,
        after: int,
        pause: PauseComponents | None = None,
        lost_samples: float = 0.0,
        lost_s: float = 0.0,
        time_s: float | None = None,
    ) -> None:
        n = max(before, 1)
        lost_steps = 0
        if lost_samples > 0:
            step_eff = self.job.global_batch(n) * self._eff[n]
            lost_steps = int(math.ceil(lost_samples / step_eff - 1e-9))
        at_s, lost_h = (self.now if time_s is None else time_s), lost_s / 3600.0
        # positional, in EventRecord's field order: keywords cost twice as much here
        record = EventRecord(
            at_s, kind, before, after, pause or _NO_PAUSE, lost_samples, lost_h, lost_steps
        )
        self._out.append(record)

    def _to(self, new: JobState) -> None:
        if self._sm.to(new, self.now):
            self.training = new is _RUNNING

    # -- what the loop asks for ------------------------------------------------------------

    def settle(self, now_s: float) -> list[EventRecord]:
        """Pauses and checkpoint writes that end now."""
        self.now = now_s
        if now_s < self._next_due_s - _EPS:
            return []
        state = self._sm.state
        if state is _RESCALING and now_s >= self.pause_end_s - _EPS:
            self._to(_RUNNING)
            self.pause_end_s = math.inf
            self.pause_ckpt_until_s = -math.inf
        elif state is _CHECKPOINTING and now_s >= self.pause_end_s - _EPS:
            self.durable.finish_write()
            self._to(_RUNNING)
            self.pause_end_s = math.inf
        return []

    def checkpoint(self, now_s: float) -> list[EventRecord]:
        """Start a periodic checkpoint write (training pauses for its cost)."""
        self.now = now_s
        if self._sm.state is not _RUNNING:
            return []
        n = self.group_spot + self.group_od
        self.durable.begin_write(self.progress_samples)
        self._to(_CHECKPOINTING)
        self.pause_end_s = now_s + self.ckpt_cost_s
        self._next_due_s = min(self._next_due_s, self.pause_end_s)
        self._event(EventKind.CHECKPOINT, n, n, self._ckpt_pause)
        return self._take()

    def poll(self, now_s: float) -> list[EventRecord]:
        """Nothing happens on its own in the model."""
        return []

    def admit(self, now_s: float) -> list[EventRecord]:
        """Booted nodes join the group with a re-formation."""
        self.now = now_s
        if now_s < self._next_due_s - _EPS or not self.booting:
            return []
        ready = [b for b in self.booting if b[0] <= now_s + _EPS]
        if not ready:
            return []
        self.booting = [b for b in self.booting if b[0] > now_s + _EPS]
        spot = sum(int(b[1]) for b in ready)
        od = sum(int(b[2]) for b in ready)
        requested_s = min(b[3] for b in ready)
        before = self.group
        if before + spot + od < self.min_nodes:
            # not enough to run yet: keep them waiting as "ready" at the front
            self.booting.insert(0, [now_s, spot, od, requested_s])
            return []
        self.group_spot += spot
        self.group_od += od
        self._begin_rescale(
            EventKind.SCALE_UP,
            before,
            self.group,
            newcomers=spot + od,
            failure=False,
            waited_boot=before == 0,
            acquire_s=now_s - requested_s,
        )
        return self._take()

    def apply(self, spot: int, on_demand: int, now_s: float, fresh: bool) -> list[EventRecord]:
        """Release what is over the target now; acquire (boot) what is missing."""
        self.now = now_s
        if spot == self.spot_held and on_demand == self.od_held:
            return []  # the common case: holdings already match the target
        before = self.group
        released = self._release(True, spot) | self._release(False, on_demand)  # both run
        self.booting = [b for b in self.booting if b[1] or b[2]]
        if released:
            self._begin_rescale(
                EventKind.SCALE_DOWN, before, self.group, newcomers=0, failure=False
            )
        add_spot = spot - self.spot_held
        add_od = on_demand - self.od_held
        if add_spot > 0 or add_od > 0:
            add_spot, add_od = max(add_spot, 0), max(add_od, 0)
            for ready_s, n_spot, n_od in self._acquire_times(add_spot, add_od):
                self.booting.append([ready_s, n_spot, n_od, now_s])
                self._next_due_s = min(self._next_due_s, ready_s)
            self.spot_held += add_spot
            self.od_held += add_od
        return self._take()

    def moved(self, now_s: float) -> None:
        """Arrived in another zone: a restart there, every node cold (old starts void)."""
        self.now, self._moved, self._cold_until, self._starting = now_s, True, [], []

    def _release(self, is_spot: bool, want: int) -> bool:
        """Release nodes of one market down to ``want``: booting first, then members."""
        index = 1 if is_spot else 2
        held = self.spot_held if is_spot else self.od_held
        excess = held - want
        if excess <= 0:
            return False
        for batch in reversed(self.booting):
            take = min(int(batch[index]), excess)
            batch[index] -= take
            excess -= take
            held -= take
        released = excess > 0
        if released:
            held -= excess
            if is_spot:
                self.group_spot -= excess
            else:
                self.group_od -= excess
        if is_spot:
            self.spot_held = held
        else:
            self.od_held = held
        return released

    def _acquire_times(self, spot: int, od: int) -> list[tuple[float, int, int]]:
        """When ``spot + od`` new nodes can join: warm slots first, then cold ones.

        Without cold starts (every preset) all of them are ready after ``boot_s``.
        With them (measured profiles), a slot whose process was killed joins only when
        its replacement has started, so joins come one by one, as in the executor;
        after a zone move (:meth:`moved`) every node starts cold, together.
        """
        now, boot_s = self.now, self.job.rescale.boot_s
        warm = self.max_nodes - self.spot_held - self.od_held
        if self._moved:  # no slot of the new zone has a process: all start together
            self._moved, warm = False, 0
            self._cold_start(spot + od, 0)
        self._cold_until = sorted(t for t in self._cold_until if t > now)
        if not self._cold_until:
            return [(now + boot_s, spot, od)]
        warm -= len(self._cold_until)
        times: dict[float, list[int]] = {}
        for index in range(spot + od):
            if warm > 0:
                warm -= 1
                ready = now + boot_s
            else:
                ready = self._cold_until.pop(0) + boot_s
            entry = times.setdefault(ready, [0, 0])
            entry[0 if index < spot else 1] += 1
        return [(ready, counts[0], counts[1]) for ready, counts in sorted(times.items())]

    def preempt(
        self, victims: int, graceful: bool, now_s: float, drop_s: float | None = None
    ) -> list[EventRecord]:
        """Take ``victims`` spot nodes: booting ones first, then group members.

        ``drop_s`` is unused: a modelled leave takes exactly the time it is given.
        """
        self.now = now_s
        lost_members = members_lost(victims, self.spot_held, self.group_spot)
        self.spot_held -= victims
        starting = victims - lost_members  # the booting nodes taken, newest first
        for batch in reversed(self.booting):
            take = min(int(batch[1]), starting)
            batch[1] -= take
            starting -= take
        self.booting = [b for b in self.booting if b[1] or b[2]]
        if lost_members <= 0:
            return []
        victims = lost_members
        before = self.group
        self.group_spot -= victims
        after = self.group
        survivors = after if self.mode is RescaleMode.INPLACE else 0
        if graceful and survivors == 0 and not self._final_checkpoint(before):
            graceful = False  # no time to write it: the unsaved work is lost
        if not graceful:
            self._cold_start(victims, after)
        lost, lost_s = self._lost_to_preemption(graceful, before, after)
        if lost > 0:
            self.progress_samples -= lost
        if self._sm.state is _CHECKPOINTING or (
            self._sm.state is _RESCALING and self.pause_ckpt_until_s > now_s
        ):
            self.pause_ckpt_until_s = -math.inf  # the write in progress is void
        self._event(EventKind.PREEMPT, before, after, lost_samples=lost, lost_s=lost_s)
        if after == 0:
            self._to(JobState.WAITING)
            self.pause_end_s = math.inf
            self._event(EventKind.PAUSE, before, 0)
            return self._take()
        self._begin_rescale(
            EventKind.SCALE_DOWN,
            before,
            after,
            newcomers=0,
            failure=not graceful,
            checkpoint_first=False,  # a graceful restart checkpointed before leaving
        )
        return self._take()

    def _cold_start(self, victims: int, after: int) -> None:
        """Killed slots go cold; their replacements start together, now."""
        rescale = self.job.rescale
        if not (rescale.cold_start_s > 0 or rescale.cold_start_table):
            return
        now = self.now
        trainers = after if self.mode is RescaleMode.INPLACE else 0
        self._starting = [t for t in self._starting if t > now + _EPS]
        offsets = rescale.cold_start_offsets_s(
            victims, trainers=trainers, starting=len(self._starting)
        )
        self._cold_until.extend(now + o for o in offsets)
        if self._shared_host:
            self._starting.extend(now + o for o in offsets)

    def _begin_rescale(
        self,
        kind: EventKind,
        before: int,
        after: int,
        *,
        newcomers: int,
        failure: bool,
        waited_boot: bool = False,
        checkpoint_first: bool = True,
        acquire_s: float | None = None,
    ) -> None:
        """Start a group re-formation from ``before`` to ``after`` members.

        In restart mode a planned change writes a checkpoint first
        (``checkpoint_first``) and restarts from it; after a graceful preemption that
        checkpoint was already written before the leave.
        """
        if after == 0:
            self._stop_all(before, failure)
            return
        survivors = after - newcomers if before > 0 else 0
        write_s = 0.0
        if checkpoint_first and survivors > 0 and not failure:
            write_s = self._checkpoint_before_restart(before)
        pause = pause_for(
            self.job,
            self.mode,
            nodes_after=after,
            nodes_before=before,
            survivors=survivors,
            newcomers=newcomers if survivors else after,
            failure=failure,
            has_checkpoint=self.durable.has_checkpoint and self.progress_samples > 0,
            waited_boot=waited_boot,
            checkpoint_write_s=write_s,
            acquire_s=acquire_s,
        )
        state = self._sm.state
        if state is JobState.WAITING and self.started:
            kind = EventKind.RESUME
            if self.durable.has_checkpoint and self.progress_samples > 0:
                self._event(EventKind.RESTORE, 0, after)
        now = self.now
        self._sm.reform(now)
        self.training, self.started = False, True
        # a boot that nobody trained through has already elapsed (in WAITING)
        self._pause_from_nodes = before
        self.pause_end_s = now + pause.pause_s - pause.acquire_s
        self._next_due_s = min(self._next_due_s, self.pause_end_s)
        self.pause_ckpt_until_s = now + write_s if write_s else -math.inf
        self._event(kind, before, after, pause)

    def _checkpoint_before_restart(self, before: int) -> float:
        """A planned restart's checkpoint, written before the group restarts from it.

        In restart mode every member loses its state at a re-formation, so a planned
        change (not a failure, with survivors to restart) first writes a checkpoint of
        a running job; the write is part of the re-formation's pause.  In place the
        survivors keep the state and nothing is written.

        Returns:
            The seconds the write adds to the pause (0 when none is written).
        """
        if self.mode is not RescaleMode.RESTART or self._sm.state is not _RUNNING:
            return 0.0
        write_s = self.ckpt_cost_s  # planned restart: checkpoint, then restart
        self.durable.save(self.progress_samples)
        self._event(EventKind.CHECKPOINT, before, before, self._ckpt_pause)
        return write_s

    # -- what survives a loss of nodes (the rules are elasim.jobmodel.durability's) -------

    def _lost_to_preemption(self, graceful: bool, before: int, after: int) -> tuple[float, float]:
        """Work a preemption throws away: (effective samples, running seconds)."""
        if graceful or self._sm.state is JobState.WAITING:
            return 0.0, 0.0
        if self.mode is RescaleMode.INPLACE and after > 0:
            step_eff = self.job.global_batch(before) * self._eff[before]  # the step in flight
            return self.durable.lose_step(self.progress_samples, step_eff, self._good[before])
        return self.durable.rollback(self.progress_samples)

    def _final_checkpoint(self, nodes: int) -> bool:
        """Save all before the last ``nodes`` leave on purpose; False: no time (roll back)."""
        state = self._sm.state
        n = self._pause_from_nodes if state is _RESCALING else nodes  # who trained
        rates = (self._good[n], self._thr[n], self._eff[n])
        release = Release.of(self._sm, self.now, self.ckpt_cost_s, rates)
        done = final_checkpoint(self.durable, self.books, self.progress_samples, release)
        if done is None:
            return False
        self.progress_samples, write_start_s = done
        if write_start_s is not None:
            self._event(EventKind.CHECKPOINT, nodes, nodes, self._ckpt_pause, time_s=write_start_s)
        return True

    def _stop_all(self, before: int, failure: bool) -> None:
        """The group released every node: save what can be saved, then wait."""
        if self._sm.state is not JobState.WAITING:
            lost, lost_s = 0.0, 0.0
            if not failure and not self._final_checkpoint(before):
                lost, lost_s = self.durable.rollback(self.progress_samples)  # too soon to save
            self.progress_samples -= lost
            self._to(JobState.WAITING)
            self._event(EventKind.PAUSE, before, 0, lost_samples=lost, lost_s=lost_s)
        self.pause_end_s = math.inf
