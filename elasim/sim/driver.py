"""The SimPy model of one elastic training job: a thin observe -> decide -> apply loop.

The policy is asked at *decision points* only: the start, every change of capacity or
price, every preemption notice, and when its own ``wake_after_s`` expires.  Its
decision is a *target* (spot and on-demand node counts); the job then works towards
it on its own (booting nodes, re-forming the group, checkpointing).  The executor's
controller asks at the same points, which is what makes decision logs comparable.

Model assumptions (also in the README):

* Training progress is a fluid: on ``n`` nodes the job makes ``goodput(n) =
  throughput(n) * efficiency(n)`` effective samples per second (see
  :mod:`elasim.job`).  Steps are not simulated one by one; events happen only when
  something changes, which keeps an 11-day trace well under a second.
* New nodes boot for ``boot_s`` while the current group keeps training and are paid
  for from the request on; they join with a group re-formation.  Released and
  preempted nodes stop being paid for at once.
* A re-formation pauses training for ``detect + acquire + rendezvous + state +
  warmup`` (:class:`elasim.policies.PauseComponents`); see :func:`pause_for`.
* Preemption without (enough) notice: in-place survivors lose the step in flight;
  restart mode, or losing every node, rolls back to the last checkpoint.  With
  enough notice (one step when survivors remain in place, else a checkpoint write)
  the job leaves gracefully and loses nothing.
* Periodic checkpoints every ``checkpoint_interval_s`` of *running* time pause
  training for the checkpoint cost; a preemption during a write voids it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import simpy

from elasim.job import JobSpec
from elasim.policies import (
    Decision,
    DecisionRecord,
    EventKind,
    EventRecord,
    JobState,
    Observation,
    ObservedEvent,
    PauseComponents,
    Policy,
    clamp,
)
from elasim.traces.model import CapacityTrace, JobTrace

from .capacity import ClusterSource, SpotTraceSource
from .config import RescaleMode, SimConfig, SimResult, Timeline, young_daly_interval_s

__all__ = ["SimJob", "pause_for", "simulate"]

log = logging.getLogger(__name__)

_EPS = 1e-9
_DEFAULT_HORIZON_S = 400 * 86400.0
#: ``auto`` never checkpoints more often than once a minute (a free checkpoint would
#: otherwise be taken continuously).
_MIN_AUTO_INTERVAL_S = 60.0


def pause_for(
    job: JobSpec,
    mode: RescaleMode,
    *,
    nodes_after: int,
    nodes_before: int | None = None,
    survivors: int,
    newcomers: int,
    failure: bool,
    has_checkpoint: bool,
    waited_boot: bool,
    checkpoint_write_s: float = 0.0,
    acquire_s: float | None = None,
) -> PauseComponents:
    """Pause components of one group re-formation (shared with calibration).

    Args:
        job: the job spec with the ``[rescale]`` and ``[checkpoint]`` figures.
        mode: in-place or restart.
        nodes_after: group size after the change.
        survivors: members that keep their process and state (in-place only).
        newcomers: members that join.
        failure: the change follows a failure nobody was warned of (adds detection).
        has_checkpoint: a checkpoint exists to restore from.
        waited_boot: nobody was training while the nodes booted (adds ``acquire_s``).
        checkpoint_write_s: a checkpoint written as part of this change (restart mode,
            planned change); reported inside ``state_s``.
        nodes_before: group size before; with a measured pause table (a profile), the
            measured components of this exact transition are used when present.
        acquire_s: the acquisition actually waited for (a cold start can take longer
            than ``boot_s``); None means ``boot_s``.
    """
    waited_s = job.rescale.boot_s if acquire_s is None else acquire_s
    if job.pause_table and nodes_before is not None:
        measured = job.measured_pause(mode.value, nodes_before, nodes_after, failure)
        if measured is not None:
            if waited_boot and waited_s > measured.acquire_s:
                return dataclasses.replace(measured, acquire_s=waited_s)
            return measured
    spec = job.rescale
    detect = spec.detect_s if failure else 0.0
    acquire = waited_s if waited_boot else 0.0
    rendezvous = spec.rendezvous_s(nodes_after)
    if mode is RescaleMode.INPLACE and survivors > 0:
        state = job.checkpoint.size_bytes / spec.state_bandwidth_bytes_per_s if newcomers else 0.0
    else:
        state = job.checkpoint.read_s if has_checkpoint else 0.0
        state += checkpoint_write_s
    return PauseComponents(
        detect_s=detect,
        acquire_s=acquire,
        rendezvous_s=rendezvous,
        state_s=state,
        warmup_s=spec.warmup_s,
    )


class SimJob:
    """The elastic job and its control loop inside one ``simpy.Environment``."""

    def __init__(
        self,
        env: simpy.Environment,
        job: JobSpec,
        policy: Policy,
        config: SimConfig,
        source: SpotTraceSource | ClusterSource,
        on_demand_price_per_hour: float,
    ) -> None:
        self.env = env
        self.job = job
        self.policy = policy
        self.config = config
        self.mode = config.rescale
        self.source = source
        self.od_price = on_demand_price_per_hour
        self.allow_on_demand = math.isfinite(on_demand_price_per_hour)
        self.min_nodes = job.nodes.min
        self.max_nodes = job.nodes.max
        self.target_samples = job.target_samples
        self._thr = job.throughput_table()
        self._eff = job.efficiency_table()
        self._good = tuple(t * e for t, e in zip(self._thr, self._eff, strict=True))
        self._step_s = (0.0,) + tuple(job.step_time_s(n) for n in range(1, self.max_nodes + 1))
        self.ckpt_cost_s = (
            job.checkpoint.write_s if config.checkpoint_cost_s is None else config.checkpoint_cost_s
        )
        self.horizon_s = config.max_sim_time_s or _DEFAULT_HORIZON_S
        # capacity
        self.available, self.price = source.initial()
        # holdings: nodes paid for; group: nodes training; booting: [ready_s, spot, od]
        self.spot_held = 0
        self.od_held = 0
        self.group_spot = 0
        self.group_od = 0
        self.booting: list[list[float]] = []
        # ready times of worker slots whose process was killed (cold start pending)
        self._cold_until: list[float] = []
        # end times of cold starts in progress (they compete for a shared host's cores)
        self._starting: list[float] = []
        self._shared_host = job.rescale.shared_host_cores > 0
        self.target = Decision(0, 0)
        self.state = JobState.WAITING
        self.pause_end_s = math.inf
        self.pause_ckpt_until_s = -math.inf  # part of a pause that is a checkpoint write
        self.started = False
        # progress
        self.progress = 0.0
        self.ckpt_progress = 0.0
        self.has_checkpoint = False
        self.ckpt_pending_progress = 0.0
        self.run_since_ckpt_s = 0.0
        # running time whose work is not durable yet: what a rollback loses, exactly
        self.unsaved_run_s = 0.0
        self._ckpt_pending_run_s = 0.0
        self.raw_samples = 0.0
        # accounting
        self.last_s = 0.0
        self.spot_cost = 0.0
        self.od_cost = 0.0
        self.spot_node_s = 0.0
        self.od_node_s = 0.0
        self.rescale_s = 0.0
        self.ckpt_s = 0.0
        self.idle_s = 0.0
        self.conv_s = 0.0
        self.run_s = 0.0
        self.running_since_s = 0.0
        self.conv_samples = 0.0
        self.lost_s = 0.0
        self.rescales = 0
        self.preemptions = 0
        self.checkpoints = 0
        self.done_s: float | None = None
        # bookkeeping
        self.events: list[EventRecord] = []
        self._unseen_events: list[ObservedEvent] = []
        self.decisions: list[DecisionRecord] = []
        self.notices: dict[float, float] = {}
        self.decision_due = True
        self.wake_at_s = math.inf
        self._wake: simpy.Event | None = None
        self._token = 0
        self.rescale_cost_estimate_s = self._planned_rescale_estimate()
        self.resume_cost_estimate_s = pause_for(
            job,
            self.mode,
            nodes_after=self.max_nodes,
            survivors=0,
            newcomers=self.max_nodes,
            failure=False,
            has_checkpoint=True,
            waited_boot=True,
        ).pause_s
        self._ckpt_interval_s = self._estimate_checkpoint_interval_s()
        self._timer_at_s = math.inf
        self._next_due_s = -math.inf  # when _handle_due next has work (-inf: now)
        self._tl: dict[str, list[Any]] = {
            k: []
            for k in (
                "time_s",
                "spot_available",
                "spot_held",
                "on_demand_held",
                "group_nodes",
                "price_per_hour",
                "progress",
                "state",
            )
        }
        self.done_event = env.event()

    # -- accounting ----------------------------------------------------------------------

    @property
    def group(self) -> int:
        """Nodes in the training group."""
        return self.group_spot + self.group_od

    def _advance(self) -> None:
        """Integrate progress, cost and time accounting from the last update to now."""
        now = self.env.now
        dt = now - self.last_s
        if dt <= 0:
            return
        self.last_s = now
        self.spot_cost += self.spot_held * self.price * dt / 3600.0
        if self.od_held:
            self.od_cost += self.od_held * self.od_price * dt / 3600.0
        self.spot_node_s += self.spot_held * dt
        self.od_node_s += self.od_held * dt
        state = self.state
        rate = 1.0
        if self._shared_host and self._starting:
            # the loop wakes at every cold start's end, so the count is constant over dt
            rate = self._training_rate(now - dt)
            self._starting = [t for t in self._starting if t > now + _EPS]
        if state is JobState.RUNNING:
            n = self.group
            self.progress += self._good[n] * rate * dt
            self.raw_samples += self._thr[n] * rate * dt
            self.run_since_ckpt_s += dt
            self.unsaved_run_s += dt
            self.run_s += dt
            waste = 1.0 - self._eff[n]
            if waste > 0:
                self.conv_s += waste * dt
                self.conv_samples += self._thr[n] * rate * waste * dt
        elif state is JobState.RESCALING:
            ckpt_part = min(max(self.pause_ckpt_until_s - (now - dt), 0.0), dt)
            self.ckpt_s += ckpt_part
            self.rescale_s += dt - ckpt_part
        elif state is JobState.CHECKPOINTING:
            self.ckpt_s += dt
        elif state is JobState.WAITING:
            # waiting for booting nodes is part of the (re)start; otherwise the job idles
            if self.booting:
                self.rescale_s += dt
            else:
                self.idle_s += dt

    def _training_rate(self, at_s: float) -> float:
        """Training speed relative to the step table while cold starts share the host."""
        if not self._shared_host:
            return 1.0
        starting = sum(1 for t in self._starting if t > at_s + _EPS)
        return self.job.rescale.training_rate(self.group, starting)

    def _record_timeline(self) -> None:
        if not self.config.record_timeline:
            return
        tl = self._tl
        tl["time_s"].append(self.env.now)
        tl["spot_available"].append(self.available)
        tl["spot_held"].append(self.spot_held)
        tl["on_demand_held"].append(self.od_held)
        tl["group_nodes"].append(self.group)
        tl["price_per_hour"].append(self.price)
        tl["progress"].append(min(self.progress / self.target_samples, 1.0))
        tl["state"].append(self.state.value)

    def _event(
        self,
        kind: EventKind,
        before: int,
        after: int,
        pause: PauseComponents | None = None,
        lost_samples: float = 0.0,
        lost_s: float = 0.0,
        time_s: float | None = None,
        deadline_s: float | None = None,
    ) -> None:
        n = max(before, 1)
        lost_steps = 0
        if lost_samples > 0:
            step_eff = self.job.global_batch(n) * self._eff[n]
            lost_steps = int(math.ceil(lost_samples / step_eff - 1e-9))
        when = self.env.now if time_s is None else time_s
        record = EventRecord(
            time_s=when,
            kind=kind,
            nodes_before=before,
            nodes_after=after,
            pause=pause or PauseComponents(),
            lost_samples=lost_samples,
            lost_work_h=lost_s / 3600.0,
            lost_steps=lost_steps,
        )
        self.events.append(record)
        self._unseen_events.append(ObservedEvent(when, kind, before, after, deadline_s))

    def _set_state(self, new: JobState) -> None:
        if new is not self.state and not self.state.can_become(new):
            raise RuntimeError(f"illegal job transition {self.state.value} -> {new.value}")
        if new is JobState.RUNNING and self.state is not JobState.RUNNING:
            self.running_since_s = self.env.now
        self.state = new

    # -- the policy ----------------------------------------------------------------------

    def _planned_rescale_estimate(self) -> float:
        """Pause of a representative planned scale-up, for ``Observation.rescale_cost_s``."""
        n = self.max_nodes
        write = self.ckpt_cost_s if self.mode is RescaleMode.RESTART else 0.0
        return pause_for(
            self.job,
            self.mode,
            nodes_after=n,
            survivors=max(n - 1, 1),
            newcomers=1,
            failure=False,
            has_checkpoint=True,
            waited_boot=False,
            checkpoint_write_s=write,
        ).pause_s

    def observe(self) -> Observation:
        """Build the immutable snapshot the policy sees."""
        return Observation(
            now_s=self.env.now,
            spot_available=self.available,
            spot_held=self.spot_held,
            on_demand_held=self.od_held,
            spot_price_per_hour=self.price,
            on_demand_price_per_hour=self.od_price if self.allow_on_demand else math.inf,
            progress=min(self.progress / self.target_samples, 1.0),
            remaining_samples=max(self.target_samples - self.progress, 0.0),
            throughput_samples_per_s=self._thr,
            statistical_efficiency=self._eff,
            rescale_cost_s=self.rescale_cost_estimate_s,
            resume_cost_s=self.resume_cost_estimate_s,
            deadline_s=self.config.deadline_s,
            min_nodes=self.min_nodes,
            max_nodes=self.max_nodes,
            recent_events=tuple(self._unseen_events),
        )

    def _decide(self) -> None:
        obs = self.observe()
        self._unseen_events.clear()
        decision = clamp(self.policy.decide(obs), obs)
        if not self.allow_on_demand and decision.on_demand_nodes:
            decision = clamp(Decision(decision.spot_nodes, 0, decision.wake_after_s), obs)
        self.decisions.append(
            DecisionRecord(
                obs.now_s, obs.spot_available, obs.spot_held, obs.on_demand_held, decision
            )
        )
        self.target = decision
        self.wake_at_s = (
            math.inf if decision.wake_after_s is None else self.env.now + decision.wake_after_s
        )
        self._next_due_s = min(self._next_due_s, self.wake_at_s)
        self.decision_due = False

    # -- callbacks from the capacity source ----------------------------------------------

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None and not wake.triggered:
            wake.succeed()

    def on_notice(self, drop_time_s: float, available_after: int) -> None:
        """A drop to ``available_after`` is coming at ``drop_time_s``."""
        if self.state is JobState.DONE:
            return
        self._advance()
        if self._check_done():
            return
        self.notices[drop_time_s] = self.env.now
        if available_after < self.spot_held:
            self._event(
                EventKind.PREEMPT_NOTICE,
                self.group,
                self.group - min(self.group_spot, self.spot_held - available_after),
                deadline_s=drop_time_s,
            )
            self.decision_due = True
            self._poke()

    def on_capacity(self, available: int, price_per_hour: float) -> None:
        """Capacity or price changed now; preempt if we hold more than is available."""
        if self.state is JobState.DONE:
            return
        self._advance()
        if self._check_done():
            return
        self.available, self.price = available, price_per_hour
        notice_at = self.notices.pop(self.env.now, None)
        if self.spot_held > available:
            self._preempt(self.spot_held - available, notice_at)
        self.decision_due = True
        self._record_timeline()
        self._poke()

    # -- mechanics ------------------------------------------------------------------------

    def _preempt(self, victims: int, notice_at_s: float | None) -> None:
        """Take ``victims`` spot nodes: booting ones first, then group members."""
        now = self.env.now
        self.spot_held -= victims
        for batch in reversed(self.booting):
            take = min(int(batch[1]), victims)
            batch[1] -= take
            victims -= take
        self.booting = [b for b in self.booting if b[1] or b[2]]
        if victims <= 0:
            return
        before = self.group
        self.group_spot -= victims
        after = self.group
        rescale = self.job.rescale
        cold = rescale.cold_start_s > 0 or bool(rescale.cold_start_table)
        self.preemptions += 1
        self._refresh_checkpoint_interval()
        survivors = after if self.mode is RescaleMode.INPLACE else 0
        lead_s = 0.0 if notice_at_s is None else now - notice_at_s
        needs_ckpt = survivors == 0
        required_s = self.ckpt_cost_s + self._step_s[before] if needs_ckpt else self._step_s[before]
        if needs_ckpt and self.state is JobState.RUNNING and notice_at_s is not None:
            # the checkpoint can only be written while running: not before a resume
            lead_s = now - max(notice_at_s, self.running_since_s)
        unsaved = self.progress > self.ckpt_progress
        graceful = (lead_s >= required_s and lead_s > 0) or (
            needs_ckpt and notice_at_s is not None and not unsaved
        )
        lost = 0.0
        if graceful and needs_ckpt and not self._final_checkpoint(before):
            graceful = False  # no time to write it: the unsaved work is lost
        if not graceful and cold:
            # killed: the slots go cold; their replacements start together, now
            trainers = after if self.mode is RescaleMode.INPLACE else 0
            self._starting = [t for t in self._starting if t > now + _EPS]
            offsets = rescale.cold_start_offsets_s(
                victims, trainers=trainers, starting=len(self._starting)
            )
            self._cold_until.extend(now + o for o in offsets)
            if self._shared_host:
                self._starting.extend(now + o for o in offsets)
        lost_s = 0.0
        if not graceful and self.state is not JobState.WAITING:
            if self.mode is RescaleMode.INPLACE and after > 0:
                # the step in flight on the old group
                step_eff = self.job.global_batch(before) * self._eff[before]
                lost = min(step_eff, self.progress - self.ckpt_progress)
                lost_s = lost / self._good[before] if lost > 0 else 0.0
                self.unsaved_run_s = max(self.unsaved_run_s - lost_s, 0.0)
            else:
                lost, lost_s = self._rollback()
        if lost > 0:
            self.progress -= lost
        self.lost_s += lost_s
        if self.state is JobState.CHECKPOINTING or (
            self.state is JobState.RESCALING and self.pause_ckpt_until_s > now
        ):
            self.pause_ckpt_until_s = -math.inf  # the write in progress is void
        self._event(EventKind.PREEMPT, before, after, lost_samples=lost, lost_s=lost_s)
        if after == 0:
            self._set_state(JobState.WAITING)
            self.pause_end_s = math.inf
            self.run_since_ckpt_s = 0.0
            self._event(EventKind.PAUSE, before, 0)
            return
        self._begin_rescale(
            EventKind.SCALE_DOWN,
            before,
            after,
            newcomers=0,
            failure=not graceful,
            checkpoint_first=False,  # a graceful restart checkpointed inside the notice
        )

    def _rollback(self) -> tuple[float, float]:
        """Everything since the last durable checkpoint is lost: (samples, run seconds)."""
        lost = max(self.progress - self.ckpt_progress, 0.0)
        lost_s = self.unsaved_run_s if lost > 0 else 0.0
        self.unsaved_run_s = 0.0
        self._ckpt_pending_run_s = 0.0
        return lost, lost_s

    def _final_checkpoint(self, nodes: int) -> bool:
        """Checkpoint that ends right now, before the last nodes leave on purpose.

        The job spent its last ``ckpt_cost_s`` writing instead of training, so that
        much progress is taken back and booked as checkpoint time.  A write needs a
        running job and a running period at least as long as the write; otherwise
        the unsaved progress cannot be saved and the caller rolls it back.

        Returns:
            Whether everything done so far is durable.
        """
        if self.progress <= self.ckpt_progress:
            self.unsaved_run_s = 0.0
            return True  # nothing unsaved
        if self.state is JobState.CHECKPOINTING and self.progress <= self.ckpt_pending_progress:
            # warned in time, the job lets the write in progress be its final checkpoint
            self.ckpt_progress = self.ckpt_pending_progress
            self.has_checkpoint = True
            self.unsaved_run_s = 0.0
            self._ckpt_pending_run_s = 0.0
            return True
        if self.state is not JobState.RUNNING:
            return False
        cost = self.ckpt_cost_s
        if cost <= 0:
            self.ckpt_progress, self.has_checkpoint = self.progress, True
            self.unsaved_run_s = 0.0
            return True
        if self.env.now - self.running_since_s < cost - _EPS:
            return False
        undo = min(self._good[nodes] * cost, self.progress - self.ckpt_progress)
        self.progress -= undo
        self.run_s -= cost  # those seconds were spent writing, not training
        self.unsaved_run_s = 0.0
        self.raw_samples -= min(self.raw_samples, self._thr[nodes] * cost)
        self.conv_s -= min(self.conv_s, (1 - self._eff[nodes]) * cost)
        self.ckpt_s += cost
        self.run_since_ckpt_s = 0.0
        self.ckpt_progress = self.progress
        self.has_checkpoint = True
        self.checkpoints += 1
        self._event(
            EventKind.CHECKPOINT,
            nodes,
            nodes,
            PauseComponents(state_s=cost),
            time_s=self.env.now - cost,
        )
        return True

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
        checkpoint was already written during the notice.
        """
        now = self.env.now
        if after == 0:
            if self.state is not JobState.WAITING:
                lost, lost_s = 0.0, 0.0
                if not failure and not self._final_checkpoint(before):
                    lost, lost_s = self._rollback()  # released too soon to save
                self.progress -= lost
                self.lost_s += lost_s
                self._set_state(JobState.WAITING)
                self._event(EventKind.PAUSE, before, 0, lost_samples=lost, lost_s=lost_s)
            self.pause_end_s = math.inf
            return
        survivors = after - newcomers if before > 0 else 0
        write_s = 0.0
        if (
            self.mode is RescaleMode.RESTART
            and checkpoint_first
            and survivors > 0
            and not failure
            and self.state is JobState.RUNNING
        ):
            write_s = self.ckpt_cost_s  # planned restart: checkpoint, then restart
            self.ckpt_progress = self.progress
            self.has_checkpoint = True
            self.checkpoints += 1
            self.run_since_ckpt_s = 0.0
            self.unsaved_run_s = 0.0
        pause = pause_for(
            self.job,
            self.mode,
            nodes_after=after,
            nodes_before=before,
            survivors=survivors,
            newcomers=newcomers if survivors else after,
            failure=failure,
            has_checkpoint=self.has_checkpoint and self.progress > 0,
            waited_boot=waited_boot,
            checkpoint_write_s=write_s,
            acquire_s=acquire_s,
        )
        if self.state is JobState.WAITING:
            self._set_state(JobState.RESCALING)
            if self.started:
                kind = EventKind.RESUME
                if self.has_checkpoint and self.progress > 0:
                    self._event(EventKind.RESTORE, 0, after)
        elif self.state is JobState.CHECKPOINTING:
            self.pause_ckpt_until_s = -math.inf  # an interrupted write is void
            self._set_state(JobState.RESCALING)
        else:
            self._set_state(JobState.RESCALING)
        if self.started:
            self.rescales += 1
        self.started = True
        # a boot that nobody trained through has already elapsed (in WAITING)
        self.pause_end_s = now + pause.pause_s - pause.acquire_s
        self._next_due_s = min(self._next_due_s, self.pause_end_s)
        self.pause_ckpt_until_s = now + write_s if write_s else -math.inf
        self._event(kind, before, after, pause)

    def _reconcile(self) -> None:
        """Move holdings towards the target: release now, acquire (boot) as allowed."""
        target = self.target
        want_spot = min(target.spot_nodes, self.available)
        want_od = target.on_demand_nodes
        if want_spot == self.spot_held and want_od == self.od_held:
            return  # the common case: holdings already match the target
        before = self.group
        released = False
        # release spot: booting first, then group members
        for kind_index, want in ((1, want_spot), (2, want_od)):
            held = self.spot_held if kind_index == 1 else self.od_held
            excess = held - want
            if excess <= 0:
                continue
            for batch in reversed(self.booting):
                take = min(int(batch[kind_index]), excess)
                batch[kind_index] -= take
                excess -= take
                held -= take
            if excess > 0:
                held -= excess
                if kind_index == 1:
                    self.group_spot -= excess
                else:
                    self.group_od -= excess
                released = True
            if kind_index == 1:
                self.spot_held = held
            else:
                self.od_held = held
        self.booting = [b for b in self.booting if b[1] or b[2]]
        if released:
            self._begin_rescale(
                EventKind.SCALE_DOWN, before, self.group, newcomers=0, failure=False
            )
        # acquire
        add_spot = want_spot - self.spot_held
        add_od = want_od - self.od_held
        if add_spot > 0 or add_od > 0:
            add_spot, add_od = max(add_spot, 0), max(add_od, 0)
            for ready_s, spot, od in self._acquire_times(add_spot, add_od):
                self.booting.append([ready_s, spot, od, self.env.now])
                self._next_due_s = min(self._next_due_s, ready_s)
            self.spot_held += add_spot
            self.od_held += add_od

    def _acquire_times(self, spot: int, od: int) -> list[tuple[float, int, int]]:
        """When ``spot + od`` new nodes can join: warm slots first, then cold ones.

        Without cold starts (every preset) all of them are ready after ``boot_s``.
        With them (measured profiles), a slot whose process was killed joins only
        when its replacement has started, so joins come one by one, as in the
        executor.
        """
        now, boot_s = self.env.now, self.job.rescale.boot_s
        self._cold_until = sorted(t for t in self._cold_until if t > now)
        if not self._cold_until:
            return [(now + boot_s, spot, od)]
        warm = self.max_nodes - self.spot_held - self.od_held - len(self._cold_until)
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

    def _join_ready_boots(self) -> None:
        if not self.booting:
            return
        now = self.env.now
        ready = [b for b in self.booting if b[0] <= now + _EPS]
        if not ready:
            return
        self.booting = [b for b in self.booting if b[0] > now + _EPS]
        spot = sum(int(b[1]) for b in ready)
        od = sum(int(b[2]) for b in ready)
        requested_s = min(b[3] if len(b) > 3 else now for b in ready)
        before = self.group
        if before + spot + od < self.min_nodes:
            # not enough to run yet: keep them waiting as "ready" at the front
            self.booting.insert(0, [now, spot, od, requested_s])
            return
        self.group_spot += spot
        self.group_od += od
        waited = before == 0
        kind = EventKind.SCALE_UP
        self._begin_rescale(
            kind,
            before,
            self.group,
            newcomers=spot + od,
            failure=False,
            waited_boot=waited,
            acquire_s=now - requested_s,
        )

    def _refresh_checkpoint_interval(self) -> None:
        """Re-estimate the interval (after every checkpoint and preemption)."""
        self._ckpt_interval_s = self._estimate_checkpoint_interval_s()

    def _estimate_checkpoint_interval_s(self) -> float:
        configured = self.config.checkpoint_interval_s
        if configured is not None:
            return configured
        prior = self.source.prior_mtbf_s
        if math.isinf(prior):
            prior = 86400.0
        # the trace's mean time between drops counts as one pseudo-observation
        mtbf = (prior + self.env.now) / (1 + self.preemptions)
        return max(young_daly_interval_s(self.ckpt_cost_s, mtbf), _MIN_AUTO_INTERVAL_S)

    def _next_deadline(self) -> float:
        now = self.env.now
        best = min(self.wake_at_s, self.horizon_s)
        state = self.state
        if state is JobState.RUNNING:
            n = self.group
            remaining = self.target_samples - self.progress
            rate = self._training_rate(now) if self._starting else 1.0
            best = min(best, now + max(remaining, 0.0) / (self._good[n] * rate))
            interval = self._ckpt_interval_s
            if math.isfinite(interval):
                best = min(best, now + max(interval - self.run_since_ckpt_s, 0.0))
        elif state is JobState.RESCALING or state is JobState.CHECKPOINTING:
            best = min(best, self.pause_end_s)
        for batch in self.booting:
            if batch[0] > now + _EPS:
                best = min(best, batch[0])
        for end in self._starting:  # the training rate changes when a start ends
            if end > now + _EPS:
                best = min(best, end)
        return best

    def _check_done(self) -> bool:
        """Finish if the target is reached (before anything else at the same instant)."""
        if self.state is not JobState.RUNNING:
            return self.state is JobState.DONE
        n = self.group
        remaining = self.target_samples - self.progress
        if remaining > _EPS * max(self.target_samples, 1.0) and remaining / self._good[n] >= 1e-6:
            return False
        self.progress = self.target_samples
        self._set_state(JobState.DONE)
        self.done_s = self.env.now
        self._event(EventKind.DONE, n, n)
        self._poke()
        return True

    def _handle_due(self) -> None:
        """Everything whose time has come: pauses end, checkpoints, boots, completion."""
        now = self.env.now
        if now < self._next_due_s - _EPS:
            return  # nothing internal is due (a capacity change or decision woke us)
        state = self.state
        if state is JobState.RESCALING and now >= self.pause_end_s - _EPS:
            self._set_state(JobState.RUNNING)
            self.pause_end_s = math.inf
            self.pause_ckpt_until_s = -math.inf
        elif state is JobState.CHECKPOINTING and now >= self.pause_end_s - _EPS:
            self.ckpt_progress = self.ckpt_pending_progress
            self.unsaved_run_s = max(self.unsaved_run_s - self._ckpt_pending_run_s, 0.0)
            self._ckpt_pending_run_s = 0.0
            self.has_checkpoint = True
            self._set_state(JobState.RUNNING)
            self.pause_end_s = math.inf
        if self._check_done():
            return
        if self.state is JobState.RUNNING:
            n = self.group
            interval = self._ckpt_interval_s
            if math.isfinite(interval) and self.run_since_ckpt_s >= interval - 1e-6:
                self.ckpt_pending_progress = self.progress
                self._ckpt_pending_run_s = self.unsaved_run_s
                self.run_since_ckpt_s = 0.0
                self.checkpoints += 1
                self._refresh_checkpoint_interval()
                self._set_state(JobState.CHECKPOINTING)
                self.pause_end_s = now + self.ckpt_cost_s
                self._next_due_s = min(self._next_due_s, self.pause_end_s)
                self._event(EventKind.CHECKPOINT, n, n, PauseComponents(state_s=self.ckpt_cost_s))
        self._join_ready_boots()
        if now >= self.wake_at_s - _EPS:
            self.wake_at_s = math.inf
            self.decision_due = True

    def _on_timer(self, token: int) -> None:
        if token == self._token:
            self._timer_at_s = math.inf
            self._poke()

    def process(self) -> Iterator[simpy.Event]:
        """The control loop: observe -> decide -> apply, then wait for the next change."""
        env = self.env
        while True:
            if self.decision_due:
                self._decide()
            self._reconcile()
            self._handle_due()
            if self.state is JobState.DONE:
                break
            if self.decision_due:
                continue
            self._record_timeline()
            deadline = self._next_due_s = self._next_deadline()
            if env.now >= self.horizon_s - _EPS:
                break
            wake = self._wake = env.event()
            if deadline != self._timer_at_s:
                # a timer for the same instant is still pending: keep it, else replace it
                self._token += 1
                self._timer_at_s = deadline
                if math.isfinite(deadline):
                    timer = env.timeout(max(deadline - env.now, 0.0))
                    timer.callbacks.append(lambda _ev, tok=self._token: self._on_timer(tok))
            yield wake
            self._wake = None
            self._advance()
        self._advance()
        self._record_timeline()
        self.done_event.succeed()

    # -- results -------------------------------------------------------------------------

    def result(self, metadata: dict[str, Any], events_processed: int) -> SimResult:
        """Freeze what happened into a :class:`SimResult`."""
        end_s = self.env.now
        completed = self.done_s is not None
        deadline = self.config.deadline_s
        node_s = self.spot_node_s + self.od_node_s
        return SimResult(
            completed=completed,
            completion_time_h=(self.done_s / 3600.0) if completed else None,
            cost_usd=self.spot_cost + self.od_cost,
            spot_cost_usd=self.spot_cost,
            on_demand_cost_usd=self.od_cost,
            spot_node_hours=self.spot_node_s / 3600.0,
            on_demand_node_hours=self.od_node_s / 3600.0,
            mean_nodes=node_s / end_s if end_s > 0 else 0.0,
            rescales=self.rescales,
            preemptions=self.preemptions,
            checkpoints=self.checkpoints,
            lost_work_h=self.lost_s / 3600.0,
            rescale_overhead_h=self.rescale_s / 3600.0,
            checkpoint_overhead_h=self.ckpt_s / 3600.0,
            idle_h=self.idle_s / 3600.0,
            running_h=self.run_s / 3600.0,
            convergence_cost_h=self.conv_s / 3600.0,
            convergence_cost_samples=self.conv_samples,
            raw_samples=self.raw_samples,
            deadline_met=None
            if deadline is None
            else bool(completed and self.done_s is not None and self.done_s <= deadline + _EPS),
            events_processed=events_processed,
            sim_time_h=end_s / 3600.0,
            events=tuple(self.events),
            decisions=tuple(self.decisions),
            timeline=Timeline(**{k: tuple(v) for k, v in self._tl.items()}),
            metadata=tuple(metadata.items()),
        )


