"""The worker process: a warm standby that joins, trains, re-forms and leaves on command.

Run as ``python -m elasim.executor.worker --store HOST:PORT --wid N --settings FILE
--secret-file FILE`` (the controller or an agent starts it, with the command line of
:func:`~.launchers.worker_argv`).  The life of a worker (:class:`WorkerPhase`):

1. **Warm-up, before it is needed.**  It imports torch, builds the job's data, model
   and optimizer (seeded, so every replica starts identical), runs one throw-away
   forward/backward pass, freezes the garbage collector's view of all that, and
   posts ``READY``.  This is the ``acquire_s`` of the pause components, and it
   happens *while the survivors keep training*: the controller only asks a worker to
   join once it is ready.
2. **Join generation g** (command ``JOIN``): destroy the previous process group (if
   any), meet the other members at a store barrier that the controller can abort
   (so nobody waits for a peer that died), then ``init_process_group`` on a
   ``PrefixStore("gen/{g}/pg")`` (every generation has its own keys) with a short
   timeout (so a collective with a dead peer raises instead of hanging).
3. **State sync.**  Members all-gather ``(committed step, parameter checksum,
   step-in-flight)``.  The *source* is the lowest rank at the highest committed step
   (a survivor: after a hard failure, a step counts as committed once any survivor
   applied the all-reduced gradient, which already contains every rank's
   contribution).  Ranks whose step or checksum differ (newcomers, a survivor that
   lost the in-flight step) receive model, optimizer and sampler position by
   broadcast, from memory, not from disk.  A pure scale-down skips the broadcast
   (:mod:`.statesync`).
4. **Train** (:mod:`.training`).  Each step: the rank's share of the global batch (see
   :mod:`.sampler`), forward + backward, one all-reduce of a flat buffer holding
   every gradient plus three control slots (rank 0's view of ``cmdseq``, the loss
   sum, the sample count), optimizer step.  After the all-reduce every rank knows the
   same command number, so all of them act on the same commands at the same step
   boundary.
5. **Leave**: a worker missing from the new member list finishes the step and goes
   back to warm standby (it may be named again later, as a newcomer); ``STOP`` and
   ``EXIT`` end the process.  Or **fail**: a collective raised, so clean up and wait
   for the controller's next ``JOIN``.

Timestamps that cross processes use ``time.time()`` (one host: one clock; across
hosts the ``detect_s`` component is only as good as the hosts' clock sync).

This module is the process and its life cycle (phases, warm-up, the store, commands
between generations, joining).  The two parts that change for other reasons live
beside it: :mod:`.statesync` (step 3: plain ``torch.distributed`` over the training
state) and :mod:`.training` (step 4: the step loop, the hot path, and what ends a
generation).
"""

from __future__ import annotations

import argparse
import enum
import faulthandler
import gc
import json
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from .api import ElasticJob, TrainState, load_elastic_job, move_to_device
from .checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint
from .protocol import (
    CMDSEQ_KEY,
    GO_ABORT,
    GO_OK,
    Command,
    CommandOp,
    WorkerEventType,
    WorkerSettings,
    cmd_key,
    encode,
    event_count_key,
    event_key,
    gen_arrived_key,
    gen_go_key,
    gen_here_key,
    gen_pg_prefix,
    steps_count_key,
    steps_key,
)
from .sampler import ElasticSampler
from .statesync import sync_state
from .training import _META_SLOTS, TrainingLoop, _Next, _Notice

__all__ = ["Worker", "WorkerPhase", "main"]

log = logging.getLogger(__name__)

#: Exit codes of the worker process.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONTROLLER_GONE = 3
# (17: the injected checkpoint crash, see .training)
_LONG_WAIT = timedelta(seconds=3600)


