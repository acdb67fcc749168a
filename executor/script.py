"""A user's unmodified ``torchrun`` script as the worker group: ``elasim run --script``.

The job model (:class:`~elasim.jobmodel.JobLoop`, through the controller and
:class:`~.actuator.GroupActuator`) decides exactly as for elasim's own workers; only
what acts differs.  :class:`ScriptWorkerGroup` applies every decision with
TorchElastic's *restart* semantics, to processes elasim does not control:

* **start** a world of ``n`` processes of ``python train.py ARGS`` with the
  TorchElastic contract in the environment: ``RANK``, ``LOCAL_RANK``,
  ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``ROLE_RANK``,
  ``MASTER_ADDR``/``MASTER_PORT`` (a fresh port per world, on the run's bind
  address), ``TORCHELASTIC_RESTART_COUNT``, ``TORCHELASTIC_RUN_ID``.  One process is
  one of the job model's nodes, all on this host: ``torchrun --standalone
  --nproc_per_node n``.  ``TORCHELASTIC_USE_AGENT_STORE=False``: rank 0 hosts the
  store, as there is no agent;
* **stop** a world: SIGTERM to every process, then SIGKILL to what is left at the
  drop (a noticed preemption: the job model's graceful leave gives the script the
  lead it computes, :func:`elasim.jobmodel.leave_lead_s`) or after ``stop_grace_s``
  (a decision).  A preemption without (enough) notice SIGKILLs its victims at the
  drop and SIGTERMs the rest, as torchrun's agent does when a worker dies;
* the script **checkpoints and resumes by itself**.  elasim's own checkpoint
  schedule is off (``--checkpoint-interval-s`` does not apply), and the graceful
  lead assumes the prior checkpoint write (``checkpoint_write_prior_real_s``),
  because elasim cannot see the script's writes.

What is measured, from the outside (real seconds):

* a **pause** runs from the stop signal to the new world's first completed step:
  the old world's teardown (SIGTERM to exit) is ``rendezvous_s``, and process start
  to the first step, less one typical step, is ``acquire_s`` (interpreter, torch
  import, ``init_process_group``, the script's own checkpoint load: one number, the
  parts cannot be told apart from outside).  ``interval_s`` is the raw last step
  before to first step after;
* **steps** are what the script reports with :func:`~.report.step_done` (rank 0, one
  JSON line each, through the file named in ``ELASIM_STEP_FILE``).  That one optional
  line is the only way elasim sees progress: a script that never calls it still runs,
  but its pauses, steps and progress are not measured;
* **lost work**: when ``step_done`` is given the step number, the first step after a
  restart shows where the script resumed, and the steps reported after that point
  were thrown away (charged their measured time).  Without step numbers it cannot be
  told and is reported as zero.  A restart back at step 0 is warned of (once);
* **cold starts** (``workers.parquet``): a process's ``ready_s`` is its world's
  first reported step (a script sends no ``READY``; NaN when none was reported);
* **the batch**: a world starts with the batch of :meth:`ScriptWorkerGroup.set_batch`
  in its environment, which the script reads with :func:`~.report.batch_plan`;
* **done**: every process of the world exited 0 on its own.  A process that exits
  non-zero on its own is a failure (torchrun's default ``--max-restarts 0``): the run
  ends with :class:`ScriptFailed`.

It is composed of the parts of :class:`~.group.ProcessWorkerGroup` that do not
depend on how workers report: a :class:`~.workertable.WorkerTable` (processes,
reaping, signals), a :class:`~.records.StepLog` filled from the step file, and a
:class:`~.pauses.PauseAccounting` over it (typical step per world size, what a
rollback throws away); not the pool (:mod:`.pool`, :mod:`.reports`): a script does
not speak the wire protocol.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasim.policies import EventKind, PauseComponents

from .launchers import LocalLauncher, last_log_line
from .pauses import PauseAccounting
from .records import (
    ExecutorError,
    GroupEvent,
    GroupProgress,
    StepLog,
    StepRecord,
    WorkerStart,
    split_preempt,
)
from .report import BATCH_ENV, GAIN_ENV, STEP_FILE_ENV
from .settings import GroupSettings
from .workertable import NodeKind, Worker, WorkerStatus, WorkerTable, newest, wait_until
from .workertable import free_port as _free_port

__all__ = ["ScriptFailed", "ScriptSpec", "ScriptWorkerGroup"]

log = logging.getLogger(__name__)


class ScriptFailed(ExecutorError):
    """A process of the user's script exited non-zero on its own."""