def _events_scheduled(env: simpy.Environment) -> int:
    """SimPy events processed so far: scheduled minus still queued."""
    counter = getattr(env, "_eid", None)
    if counter is None:  # pragma: no cover - other SimPy versions
        return 0
    scheduled = next(counter)
    return int(scheduled - len(getattr(env, "_queue", ())))


def simulate(
    trace: CapacityTrace | JobTrace,
    policy: Policy,
    job: JobSpec,
    config: SimConfig | None = None,
    *,
    trace_name: str | None = None,
    policy_spec: str | None = None,
) -> SimResult:
    """Run one elastic job against one trace with one policy.

    Same inputs and seed give the same result, bit for bit: nothing here reads the
    clock (wall time is measured by the caller) and all randomness comes from ``seed``.

    Raises:
        ValueError: a job trace without ``cluster_gpus``, or an impossible setting.
    """
    config = config or SimConfig()
    start = time.perf_counter()
    env = simpy.Environment()
    rng = np.random.default_rng(config.seed)
    if isinstance(trace, JobTrace):
        if config.cluster_gpus is None:
            raise ValueError("a job (shared-cluster) trace needs --cluster-gpus")
        period = max(float(np.max(trace.submit_time_s)) if len(trace.submit_time_s) else 0.0, 1.0)
        offset = config.start_offset_s
        if offset is None:
            offset = float(rng.uniform(0.0, period))
        source: SpotTraceSource | ClusterSource = ClusterSource(
            trace,
            cluster_gpus=config.cluster_gpus,
            gpus_per_node=job.nodes.gpus_per_node,
            price_per_hour=config.cluster_price_per_hour,
            start_offset_s=offset,
            cap_nodes=job.nodes.max,
        )
        od_price = config.on_demand_price_per_hour
    else:
        offset = config.start_offset_s
        if offset is None:
            offset = float(rng.uniform(0.0, float(trace.duration_s)))
        od_price = config.on_demand_price_per_hour
        if od_price is None:
            od_price = trace.metadata.on_demand_price_per_hour
        source = SpotTraceSource(
            trace,
            start_offset_s=offset,
            notice_s=config.notice_s,
            cap_nodes=job.nodes.max,
            default_price_per_hour=config.spot_price_per_hour or 0.0,
        )
    sim_job = SimJob(env, job, policy, config, source, math.inf if od_price is None else od_price)
    env.process(sim_job.process())
    env.process(source.process(env, sim_job))
    env.run(until=sim_job.done_event)
    metadata: dict[str, Any] = {
        "trace": trace_name or getattr(trace, "name", ""),
        "policy": policy_spec or getattr(policy, "name", type(policy).__name__),
        "policy_config": repr(getattr(policy, "config", None)),
        "job": job.name,
        "rescale": config.rescale.value,
        "notice_s": config.notice_s,
        "checkpoint_interval_s": "auto"
        if config.checkpoint_interval_s is None
        else config.checkpoint_interval_s,
        "checkpoint_cost_s": sim_job.ckpt_cost_s,
        "deadline_s": config.deadline_s,
        "seed": config.seed,
        "start_offset_s": offset,
        "min_nodes": job.nodes.min,
        "max_nodes": job.nodes.max,
        "cluster_gpus": config.cluster_gpus,
        "priced": not isinstance(trace, CapacityTrace)
        or trace.price_per_hour is not None
        or config.spot_price_per_hour is not None,
    }
    if isinstance(source, ClusterSource):
        metadata["skipped_background_jobs"] = source.skipped_jobs
    result = sim_job.result(metadata, _events_scheduled(env))
    log.debug("simulated %s in %.3f s", metadata["trace"], time.perf_counter() - start)
    return result