class WorkerPhase(str, enum.Enum):
    """Life cycle of one worker process.

    Legal transitions::

        STARTING -> STANDBY                    (warm: torch imported, job built)
        STANDBY  -> JOINING                    (a JOIN names this worker)
        JOINING  -> RUNNING                    (group formed, state synced)
        JOINING  -> STANDBY                    (generation aborted / timed out)
        RUNNING  -> JOINING                    (a new generation keeps this worker)
        RUNNING  -> STANDBY                    (dropped from the group, or a collective
                                                failed: wait for a JOIN)
        RUNNING  -> LEAVING -> EXITED          (STOP, EXIT, or done)
        STANDBY  -> EXITED                     (EXIT, or the controller is gone)
    """

    STARTING = "starting"
    STANDBY = "standby"
    JOINING = "joining"
    RUNNING = "running"
    LEAVING = "leaving"
    EXITED = "exited"


_TRANSITIONS: dict[WorkerPhase, frozenset[WorkerPhase]] = {
    WorkerPhase.STARTING: frozenset({WorkerPhase.STANDBY, WorkerPhase.EXITED}),
    WorkerPhase.STANDBY: frozenset({WorkerPhase.JOINING, WorkerPhase.EXITED}),
    WorkerPhase.JOINING: frozenset({WorkerPhase.RUNNING, WorkerPhase.STANDBY}),
    WorkerPhase.RUNNING: frozenset({WorkerPhase.JOINING, WorkerPhase.STANDBY, WorkerPhase.LEAVING}),
    WorkerPhase.LEAVING: frozenset({WorkerPhase.EXITED}),
    WorkerPhase.EXITED: frozenset(),
}


class _CollectiveFailed(Exception):
    """A collective raised; carries only the message (no frames that pin the group)."""


class _ControllerGone(Exception):
    """The store (hence the controller) is unreachable."""


