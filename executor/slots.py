"""One pool of worker slots shared by several jobs: :class:`SlotPool`.

``elasim cluster run`` runs several elastic jobs at once, each a
:class:`~.group.ProcessWorkerGroup` with its own store, its own generations and its
own measured pauses, exactly as ``elasim run`` runs one.  What they share is the
hardware: the slots of the launchers (this host's processes and the agents on other
hosts).  The cluster policy decides how many workers each job may have; the pool
makes that a hard limit.

Each job gets one :class:`SlotView` per real launcher.  A view *is* a
:class:`~.launchers.Launcher` to the job's group, so the group's own slot
bookkeeping (:meth:`~.pool.WorkerPool.spawn`) needs no change: its ``slots`` is
what the job may use on that launcher right now, namely the processes it already has
there plus the slots nobody uses, never more than its quota over all launchers.  A
process holds its slot until it has exited, so a slot given up by one job reaches
the next one only once the old worker is gone (the real cost of moving a GPU
between jobs, measured, not modelled).

Capacity changes (``elasim cluster run --capacity``) take whole launchers (nodes)
away and give them back: the pool follows the cluster loop's
usable nodes, so a node the trace dropped offers no slot to anyone until it rises
again (its workers were preempted by the loop, as the simulator preempts them).

Why views rather than a change to the group: one job's group keeps working exactly
as in a single-job run (the same code measures the same pauses), and the pool is the
only place that knows there are other jobs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .launchers import Launcher, NoFreeSlot, ProcessHandle, WorkerLaunch

__all__ = ["SlotPool", "SlotView"]


@dataclass
class _Held:
    """A process started through a view, and the physical slot it occupies."""

    proc: ProcessHandle
    slot: int


@dataclass
class _Slots:
    """What one real launcher's slots hold (mutable bookkeeping of the pool)."""

    launcher: Launcher
    held: dict[str, list[_Held]] = field(default_factory=dict)  # job -> its processes

    def reap(self) -> None:
        """Forget processes that have exited: their slots are free again."""
        for job, procs in self.held.items():
            self.held[job] = [h for h in procs if h.proc.poll() is None]

    def used(self) -> set[int]:
        return {h.slot for procs in self.held.values() for h in procs}


