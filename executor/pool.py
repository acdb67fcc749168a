"""The worker pool: processes, the store, and what workers report through it.

Everything :class:`~.group.ProcessWorkerGroup` knows about its worker *processes*
lives here, whatever the rescale mode: the run's store (:mod:`.authstore`), spawning into the
free slots of its launchers (:mod:`.launchers`), warm standbys, reaping exits (and
telling a crash from a planned exit), pumping each worker's events and step records
out of the store, and forming a generation (publishing ``JOIN`` until the named
members train a step).

Why a module of its own: this is the part that changes with the wire protocol
(:mod:`.protocol`) and with the life of a process, and those change *together* (a
new worker event is read here and usually moves a worker's status here).  It knows
nothing about scale-up/scale-down decisions or how pauses are measured; the
mechanisms (:mod:`.inplace`, :mod:`.restart`) and the accounting (:mod:`.pauses`)
build on it.  The records of the processes, and the signals and reaping that keep
them current, are a :class:`~.workertable.WorkerTable` (:attr:`WorkerPool.workers`),
which the script group (:mod:`.script`) keeps too.

:class:`WorkerPool` is a base class rather than a helper object because every layer
above it reads and writes the same bookkeeping (the worker table, the members, the
inbox of events, the step records) many times per change; one object with that state
in one place (initialized in :meth:`WorkerPool.__init__`) is simpler to follow than
the same state passed between helpers.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import signal
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .authstore import StoreServer
from .launchers import Launcher, WorkerLaunch, last_log_line
from .protocol import (
    CMDSEQ_KEY,
    GO_ABORT,
    Command,
    CommandOp,
    WorkerEventType,
    cmd_key,
    decode,
    event_count_key,
    event_key,
    gen_go_key,
    gen_here_key,
    steps_count_key,
    steps_key,
)
from .records import ExecutorError, GroupProgress, StepRecord, WorkerStart
from .runfiles import RunFiles
from .settings import GroupSettings
from .workertable import Worker, WorkerStatus, WorkerTable, wait_until

__all__ = ["WorkerPool"]

log = logging.getLogger(__name__)


class WorkerPool:
    """Worker processes, the store, and their reports (see the module docstring).

    Attributes:
        settings: the group's settings.
        launchers: where worker processes are started.
    """

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
        self.launchers = list(launchers)
        self._now = now or time.monotonic
        self._store: Any = None
        #: the run's secret and worker settings (made at ``_open_store`` unless given)
        self._files: RunFiles | None = settings.run_files
        #: the record of every process started
        self.workers = WorkerTable()
        self._seq = 0
        self._gen = 0
        self._started_once = False  # a generation has trained (either mechanism)
        self._members: list[int] = []
        self._inbox: list[dict[str, Any]] = []
        self._steps: list[StepRecord] = []
        self._step_walls: list[float] = []
        self._done = False
        self._metrics: dict[str, float] = {}
        #: a resumed run restores the checkpoint it found (``settings.resume_step``)
        self._last_checkpoint_step: int | None = settings.resume_step
        self._checkpoint_path: str | None = None
        self._global_batch: int | None = None
        self._crashed: list[int] = []
        #: workers in a row that exited on their own before they were ready
        self._failed_starts = 0
        self._failed_collectives: list[dict[str, Any]] = []
        self._closed = False
        #: keep every free slot filled with a warm standby (the group sets it: ``inplace``
        #: mode with ``settings.standby``)
        self._keep_warm = False
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

    def _open_store(self) -> None:
        """Write the run's private files (unless given) and open its store.

        The worker settings go to a private file, not into the store: the store is
        authenticated and holds data only (:mod:`.authstore`).
        """
        try:
            if self._files is None:
                self._files = RunFiles.create(self.settings.worker)
            secret = self._files.secret()
        except (OSError, ValueError) as exc:
            raise ExecutorError(f"cannot write the run's private files: {exc}") from None
        store = StoreServer(secret, self.settings.bind_host, self.settings.store_port)
        try:
            store.start()
        except OSError as exc:
            where = f"{self.settings.bind_host}:{self.settings.store_port}"
            reason = exc.strerror or str(exc)
            raise ExecutorError(f"cannot open the run's store on {where}: {reason}") from None
        self._store = store
        self._store.add(CMDSEQ_KEY, 0)
        if self.settings.worker.checkpoint_dir:
            from .checkpoint import CHECKPOINT_NAME

            self._checkpoint_path = str(Path(self.settings.worker.checkpoint_dir) / CHECKPOINT_NAME)

    def _start_standbys(self) -> None:
        """Fill every slot with a warm standby and wait until they are ready."""
        self._fill_standbys()
        # the warm pool is part of setting up, not of the replay: wait for it
        self._wait_until(
            lambda: all(w.status is not WorkerStatus.STARTING for w in self.workers.records()),
            self.settings.ready_timeout_s,
        )
        if not any(w.status is WorkerStatus.STANDBY for w in self.workers.records()):
            raise ExecutorError(self._why_none_ready())

    def _why_none_ready(self) -> str:
        """One line on why no worker became ready: the first one's exit and last log line.

        Why read the log here: a worker that cannot start (a missing module, a job
        that raises) exits at once, and the user's first question is why; a line
        that only says "see the logs" does not say which log, or whether there is one.
        """
        timeout = f"within {self.settings.ready_timeout_s:.0f} s"
        dead = [w for w in self.workers.records() if w.status is WorkerStatus.DEAD]
        if not dead:
            return f"no worker became ready {timeout} (a slow or busy machine: see --help)"
        first = min(dead, key=lambda w: w.exit_wall_s or 0.0)
        log_dir = getattr(first.launcher, "log_dir", None)
        log_path = None if log_dir is None else Path(log_dir) / f"worker-{first.wid}.log"
        last = "" if log_path is None else last_log_line(log_path)
        why = f": {last}" if last else ""
        where = f" (log: {log_path})" if log_path is not None and log_path.exists() else ""
        return (
            f"no worker became ready: worker {first.wid} exited with code "
            f"{first.exit_code} before it was ready{why}{where}"
        )

    def close(self) -> None:
        """Tell every worker to exit, then make sure they did."""
        if self._closed:
            return
        self._closed = True
        alive = [w for w in self.workers.records() if w.status is not WorkerStatus.DEAD]
        if self._store is not None and alive:
            with contextlib.suppress(Exception):
                self._publish(Command(CommandOp.STOP, tag="close"))
                self._publish(Command(CommandOp.EXIT, wids=tuple(w.wid for w in alive)))
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and any(w.proc.poll() is None for w in alive):
                time.sleep(0.02)
        for launcher in self.launchers:
            launcher.close()
        if self._store is not None:
            self._store.close()
        self._store = None
        if self._files is not None:
            self._files.cleanup()  # only a temporary folder made for this run

    # -- processes ---------------------------------------------------------------------------

    def _clock_of(self, wall_s: float) -> float:
        """A worker's ``time.time()`` on the controller's clock."""
        return self._now() - (time.time() - wall_s)

    def _publish(self, cmd: Command) -> None:
        self._expect_exits(cmd)
        self._seq += 1
        self._store.set(cmd_key(self._seq), cmd.to_bytes())
        self._store.add(CMDSEQ_KEY, 1)

    def _expect_exits(self, cmd: Command) -> None:
        """Note the workers that ``cmd`` tells to exit: their exit is planned."""
        if cmd.op is CommandOp.STOP and not cmd.keep:
            wids: Sequence[int] = self._members  # STOP reaches the running generation
        elif cmd.op is CommandOp.EXIT:
            wids = cmd.wids
        else:
            return
        now = time.time()
        for wid in wids:
            worker = self.workers[wid]
            worker.stop_wall_s = worker.stop_wall_s or now

    def _free_slots(self, launcher: Launcher) -> int:
        return launcher.slots - len(self.workers.on(launcher))

    @property
    def slots(self) -> int:
        """Worker slots over all launchers."""
        return sum(launcher.slots for launcher in self.launchers)

    def _spawn(self) -> Worker | None:
        """Start one worker on the launcher with the most free slots (None: all full).

        The worker gets the lowest free slot index of its launcher as
        ``--device-index``: with CUDA, one GPU per slot.
        """
        best = max(self.launchers, key=self._free_slots)
        if self._free_slots(best) <= 0:
            return None
        used = {w.slot for w in self.workers.on(best)}
        slot = min(i for i in range(best.slots) if i not in used)
        wid = self.workers.new_wid()
        self._store.set(event_count_key(wid), "0")
        self._store.set(steps_count_key(wid), "0")
        wall = time.time()
        launch = WorkerLaunch(
            wid,
            self.address,
            wall,
            device_index=slot,
            idle_warmup=bool(self.settings.idle_warmup),
        )
        proc = best.spawn(launch, self._files)
        worker = Worker(wid, best, proc, wall, slot=slot)
        self.workers.add(worker)
        return worker

    def _fill_standbys(self) -> None:
        while self._spawn() is not None:
            pass

    def _await_exit(self, wids: Sequence[int], timeout_s: float) -> None:
        alive = self.workers.alive
        if not self._wait_until(lambda: all(not alive(w) for w in wids), timeout_s):
            for wid in wids:
                self.workers.kill(wid, signal.SIGKILL)
            self._wait_until(lambda: all(not alive(w) for w in wids), timeout_s)

    # -- what workers report -----------------------------------------------------------------

    def _pump(self) -> None:
        """Reap exited processes, read new worker events and step records.

        A member that died on its own is a crash (``_crashed``, for ``poll``), logged
        once.  That is decided only after its last events are read: a worker's exit
        is often seen before the ``DONE`` it posted just before exiting.
        """
        exited = self.workers.reap()
        self._read_reports()
        for worker, was in exited:
            if was is WorkerStatus.MEMBER and self._died_on_its_own(worker):
                log.warning("worker %s exited unexpectedly (code %s)", worker.wid, worker.exit_code)
                self._crashed.append(worker.wid)
            planned = worker.killed_wall_s is not None or worker.stop_wall_s is not None
            if was is WorkerStatus.STARTING and not planned:
                self._failed_starts += 1
        if self._failed_starts >= max(3, 2 * self.slots):
            # every start fails the same way (a missing module, a job that raises):
            # starting more only repeats it, for as long as the caller waits
            raise ExecutorError(self._why_none_ready())

    def _died_on_its_own(self, worker: Worker) -> bool:
        """Whether an exited member crashed, rather than left as the group planned.

        Planned: the group killed it, training was over, or the group told it to exit
        and it did so cleanly (code 0).  A worker that was told to stop but failed on
        the way out (say, while writing the final checkpoint) did crash.
        """
        if worker.killed_wall_s is not None or self._done:
            return False
        return not (worker.stop_wall_s is not None and worker.exit_code == 0)

    def _read_reports(self) -> None:
        """Read every worker's new events and step records from the store."""
        pending = [w for w in self.workers.records() if not w.drained]
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

    def _on_event(self, worker: Worker, event: dict[str, Any]) -> None:
        kind = WorkerEventType(event["type"])
        if kind is WorkerEventType.READY:
            worker.ready_wall_s = float(event["wall_s"])
            if self._global_batch is None:
                self._global_batch = int(event["global_batch"])
                self.target_accuracy = event.get("target_accuracy")
                self.job_name = event.get("job")
            if worker.status is WorkerStatus.STARTING:
                worker.status = WorkerStatus.STANDBY
            self._failed_starts = 0
            return
        if kind is WorkerEventType.DONE:
            self._done = True
            self._metrics = {k: float(v) for k, v in event.get("metrics", {}).items()}
        elif kind is WorkerEventType.CHECKPOINT:
            # the path is the settings' checkpoint_dir: a path from the store is not kept
            self._last_checkpoint_step = int(event["step"])
        elif kind is WorkerEventType.LEFT:
            if worker.status is not WorkerStatus.DEAD:
                if event.get("exit", True):
                    worker.status = WorkerStatus.LEAVING
                else:  # back in the warm pool: it stands for a node that has booted
                    worker.kind = None
                    worker.status = WorkerStatus.STANDBY
        elif kind is WorkerEventType.COLLECTIVE_FAILED:
            self._failed_collectives.append(event)
        elif kind is WorkerEventType.ERROR:
            # a worker that fails while starting is reported once, by whoever waits
            # for it to be ready (with its log); one that fails later, here
            starting = worker.status is WorkerStatus.STARTING
            level = logging.DEBUG if starting else logging.ERROR
            log.log(level, "worker %s error: %s", worker.wid, event.get("reason"))
        elif kind is WorkerEventType.FAULT:
            worker.fault_wall_s = float(event["wall_s"])
        self._inbox.append(event)

    def _on_steps(self, raw: bytes) -> None:
        import json

        for row in json.loads(raw):
            t_end, step, world, loss, samples, gen, epoch, total, *gns = row
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
                    *(float(v) for v in gns),  # the noise-scale norms, when the worker sent them
                )
            )

    def _wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        return wait_until(self._pump, predicate, timeout_s, self.settings.poll_interval_s)

    def _take(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        for i, event in enumerate(self._inbox):
            if match(event):
                return self._inbox.pop(i)
        return None

    # -- queries -----------------------------------------------------------------------------

    def held(self) -> tuple[int, int]:
        """``(spot, on_demand)`` members of the current generation."""
        return self.workers.kind_counts(self._members)

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
        return self.workers.starts(self._clock_of)

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

    # -- standbys and generations ------------------------------------------------------------

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
            return sorted(w.wid for w in self.workers.records() if w.status is WorkerStatus.STANDBY)

        def enough() -> bool:
            have = ready()
            starting = sum(1 for w in self.workers.records() if w.status is WorkerStatus.STARTING)
            while len(have) + starting < count and self._spawn() is not None:
                starting += 1
            leaving = any(w.status is WorkerStatus.LEAVING for w in self.workers.records())
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
                return [w for w in self._members if self.workers.alive(w)], None
            members = [w for w in members if self.workers.alive(w)]
            if not members:
                self._members = []
                return [], None
            self._gen += 1
            gen = self._gen
            for wid in members:
                self.workers[wid].status = WorkerStatus.MEMBER
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
            failure_wall_s = self._abandon(gen, members, ok, result, failure_wall_s)
        raise ExecutorError(f"could not form a group after {self.settings.max_attempts} attempts")

    def _abandon(
        self,
        gen: int,
        members: list[int],
        ok: bool,
        result: dict[str, Any],
        failure_wall_s: float | None,
    ) -> float | None:
        """Generation ``gen`` failed: abort it and remove hung members before a retry.

        Returns the failure time the next attempt reports (when a member died and none
        was known yet, the earliest death).
        """
        log.warning(
            "generation %s failed (%s); retrying",
            gen,
            result.get("failed", "a member died" if ok else "timeout"),
        )
        self._store.compare_set(gen_go_key(gen), "", GO_ABORT)
        dead = [w for w in members if not self.workers.alive(w)]
        if dead and failure_wall_s is None:
            failure_wall_s = min(
                self.workers[w].killed_wall_s or self.workers[w].exit_wall_s or time.time()
                for w in dead
            )
        # a member that never reached the barrier is hung: as good as dead
        arrived = {w for w in members if self._store.check([gen_here_key(gen, w)])}
        stuck = [w for w in members if w not in arrived and self.workers.alive(w)]
        timed_out = not ok or "timeout" in str(result.get("failed", "")).lower()
        if timed_out and stuck:
            log.warning("workers %s never reached the barrier of generation %s", stuck, gen)
            for wid in stuck:
                self.workers.kill(wid, signal.SIGKILL)
        elif not ok:
            for wid in members:  # nobody answers at all: start over
                self.workers.kill(wid, signal.SIGKILL)
        return failure_wall_s

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
        return any(not self.workers.alive(w) for w in members)