class Worker(TrainingLoop):
    """One elastic data-parallel replica (see the module docstring).

    The step loop inside a generation is :class:`~.training.TrainingLoop`; the state
    sync when a generation forms is :mod:`.statesync`.
    """

    def __init__(
        self,
        store: dist.Store,
        wid: int,
        settings: WorkerSettings,
        *,
        device_index: int | None = None,
        spawn_wall_s: float | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.on_ready = on_ready
        self.wid = int(wid)
        self.settings = settings
        self.device_index = device_index
        self.spawn_wall_s = spawn_wall_s
        self.phase = WorkerPhase.STARTING
        self._seen = 0
        self._event_n = 0
        self._steps_n = 0
        self._step_buffer: list[list[Any]] = []
        self._last_flush = time.monotonic()
        self._last_poll = -math.inf
        self._last_seq = 0
        self._perm_cache: tuple[int, np.ndarray] | None = None
        self._ckpt_count = 0
        self._sample_log: Any = None
        self.gen = 0
        self._gain = 1.0  # the AdaScale gain of the current generation (see .training)
        self._base_lrs: list[float] = []

    # -- small helpers ---------------------------------------------------------------

    def _become(self, phase: WorkerPhase) -> None:
        if phase is not self.phase and phase not in _TRANSITIONS[self.phase]:
            raise RuntimeError(f"illegal worker transition {self.phase.value} -> {phase.value}")
        self.phase = phase

    def _post(self, kind: WorkerEventType, **payload: Any) -> None:
        payload.update(type=kind.value, wid=self.wid, wall_s=time.time(), gen=self.gen)
        try:
            self.store.set(event_key(self.wid, self._event_n), encode(payload))
            self._event_n += 1
            self.store.set(event_count_key(self.wid), str(self._event_n))
        except (RuntimeError, OSError) as exc:
            raise _ControllerGone(str(exc)) from None

    def _flush_steps(self) -> None:
        if not self._step_buffer:
            return
        try:
            self.store.set(steps_key(self.wid, self._steps_n), json.dumps(self._step_buffer))
            self._steps_n += 1
            self.store.set(steps_count_key(self.wid), str(self._steps_n))
        except (RuntimeError, OSError) as exc:
            raise _ControllerGone(str(exc)) from None
        self._step_buffer = []
        self._last_flush = time.monotonic()

    # -- building ----------------------------------------------------------------------

    def build(self) -> None:
        """Import the job, build data, model and optimizer, warm up; then ``READY``."""
        settings = self.settings
        use_cuda = settings.backend == "nccl" or (
            settings.backend == "auto" and torch.cuda.is_available()
        )
        self.backend = "nccl" if use_cuda else "gloo"
        if use_cuda:
            index = self.device_index if self.device_index is not None else 0
            index %= max(torch.cuda.device_count(), 1)  # slots beyond the GPUs share them
            torch.cuda.set_device(index)
            self.device = torch.device("cuda", index)
        else:
            self.device = torch.device("cpu")
            torch.set_num_threads(max(int(settings.threads_per_worker), 1))
        torch.manual_seed(settings.seed)
        job: ElasticJob = load_elastic_job(settings.job, settings.job_options)
        self.job = job
        self.data = job.make_data()
        model = job.make_model().to(self.device)
        optimizer = job.make_optimizer(model.parameters())
        self.state = TrainState(model, optimizer)
        self._base_lrs = [float(g["lr"]) for g in optimizer.param_groups]
        self.sampler = ElasticSampler(len(self.data.train), job.global_batch, settings.seed)
        self._setup_buffers()
        self._warm_up()
        if settings.sample_log_dir:
            path = Path(settings.sample_log_dir) / f"samples-{self.wid}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._sample_log = open(path, "a", encoding="utf-8")  # noqa: SIM115
        gc.collect()
        gc.freeze()  # everything built so far is permanent: later collections stay cheap
        if self.on_ready is not None:
            self.on_ready()
        self._become(WorkerPhase.STANDBY)
        self._post(
            WorkerEventType.READY,
            spawn_wall_s=self.spawn_wall_s,
            pid=os.getpid(),
            backend=self.backend,
            device=str(self.device),
            job=job.name,
            dataset_size=len(self.data.train),
            global_batch=job.global_batch,
            target_accuracy=job.target_accuracy,
        )

    def _setup_buffers(self) -> None:
        """One flat gradient buffer per dtype; ``p.grad`` are views into it.

        The all-reduce then moves one contiguous tensor per dtype (like DDP's
        ``gradient_as_bucket_view``), and the control slots ride in the float32 one.
        """
        params = [p for p in self.state.model.parameters() if p.requires_grad]
        by_dtype: dict[torch.dtype, list[torch.nn.Parameter]] = {}
        for p in params:
            by_dtype.setdefault(p.dtype, []).append(p)
        self._buckets: list[torch.Tensor] = []
        self._grad_numels: list[int] = []  # gradient elements of each bucket
        self._meta: torch.Tensor | None = None
        for dtype, group in by_dtype.items():
            numel = sum(p.numel() for p in group)
            extra = _META_SLOTS if dtype == torch.float32 and self._meta is None else 0
            flat = torch.zeros(numel + extra, dtype=dtype, device=self.device)
            offset = 0
            for p in group:
                p.grad = flat[offset : offset + p.numel()].view_as(p)
                offset += p.numel()
            if extra:
                self._meta = flat[numel:]
            self._buckets.append(flat)
            self._grad_numels.append(numel)
        if self._meta is None:
            meta = torch.zeros(_META_SLOTS, dtype=torch.float64, device=self.device)
            self._buckets.append(meta)
            self._grad_numels.append(0)
            self._meta = meta

    def _warm_up(self) -> None:
        """One forward/backward on a tiny batch (allocator, kernels); no optimizer step."""
        ids = np.arange(min(2, len(self.data.train)), dtype=np.int64)
        batch = move_to_device(self.job.collate(self.data.train, ids), self.device)
        out = self.job.train_step(self.state, batch)
        out["loss"].backward()
        for flat in self._buckets:
            flat.zero_()

    # -- commands ------------------------------------------------------------------------

    def _read_commands(self, upto: int) -> list[Command]:
        keys = [cmd_key(k) for k in range(self._seen + 1, upto + 1)]
        if not keys:
            return []
        try:
            raw = self.store.multi_get(keys)
        except (RuntimeError, OSError) as exc:
            raise _ControllerGone(str(exc)) from None
        self._seen = upto
        return [Command.from_bytes(r) for r in raw]

    def _cmdseq(self) -> int:
        try:
            return int(self.store.add(CMDSEQ_KEY, 0))
        except (RuntimeError, OSError) as exc:
            raise _ControllerGone(str(exc)) from None

    def _await_plan(self) -> Command | None:
        """Block until a ``JOIN`` names this worker (the latest one wins) or ``EXIT``."""
        while True:
            try:
                self.store.wait([cmd_key(self._seen + 1)], _LONG_WAIT)
            except (RuntimeError, OSError) as exc:
                if "timeout" in str(exc).lower():
                    continue
                raise _ControllerGone(str(exc)) from None
            plan: Command | None = None
            for cmd in self._read_commands(self._cmdseq()):
                if cmd.op is CommandOp.JOIN:
                    plan = cmd if self.wid in cmd.members else None
                elif cmd.op is CommandOp.EXIT and self.wid in cmd.wids:
                    return None
            if plan is not None:
                return plan

    # -- the life of a worker -------------------------------------------------------------

    def run(self) -> int:
        """Serve until told to exit; returns the process exit code."""
        try:
            self.build()
            notice: _Notice | None = None
            plan = self._await_plan()
            while plan is not None:
                nxt = self._generation(plan, notice)
                if nxt.action == "exit":
                    self._become(WorkerPhase.LEAVING)
                    break
                notice = nxt.notice
                if nxt.action == "join":
                    plan = nxt.plan
                    continue
                self._become(WorkerPhase.STANDBY)
                plan = self._await_plan()
            return EXIT_OK
        except _ControllerGone as exc:
            log.warning("worker %s: controller gone (%s); exiting", self.wid, exc)
            return EXIT_CONTROLLER_GONE
        finally:
            self._destroy_group()
            if self._sample_log is not None:
                self._sample_log.close()
            if self.phase is not WorkerPhase.EXITED:
                self.phase = WorkerPhase.EXITED

    def _destroy_group(self) -> None:
        if dist.is_available() and dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception as exc:  # a broken group may refuse a clean shutdown
                log.debug("destroy_process_group: %s", exc)
        gc.collect(0)

    def _barrier(self, gen: int, world: int) -> bool:
        """Pre-rendezvous barrier of ``gen``; False if the controller aborted it."""
        self.store.set(gen_here_key(gen, self.wid), "1")
        arrived = int(self.store.add(gen_arrived_key(gen), 1))
        if arrived == world:
            self.store.compare_set(gen_go_key(gen), "", GO_OK)
        self.store.wait([gen_go_key(gen)], timedelta(seconds=self.settings.rendezvous_timeout_s))
        return self.store.get(gen_go_key(gen)).decode() != GO_ABORT

    def _generation(self, plan: Command, notice: _Notice | None) -> _Next:
        """Join generation ``plan.gen``, sync state, train until the membership ends."""
        self._become(WorkerPhase.JOINING)
        t_cmd = time.time()
        rank, world = plan.members.index(self.wid), len(plan.members)
        self.gen = plan.gen
        self._destroy_group()
        t_destroyed = time.time()
        try:
            if not self._barrier(plan.gen, world):
                self._post(WorkerEventType.JOIN_FAILED, reason="aborted")
                return _Next("wait", notice=notice)
            t_barrier = time.time()
            dist.init_process_group(
                self.backend,
                store=dist.PrefixStore(gen_pg_prefix(plan.gen), self.store),
                rank=rank,
                world_size=world,
                timeout=timedelta(seconds=self.settings.collective_timeout_s),
            )
            t_formed = time.time()
            restored_step = None
            if plan.restore and rank == 0:
                restored_step = self._restore()
            inflight = bool(notice and notice.inflight)
            sync = sync_state(self.state, self.device, rank, world, inflight=inflight)
            t_synced = time.time()
        except _ControllerGone:
            raise
        except Exception as exc:  # barrier timeout, init failure, a peer died in the sync
            message = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            del exc
            self._destroy_group()
            self._post(WorkerEventType.JOIN_FAILED, reason=message)
            return _Next("wait", notice=notice)
        self._become(WorkerPhase.RUNNING)
        timing = {
            "t_cmd": t_cmd,
            "t_destroyed": t_destroyed,
            "t_barrier": t_barrier,
            "t_formed": t_formed,
            "t_synced": t_synced,
            "restored_step": restored_step,
            **sync,
        }
        if rank == 0:
            self._post(WorkerEventType.FORMED, rank=rank, world=world, **timing)
        return self._train(plan, rank, world, notice, timing)

    def _restore(self) -> int | None:
        """Rank 0 loads the run's checkpoint (if there is one) before the state sync.

        Only the checkpoint in this worker's own ``checkpoint_dir`` (from its private
        settings file): a ``JOIN`` says *whether* to restore, never *what*, so no
        path that came through the store is ever loaded.
        """
        if not self.settings.checkpoint_dir:
            return None
        path = Path(self.settings.checkpoint_dir) / CHECKPOINT_NAME
        try:
            state = load_checkpoint(path)
        except CheckpointError as exc:
            log.info("no usable checkpoint (%s); starting from the initial state", exc)
            return None
        self.state.load_state_dict(state)
        return self.state.step


def main(argv: list[str] | None = None, on_ready: Callable[[], None] | None = None) -> int:
    """Process entry point (``python -m elasim.executor.worker``).

    Args:
        argv: command-line arguments (default ``sys.argv``).
        on_ready: called once the worker is warm, just before it reports ``READY``
            (the entry point uses it to leave idle priority, see ``_entry``).
    """
    parser = argparse.ArgumentParser(prog="elasim-worker", description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="HOST:PORT of the run's store")
    parser.add_argument("--wid", required=True, type=int, help="worker id")
    parser.add_argument("--device-index", type=int, default=None, help="CUDA device of this slot")
    parser.add_argument("--spawn-wall", type=float, default=None, help="time.time() at spawn")
    parser.add_argument("--connect-timeout-s", type=float, default=60.0)
    parser.add_argument("--settings", required=True, help="the run's worker settings (0600)")
    parser.add_argument("--secret-file", required=True, help="the run's secret (0600)")
    args = parser.parse_args(argv)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1` dumps stacks
    logging.basicConfig(
        level=logging.WARNING, format=f"[worker {args.wid}] %(levelname)s %(message)s"
    )
    from .auth import read_secret
    from .runfiles import read_worker_settings
    from .storeclient import connect_store

    try:  # what to run comes from the user's private file, never from the store
        settings = read_worker_settings(args.settings)
        secret = read_secret(args.secret_file)
    except ValueError as exc:
        log.error("%s", exc)
        return EXIT_ERROR
    try:
        store = connect_store(args.store, secret, connect_s=args.connect_timeout_s)
    except (RuntimeError, OSError, ValueError) as exc:
        log.error("cannot reach the controller at %s: %s", args.store, exc)
        return EXIT_CONTROLLER_GONE
    worker = Worker(
        store,
        args.wid,
        settings,
        device_index=args.device_index,
        spawn_wall_s=args.spawn_wall,
        on_ready=on_ready,
    )
    try:
        return worker.run()
    except Exception as exc:
        log.exception("worker %s failed", args.wid)
        try:
            worker._post(WorkerEventType.ERROR, reason=str(exc)[:500])
        except Exception:  # noqa: BLE001 - best effort while dying
            pass
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