class SlotPool:
    """The slots of ``launchers``, divided among jobs by quota (see the module docstring).

    Args:
        launchers: the real launchers (local slots, agents); the pool closes them.
    """

    def __init__(self, launchers: Sequence[Launcher]) -> None:
        if not launchers:
            raise ValueError("a slot pool needs at least one launcher")
        self._slots = [_Slots(launcher) for launcher in launchers]
        self._quota: dict[str, int] = {}
        self._per_launcher: dict[str, dict[int, int] | None] = {}
        self._usable: Callable[[], int | None] = lambda: None

    @property
    def total(self) -> int:
        """Slots over every launcher."""
        return sum(s.launcher.slots for s in self._slots)

    def views(self, job: str) -> list[SlotView]:
        """The launchers ``job``'s group sees: one view per real launcher.

        Raises:
            ValueError: ``job`` already has views (one group per job).
        """
        if job in self._quota:
            raise ValueError(f"job {job!r} already has slots in this pool")
        self._quota[job] = 0
        for s in self._slots:
            s.held[job] = []
        return [SlotView(self, job, i) for i in range(len(self._slots))]

    @property
    def launchers(self) -> list[Launcher]:
        """The real launchers, in order (launcher ``i`` is node ``i`` of a cluster run)."""
        return [s.launcher for s in self._slots]

    def follow(self, usable: Callable[[], int | None]) -> None:
        """Offer slots only on launchers ``0 .. usable() - 1`` (None: on all of them).

        Read at every spawn decision: the cluster loop's ``available_nodes``, which a
        capacity trace's rows change on the run's clock, so a drop takes its nodes'
        slots away and a rise gives them back in the same turn that decided it.
        """
        self._usable = usable

    def usable(self) -> int:
        """Launchers (nodes) that offer slots now."""
        nodes = self._usable()
        return len(self._slots) if nodes is None else min(max(nodes, 0), len(self._slots))

    def first_lost(self) -> int | None:
        """The first launcher that offers no slot any more (its host is gone); None: none.

        A Ray node that died reads so (a launcher pinned to a node counts it only while
        Ray reports it alive); a local launcher or an agent keeps its slots.
        """
        for index, s in enumerate(self._slots):
            if s.launcher.slots <= 0:
                return index
        return None

    def set_quota(self, job: str, workers: int, per_launcher: dict[int, int] | None = None) -> None:
        """Let ``job`` have at most ``workers`` processes alive over all launchers.

        ``per_launcher`` (launcher index -> processes) also caps each launcher: a
        cluster policy's placement, GPUs per node.
        """
        if workers < 0 or any(v < 0 for v in (per_launcher or {}).values()):
            raise ValueError(f"quota must be >= 0, got {workers} {per_launcher or ''}")
        self._quota[job] = int(workers)
        self._per_launcher[job] = None if per_launcher is None else dict(per_launcher)

    def quota(self, job: str) -> int:
        """The most processes ``job`` may have alive."""
        return self._quota[job]

    def alive(self, job: str) -> int:
        """Processes of ``job`` still alive (each holds a slot)."""
        for s in self._slots:
            s.reap()
        return sum(len(s.held[job]) for s in self._slots)

    def free(self) -> int:
        """Slots no process holds."""
        for s in self._slots:
            s.reap()
        return sum(s.launcher.slots - len(s.used()) for s in self._slots)

    def _view_slots(self, job: str, index: int) -> int:
        """What ``job`` may use on launcher ``index`` now (its own plus free, by quota)."""
        for s in self._slots:
            s.reap()
        mine = self._slots[index]
        own_here = len(mine.held[job])
        own_total = sum(len(s.held[job]) for s in self._slots)
        free_here = mine.launcher.slots - len(mine.used())
        room = min(free_here, self._quota[job] - own_total)
        if index >= self.usable():
            room = 0  # the node is gone for now (capacity dropped)
        caps = self._per_launcher.get(job)
        if caps is not None:
            room = min(room, caps.get(index, 0) - own_here)
        return own_here + max(room, 0)

    def _spawn(self, job: str, index: int, launch: WorkerLaunch, files: Any) -> ProcessHandle:
        """Start a worker of ``job`` in the lowest free physical slot of launcher ``index``.

        The group numbers its slots per job; the device index a worker gets (one GPU
        per slot with CUDA) is the pool's, so two jobs never share a device.

        Raises:
            NoFreeSlot: none is free for ``job`` now.  A Ray node's slots are read
                afresh at each call, so a node that died since the group read
                :attr:`SlotView.slots` lands here (seen in CI after a host loss).
        """
        s = self._slots[index]
        s.reap()
        used = s.used()
        free = [i for i in range(s.launcher.slots) if i not in used]
        if not free or self._view_slots(job, index) <= len(s.held[job]):
            raise NoFreeSlot(f"job {job!r} has no free slot on {s.launcher.name}")
        slot = free[0]
        proc = s.launcher.spawn(dataclasses.replace(launch, device_index=slot), files)
        s.held[job].append(_Held(proc, slot))
        return proc

    def kill_job(self, job: str) -> None:
        """SIGKILL every process of ``job`` still alive (its group is closing)."""
        for s in self._slots:
            for h in s.held.get(job, []):
                if h.proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        h.proc.send_signal(signal.SIGKILL)

    def close(self) -> None:
        """Close every real launcher (it kills what is still running)."""
        for s in self._slots:
            s.launcher.close()


class SlotView:
    """One job's view of one real launcher (a :class:`~.launchers.Launcher`).

    Attributes:
        name: the real launcher's name, with the job's.
    """

    def __init__(self, pool: SlotPool, job: str, index: int) -> None:
        self._pool = pool
        self._job = job
        self._index = index
        real = pool._slots[index].launcher  # noqa: SLF001 - the pool's own view
        self.name = f"{real.name}[{job}]"

    @property
    def slots(self) -> int:
        """What the job may use here now: read at every spawn decision of its group."""
        return self._pool._view_slots(self._job, self._index)  # noqa: SLF001

    def spawn(self, launch: WorkerLaunch, files: Any) -> ProcessHandle:
        """Start one of the job's workers in a free slot of the real launcher."""
        return self._pool._spawn(self._job, self._index, launch, files)  # noqa: SLF001

    def close(self) -> None:
        """Kill the job's processes; the real launcher stays open for the other jobs."""
        self._pool.kill_job(self._job)
