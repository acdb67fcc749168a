"""The worker table: one record per worker process, and the signals a process gets.

A record (:class:`Worker`) is what the controller knows about one process: where it
runs, its :class:`WorkerStatus`, what kind of node it stands for, and when it was
started, became ready, was told to stop, was signalled and exited.
:class:`WorkerTable` holds the records of a run, hands out worker ids, signals and
reaps processes, and answers the questions every group asks of it (who is alive,
which slots of a launcher are taken, when did each process start).

Why a module of its own: both worker groups keep such a table, and keep it the same
way.  :class:`~.group.ProcessWorkerGroup`'s pool (:mod:`.pool`) fills it with
elasim's own workers, which talk through the store; :class:`~.script.ScriptWorkerGroup`
fills it with the processes of a user's script, which do not.  What a process *is*
does not depend on how it reports, so the table knows nothing of the store or of
the wire protocol.
"""

from __future__ import annotations

import contextlib
import enum
import signal
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from .launchers import Launcher, ProcessHandle
from .records import WorkerStart

__all__ = [
    "NodeKind",
    "Worker",
    "WorkerStatus",
    "WorkerTable",
    "free_port",
    "newest",
    "wait_until",
]


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


@dataclass
class Worker:
    """Mutable record of one worker process.

    Attributes (the times are ``time.time()``):
        exit_wall_s: when the group saw the process gone.
        exit_code: its exit code, once gone.
        killed_wall_s: when the group signalled it (SIGKILL or SIGTERM).
        stop_wall_s: when the group told it to exit (``STOP`` without ``keep``, or
            ``EXIT``): a clean exit after that is planned, not a crash.
        fault_wall_s: when it reported an injected fault.
    """

    wid: int
    launcher: Launcher
    proc: ProcessHandle
    spawn_wall_s: float
    slot: int = 0
    status: WorkerStatus = WorkerStatus.STARTING
    kind: NodeKind | None = None
    ready_wall_s: float | None = None
    exit_wall_s: float | None = None
    exit_code: int | None = None
    killed_wall_s: float | None = None
    stop_wall_s: float | None = None
    fault_wall_s: float | None = None
    events_read: int = 0
    steps_read: int = 0
    drained: bool = False


class WorkerTable:
    """Every worker process of a run, by worker id (see the module docstring).

    Iterating the table gives the worker ids in spawn order.
    """

    def __init__(self) -> None:
        self._workers: dict[int, Worker] = {}
        self._next_wid = 0

    def new_wid(self) -> int:
        """A worker id nobody had: a new process needs one before it is started."""
        wid = self._next_wid
        self._next_wid += 1
        return wid

    def add(self, worker: Worker) -> None:
        """Track ``worker`` (a process just started)."""
        self._workers[worker.wid] = worker

    def __getitem__(self, wid: int) -> Worker:
        return self._workers[wid]

    def __iter__(self) -> Iterator[int]:
        return iter(self._workers)

    def records(self) -> list[Worker]:
        """Every record, in spawn order."""
        return list(self._workers.values())

    def in_status(self, *statuses: WorkerStatus) -> list[Worker]:
        """The records whose status is one of ``statuses``, in spawn order."""
        return [w for w in self._workers.values() if w.status in statuses]

    def alive(self, wid: int) -> bool:
        """Whether worker ``wid`` has not been seen gone yet."""
        return self._workers[wid].status is not WorkerStatus.DEAD

    def on(self, launcher: Launcher) -> list[Worker]:
        """The live workers of ``launcher``: each holds one of its slots."""
        return [
            w
            for w in self._workers.values()
            if w.launcher is launcher and w.status is not WorkerStatus.DEAD
        ]

    def kind_counts(self, wids: Sequence[int]) -> tuple[int, int]:
        """``(spot, on_demand)`` among ``wids`` (a worker of no kind counts as on-demand)."""
        spot = sum(1 for w in wids if self._workers[w].kind is NodeKind.SPOT)
        return spot, len(wids) - spot

    def kill(self, wid: int, sig: int = signal.SIGKILL) -> None:
        """Signal worker ``wid`` (unless gone), noting when: its exit is then planned."""
        worker = self._workers[wid]
        if worker.status is WorkerStatus.DEAD:
            return
        worker.killed_wall_s = worker.killed_wall_s or time.time()
        with contextlib.suppress(ProcessLookupError):
            worker.proc.send_signal(sig)

    def reap(self) -> list[tuple[Worker, WorkerStatus]]:
        """Mark exited processes DEAD; returns them with the status they had."""
        exited: list[tuple[Worker, WorkerStatus]] = []
        for worker in self._workers.values():
            if worker.status is WorkerStatus.DEAD:
                continue
            code = worker.proc.poll()
            if code is None:
                continue
            exited.append((worker, worker.status))
            worker.exit_wall_s = time.time()
            worker.exit_code = code
            worker.status = WorkerStatus.DEAD
        return exited

    def starts(self, clock_of: Callable[[float], float]) -> tuple[WorkerStart, ...]:
        """Every process started so far, in spawn order, on the controller's clock.

        ``clock_of`` turns a ``time.time()`` into the controller's clock.
        """
        return tuple(
            WorkerStart(
                w.wid,
                clock_of(w.spawn_wall_s),
                None if w.ready_wall_s is None else clock_of(w.ready_wall_s),
            )
            for w in sorted(self._workers.values(), key=lambda w: w.wid)
        )


def newest(ids: Iterable[int], count: int) -> list[int]:
    """The ``count`` newest of ``ids`` (highest ids, so highest ranks), in id order.

    The group's victim choice, for a scale-down and a preemption alike: the newest
    workers go first, deterministically, so that the oldest (rank 0, which writes the
    checkpoints) stays.
    """
    ordered = sorted(ids)
    return ordered[len(ordered) - min(max(count, 0), len(ordered)) :]


def wait_until(
    pump: Callable[[], None],
    predicate: Callable[[], bool],
    timeout_s: float,
    interval_s: float,
) -> bool:
    """Pump, then test ``predicate``, every ``interval_s`` until it holds or time is up.

    Returns whether it held.  Why the pump is passed in: what there is to read between
    two tests differs between groups (the store for elasim's workers, a step file for
    a script), while the waiting does not.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        pump()
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def free_port(host: str) -> int:
    """A free TCP port on ``host`` (a script's new world's ``MASTER_PORT``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
