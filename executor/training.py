"""Training inside one generation: the step loop and what ends it.

Each step: the rank's share of the global batch (see :mod:`.sampler`), forward +
backward, one all-reduce of a flat buffer holding every gradient plus control slots
(rank 0's view of ``cmdseq``, the loss sum, the sample count, a stop flag, the
workers' local squared gradient norms for the gradient noise scale), optimizer
step.  After the all-reduce every rank knows the same command number, so all of
them act on the same commands at the same step boundary
(:meth:`TrainingLoop._apply_commands`).  A generation ends when a command names a
new one (``join``), drops this worker or a collective fails (``wait``), or training
is over (``exit``); the :class:`_Next` it returns tells the worker's life cycle
(:meth:`~.worker.Worker.run`) what to do, and the :class:`_Notice` it carries is
what rank 0 of the next generation needs to measure the pause
(:meth:`TrainingLoop._report_pause`).

Why a module of its own: the step loop is the hot path and changes for its own
reasons (what a step does, reporting, checkpoints, fault injection), while the
worker process around it (:mod:`.worker`: warm-up, commands between generations,
joining) changes with the protocol.  :class:`TrainingLoop` is a base class of
:class:`~.worker.Worker` and works on its state; it uses the worker's store helpers
(``_post``, ``_flush_steps``, ``_cmdseq``, ``_read_commands``) and
``_destroy_group``.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from elasim.noise_scale import harmonic_batch

from .api import move_to_device
from .checkpoint import CHECKPOINT_NAME, save_checkpoint
from .protocol import Command, CommandOp, WorkerEventType
from .sampler import SamplerPosition

__all__ = ["TrainingLoop"]

#: exit code of rank 0 when the injected checkpoint crash fires (see ``FaultInjection``)
_CHECKPOINT_CRASH_EXIT = 17
_META_SLOTS = 5  # cmdseq, loss sum, samples, stop flag, local gradients' squared norms
_META_SEQ, _META_LOSS, _META_SAMPLES, _META_STOP, _META_GRAD_SQ = range(_META_SLOTS)
_STEP_HISTORY = 32


@dataclass
class _Notice:
    """What a member knows when it leaves a generation (for the next pause)."""

    wall_s: float
    failure: bool
    last_end_wall_s: float | None
    typical_step_s: float | None
    inflight: bool


@dataclass(frozen=True)
class _Next:
    """What to do after a generation ends.

    ``join``: the next generation, ``plan``; ``wait``: back to standby until a
    ``JOIN`` names this worker; ``exit``: leave (``Worker.run`` moves the worker to
    ``LEAVING``).
    """

    action: str  # "join" | "wait" | "exit"
    plan: Command | None = None
    notice: _Notice | None = None


def _shard_sizes(n_global: int, world: int) -> list[int]:
    """Samples of each rank's shard (``np.array_split``, as :meth:`.sampler.shard` cuts)."""
    quotient, remainder = divmod(n_global, world)
    return [quotient + 1] * remainder + [quotient] * (world - remainder)


