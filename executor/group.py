"""Real worker groups: processes, generations, and the measured pause of every change.

:class:`ProcessWorkerGroup` is what the controller's decisions are applied to.  It
owns the run's ``TCPStore`` (bound to ``127.0.0.1`` unless told otherwise), starts
worker processes through *launchers* (local subprocesses, or remote agents, see
:mod:`.agent`), and turns "hold 3 spot and 1 on-demand node" into generations of
the process group.  One worker process is one node (one slot; one GPU with NCCL).

Two mechanisms (:class:`RescaleMode`):

* ``inplace``: every free slot holds a *warm standby* (torch imported, job built)
  while the group trains.  A change publishes generation ``g+1``; survivors re-form
  in place and newcomers receive the state by broadcast (see :mod:`.worker`).  A
  victim of a hard preemption is SIGKILLed; survivors notice through a failing
  collective and lose only the step in flight.
* ``restart``: TorchElastic semantics, the baseline.  Every change stops *all*
  workers (a planned change first writes a checkpoint at a step boundary; a failure
  does not), starts *fresh* processes (cold: interpreter + torch import), and the
  new group restores the last checkpoint.  We use our own spawner rather than
  ``torchrun``'s agent because the *controller* decides membership here (torchrun
  re-forms when its own rendezvous sees agents come and go, which cannot be driven
  per decision), and because the point is to measure the mechanism (stop, cold start,
  rendezvous, checkpoint load) without torchrun's fixed rendezvous timeouts; the
  benchmark measures a plain ``torchrun --max-restarts`` job separately.

Pause accounting (real seconds; the controller converts to trace time).  For a
change with survivors the pause is measured by the new rank 0, a survivor: from its
last step end before the change to its first step end after it, minus one typical
step (the time it did not train), split into ``detect_s`` (failure -> noticed),
``rendezvous_s`` (noticed -> new group formed, including waiting for the plan and
tearing the old group down), ``state_s`` (state sync) and ``warmup_s`` (first step
minus a typical step).  ``acquire_s`` is zero when warm standbys were ready, which is
the point of keeping them.  Without survivors (``restart`` mode, or a resume after
losing every node) ``acquire_s`` is the cold start of the new processes, teardown
of the old ones counts as rendezvous, and a checkpoint write/load as state.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import functools
import logging
import math
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from elasim.jobmodel import RescaleMode
from elasim.policies import EventKind, PauseComponents

from .protocol import (
    CMDSEQ_KEY,
    CONFIG_KEY,
    GO_ABORT,
    Command,
    CommandOp,
    WorkerEventType,
    WorkerSettings,
    cmd_key,
    decode,
    event_count_key,
    event_key,
    gen_go_key,
    gen_here_key,
    steps_count_key,
    steps_key,
)

__all__ = [
    "ExecutorError",
    "GroupEvent",
    "GroupProgress",
    "GroupSettings",
    "Launcher",
    "LocalLauncher",
    "NodeKind",
    "ProcessHandle",
    "ProcessWorkerGroup",
    "RescaleMode",
    "StepRecord",
    "WorkerStart",
    "WorkerStatus",
    "split_preempt",
]

log = logging.getLogger(__name__)


class ExecutorError(RuntimeError):
    """The executor cannot continue (workers keep failing, a timeout expired)."""


class NodeKind(str, enum.Enum):
    """What a member node is: spot nodes can be preempted, on-demand nodes never are."""

    SPOT = "spot"
    ON_DEMAND = "on_demand"


class WorkerStatus(str, enum.Enum):
    """A worker process as the group tracks it.

    Legal transitions::

        STARTING -> STANDBY -> MEMBER -> LEAVING -> DEAD
        STARTING -> DEAD            (crashed or killed while warming up)
        STANDBY  -> DEAD            (EXIT, or killed)
        MEMBER   -> DEAD            (killed: preemption, or a crash)
        MEMBER   -> STANDBY         (dropped gracefully: warm again; or a generation
                                     failed and it waits for the next JOIN)
        STANDBY  -> MEMBER          (named in a JOIN)
    """

    STARTING = "starting"
    STANDBY = "standby"
    MEMBER = "member"
    LEAVING = "leaving"
    DEAD = "dead"


@dataclass(frozen=True)
class GroupEvent:
    """Something the group did, in real seconds (the controller converts to trace time).

    Attributes:
        kind: shared event vocabulary.
        real_s: when it started, on the controller's clock.
        nodes_before: members before.
        nodes_after: members after.
        pause: the survivors' pause, by component (real seconds).
        lost_steps: optimizer steps thrown away.
        lost_samples: samples thrown away.
        lost_real_s: training time thrown away (real seconds).
        interval_s: raw last-step-end-before -> first-step-end-after, when measured.
        detail: extra facts for logs (tuples so the record stays hashable).
    """

    kind: EventKind
    real_s: float
    nodes_before: int
    nodes_after: int
    pause: PauseComponents = PauseComponents()
    lost_steps: int = 0
    lost_samples: float = 0.0
    lost_real_s: float = 0.0
    interval_s: float | None = None
    detail: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class StepRecord:
    """One committed optimizer step, as rank 0 reported it.

    Attributes:
        real_s: step end on the controller's clock.
        step: step number after the step (1-based).
        world_size: members in the generation.
        loss: global mean training loss of the step.
        samples: samples in the global batch.
        gen: generation number.
        epoch: sampler epoch of the batch.
        samples_total: samples consumed by committed steps up to this one.
    """

    real_s: float
    step: int
    world_size: int
    loss: float
    samples: int
    gen: int
    epoch: int
    samples_total: int


@dataclass(frozen=True)
class WorkerStart:
    """One worker process's cold start: spawned, then READY (torch imported, job built).

    The simulator's cold-start model of a measured profile comes from these: when
    several workers start at once they share the host's cores, so the ready times of
    a batch are staggered, and a replacement for a killed node joins only when ready.

    Attributes:
        wid: worker id.
        spawn_s: when it was spawned, on the controller's clock.
        ready_s: when it reported READY (None: it never did).
    """

    wid: int
    spawn_s: float
    ready_s: float | None

    @property
    def start_s(self) -> float | None:
        """Spawn to READY (None: never ready)."""
        return None if self.ready_s is None else self.ready_s - self.spawn_s


@dataclass(frozen=True)
class GroupProgress:
    """Where training stands.

    Attributes:
        step: last committed step reported.
        samples: samples consumed by committed steps (up to ``step``).
        loss: loss of that step (NaN before the first).
        done: rank 0 reported that ``max_steps`` (or the target) was reached.
        metrics: final metrics from ``ElasticJob.evaluate`` (when done).
    """

    step: int = 0
    samples: int = 0
    loss: float = math.nan
    done: bool = False
    metrics: tuple[tuple[str, float], ...] = ()


def split_preempt(events: list[GroupEvent]) -> list[GroupEvent]:
    """Write a preemption with survivors as the simulator does: two events.

    ``PREEMPT`` carries the nodes taken and the work lost; the ``SCALE_DOWN`` that
    follows carries the survivors' pause (the simulator's ``_preempt`` then
    ``_begin_rescale``), so the two event tables join row by row.  A ``RESTORE``
    reported by the re-formation goes between the two.
    """
    out: list[GroupEvent] = []
    held: list[GroupEvent] = []
    for ev in events:
        if ev.kind is EventKind.RESTORE:
            held.append(ev)
            continue
        if ev.kind is not EventKind.PREEMPT or ev.nodes_after == 0:
            out += held + [ev]
            held = []
            continue
        out.append(
            GroupEvent(
                EventKind.PREEMPT,
                ev.real_s,
                ev.nodes_before,
                ev.nodes_after,
                lost_steps=ev.lost_steps,
                lost_samples=ev.lost_samples,
                lost_real_s=ev.lost_real_s,
                detail=ev.detail,
            )
        )
        out += held
        held = []
        out.append(
            GroupEvent(
                EventKind.SCALE_DOWN,
                ev.real_s,
                ev.nodes_before,
                ev.nodes_after,
                ev.pause,
                interval_s=ev.interval_s,
                detail=ev.detail,
            )
        )
    return out + held


class ProcessHandle(Protocol):
    """A started worker process, local or remote."""

    pid: int

    def poll(self) -> int | None:
        """Exit code, or None while running."""

    def send_signal(self, sig: int) -> None:
        """Deliver ``sig`` (SIGKILL emulates a preemption without notice)."""


class Launcher(Protocol):
    """Starts worker processes on one host."""

    name: str
    slots: int

    def spawn(self, wid: int, args: Sequence[str]) -> ProcessHandle:
        """Start ``python -m elasim.executor._entry *args`` for worker ``wid``."""

    def close(self) -> None:
        """Stop everything this launcher started."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: SIGKILL the worker if the controller dies (no orphaned trainers)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class LocalLauncher:
    """Worker processes on this host, as ``subprocess.Popen`` children.

    Attributes:
        slots: most processes alive at once.
        log_dir: each worker's stderr goes to ``worker-{wid}.log`` here (None: discarded).
        device_indices: CUDA device per slot index, when GPUs are present.
    """

    def __init__(
        self,
        slots: int,
        *,
        log_dir: str | Path | None = None,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.name = "local"
        self.slots = int(slots)
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.python = python
        self.env = env
        self._procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, wid: int, args: Sequence[str]) -> ProcessHandle:
        """Start one worker process."""
        stderr: Any = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            stderr = open(self.log_dir / f"worker-{wid}.log", "ab")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [self.python, "-m", "elasim.executor._entry", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=self.env,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        finally:
            if stderr is not subprocess.DEVNULL:
                stderr.close()
        self._procs.append(proc)
        return proc

    def close(self) -> None:
        """SIGKILL and reap every child still running."""
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        self._procs.clear()


@dataclass(frozen=True)
class GroupSettings:
    """How the group manages processes.

    Attributes:
        mode: ``inplace`` or ``restart``.
        worker: settings every worker receives.
        bind_host: address the TCPStore listens on (loopback by default).
        store_port: 0 picks a free port.
        standby: keep free slots filled with warm standbys (``inplace`` only).
        change_timeout_s: bound on one generation change.
        ready_timeout_s: bound on a cold start (spawn to ``READY``).
        poll_interval_s: how often waits poll processes and the store.
        max_attempts: generations tried for one change before giving up.
        stop_grace_s: after SIGTERM, wait this long before SIGKILL.
        advertise_host: the address workers on other hosts use to reach the store
            (None: ``bind_host``, or this host's name when binding every interface).
        idle_warmup: standbys warm up at idle CPU priority (see ``_entry``), so a
            "booting node" does not slow down training on the same host.
    """

    mode: RescaleMode = RescaleMode.INPLACE
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    bind_host: str = "127.0.0.1"
    store_port: int = 0
    standby: bool = True
    change_timeout_s: float = 60.0
    ready_timeout_s: float = 120.0
    poll_interval_s: float = 0.005
    max_attempts: int = 4
    stop_grace_s: float = 5.0
    advertise_host: str | None = None
    idle_warmup: bool = False


@dataclass
class _Worker:
    """Mutable record of one worker process."""

    wid: int
    launcher: Launcher
    proc: ProcessHandle
    spawn_wall_s: float
    slot: int = 0
    status: WorkerStatus = WorkerStatus.STARTING
    kind: NodeKind | None = None
    ready_wall_s: float | None = None
    exit_wall_s: float | None = None
    killed_wall_s: float | None = None
    fault_wall_s: float | None = None
    events_read: int = 0
    steps_read: int = 0
    drained: bool = False


class ProcessWorkerGroup:
    """Worker processes driven through generations (see the module docstring)."""

    def __init__(
        self,
        settings: GroupSettings,
        launchers: Sequence[Launcher],
        *,
        now: Callable[[], float] | None = None,
    ) -> None:
        if not launchers:
            raise ValueError("a worker group needs at least one launcher")
        self.settings = settings
        self.mode = settings.mode
        self.launchers = list(launchers)
        self._now = now or time.monotonic
        self._store: Any = None
        self._workers: dict[int, _Worker] = {}
        self._next_wid = 0
        self._seq = 0
        self._gen = 0
        self._members: list[int] = []
        self._inbox: list[dict[str, Any]] = []
        self._steps: list[StepRecord] = []
        self._step_walls: list[float] = []
        self._done = False
        self._metrics: dict[str, float] = {}
        self._last_checkpoint_step: int | None = None
        self._checkpoint_path: str | None = None
        self._started_once = False
        self._global_batch: int | None = None
        self._crashed: list[int] = []
        self._failed_collectives: list[dict[str, Any]] = []
        self._closed = False
        self._starved_since: float | None = None
        #: the job's stated accuracy target and name (from the first READY worker)
        self.target_accuracy: float | None = None
        self.job_name: str | None = None

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``HOST:PORT`` of the run's store, as workers (on any host) reach it."""
        host = self.settings.advertise_host or self.settings.bind_host
        if host in ("0.0.0.0", "::"):
            host = socket.getfqdn()
        return f"{host}:{self._store.port}"

    def start(self) -> None:
        """Open the store, publish the settings, start warm standbys (``inplace``)."""
        import torch.distributed as dist

        # TCPStore's own listener binds every interface whatever host it is given;
        # a socket bound here (loopback by default) and handed over keeps it private.
        family = socket.AF_INET6 if ":" in self.settings.bind_host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.settings.bind_host, self.settings.store_port))
        listener.listen(512)
        port = listener.getsockname()[1]
        self._store = dist.TCPStore(
            self.settings.bind_host,
            port,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=max(30.0, self.settings.change_timeout_s)),
            master_listen_fd=listener.detach(),  # the store owns (and closes) the socket now
        )
        self._store.set(CONFIG_KEY, self.settings.worker.to_bytes())
        self._store.add(CMDSEQ_KEY, 0)
        if self.settings.worker.checkpoint_dir:
            from .checkpoint import CHECKPOINT_NAME

            self._checkpoint_path = str(Path(self.settings.worker.checkpoint_dir) / CHECKPOINT_NAME)
        if self.mode is RescaleMode.INPLACE and self.settings.standby:
            self._fill_standbys()
            # the warm pool is part of setting up, not of the replay: wait for it
            self._wait_until(
                lambda: all(w.status is not WorkerStatus.STARTING for w in self._workers.values()),
                self.settings.ready_timeout_s,
            )
            if not any(w.status is WorkerStatus.STANDBY for w in self._workers.values()):
                raise ExecutorError("no worker became ready (see the worker logs)")

    def close(self) -> None:
        """Tell every worker to exit, then make sure they did."""
        if self._closed:
            return
        self._closed = True
        alive = [w for w in self._workers.values() if w.status is not WorkerStatus.DEAD]
        if self._store is not None and alive:
            with contextlib.suppress(Exception):
                self._publish(Command(CommandOp.STOP, tag="close"))
                self._publish(Command(CommandOp.EXIT, wids=tuple(w.wid for w in alive)))
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and any(w.proc.poll() is None for w in alive):
                time.sleep(0.02)
        for launcher in self.launchers:
            launcher.close()
        self._store = None

    # -- bookkeeping -----------------------------------------------------------------------

    def _clock_of(self, wall_s: float) -> float:
        """A worker's ``time.time()`` on the controller's clock."""
        return self._now() - (time.time() - wall_s)

    def _checkpoint_event(
        self, message: dict[str, Any], nodes: int, detail: tuple[tuple[str, Any], ...] = ()
    ) -> GroupEvent:
        """A worker's checkpoint report as a CHECKPOINT event, placed when the write began."""
        write_s = float(message["write_s"])
        return GroupEvent(
            EventKind.CHECKPOINT,
            self._clock_of(float(message["wall_s"]) - write_s),
            nodes,
            nodes,
            PauseComponents(state_s=write_s),
            detail=detail,
        )

    def _publish(self, cmd: Command) -> None:
        self._seq += 1
        self._store.set(cmd_key(self._seq), cmd.to_bytes())
        self._store.add(CMDSEQ_KEY, 1)

    def _free_slots(self, launcher: Launcher) -> int:
        used = sum(
            1
            for w in self._workers.values()
            if w.launcher is launcher and w.status is not WorkerStatus.DEAD
        )
        return launcher.slots - used

    @property
    def slots(self) -> int:
        """Worker slots over all launchers."""
        return sum(launcher.slots for launcher in self.launchers)

    def _spawn(self) -> _Worker | None:
        """Start one worker on the launcher with the most free slots (None: all full).

        The worker gets the lowest free slot index of its launcher as
        ``--device-index``: with CUDA, one GPU per slot.
        """
        best = max(self.launchers, key=self._free_slots)
        if self._free_slots(best) <= 0:
            return None
        used = {
            w.slot
            for w in self._workers.values()
            if w.launcher is best and w.status is not WorkerStatus.DEAD
        }
        slot = min(i for i in range(best.slots) if i not in used)
        wid = self._next_wid
        self._next_wid += 1
        self._store.set(event_count_key(wid), "0")
        self._store.set(steps_count_key(wid), "0")
        wall = time.time()
        args = ["--store", self.address, "--wid", str(wid), "--spawn-wall", repr(wall)]
        args += ["--device-index", str(slot)]
        if self.settings.idle_warmup:
            args.insert(0, "--idle-warmup")
        proc = best.spawn(wid, args)
        worker = _Worker(wid, best, proc, wall, slot=slot)
        self._workers[wid] = worker
        return worker

    def _fill_standbys(self) -> None:
        while self._spawn() is not None:
            pass

    def _set_status(self, worker: _Worker, status: WorkerStatus) -> None:
        worker.status = status

    def _pump(self) -> None:
        """Reap exited processes, read new worker events and step records."""
        for worker in self._workers.values():
            if worker.status is WorkerStatus.DEAD:
                continue
            code = worker.proc.poll()
            if code is None:
                continue
            was = worker.status
            worker.exit_wall_s = time.time()
            self._set_status(worker, WorkerStatus.DEAD)
            if was is WorkerStatus.MEMBER and worker.killed_wall_s is None:
                if not self._done:
                    log.warning("worker %s exited unexpectedly (code %s)", worker.wid, code)
                    self._crashed.append(worker.wid)
        pending = [w for w in self._workers.values() if not w.drained]
        if not pending:
            return
        keys: list[str] = []
        for w in pending:
            keys += [event_count_key(w.wid), steps_count_key(w.wid)]
        counts = self._store.multi_get(keys)
        for i, w in enumerate(pending):
            n_events, n_steps = int(counts[2 * i]), int(counts[2 * i + 1])
            if n_events > w.events_read:
                raw = self._store.multi_get(
                    [event_key(w.wid, k) for k in range(w.events_read, n_events)]
                )
                w.events_read = n_events
                for item in raw:
                    self._on_event(w, decode(item))
            if n_steps > w.steps_read:
                raw = self._store.multi_get(
                    [steps_key(w.wid, k) for k in range(w.steps_read, n_steps)]
                )
                w.steps_read = n_steps
                for item in raw:
                    self._on_steps(item)
            if w.status is WorkerStatus.DEAD:
                w.drained = True

    def _on_event(self, worker: _Worker, event: dict[str, Any]) -> None:
        kind = WorkerEventType(event["type"])
        if kind is WorkerEventType.READY:
            worker.ready_wall_s = float(event["wall_s"])
            if self._global_batch is None:
                self._global_batch = int(event["global_batch"])
                self.target_accuracy = event.get("target_accuracy")
                self.job_name = event.get("job")
            if worker.status is WorkerStatus.STARTING:
                self._set_status(worker, WorkerStatus.STANDBY)
            return
        if kind is WorkerEventType.DONE:
            self._done = True
            self._metrics = {k: float(v) for k, v in event.get("metrics", {}).items()}
        elif kind is WorkerEventType.CHECKPOINT:
            self._last_checkpoint_step = int(event["step"])
            self._checkpoint_path = str(event["path"])
        elif kind is WorkerEventType.LEFT:
            if worker.status is not WorkerStatus.DEAD:
                if event.get("exit", True):
                    self._set_status(worker, WorkerStatus.LEAVING)
                else:  # back in the warm pool: it stands for a node that has booted
                    worker.kind = None
                    self._set_status(worker, WorkerStatus.STANDBY)
        elif kind is WorkerEventType.COLLECTIVE_FAILED:
            self._failed_collectives.append(event)
        elif kind is WorkerEventType.ERROR:
            log.error("worker %s error: %s", worker.wid, event.get("reason"))
        elif kind is WorkerEventType.FAULT:
            worker.fault_wall_s = float(event["wall_s"])
        self._inbox.append(event)

    def _on_steps(self, raw: bytes) -> None:
        import json

        for t_end, step, world, loss, samples, gen, epoch, total in json.loads(raw):
            self._step_walls.append(float(t_end))
            self._steps.append(
                StepRecord(
                    self._clock_of(float(t_end)),
                    int(step),
                    int(world),
                    float(loss),
                    int(samples),
                    int(gen),
                    int(epoch),
                    int(total),
                )
            )

    def _wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            self._pump()
            if predicate():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.settings.poll_interval_s)

    def _take(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        for i, event in enumerate(self._inbox):
            if match(event):
                return self._inbox.pop(i)
        return None

    def _alive(self, wid: int) -> bool:
        return self._workers[wid].status is not WorkerStatus.DEAD

    def _kind_counts(self, wids: Sequence[int]) -> tuple[int, int]:
        spot = sum(1 for w in wids if self._workers[w].kind is NodeKind.SPOT)
        return spot, len(wids) - spot

    # -- queries -----------------------------------------------------------------------------

    def held(self) -> tuple[int, int]:
        """``(spot, on_demand)`` members of the current generation."""
        return self._kind_counts(self._members)

    @property
    def members(self) -> tuple[int, ...]:
        """Worker ids of the current generation, in rank order."""
        return tuple(self._members)

    def progress(self) -> GroupProgress:
        """The latest reported training progress."""
        self._pump()
        if not self._steps:
            return GroupProgress(done=self._done, metrics=tuple(self._metrics.items()))
        last = max(self._steps, key=lambda r: (r.real_s, r.step))
        return GroupProgress(
            last.step,
            last.samples_total,
            last.loss,
            self._done,
            tuple(sorted(self._metrics.items())),
        )

    def step_records(self) -> tuple[StepRecord, ...]:
        """Every step rank 0 reported, in order of completion."""
        self._pump()
        return tuple(sorted(self._steps, key=lambda r: r.real_s))

    def worker_starts(self) -> tuple[WorkerStart, ...]:
        """Every worker process started so far, in spawn order (see :class:`WorkerStart`)."""
        self._pump()
        return tuple(
            WorkerStart(
                w.wid,
                self._clock_of(w.spawn_wall_s),
                None if w.ready_wall_s is None else self._clock_of(w.ready_wall_s),
            )
            for w in sorted(self._workers.values(), key=lambda w: w.wid)
        )

    def step_time_by_world(self, recent: int = 64) -> dict[int, float]:
        """Median step time (real s) per world size, from consecutive steps of one generation."""
        by_world: dict[int, list[float]] = {}
        rows = self._steps[-(recent * 8) :]
        for prev, row in zip(rows, rows[1:], strict=False):
            if row.gen == prev.gen and row.step == prev.step + 1:
                by_world.setdefault(row.world_size, []).append(row.real_s - prev.real_s)
        return {n: statistics.median(v[-recent:]) for n, v in by_world.items() if v}

    def typical_step_s(self, world: int | None = None) -> float | None:
        """Median step time at ``world`` (or at the current size)."""
        table = self.step_time_by_world()
        n = world if world is not None else len(self._members)
        if n in table:
            return table[n]
        return statistics.median(table.values()) if table else None

    @property
    def global_batch(self) -> int | None:
        """Samples per step, once a worker has reported it."""
        return self._global_batch

    @property
    def last_checkpoint_step(self) -> int | None:
        """Step of the newest checkpoint written in this run."""
        return self._last_checkpoint_step

    @property
    def done(self) -> bool:
        """Whether training finished."""
        return self._done

    # -- the mechanics of a change ------------------------------------------------------------

    def warm(self, count: int, timeout_s: float | None = None) -> int:
        """Make sure ``count`` warm standbys are ready (spawning as slots allow).

        Returns how many are ready.  Training continues meanwhile; tests and
        benchmarks call this so that a following ``apply`` measures the in-place
        mechanism rather than a cold start.
        """
        return len(self._ready_standbys(count, timeout_s or self.settings.ready_timeout_s))

    def _ready_standbys(self, count: int, timeout_s: float) -> list[int]:
        """Up to ``count`` warm standbys (oldest first), starting more as slots free up."""

        def ready() -> list[int]:
            return sorted(w.wid for w in self._workers.values() if w.status is WorkerStatus.STANDBY)

        def enough() -> bool:
            have = ready()
            starting = sum(1 for w in self._workers.values() if w.status is WorkerStatus.STARTING)
            while len(have) + starting < count and self._spawn() is not None:
                starting += 1
            leaving = any(w.status is WorkerStatus.LEAVING for w in self._workers.values())
            # slots held by leaving workers free up soon: keep waiting for them
            hope = starting > 0 or (leaving and len(have) + starting < count)
            return len(have) >= count or not hope or self._done

        self._wait_until(enough, timeout_s)
        return ready()[:count]

    def _form(
        self,
        members: list[int],
        *,
        failure_wall_s: float | None = None,
        restore: str | None = None,
    ) -> tuple[list[int], dict[str, Any] | None]:
        """Publish generations until one with (a subset of) ``members`` trains a step.

        Returns the members that made it and rank 0's ``PAUSE`` payload (None when
        training was already complete, or when nobody is left).
        """
        for _ in range(self.settings.max_attempts):
            if self._done:  # training finished while we were getting ready
                return [w for w in self._members if self._alive(w)], None
            members = [w for w in members if self._alive(w)]
            if not members:
                self._members = []
                return [], None
            self._gen += 1
            gen = self._gen
            for wid in members:
                self._set_status(self._workers[wid], WorkerStatus.MEMBER)
            self._members = list(members)
            self._publish(
                Command(
                    CommandOp.JOIN,
                    gen=gen,
                    members=tuple(members),
                    failure_wall_s=failure_wall_s,
                    restore=restore,
                )
            )
            result: dict[str, Any] = {}
            settled = functools.partial(self._settled, gen, members, result)
            ok = self._wait_until(settled, self.settings.change_timeout_s)
            if ok and "pause" in result:
                self._inbox = [e for e in self._inbox if e.get("gen", gen) >= gen]
                self._failed_collectives = [
                    e for e in self._failed_collectives if e.get("gen", 0) >= gen
                ]
                return members, result["pause"]
            if ok and result.get("done"):
                return members, None
            log.warning(
                "generation %s failed (%s); retrying",
                gen,
                result.get("failed", "a member died" if ok else "timeout"),
            )
            self._store.compare_set(gen_go_key(gen), "", GO_ABORT)
            dead = [w for w in members if not self._alive(w)]
            if dead and failure_wall_s is None:
                failure_wall_s = min(
                    self._workers[w].killed_wall_s or self._workers[w].exit_wall_s or time.time()
                    for w in dead
                )
            # a member that never reached the barrier is hung: as good as dead
            arrived = {w for w in members if self._store.check([gen_here_key(gen, w)])}
            stuck = [w for w in members if w not in arrived and self._alive(w)]
            timed_out = not ok or "timeout" in str(result.get("failed", "")).lower()
            if timed_out and stuck:
                log.warning("workers %s never reached the barrier of generation %s", stuck, gen)
                for wid in stuck:
                    self._kill(wid, signal.SIGKILL)
            elif not ok:
                for wid in members:  # nobody answers at all: start over
                    self._kill(wid, signal.SIGKILL)
        raise ExecutorError(f"could not form a group after {self.settings.max_attempts} attempts")

    def _settled(self, gen: int, members: list[int], result: dict[str, Any]) -> bool:
        """Whether generation ``gen`` trained a step, finished, or failed."""

        def of(kind: str) -> Callable[[dict[str, Any]], bool]:
            return lambda e: e["type"] == kind and e["gen"] == gen

        pause = self._take(of("pause"))
        if pause is not None:
            result["pause"] = pause
            return True
        if self._take(of("done")):
            result["done"] = True
            return True
        failed = self._take(of("join_failed"))
        if failed is not None:
            result["failed"] = failed.get("reason")
            return True
        return any(not self._alive(w) for w in members)

    def _kill(self, wid: int, sig: int = signal.SIGKILL) -> None:
        worker = self._workers[wid]
        if worker.status is WorkerStatus.DEAD:
            return
        worker.killed_wall_s = worker.killed_wall_s or time.time()
        with contextlib.suppress(ProcessLookupError):
            worker.proc.send_signal(sig)

    def _await_exit(self, wids: Sequence[int], timeout_s: float) -> None:
        if not self._wait_until(lambda: all(not self._alive(w) for w in wids), timeout_s):
            for wid in wids:
                self._kill(wid, signal.SIGKILL)
            self._wait_until(lambda: all(not self._alive(w) for w in wids), timeout_s)

    def _last_step_wall(self) -> float | None:
        return max(self._step_walls) if self._step_walls else None

    def _last_step(self) -> int:
        return max((r.step for r in self._steps), default=0)

    def _rollback_run_s(self, after_step: int, world: int) -> float:
        """Training time a rollback to ``after_step`` throws away (real seconds).

        The measured durations of the committed steps after it (a step redone after an
        earlier rollback counts once, as last run), plus one step in flight.  The
        first step of a generation, whose time the pause holds, counts as a typical
        step of its world size.  Multiplying the lost steps by today's typical step
        instead overstates the loss whenever the steps ran at another world size.
        """
        table = self.step_time_by_world()
        typical = table.get(world) or (statistics.median(table.values()) if table else 0.0)
        duration: dict[int, float] = {}
        previous: StepRecord | None = None
        for record in sorted(self._steps, key=lambda r: r.real_s):
            if (
                previous is not None
                and record.gen == previous.gen
                and (record.step == previous.step + 1)
            ):
                duration[record.step] = record.real_s - previous.real_s
            else:
                duration[record.step] = table.get(record.world_size, typical)
            previous = record
        return sum(d for step, d in duration.items() if step > after_step) + typical

    def _pause_event(
        self,
        kind: EventKind,
        before: int,
        after: int,
        payload: dict[str, Any] | None,
        *,
        begin_real_s: float,
        acquire_s: float = 0.0,
        extra_rendezvous_s: float = 0.0,
        extra_state_s: float = 0.0,
        lost_steps: int = 0,
        lost_real_s: float | None = None,
        last_end_wall_s: float | None = None,
        typical_s: float | None = None,
        detail: dict[str, Any] | None = None,
    ) -> GroupEvent:
        """Turn rank 0's ``PAUSE`` payload into a :class:`GroupEvent`."""
        info = dict(detail or {})
        if payload is None:
            return GroupEvent(kind, begin_real_s, before, after, detail=tuple(info.items()))
        typical = payload.get("typical_step_s") or typical_s
        first_step_s = float(payload["first_step_s"])
        warmup = max(first_step_s - typical, 0.0) if typical else 0.0
        interval = None
        if payload.get("survivor"):
            pause = PauseComponents(
                detect_s=float(payload["detect_s"]),
                acquire_s=acquire_s,
                rendezvous_s=float(payload["rendezvous_s"]) + extra_rendezvous_s,
                state_s=float(payload["state_s"]) + extra_state_s,
                warmup_s=float(payload["warmup_s"]),
            )
            if payload.get("last_end_wall_s") is not None:
                interval = float(payload["first_end_wall_s"]) - float(payload["last_end_wall_s"])
        else:
            pause = PauseComponents(
                acquire_s=acquire_s,
                rendezvous_s=max(payload["t_formed"] - payload["t_cmd"], 0.0) + extra_rendezvous_s,
                state_s=max(payload["t_synced"] - payload["t_formed"], 0.0) + extra_state_s,
                warmup_s=warmup,
            )
            if last_end_wall_s is not None:
                interval = float(payload["first_end_wall_s"]) - last_end_wall_s
        step_s = typical or first_step_s
        batch = self._global_batch or int(payload.get("global_batch", 0))
        info.update(
            gen=payload.get("gen"),
            receivers=payload.get("receivers"),
            state_bytes=payload.get("state_bytes"),
            restored_step=payload.get("restored_step"),
        )
        return GroupEvent(
            kind,
            begin_real_s,
            before,
            after,
            pause,
            lost_steps=lost_steps,
            lost_samples=float(lost_steps * batch),
            lost_real_s=lost_steps * step_s if lost_real_s is None else lost_real_s,
            interval_s=interval,
            detail=tuple((k, v) for k, v in info.items() if v is not None),
        )

    # -- inplace ------------------------------------------------------------------------------

    def _inplace_change(
        self,
        kind: EventKind,
        survivors: list[int],
        newcomers: list[int],
        *,
        failure_wall_s: float | None,
        begin_real_s: float,
        before: int,
        waited_s: float = 0.0,
    ) -> list[GroupEvent]:
        """Re-form in place; ``waited_s``: time nobody trained while standbys warmed up."""
        events: list[GroupEvent] = []
        typical = self.typical_step_s(before) if before else None
        last_wall = self._last_step_wall()
        restore = None
        if not survivors and self._last_checkpoint_step is not None:
            restore = self._checkpoint_path  # only a checkpoint this run wrote
        t_publish = time.time()
        members, payload = self._form(
            survivors + newcomers, failure_wall_s=failure_wall_s, restore=restore
        )
        if payload is None and self._done:
            return events
        after = len(members)
        if not survivors and self._started_once and payload is not None:
            restored = payload.get("restored_step")
            if restored:
                events.append(GroupEvent(EventKind.RESTORE, begin_real_s, 0, after))
            kind = EventKind.RESUME
        lost = 1 if failure_wall_s is not None and survivors else 0
        acquire = waited_s
        if not survivors and newcomers:
            readies = [self._workers[w].ready_wall_s or t_publish for w in newcomers]
            acquire += max(max(readies) - t_publish, 0.0)
        events.append(
            self._pause_event(
                kind,
                before,
                after,
                payload,
                begin_real_s=begin_real_s,
                acquire_s=acquire,
                lost_steps=lost,
                last_end_wall_s=last_wall if survivors else None,
                typical_s=typical,
                detail={"mode": "inplace", "newcomers": len(newcomers)},
            )
        )
        self._started_once = self._started_once or payload is not None
        if self.settings.standby:
            self._fill_standbys()
        return events

    # -- restart ------------------------------------------------------------------------------

    def _restart_change(
        self,
        kind: EventKind,
        kinds: list[NodeKind],
        *,
        planned: bool,
        failure_wall_s: float | None,
        begin_real_s: float,
        before: int,
    ) -> list[GroupEvent]:
        """Stop everyone, cold-start ``len(kinds)`` fresh workers, restore the checkpoint."""
        events: list[GroupEvent] = []
        old = [w for w in self._members if self._alive(w)]
        typical = self.typical_step_s(before) if before else None
        write_s = 0.0
        t0 = time.time()
        if old and planned:
            self._publish(Command(CommandOp.STOP, checkpoint=True, tag="restart"))
            stopped: dict[str, Any] = {}

            def got_stop() -> bool:
                event = self._take(lambda e: e["type"] == "stopped")
                if event is not None:
                    stopped["event"] = event
                return bool(stopped) or not any(self._alive(w) for w in old)

            self._wait_until(got_stop, self.settings.change_timeout_s)
            ckpt = self._take(lambda e: e["type"] == "checkpoint" and e.get("tag") == "restart")
            if ckpt is not None:
                events.append(self._checkpoint_event(ckpt, before))
            self._await_exit(old, self.settings.stop_grace_s)
        elif old:
            # TorchElastic: a failed worker stops the whole group.  Let survivors notice
            # (they flush their step records) before terminating them.
            self._wait_until(
                lambda: all(
                    not self._alive(w) or any(e["wid"] == w for e in self._failed_collectives)
                    for w in old
                ),
                self.settings.worker.collective_timeout_s + 1.0,
            )
            for wid in old:
                self._kill(wid, signal.SIGTERM)
            self._await_exit(old, self.settings.stop_grace_s)
        self._failed_collectives.clear()
        t_exited = time.time()
        last_wall = self._last_step_wall()
        last_step = self._last_step()
        self._members = []
        lost, lost_s = 0, 0.0
        if not planned and self._started_once:
            ckpt_step = self._last_checkpoint_step or 0
            lost = max(last_step - ckpt_step, 0) + 1
            lost_s = self._rollback_run_s(ckpt_step, before)
        if not kinds:
            if not planned and before:
                events.append(GroupEvent(EventKind.PREEMPT, begin_real_s, before, 0))
                events = self._with_lost(events, lost, lost_s)
            if old or before:
                events.append(
                    GroupEvent(
                        EventKind.PAUSE, begin_real_s, before, 0, detail=(("mode", "restart"),)
                    )
                )
            return events
        t_spawn = time.time()
        fresh: list[int] = []
        for node_kind in kinds:
            worker = self._spawn()
            if worker is None:
                break
            worker.kind = node_kind
            fresh.append(worker.wid)
        self._wait_until(
            lambda: all(self._workers[w].status is not WorkerStatus.STARTING for w in fresh),
            self.settings.ready_timeout_s,
        )
        fresh = [w for w in fresh if self._workers[w].status is WorkerStatus.STANDBY]
        readies = [self._workers[w].ready_wall_s or t_spawn for w in fresh]
        acquire = max(max(readies, default=t_spawn) - t_spawn, 0.0)
        restore = self._checkpoint_path if self._last_checkpoint_step is not None else None
        members, payload = self._form(fresh, restore=restore)
        if payload is None and self._done:
            return events
        if payload is not None and payload.get("restored_step"):
            events.append(GroupEvent(EventKind.RESTORE, begin_real_s, 0, len(members)))
        teardown = max(t_exited - t0 - write_s, 0.0) if old else 0.0
        if not old and self._started_once:
            kind = EventKind.RESUME
        events.append(
            self._pause_event(
                kind,
                before,
                len(members),
                payload,
                begin_real_s=begin_real_s,
                acquire_s=acquire,
                extra_rendezvous_s=teardown,
                extra_state_s=write_s,
                lost_steps=lost,
                lost_real_s=lost_s,
                last_end_wall_s=last_wall if old else None,
                typical_s=typical,
                detail={"mode": "restart", "planned": planned},
            )
        )
        self._started_once = self._started_once or payload is not None
        return events

    def _with_lost(self, events: list[GroupEvent], lost: int, lost_s: float) -> list[GroupEvent]:
        if not lost or not events:
            return events
        last = events[-1]
        batch = self._global_batch or 0
        events[-1] = GroupEvent(
            last.kind,
            last.real_s,
            last.nodes_before,
            last.nodes_after,
            last.pause,
            lost,
            float(lost * batch),
            lost_s,
            last.interval_s,
            last.detail,
        )
        return events

    # -- what the controller calls ---------------------------------------------------------

    def apply(
        self, spot: int, on_demand: int, *, wait_ready_s: float | None = None
    ) -> list[GroupEvent]:
        """Move the membership towards ``spot`` + ``on_demand`` nodes.

        Args:
            spot: spot nodes to hold.
            on_demand: on-demand nodes to hold.
            wait_ready_s: how long to wait for warm standbys to join (None: up to
                ``ready_timeout_s``).  The controller passes 0: newcomers that are
                still starting join at a later call (like booting nodes in the
                simulator), so the loop never blocks on a cold start.
        """
        self._pump()
        if self._done:
            return []
        cur = list(self._members)
        cur_spot = [w for w in cur if self._workers[w].kind is NodeKind.SPOT]
        cur_od = [w for w in cur if self._workers[w].kind is NodeKind.ON_DEMAND]
        # victims of a scale-down: the newest first (deterministic)
        drop = set(sorted(cur_spot)[spot:] if len(cur_spot) > spot else [])
        drop |= set(sorted(cur_od)[on_demand:] if len(cur_od) > on_demand else [])
        add_spot = max(spot - len(cur_spot), 0)
        add_od = max(on_demand - len(cur_od), 0)
        if not drop and not add_spot and not add_od:
            return []
        begin = self._now()
        survivors = [w for w in cur if w not in drop]
        before = len(cur)
        kind = EventKind.SCALE_UP if add_spot + add_od > 0 else EventKind.SCALE_DOWN
        if self.mode is RescaleMode.RESTART:
            kinds = [self._workers[w].kind for w in survivors]
            kinds += [NodeKind.SPOT] * add_spot + [NodeKind.ON_DEMAND] * add_od
            return self._restart_change(
                kind,
                [k for k in kinds if k is not None],
                planned=True,
                failure_wall_s=None,
                begin_real_s=begin,
                before=before,
            )
        if not survivors and not (add_spot + add_od):
            # every node released on purpose: checkpoint, then stop
            return self._stop_all(EventKind.PAUSE, begin, before)
        t_request = time.time()
        wait_s = self.settings.ready_timeout_s if wait_ready_s is None else wait_ready_s
        newcomers = self._ready_standbys(add_spot + add_od, wait_s)
        waited_s = time.time() - t_request
        self._pump()
        if self._done:
            return []
        if not survivors and not cur:
            if len(newcomers) < add_spot + add_od and self._starved_since is None:
                self._starved_since = t_request  # nobody trains until they are ready
            if not newcomers:
                return []
            if self._starved_since is not None:
                waited_s = time.time() - self._starved_since
            self._starved_since = None
        for i, wid in enumerate(newcomers):
            self._workers[wid].kind = NodeKind.SPOT if i < add_spot else NodeKind.ON_DEMAND
        if not newcomers and not drop:
            return []
        if not survivors and cur:
            self._stop_all(EventKind.PAUSE, begin, before)
        return self._inplace_change(
            kind,
            survivors,
            newcomers,
            failure_wall_s=None,
            begin_real_s=begin,
            before=before if survivors else 0,
            waited_s=0.0 if survivors else waited_s,
        )

    def _stop_all(self, kind: EventKind, begin: float, before: int) -> list[GroupEvent]:
        """Every member leaves on purpose: final checkpoint, then stop."""
        old = [w for w in self._members if self._alive(w)]
        events: list[GroupEvent] = []
        keep = self.mode is RescaleMode.INPLACE and self.settings.standby
        if old:
            self._publish(
                Command(
                    CommandOp.STOP,
                    checkpoint=self._checkpoint_path is not None,
                    keep=keep,
                    tag="stop",
                )
            )
            self._wait_until(
                lambda: (
                    any(e["type"] == "stopped" for e in self._inbox)
                    or not any(self._alive(w) for w in old)
                ),
                self.settings.change_timeout_s,
            )
            self._take(lambda e: e["type"] == "stopped")
            ckpt = self._take(lambda e: e["type"] == "checkpoint" and e.get("tag") == "stop")
            if ckpt is not None:
                events.append(self._checkpoint_event(ckpt, before))
            if keep:  # they stay, as warm standbys
                self._wait_until(
                    lambda: all(self._workers[w].status is not WorkerStatus.MEMBER for w in old),
                    self.settings.stop_grace_s,
                )
            else:
                self._await_exit(old, self.settings.stop_grace_s)
        self._members = []
        events.append(GroupEvent(kind, begin, before, 0))
        if self.mode is RescaleMode.INPLACE and self.settings.standby:
            self._fill_standbys()
        return events

    def preempt(self, count: int, *, graceful: bool) -> list[GroupEvent]:
        """Take ``count`` spot members away (newest first): gracefully, or by SIGKILL."""
        return split_preempt(self._preempt(count, graceful=graceful))

    def _preempt(self, count: int, *, graceful: bool) -> list[GroupEvent]:
        self._pump()
        spot_members = sorted(w for w in self._members if self._workers[w].kind is NodeKind.SPOT)
        victims = spot_members[len(spot_members) - min(count, len(spot_members)) :]
        if not victims or self._done:
            return []
        begin = self._now()
        before = len(self._members)
        survivors = [w for w in self._members if w not in victims]
        if graceful:
            if self.mode is RescaleMode.RESTART:
                kinds = [self._workers[w].kind for w in survivors]
                events = self._restart_change(
                    EventKind.PREEMPT,
                    [k for k in kinds if k is not None],
                    planned=True,
                    failure_wall_s=None,
                    begin_real_s=begin,
                    before=before,
                )
                return events if survivors else self._relabel(events, before)
            if not survivors:
                return self._relabel(self._stop_all(EventKind.PAUSE, begin, before), before)
            events = self._inplace_change(
                EventKind.PREEMPT,
                survivors,
                [],
                failure_wall_s=None,
                begin_real_s=begin,
                before=before,
            )
            self._wait_until(
                lambda: all(self._workers[w].status is not WorkerStatus.MEMBER for w in victims),
                self.settings.stop_grace_s,
            )
            return events
        kill_wall = time.time()
        for wid in victims:
            self._kill(wid, signal.SIGKILL)
        return self._after_failure(victims, survivors, kill_wall, begin, before)

    def _relabel(self, events: list[GroupEvent], before: int) -> list[GroupEvent]:
        """A graceful loss of every node: the PREEMPT itself, then the PAUSE."""
        head = GroupEvent(EventKind.PREEMPT, events[-1].real_s, before, 0)
        return [*events[:-1], head, events[-1]]

    def _after_failure(
        self,
        dead: list[int],
        survivors: list[int],
        failure_wall_s: float,
        begin: float,
        before: int,
    ) -> list[GroupEvent]:
        """Recover from members that died without notice."""
        if self.mode is RescaleMode.RESTART:
            kinds = [self._workers[w].kind for w in survivors]
            return self._restart_change(
                EventKind.PREEMPT,
                [k for k in kinds if k is not None],
                planned=False,
                failure_wall_s=failure_wall_s,
                begin_real_s=begin,
                before=before,
            )
        if not survivors:
            # everything is gone: the next start restores the last checkpoint
            self._await_exit(dead, self.settings.stop_grace_s)
            ckpt_step = self._last_checkpoint_step or 0
            lost = max(self._last_step() - ckpt_step, 0) + 1
            self._members = []
            batch = self._global_batch or 0
            events = [
                GroupEvent(
                    EventKind.PREEMPT,
                    begin,
                    before,
                    0,
                    lost_steps=lost,
                    lost_samples=float(lost * batch),
                    lost_real_s=self._rollback_run_s(ckpt_step, before),
                ),
                GroupEvent(EventKind.PAUSE, begin, before, 0),
            ]
            if self.settings.standby:
                self._fill_standbys()
            return events
        return self._inplace_change(
            EventKind.PREEMPT,
            survivors,
            [],
            failure_wall_s=failure_wall_s,
            begin_real_s=begin,
            before=before,
        )

    def checkpoint(self, tag: str = "interval") -> list[GroupEvent]:
        """Ask rank 0 to checkpoint at the next step boundary; wait for it."""
        self._pump()
        if not self._members or self._done or self._checkpoint_path is None:
            return []
        self._publish(Command(CommandOp.CHECKPOINT, tag=tag))
        got: dict[str, Any] = {}

        def written() -> bool:
            event = self._take(lambda e: e["type"] == "checkpoint" and e.get("tag") == tag)
            if event is not None:
                got["event"] = event
            return bool(got) or self._done or bool(self._crashed)

        self._wait_until(written, self.settings.change_timeout_s)
        if not got:
            return []
        event = got["event"]
        return [
            self._checkpoint_event(
                event, len(self._members), detail=(("step", int(event["step"])),)
            )
        ]

    def poll(self) -> list[GroupEvent]:
        """Handle what happened on its own: crashed members, failed collectives."""
        return split_preempt(self._poll())

    def _poll(self) -> list[GroupEvent]:
        self._pump()
        if self._done:
            return []
        if self.mode is RescaleMode.INPLACE and self.settings.standby:
            self._fill_standbys()
        crashed = [w for w in self._crashed if w in self._members]
        self._crashed.clear()
        if crashed:
            begin = self._now()
            before = len(self._members)
            survivors = [w for w in self._members if w not in crashed]
            wall = min(
                self._workers[w].fault_wall_s or self._workers[w].exit_wall_s or time.time()
                for w in crashed
            )
            return self._after_failure(crashed, survivors, wall, begin, before)
        if self._failed_collectives and self._members:
            # a collective timed out without anyone dying: re-form with everyone alive
            first = min(float(e["wall_s"]) for e in self._failed_collectives)
            if time.time() - first < 1.0:
                return []
            self._failed_collectives.clear()
            begin = self._now()
            before = len(self._members)
            survivors = [w for w in self._members if self._alive(w)]
            dead = [w for w in self._members if not self._alive(w)]
            return self._after_failure(dead, survivors, first, begin, before)
        return []

    def wait(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s`` real seconds, returning early if something happened."""
        if timeout_s <= 0:
            return

        def eventful() -> bool:
            return self._done or bool(self._crashed) or bool(self._failed_collectives)

        self._wait_until(eventful, timeout_s)

    def finish(self) -> None:
        """Training is over: send the standbys home."""
        standbys = tuple(w.wid for w in self._workers.values() if w.status is not WorkerStatus.DEAD)
        if standbys and self._store is not None:
            self._publish(Command(CommandOp.EXIT, wids=standbys))

    def kill_member(self, index: int = -1) -> int:
        """SIGKILL one member without telling anyone (tests: an unexpected crash)."""
        wid = self._members[index]
        self._workers[wid].proc.send_signal(signal.SIGKILL)
        return wid