@dataclass(frozen=True)
class ScriptSpec:
    """The user's script and how to start it.

    Attributes:
        path: the script (``python PATH ARGS``, as ``torchrun PATH ARGS`` runs it).
        args: its arguments.
        python: the interpreter (this one by default).
        first_step_timeout_s: longest wait for a world's first reported step (real
            s); a script that never reports one is not waited for again.
        log_dir: each process's stdout and stderr go to ``script-{wid}.log`` here
            (None: a temporary folder, removed at the end).
    """

    path: str
    args: tuple[str, ...] = ()
    python: str = sys.executable
    first_step_timeout_s: float = 120.0
    log_dir: str | None = None

    def check(self) -> None:
        """Raise ValueError (one line) when the script cannot be run."""
        path = Path(self.path)
        for ok, what in ((path.exists(), "no such file"), (path.is_file(), "not a file")):
            if not ok:
                raise ValueError(f"--script: {what}: {self.path}")
        if not os.access(path, os.R_OK):
            raise ValueError(f"--script: cannot read {self.path}")

    @property
    def name(self) -> str:
        """How the job is named in the run's summary."""
        return f"script:{Path(self.path).name}"


class ScriptWorkerGroup:
    """A user's torchrun script under restart semantics (see the module docstring).

    Args:
        spec: the script.
        settings: the group's settings (``stop_grace_s``, ``bind_host``,
            ``poll_interval_s``; the mode is always ``restart``).
        launcher: starts the processes; its ``slots`` are the most nodes.
        now: the group's clock (monotonic by default).

    Attributes:
        workers: the record of every process started.
        steps: the steps rank 0 reported.
        pauses: the pause accounting, over ``steps``.
    """

    def __init__(
        self,
        spec: ScriptSpec,
        settings: GroupSettings,
        launcher: LocalLauncher,
        *,
        now: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings
        self.spec = spec
        self.launcher = launcher
        self.launchers = [launcher]
        self.job_name = spec.name
        #: a script states no accuracy target
        self.target_accuracy: float | None = None
        self._now = now or time.monotonic
        self.workers = WorkerTable()
        self.steps = StepLog()
        self.pauses = PauseAccounting(self.steps, self._clock_of)
        self._members: list[int] = []
        self._crashed: list[int] = []  # members that exited non-zero on their own
        self._done = False
        self._gen = 0
        self._global_batch: int | None = None
        self._batch_env: dict[str, str] = {}  # the batch plan of the next world
        self._started_once = False
        self._closed = False
        self.run_id = uuid.uuid4().hex[:12]
        self._tmp = Path(tempfile.mkdtemp(prefix="elasim-script-"))
        self._logs = Path(spec.log_dir) if spec.log_dir else self._tmp / "logs"
        self._reports = True  # until a world is seen training without reporting
        self._step_file: Path | None = None
        self._offset = 0
        self._tail = b""
        self._first: tuple[float, int] | None = None  # this world's first step: wall, number
        self._tip = 0
        self._totals: dict[int, int] = {}
        self._said_from_zero = False

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Nothing runs until the first decision: a world starts when nodes are held."""

    def close(self) -> None:
        """SIGTERM what is still running, SIGKILL it after ``stop_grace_s``, clean up."""
        if self._closed:
            return
        self._closed = True
        alive = [w for w in self.workers if self.workers.alive(w)]
        self._stop(alive, deadline_s=self._now() + self.settings.stop_grace_s)
        self.launcher.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    # -- processes -----------------------------------------------------------------------

    def _start_world(self, kinds: list[NodeKind]) -> float:
        """Start one process per node; returns the spawn time (``time.time()``)."""
        self._gen += 1
        host = self.settings.bind_host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        port = _free_port(host)
        self._step_file = self._tmp / f"steps-{self._gen}.jsonl"
        self._step_file.touch()
        self._offset, self._tail, self._first = 0, b"", None
        # the processes inherit the controller's environment, as torchrun's workers do
        # (plus gloo's interface, when the launcher set one); elasim reads none of it
        base = dict(self.launcher.env if self.launcher.env is not None else os.environ)
        world = len(kinds)
        spawn_wall = time.time()
        members: list[int] = []
        for rank, kind in enumerate(kinds):
            env = dict(base)
            env.update(self._contract(rank, world, host, port))
            env.pop(STEP_FILE_ENV, None)
            env.update(self._batch_env)
            if rank == 0:
                env[STEP_FILE_ENV] = str(self._step_file)
            wid = self.workers.new_wid()
            argv = [self.spec.python, self.spec.path, *self.spec.args]
            path = self._logs / f"script-{wid}.log"
            proc = self.launcher.start(argv, env=env, log_path=path, with_stdout=True)
            worker = Worker(wid, self.launcher, proc, time.time(), slot=rank, kind=kind)
            worker.status = WorkerStatus.MEMBER
            self.workers.add(worker)
            members.append(wid)
        self._members = members
        return spawn_wall

    def _contract(self, rank: int, world: int, host: str, port: int) -> dict[str, str]:
        """The TorchElastic environment of one process (``torchrun --standalone``)."""
        text = {
            "RANK": rank,
            "LOCAL_RANK": rank,
            "WORLD_SIZE": world,
            "LOCAL_WORLD_SIZE": world,
            "GROUP_RANK": 0,
            "GROUP_WORLD_SIZE": 1,
            "ROLE_RANK": rank,
            "ROLE_WORLD_SIZE": world,
            "ROLE_NAME": "default",
            "MASTER_ADDR": host,
            "MASTER_PORT": port,
            "TORCHELASTIC_RESTART_COUNT": self._gen - 1,
            "TORCHELASTIC_MAX_RESTARTS": 0,
            "TORCHELASTIC_RUN_ID": self.run_id,
            "TORCHELASTIC_USE_AGENT_STORE": "False",
        }
        env = {key: str(value) for key, value in text.items()}
        if world > 1:
            env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default for several processes
        return env

    def _stop(self, wids: list[int], *, deadline_s: float) -> None:
        """SIGTERM ``wids``; SIGKILL what is left at ``deadline_s`` (the group's clock)."""
        now = time.time()
        for wid in wids:
            worker = self.workers[wid]
            worker.stop_wall_s = worker.stop_wall_s or now  # their exit is planned
            self.workers.kill(wid, signal.SIGTERM)
        left = max(deadline_s - self._now(), 0.0)
        if not self._wait_until(lambda: not any(self.workers.alive(w) for w in wids), left):
            for wid in wids:
                if self.workers.alive(wid):
                    self.workers[wid].proc.send_signal(signal.SIGKILL)
            self._wait_until(lambda: not any(self.workers.alive(w) for w in wids), 10.0)

    def _wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        return wait_until(self._pump, predicate, timeout_s, self.settings.poll_interval_s)

    def _clock_of(self, wall_s: float) -> float:  # a process's time.time() on our clock
        return self._now() - (time.time() - wall_s)

    # -- what the script reports ---------------------------------------------------------

    def _pump(self) -> None:
        """Reap exited processes and read rank 0's new step reports."""
        exited = self.workers.reap()
        self._read_steps()
        if not exited or not self._members:
            return
        for worker, _ in exited:
            planned = worker.stop_wall_s is not None or worker.killed_wall_s is not None
            if worker.wid in self._members and not planned and worker.exit_code != 0:
                self._crashed.append(worker.wid)
        workers = [self.workers[w] for w in self._members]
        if all(w.status is WorkerStatus.DEAD for w in workers) and all(
            w.exit_code == 0 and w.stop_wall_s is None and w.killed_wall_s is None for w in workers
        ):
            self._done = True

    def _read_steps(self) -> None:
        if self._step_file is None:
            return
        with contextlib.suppress(FileNotFoundError), open(self._step_file, "rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read()
        if not chunk:
            return
        self._offset += len(chunk)
        data = self._tail + chunk
        lines = data.split(b"\n")
        self._tail = lines.pop()  # a line still being written
        for line in lines:
            if line.strip():
                self._on_report(json.loads(line))

    def _on_report(self, report: dict[str, Any]) -> None:
        wall = float(report["wall_s"])
        step = report.get("step")
        step = self._tip + 1 if step is None else int(step)
        self._tip = step
        samples = report.get("samples")
        if samples is not None and self._global_batch is None:
            self._global_batch = int(samples)
        batch = int(samples) if samples is not None else (self._global_batch or 0)
        total = self._totals.get(step - 1, (step - 1) * batch) + batch
        self._totals[step] = total
        if self._first is None:
            self._first = (wall, step)
            for wid in self._members:  # a script is "ready" when its world has trained
                self.workers[wid].ready_wall_s = wall
        loss = report.get("loss")
        record = StepRecord(
            self._clock_of(wall),
            step,
            len(self._members),
            math.nan if loss is None else float(loss),
            batch,
            self._gen,
            0,
            total,
        )
        self.steps.add(record, wall)

    def _raise_if_crashed(self) -> None:
        crashed = [w for w in self._crashed if w in self._members]
        self._crashed.clear()
        if not crashed:
            return
        worker = self.workers[crashed[0]]
        path = self._logs / f"script-{worker.wid}.log"
        last = last_log_line(path)
        why = f": {last}" if last else ""
        where = f" (log: {path})" if self.spec.log_dir else ""
        raise ScriptFailed(
            f"the script failed: rank {worker.slot} exited with code {worker.exit_code}{why}{where}"
        )

    # -- what the controller calls ---------------------------------------------------------

    def apply(
        self, spot: int, on_demand: int, *, wait_ready_s: float | None = None
    ) -> list[GroupEvent]:
        """Restart the script on ``spot`` + ``on_demand`` nodes (``wait_ready_s`` unused).

        Blocks, as ``restart`` mode does, until the new world reports its first step.
        """
        self._pump()
        self._raise_if_crashed()
        if self._done or self.held() == (spot, on_demand):
            return []
        cur_spot, cur_od = self.held()
        up = spot > cur_spot or on_demand > cur_od
        kinds = [NodeKind.SPOT] * spot + [NodeKind.ON_DEMAND] * on_demand
        kind = EventKind.SCALE_UP if up else EventKind.SCALE_DOWN
        deadline = self._now() + self.settings.stop_grace_s
        return self._restart(kind, kinds, planned=True, kill_at_s=deadline)

    def preempt(
        self, count: int, *, graceful: bool, kill_at_real_s: float | None = None
    ) -> list[GroupEvent]:
        """Take ``count`` spot nodes (the highest ranks): SIGTERM, then SIGKILL at the drop.

        Restart semantics: the whole world stops and the survivors start again.  A
        graceful leave SIGTERMs everyone and SIGKILLs what is left at
        ``kill_at_real_s`` (the drop); without notice the victims are SIGKILLed now
        and the survivors SIGTERMed (then SIGKILLed after ``stop_grace_s``).
        """
        self._pump()
        victims = newest((w for w in self._members if self.workers[w].kind is NodeKind.SPOT), count)
        if not victims or self._done:
            return []
        survivors = [w for w in self._members if w not in victims]
        kinds = [k for k in (self.workers[w].kind for w in survivors) if k is not None]
        now, before = self._now(), len(self._members)
        if graceful:
            kill_at = now + self.settings.stop_grace_s if kill_at_real_s is None else kill_at_real_s
            events = self._restart(EventKind.PREEMPT, kinds, planned=True, kill_at_s=kill_at)
            if not survivors and events:  # the PREEMPT itself, then the PAUSE
                head = GroupEvent(EventKind.PREEMPT, events[-1].real_s, before, 0)
                events = [*events[:-1], head, events[-1]]
            return split_preempt(events)
        for wid in victims:
            self.workers.kill(wid, signal.SIGKILL)
        kill_at = now + self.settings.stop_grace_s
        events = self._restart(EventKind.PREEMPT, kinds, planned=False, kill_at_s=kill_at)
        return split_preempt(events)

    def checkpoint(self, tag: str = "interval") -> list[GroupEvent]:
        """Nothing: the script checkpoints itself (elasim cannot see its writes)."""
        return []

    def poll(self) -> list[GroupEvent]:
        """Raise :class:`ScriptFailed` when a process exited non-zero on its own."""
        self._pump()
        self._raise_if_crashed()
        return []

    def wait(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s`` real seconds, returning early when the world ends."""
        if timeout_s > 0:
            self._wait_until(lambda: self._done or bool(self._crashed), timeout_s)

    def finish(self) -> None:
        """Training is over; whatever still runs is stopped by :meth:`close`."""

    # -- queries -----------------------------------------------------------------------------

    @property
    def slots(self) -> int:
        """The most processes (nodes) a world may have."""
        return self.launcher.slots

    def held(self) -> tuple[int, int]:
        """``(spot, on_demand)`` processes of the current world."""
        return self.workers.kind_counts(self._members)

    @property
    def members(self) -> tuple[int, ...]:
        """Worker ids of the current world, in rank order."""
        return tuple(self._members)

    def progress(self) -> GroupProgress:
        """The latest reported training progress."""
        self._pump()
        return self.steps.progress(self._done, {})

    def step_records(self) -> tuple[StepRecord, ...]:
        """Every step rank 0 reported, in order of completion."""
        self._pump()
        return self.steps.in_order()

    def worker_starts(self) -> tuple[WorkerStart, ...]:
        """Every process started so far, ready at its world's first step."""
        self._pump()
        return self.workers.starts(self._clock_of)

    def step_time_by_world(self, recent: int = 64) -> dict[int, float]:
        """Median step time (real s) per world size, from consecutive steps of one world."""
        return self.pauses.step_time_by_world(recent)

    def typical_step_s(self, world: int | None = None) -> float | None:
        """Median step time at ``world`` (or at the current size)."""
        return self.pauses.typical_step_s(len(self._members) if world is None else world)

    def set_batch(self, global_batch: int, gain: float) -> None:
        """The next world's batch and gain: the script reads them with ``batch_plan()``."""
        self._batch_env = {BATCH_ENV: str(int(global_batch)), GAIN_ENV: repr(float(gain))}

    @property
    def global_batch(self) -> int | None:
        """Samples per step, once the script has reported it."""
        return self._global_batch

    @property
    def done(self) -> bool:
        """Whether every process of the world exited 0 on its own."""
        return self._done

    # -- one restart ----------------------------------------------------------------------

    def _restart(
        self, kind: EventKind, kinds: list[NodeKind], *, planned: bool, kill_at_s: float
    ) -> list[GroupEvent]:
        """Stop the world, start ``len(kinds)`` fresh processes, wait for the first step."""
        begin = self._now()
        old = [w for w in self._members if self.workers.alive(w)]
        before = len(self._members)
        typical = self.pauses.typical_step_s(before) if before else None
        last_wall = self.steps.last_wall_s()
        lineage = self.pauses.lineage()
        t_stop = time.time()
        self._stop(old, deadline_s=kill_at_s)
        teardown = time.time() - t_stop if old else 0.0
        self._pump()
        self._crashed.clear()  # the old world was stopped: its exits were planned
        self._members = []
        events: list[GroupEvent] = []
        if not kinds:
            if not planned and before:
                events.append(GroupEvent(EventKind.PREEMPT, begin, before, 0))
            if before:
                events.append(GroupEvent(EventKind.PAUSE, begin, before, 0, detail=_DETAIL))
            return events
        if not old and self._started_once:
            kind = EventKind.RESUME
        spawn_wall = self._start_world(kinds)
        self._await_first_step()
        self._raise_if_crashed()
        if self._first is None and self._done:  # it had finished already: nothing to redo
            return events
        self._started_once = True
        events.append(
            self._restart_event(
                kind,
                before,
                begin=begin,
                spawn_wall=spawn_wall,
                teardown_s=teardown,
                typical_s=typical,
                last_wall=last_wall if old else None,
                lineage=lineage,
                planned=planned,
            )
        )
        return events

    def _await_first_step(self) -> None:
        """Wait for the new world's first reported step (once a script is known to report)."""
        if not self._reports:
            return

        def settled() -> bool:
            gone = all(not self.workers.alive(w) for w in self._members)
            return self._first is not None or self._done or bool(self._crashed) or gone

        if not self._wait_until(settled, self.spec.first_step_timeout_s):
            self._reports = False
            log.warning(
                "the script reported no step within %.0f s: pauses and progress are not "
                "measured (call elasim.executor.step_done() after each step)",
                self.spec.first_step_timeout_s,
            )

    def _restart_event(
        self,
        kind: EventKind,
        before: int,
        *,
        begin: float,
        spawn_wall: float,
        teardown_s: float,
        typical_s: float | None,
        last_wall: float | None,
        lineage: dict[int, float],
        planned: bool,
    ) -> GroupEvent:
        """The restart as an event: the measured pause, and what the script redid."""
        after = len(self._members)
        detail: dict[str, Any] = {"mode": "script", "planned": planned, "gen": self._gen}
        if self._first is None:  # not measured: the script does not report steps
            detail["measured"] = False
            return GroupEvent(kind, begin, before, after, detail=tuple(detail.items()))
        first_wall, first_step = self._first
        cold_s = first_wall - spawn_wall - (typical_s or 0.0)
        pause = PauseComponents(acquire_s=max(cold_s, 0.0), rendezvous_s=teardown_s)
        resumed = first_step - 1
        lost = [d for step, d in lineage.items() if step > resumed]
        detail["resumed_step"] = resumed
        if resumed == 0 and lost and not self._said_from_zero:  # it loaded no checkpoint
            self._said_from_zero = True
            log.warning(_FROM_ZERO, max(lineage))
        batch = self._global_batch or 0
        return GroupEvent(
            kind,
            begin,
            before,
            after,
            pause,
            lost_steps=len(lost),
            lost_samples=float(len(lost) * batch),
            lost_real_s=sum(lost),
            interval_s=None if last_wall is None else first_wall - last_wall,
            detail=tuple(detail.items()),
        )


_DETAIL = (("mode", "script"),)
_FROM_ZERO = """the script restarted from step 0 after reaching step %d: it loaded no \
checkpoint, so every restart redoes its work; pass the script's checkpoint option after \
'--' (e.g. -- --checkpoint-dir DIR) and have it save on SIGTERM"""