class TrainingLoop:
    """The step loop of :class:`~.worker.Worker` (see the module docstring)."""

    def _global_ids(self, pos: SamplerPosition) -> np.ndarray:
        if self._perm_cache is None or self._perm_cache[0] != pos.epoch:
            self._perm_cache = (pos.epoch, self.sampler.permutation(pos.epoch))
        perm = self._perm_cache[1]
        return perm[pos.position : pos.position + self.sampler.global_batch]

    def _poll_seq(self) -> int:
        now = time.monotonic()
        if now - self._last_poll >= self.settings.command_poll_s:
            self._last_poll = now
            self._last_seq = self._cmdseq()
        return self._last_seq

    def _checkpoint(self, tag: str) -> None:
        if not self.settings.checkpoint_dir:
            return
        path = Path(self.settings.checkpoint_dir) / CHECKPOINT_NAME
        crash_after = self.settings.faults.crash_checkpoint_after_bytes
        hook = None
        if crash_after is not None and self._ckpt_count == 0:

            def hook(written: int) -> None:
                if written >= crash_after:
                    os._exit(_CHECKPOINT_CRASH_EXIT)

        info = save_checkpoint(
            path, self.state.state_dict(), on_chunk=hook, chunk_bytes=4096 if hook else 1 << 20
        )
        self._ckpt_count += 1
        self._post(
            WorkerEventType.CHECKPOINT,
            step=self.state.step,
            path=str(info.path),
            size_bytes=info.size_bytes,
            write_s=info.write_s,
            tag=tag,
        )

    def _train(
        self,
        plan: Command,
        rank: int,
        world: int,
        notice: _Notice | None,
        timing: dict[str, Any],
    ) -> _Next:
        """Train in generation ``plan.gen`` until a command or a failure ends it."""
        history: deque[float] = deque(maxlen=_STEP_HISTORY)
        prev_end: float | None = None
        first = True
        stop_requested = False
        announce_stop = False  # rank 0: tell everyone (via the next all-reduce) to stop
        self._adopt(plan)
        while True:
            if self._work_done() or stop_requested:
                return self._finish(rank, prev_end)
            pos = self.state.sampler_position
            global_ids = self._global_ids(pos)
            local_ids = self.sampler.shard(global_ids, world, rank)
            n_global = len(global_ids)
            loss_sum = self._backward(local_ids, n_global)
            self._step_faults(len(local_ids))
            self._fill_meta(rank, announce_stop, loss_sum, len(local_ids), n_global)
            failure = self._all_reduce()
            if failure is not None:
                return self._on_failure(failure, prev_end, history)
            grad_sq_global = self._grad_sq() if rank == 0 else math.nan
            t_end, values = self._commit(pos, n_global)
            if first:
                first = False
                if rank == 0:
                    self._report_pause(plan, world, notice, timing, t_end, n_global)
            elif prev_end is not None:
                history.append(t_end - prev_end)
            prev_end = t_end
            self._log_samples(plan, rank, world, pos, local_ids)
            row = (t_end, values, n_global, grad_sq_global)
            if rank == 0 and self._record_step(plan, world, pos, row):
                announce_stop = True  # everyone stops after the next step
            if values[_META_STOP] > 0:
                stop_requested = True
            agreed = int(round(values[_META_SEQ]))
            if agreed > self._seen:
                nxt = self._apply_commands(agreed, rank, t_end, history)
                if nxt is not None:
                    return nxt

    def _adopt(self, plan: Command) -> None:
        """The generation's global batch and AdaScale gain (a ``JOIN`` may change them).

        Once a gain was sent, the learning rate is the job's own times it, set again
        at every generation: a state sync or a restored checkpoint brings the
        optimizer's learning rate of another generation.  A job never sent one (every
        ``elasim run``) keeps its learning rate untouched, schedule included.  The
        gain is AdaScale's (Johnson et al. 2020, as AdaptDL applies it): ``(var + sqr)
        / (var / S + sqr)`` at ``S`` times the first batch, from the gradient
        statistics the controller sent.
        """
        if plan.global_batch and plan.global_batch != self.sampler.global_batch:
            self.sampler = replace(self.sampler, global_batch=plan.global_batch)
        if not plan.gain:
            return
        self._gain = float(plan.gain)
        for group, base in zip(self.state.optimizer.param_groups, self._base_lrs, strict=False):
            group["lr"] = base * self._gain

    def _work_done(self) -> bool:
        """``max_steps`` reached, or ``max_progress`` (the same on every rank)."""
        settings, state = self.settings, self.state
        target = settings.max_progress
        return state.step >= settings.max_steps or bool(target and state.progress >= target - 1e-9)

    def _backward(self, local_ids: np.ndarray, n_global: int) -> float:
        """Zero the buckets, then forward + backward on this rank's share; its loss sum.

        The loss is scaled by the share, so the all-reduced sum is the global mean's
        gradient.  A share above the job's ``max_local_batch`` goes through in
        accumulation steps of at most that many samples, each scaled by its own part
        (the gradient is the same sum).
        """
        for flat in self._buckets:
            flat.zero_()
        n_local = len(local_ids)
        if not n_local:
            return 0.0
        limit = self.job.max_local_batch or n_local
        loss_sum = 0.0
        for lo in range(0, n_local, limit):
            ids = local_ids[lo : lo + limit]
            batch = move_to_device(self.job.collate(self.data.train, ids), self.device)
            loss = self.job.train_step(self.state, batch)["loss"]
            (loss * (len(ids) / n_global)).backward()
            loss_sum += float(loss.detach().item()) * len(ids)
        return loss_sum

    def _step_faults(self, n_local: int) -> None:
        """The injected slow step and the injected SIGKILL before the all-reduce.

        The slow step is ``step_delay_s`` plus ``sample_delay_s`` per local sample:
        the latter is an emulated accelerator, whose compute a rank does in parallel
        with the others (a sleep takes no core), however few cores the host has.
        """
        delay_s = self.settings.step_delay_s + self.settings.sample_delay_s * n_local
        if delay_s > 0:
            time.sleep(delay_s)
        faults = self.settings.faults
        if faults.kill_wid == self.wid and faults.kill_at_step == self.state.step + 1:
            self._post(WorkerEventType.FAULT, step=self.state.step + 1)
            os.kill(os.getpid(), signal.SIGKILL)

    def _grad_sq(self) -> float:
        """Squared norm of the gradient in the buckets (control slots left out)."""
        return sum(
            float(torch.dot(flat[:numel], flat[:numel])) if numel else 0.0
            for flat, numel in zip(self._buckets, self._grad_numels, strict=True)
        )

    def _fill_meta(
        self, rank: int, announce_stop: bool, loss_sum: float, n_local: int, n_global: int
    ) -> None:
        """The control slots that ride in the all-reduce (rank 0 alone sets seq and stop).

        Besides the loss, each rank adds the squared norm of its *own* mean gradient
        (the bucket holds it scaled by ``n_local / n_global``): with the all-reduced
        gradient that gives the gradient noise scale (:mod:`elasim.noise_scale`) at
        the cost of one more float in a buffer that is all-reduced anyway.
        """
        meta = self._meta
        assert meta is not None
        if rank == 0:
            meta[_META_SEQ] = float(self._poll_seq())
            meta[_META_STOP] = 1.0 if announce_stop else 0.0
        meta[_META_LOSS] = loss_sum
        meta[_META_SAMPLES] = float(n_local)
        meta[_META_GRAD_SQ] = self._grad_sq() * (n_global / n_local) ** 2 if n_local else 0.0

    def _all_reduce(self) -> str | None:
        """All-reduce every bucket; the first line of the error if a collective raised."""
        try:
            for flat in self._buckets:
                dist.all_reduce(flat)
        except Exception as exc:
            message = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            del exc
            return message
        return None

    def _commit(self, pos: SamplerPosition, n_global: int) -> tuple[float, list[float]]:
        """Apply the all-reduced gradient; returns the step end and the summed meta slots."""
        meta = self._meta
        assert meta is not None
        state = self.state
        state.optimizer.step()
        state.step += 1
        state.samples += n_global
        state.progress += self._gain
        new_pos = self.sampler.advance(pos, n_global)
        state.epoch, state.position = new_pos.epoch, new_pos.position
        t_end = time.time()
        return t_end, meta.tolist()

    def _log_samples(
        self, plan: Command, rank: int, world: int, pos: SamplerPosition, local_ids: np.ndarray
    ) -> None:
        """One line per committed step and rank (tests check exactly-once sampling)."""
        if self._sample_log is None:
            return
        self._sample_log.write(
            json.dumps(
                {
                    "wid": self.wid,
                    "gen": plan.gen,
                    "rank": rank,
                    "world": world,
                    "step": self.state.step,
                    "epoch": pos.epoch,
                    "batch": self.sampler.global_batch,
                    "ids": [int(i) for i in local_ids],
                }
            )
            + "\n"
        )
        self._sample_log.flush()

    def _record_step(
        self,
        plan: Command,
        world: int,
        pos: SamplerPosition,
        row: tuple[float, list[float], int, float],
    ) -> bool:
        """Rank 0 after a step: report it, checkpoint on schedule; True: target reached.

        ``row``: the step's end, the summed control slots, the global batch and the
        squared norm of the all-reduced gradient.
        """
        settings, state = self.settings, self.state
        t_end, values, n_global, grad_sq_global = row
        loss_global = values[_META_LOSS] / max(values[_META_SAMPLES], 1.0)
        shards = _shard_sizes(n_global, world)
        workers = sum(1 for n in shards if n)
        self._step_buffer.append(
            [t_end, state.step, world, loss_global, n_global, plan.gen, pos.epoch, state.samples]
            + [values[_META_GRAD_SQ] / max(workers, 1), grad_sq_global, harmonic_batch(shards)]
            + [state.progress]
        )
        if time.monotonic() - self._last_flush >= settings.report_interval_s:
            self._flush_steps()
        interval = settings.checkpoint_interval_steps
        if interval and state.step % interval == 0:
            self._checkpoint("interval")
        return bool(
            settings.stop_at_target
            and settings.eval_every_steps
            and state.step % settings.eval_every_steps == 0
            and self._target_reached()
        )

    def _target_reached(self) -> bool:
        target = self.job.target_accuracy
        if target is None or self.job.evaluate is None or self.data.test is None:
            return False
        return self.job.evaluate(self.state, self.data.test).get("accuracy", 0.0) >= target

    def _typical(self, history: deque[float]) -> float | None:
        return statistics.median(history) if history else None

    def _apply_commands(
        self, upto: int, rank: int, t_end: float, history: deque[float]
    ) -> _Next | None:
        """Act on commands ``seen+1 .. upto`` at this step boundary (same on all ranks)."""
        plan: Command | None = None
        leave = dropped = False
        for cmd in self._read_commands(upto):
            if cmd.op is CommandOp.CHECKPOINT:
                if rank == 0:
                    self._checkpoint(cmd.tag or "command")
            elif cmd.op is CommandOp.JOIN:
                if self.wid in cmd.members:
                    plan, dropped = cmd, False
                else:
                    plan, dropped = None, True
            elif cmd.op is CommandOp.STOP:
                if rank == 0:
                    self._flush_steps()
                    if cmd.checkpoint:
                        self._checkpoint(cmd.tag or "stop")
                    self._post(WorkerEventType.STOPPED, step=self.state.step, last_end_wall_s=t_end)
                if cmd.keep:
                    self._destroy_group()
                    self._post(
                        WorkerEventType.LEFT,
                        step=self.state.step,
                        last_end_wall_s=t_end,
                        exit=False,
                    )
                    return _Next("wait")
                return _Next("exit")
            elif cmd.op is CommandOp.EXIT and self.wid in cmd.wids:
                leave = True
        if rank == 0 and (plan is not None or leave or dropped):
            self._flush_steps()
        if leave:
            self._post(WorkerEventType.LEFT, step=self.state.step, last_end_wall_s=t_end, exit=True)
            return _Next("exit")
        if dropped:
            # dropped from the group: back to warm standby (the next JOIN that names this
            # worker treats it as a newcomer; the state sync refreshes its state)
            self._destroy_group()
            self._post(
                WorkerEventType.LEFT, step=self.state.step, last_end_wall_s=t_end, exit=False
            )
            return _Next("wait")
        if plan is not None:
            notice = _Notice(t_end, False, t_end, self._typical(history), False)
            return _Next("join", plan=plan, notice=notice)
        return None

    def _on_failure(self, message: str, prev_end: float | None, history: deque[float]) -> _Next:
        """A collective raised: drop the group (closing our sockets wakes peers stuck in it)."""
        t_fail = time.time()
        self._destroy_group()
        self._flush_steps()
        self._post(WorkerEventType.COLLECTIVE_FAILED, reason=message, step=self.state.step)
        notice = _Notice(t_fail, True, prev_end, self._typical(history), True)
        return _Next("wait", notice=notice)

    def _finish(self, rank: int, prev_end: float | None) -> _Next:
        """``max_steps`` reached (or the target): rank 0 evaluates and reports ``DONE``."""
        if rank == 0:
            self._flush_steps()
            metrics: dict[str, float] = {}
            if self.job.evaluate is not None and self.data.test is not None:
                metrics = dict(self.job.evaluate(self.state, self.data.test))
            self._post(
                WorkerEventType.DONE,
                step=self.state.step,
                samples=self.state.samples,
                last_end_wall_s=prev_end,
                metrics=metrics,
            )
        return _Next("exit")

    def _report_pause(
        self,
        plan: Command,
        world: int,
        notice: _Notice | None,
        timing: dict[str, Any],
        t_first_end: float,
        n_global: int,
    ) -> None:
        """Rank 0 of a new generation: the survivors' pause, split into components.

        ``pause_s`` is the time the survivors did not train: from their last step end
        before the change to their first step end after it, minus one typical step.
        See :mod:`elasim.executor.group` for how the controller completes it.
        """
        typical = notice.typical_step_s if notice and notice.typical_step_s else None
        first_step_s = t_first_end - timing["t_synced"]
        payload: dict[str, Any] = {
            "rank_world": world,
            "first_end_wall_s": t_first_end,
            "first_step_s": first_step_s,
            "typical_step_s": typical,
            "survivor": notice is not None,
            "global_batch": n_global,
            **timing,
        }
        if notice is not None:
            detect = 0.0
            if notice.failure:
                origin = notice.last_end_wall_s or notice.wall_s
                if plan.failure_wall_s is not None:
                    origin = max(origin, plan.failure_wall_s)
                detect = max(notice.wall_s - origin, 0.0)
            payload.update(
                notice_wall_s=notice.wall_s,
                last_end_wall_s=notice.last_end_wall_s,
                failure=notice.failure,
                detect_s=detect,
                rendezvous_s=max(timing["t_formed"] - notice.wall_s, 0.0),
                state_s=max(timing["t_synced"] - timing["t_formed"], 0.0),
                warmup_s=max(first_step_s - (typical or first_step_s), 0.0),
            )
        self._post(WorkerEventType.PAUSE, **payload)
