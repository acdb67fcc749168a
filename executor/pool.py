"""The worker pool: processes, the store, warm standbys, and forming a generation.

Everything :class:`~.group.ProcessWorkerGroup` does with its worker *processes*
lives here, whatever the rescale mode: the run's store (:mod:`.authstore`), spawning
into the free slots of its launchers (:mod:`.launchers`), warm standbys, publishing
commands, reaping exits (and telling a crash from a planned exit), and forming a
generation (publishing ``JOIN`` until the named members train a step).

Why a module of its own: this is the part that changes with the life of a process.
It knows nothing about scale-up/scale-down decisions or how pauses are measured; the
mechanisms (:mod:`.inplace`, :mod:`.restart`) and the accounting (:mod:`.pauses`) are
handed a pool and use it.  What the pool holds is split by what changes together:
the records of the processes are a :class:`~.workertable.WorkerTable`
(:attr:`WorkerPool.workers`), and what the workers report through the store is
read by :class:`~.reports.WorkerReports` (:attr:`WorkerPool.reports`), which changes
with the wire protocol.
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
from .launchers import Launcher, NoFreeSlot, WorkerLaunch, last_log_line
from .protocol import (
    CMDSEQ_KEY,
    GO_ABORT,
    Command,
    CommandOp,
    cmd_key,
    event_count_key,
    gen_go_key,
    gen_here_key,
    steps_count_key,
)
from .records import ExecutorError
from .reports import WorkerReports
from .runfiles import RunFiles
from .settings import GroupSettings
from .workertable import Worker, WorkerStatus, WorkerTable, wait_until

__all__ = ["WorkerPool"]

log = logging.getLogger(__name__)


class WorkerPool:
    """Worker processes, the store, and generations (see the module docstring).

    Attributes:
        settings: the group's settings.
        launchers: where worker processes are started.
        workers: the record of every process started.
        reports: what the workers reported.
        crashed: members that died on their own, not yet handled; whoever handles
            them removes them.
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
        #: the run's secret and worker settings (made at ``open`` unless given)
        self._files: RunFiles | None = settings.run_files
        self.workers = WorkerTable()
        #: a resumed run restores the checkpoint it found (``settings.resume_step``)
        self.reports = WorkerReports(self.clock_of, settings.resume_step)
        self.crashed: list[int] = []
        self._seq = 0
        self._gen = 0
        self._members: list[int] = []
        self._checkpoint_path: str | None = None
        #: workers in a row that exited on their own before they were ready
        self._failed_starts = 0
        self._closed = False
        #: (global batch, AdaScale gain) every JOIN carries from now on (0: unchanged)
        self.batch: tuple[int, float] = (0, 0.0)

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``HOST:PORT`` of the run's store, as workers (on any host) reach it."""
        host = self.settings.advertise_host or self.settings.bind_host
        if host in ("0.0.0.0", "::"):
            host = socket.getfqdn()
        return f"{host}:{self._store.port}"

    @property
    def checkpoint_path(self) -> str | None:
        """Where this run's workers write the checkpoint (None: no checkpoints)."""
        return self._checkpoint_path

    def open(self) -> None:
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
            # not at the top: the checkpoint module imports torch, which the
            # controller's bookkeeping (and the tests of it) do without
            from .checkpoint import CHECKPOINT_NAME

            self._checkpoint_path = str(Path(self.settings.worker.checkpoint_dir) / CHECKPOINT_NAME)

    def start_standbys(self) -> None:
        """Fill every slot with a warm standby and wait until they are ready."""
        self.fill_standbys()
        # the warm pool is part of setting up, not of the replay: wait for it
        self.wait_until(
            lambda: not self.workers.in_status(WorkerStatus.STARTING),
            self.settings.ready_timeout_s,
        )
        if not self.workers.in_status(WorkerStatus.STANDBY):
            raise ExecutorError(self._why_none_ready())

    def _why_none_ready(self) -> str:
        """One line on why no worker became ready: the first one's exit and last log line.

        Why read the log here: a worker that cannot start (a missing module, a job
        that raises) exits at once, and the user's first question is why; a line
        that only says "see the logs" does not say which log, or whether there is one.
        """
        timeout = f"within {self.settings.ready_timeout_s:.0f} s"
        dead = self.workers.in_status(WorkerStatus.DEAD)
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
                self.publish(Command(CommandOp.STOP, tag="close"))
                self.publish(Command(CommandOp.EXIT, wids=tuple(w.wid for w in alive)))
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

    # -- commands and processes --------------------------------------------------------------

    def clock_of(self, wall_s: float) -> float:
        """A worker's ``time.time()`` on the controller's clock."""
        return self._now() - (time.time() - wall_s)

    def publish(self, cmd: Command) -> None:
        """Post ``cmd`` to every worker (through the store), noting the exits it plans."""
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

    def spawn(self) -> Worker | None:
        """Start one worker on the launcher with the most free slots (None: all full).

        The worker gets the lowest free slot index of its launcher as
        ``--device-index``: with CUDA, one GPU per slot.  A launcher whose slots
        vanished between the count and the start (a host lost) counts as full: the
        next spawn decision reads the slots again.
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
        try:
            proc = best.spawn(launch, self._files)
        except NoFreeSlot as exc:
            # the worker never ran: its counters go (the wid stays unused, a gap)
            self._store.delete_key(event_count_key(wid))
            self._store.delete_key(steps_count_key(wid))
            log.info("no worker %d started: %s", wid, exc)
            return None
        worker = Worker(wid, best, proc, wall, slot=slot)
        self.workers.add(worker)
        return worker

    def fill_standbys(self) -> None:
        """Start workers until every slot is taken: they warm up as standbys."""
        while self.spawn() is not None:
            pass

    def await_exit(self, wids: Sequence[int], timeout_s: float) -> None:
        """Wait for ``wids`` to exit; SIGKILL them after ``timeout_s`` (and wait again)."""
        alive = self.workers.alive
        if not self.wait_until(lambda: all(not alive(w) for w in wids), timeout_s):
            for wid in wids:
                self.workers.kill(wid, signal.SIGKILL)
            self.wait_until(lambda: all(not alive(w) for w in wids), timeout_s)

    def finish(self) -> None:
        """Training is over: send the standbys home."""
        standbys = tuple(w.wid for w in self.workers.records() if w.status is not WorkerStatus.DEAD)
        if standbys and self._store is not None:
            self.publish(Command(CommandOp.EXIT, wids=standbys))

    def release_standbys(self, keep: int = 0) -> int:
        """Send home every standby (ready or starting) beyond ``keep``; return how many.

        Starting ones are killed (they have not built the job yet); ready ones are
        told to exit.
        """
        self.pump()
        idle = sorted(
            self.workers.in_status(WorkerStatus.STANDBY, WorkerStatus.STARTING),
            key=lambda w: (w.status is WorkerStatus.STANDBY, w.wid),
        )
        extra = idle[: max(len(idle) - keep, 0)]
        ready = tuple(w.wid for w in extra if w.status is WorkerStatus.STANDBY)
        if ready and self._store is not None:
            self.publish(Command(CommandOp.EXIT, wids=ready))
        for w in extra:
            if w.status is WorkerStatus.STARTING:
                self.workers.kill(w.wid)
        return len(extra)

    # -- what happened -----------------------------------------------------------------------

    def pump(self) -> None:
        """Reap exited processes, read new worker events and step records.

        A member that died on its own is a crash (:attr:`crashed`), logged once.  That
        is decided only after its last events are read: a worker's exit is often seen
        before the ``DONE`` it posted just before exiting.
        """
        exited = self.workers.reap()
        if self.reports.read(self._store, self.workers.records()):
            self._failed_starts = 0
        for worker, was in exited:
            if was is WorkerStatus.MEMBER and self._died_on_its_own(worker):
                log.warning("worker %s exited unexpectedly (code %s)", worker.wid, worker.exit_code)
                self.crashed.append(worker.wid)
            planned = worker.killed_wall_s is not None or worker.stop_wall_s is not None
            # a start killed by a signal (its host or Ray node lost) did not fail on its own
            killed = worker.exit_code is not None and worker.exit_code < 0
            if was is WorkerStatus.STARTING and not (planned or killed):
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
        if worker.killed_wall_s is not None or self.reports.done:
            return False
        return not (worker.stop_wall_s is not None and worker.exit_code == 0)

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Pump until ``predicate`` holds (True) or ``timeout_s`` is over (False)."""
        return wait_until(self.pump, predicate, timeout_s, self.settings.poll_interval_s)

    # -- standbys and generations ------------------------------------------------------------

    @property
    def members(self) -> tuple[int, ...]:
        """Worker ids of the current generation, in rank order."""
        return tuple(self._members)

    def clear_members(self) -> None:
        """The current generation is over (stopped, or lost): nobody is a member."""
        self._members = []

    def ready_standbys(self, count: int, timeout_s: float) -> list[int]:
        """Up to ``count`` warm standbys (oldest first), starting more as slots free up."""

        def ready() -> list[int]:
            return sorted(w.wid for w in self.workers.in_status(WorkerStatus.STANDBY))

        def enough() -> bool:
            have = ready()
            starting = len(self.workers.in_status(WorkerStatus.STARTING))
            while len(have) + starting < count and self.spawn() is not None:
                starting += 1
            leaving = bool(self.workers.in_status(WorkerStatus.LEAVING))
            # slots held by leaving workers free up soon: keep waiting for them
            hope = starting > 0 or (leaving and len(have) + starting < count)
            return len(have) >= count or not hope or self.reports.done

        self.wait_until(enough, timeout_s)
        return ready()[:count]

    def form(
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
        alive = self.workers.alive
        for _ in range(self.settings.max_attempts):
            if self.reports.done:  # training finished while we were getting ready
                return [w for w in self._members if alive(w)], None
            members = [w for w in members if alive(w)]
            if not members:
                self._members = []
                return [], None
            self._gen += 1
            gen = self._gen
            for wid in members:
                self.workers[wid].status = WorkerStatus.MEMBER
            self._members = list(members)
            self.publish(
                Command(
                    CommandOp.JOIN,
                    gen=gen,
                    members=tuple(members),
                    failure_wall_s=failure_wall_s,
                    restore=restore,
                    global_batch=self.batch[0],
                    gain=self.batch[1],
                )
            )
            result: dict[str, Any] = {}
            settled = functools.partial(self._settled, gen, members, result)
            ok = self.wait_until(settled, self.settings.change_timeout_s)
            if ok and "pause" in result:
                self.reports.forget_before(gen)
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
        alive = self.workers.alive
        dead = [w for w in members if not alive(w)]
        if dead and failure_wall_s is None:
            failure_wall_s = min(
                self.workers[w].killed_wall_s or self.workers[w].exit_wall_s or time.time()
                for w in dead
            )
        # a member that never reached the barrier is hung: as good as dead
        arrived = {w for w in members if self._store.check([gen_here_key(gen, w)])}
        stuck = [w for w in members if w not in arrived and alive(w)]
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

        pause = self.reports.take(of("pause"))
        if pause is not None:
            result["pause"] = pause
            return True
        if self.reports.take(of("done")):
            result["done"] = True
            return True
        failed = self.reports.take(of("join_failed"))
        if failed is not None:
            result["failed"] = failed.get("reason")
            return True
        return any(not self.workers.alive(w) for w in members)
