"""Worker slots as Ray actors: ``elasim run --launcher ray [--address HOST:PORT]``.

Users who outgrow one machine already operate a Ray cluster; this launcher places
the run's workers through it instead of through a protocol of our own (the agents,
:mod:`.agent`).  Each worker slot is one Ray *actor* (holding ``CPU=1`` of Ray's
resources, or what ``--ray-resources`` says; placement strategy ``SPREAD``), on as
many nodes as the cluster has.  The actor is only a process holder: it starts the
worker as its child, with the command line every launcher builds
(:func:`~.launchers.worker_argv`: the run's settings and secret as private files on
that node), and the worker then reaches the run's store
and forms its ``torch.distributed`` group (gloo, or NCCL on GPUs) directly with its
peers.  So the process group, the in-place re-formation and the pause accounting
are the ones of a local run; only placement and failure reporting are Ray's:

* Ray reports a node or actor failure as a ``RayActorError`` on the actor's
  ``run`` call; the handle then reads as exited with ``-SIGKILL``, as a local worker
  killed by a preemption does.
* Preemption emulation (SIGKILL) is ``ray.kill(actor)``: Ray force-kills the actor's
  process, and the worker, its child, dies with it (``PR_SET_PDEATHSIG``).  Other
  signals (SIGTERM for a graceful stop, SIGSTOP/SIGCONT) go to the worker through
  the actor.
* :attr:`RayLauncher.slots` is what the cluster can hold now (its alive nodes'
  resources over each worker's), capped by ``--max-nodes``: a lost node
  lowers it, a node that joins raises it.

``elasim cluster run --launcher ray`` composes the same launcher per node: one
:class:`RayLauncher` pinned to each Ray node (``node_id``: its actors are placed on
that node only, and its slots are that node's), so a Ray node is a node of the
cluster model (:func:`node_launchers`), and a lost node reads as a launcher with no
slots.

Why an actor that holds a child process rather than the worker running inside the
actor: the worker needs its own main thread (signal handlers, a clean exit code) and
must die by SIGKILL exactly as a local one does, which a Ray worker process that
also runs Ray's own threads does not give.

``ray`` is imported only when this launcher is used (the ``ray`` extra).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elasim.ray_connect import check_address, connected, ray_module

from .launchers import WorkerLaunch

__all__ = [
    "RAY_MISSING",
    "RayLauncher",
    "RayProcess",
    "RaySession",
    "check_address",
    "node_launchers",
]

log = logging.getLogger(__name__)

RAY_MISSING = "--launcher ray needs the 'ray' extra: pip install '.[ray]' in the elasim checkout"
#: how long the slot count read from the cluster stays fresh (``ray.nodes()`` is a
#: round trip to Ray's control store; the pool asks for it at every spawn)
_CAPACITY_TTL_S = 1.0


def _ray() -> Any:
    return ray_module(RAY_MISSING)


class RaySession:
    """The Ray connection of this process for one run (what the run closes at the end).

    The connection follows :func:`elasim.ray_connect.connected`'s rules (shared with
    ``elasim sweep --backend ray``): ``address=None`` starts a private local instance
    with ``num_cpus`` CPUs and the custom ``resources``, so ``--launcher ray`` works
    on one machine too; an address joins a cluster, which is left running; a
    process already connected keeps its connection.

    Attributes:
        connected_here: whether this session connected (then :meth:`close`
            disconnects, and stops the instance it started without an address).

    Raises:
        ValueError: ray is not installed, the address is malformed, or no Ray cluster
            answers there (one line).
    """

    def __init__(
        self,
        address: str | None,
        *,
        num_cpus: int | None = None,
        resources: Mapping[str, float] | None = None,
    ) -> None:
        self._stack = contextlib.ExitStack()
        connection = self._stack.enter_context(
            connected(
                address,
                missing=RAY_MISSING,
                flag="--launcher ray",
                num_cpus=num_cpus,
                resources=resources,
            )
        )
        self.connected_here = connection.connected_here

    @classmethod
    def for_workers(
        cls, address: str | None, resources: Mapping[str, float], workers: int
    ) -> RaySession:
        """A session whose private instance (no address) offers exactly ``workers`` workers.

        ``resources`` is what each worker's actor holds (``--ray-resources``); a joined
        cluster offers what its nodes have.  ``elasim run`` asks for ``--max-nodes``
        workers, ``elasim cluster run`` for one node's slots.
        """
        return cls(
            address,
            num_cpus=math.ceil(resources.get("CPU", 0.0) * workers),
            resources={k: v * workers for k, v in resources.items() if k not in ("CPU", "GPU")},
        )

    def close(self) -> None:
        """Disconnect, if this session connected."""
        self.connected_here = False
        self._stack.close()


def _as_worker(niceness: int) -> None:  # pragma: no cover - runs in the child
    """In a Ray slot's worker, before it runs: the controller's niceness, dying with the actor.

    Raising the priority back needs a privilege (``CAP_SYS_NICE``) or a nice limit
    that allows it; without one the worker keeps Ray's niceness, as before.
    """
    import os

    from elasim.executor.launchers import _die_with_parent

    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    _die_with_parent()


def _route_address(store: str) -> str:  # pragma: no cover - runs in the actor
    """The address of this node's interface that reaches the run's ``store`` (host:port).

    Why: gloo listens on the interface the node reaches the store by, as an agent's
    workers do; a UDP ``connect`` picks the route without sending a packet.  With no
    route, ``0.0.0.0``.
    """
    import socket

    from elasim.executor.authstore import parse_address

    store_host = parse_address(store)[0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((store_host, 9))  # no packet is sent: only picks the route
            return probe.getsockname()[0]
        except OSError:
            return "0.0.0.0"


def _spawn_worker(
    argv: list[str], log: str | None, local: str, niceness: int
) -> Any:  # pragma: no cover - runs in the actor
    """Start a Ray slot's worker process, its stderr appended to ``log`` (if given).

    Why apart from :meth:`_Slot.run`: how the child is started (no stdin or stdout,
    the worker environment for the ``local`` interface, the controller's niceness,
    death with the actor) is separate from the private files it is given.  The log
    file's handle is closed here once the child holds its copy; a log that cannot
    be opened is dropped rather than failing the worker.
    """
    import subprocess

    from elasim.executor.launchers import worker_env

    stderr: Any = subprocess.DEVNULL
    if log is not None:
        with contextlib.suppress(OSError):
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            stderr = open(log, "ab")  # noqa: SIM115
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=worker_env(local),
            preexec_fn=lambda: _as_worker(niceness),
        )
    finally:
        if stderr is not subprocess.DEVNULL:
            stderr.close()


class _Slot:
    """The Ray actor of one worker slot: starts the worker as its child and reports its end.

    Runs on whatever node Ray placed it.  Threaded (``max_concurrency``), so
    ``signal`` is served while ``run`` waits for the worker.
    """

    def __init__(self) -> None:
        self._proc: Any = None

    def run(
        self,
        launch: dict[str, Any],
        settings: bytes,
        secret: bytes,
        log: str | None,
        niceness: int = 0,
    ) -> int:
        """Start the worker of ``launch`` (:func:`~.launchers.worker_argv`); its exit code.

        The worker runs at ``niceness``, the controller's, where this node allows it:
        Ray starts its worker processes (this actor) at niceness 15, and a trainer
        that inherited that got a few percent of a core beside other work (on the
        2-core machine with two busy processes, no worker started within 120 s).

        The run's settings and secret arrive through Ray (whoever can submit work to
        the cluster can run code on it anyway) and are written to ``0600`` files in a
        ``0700`` folder on this node, removed when the worker exits; the worker reads
        them from its command line as a local one does.  gloo listens on the
        interface this node reaches the store by (as an agent's workers do).  The
        worker is started from this thread and dies with this process: the thread
        lives until the worker exits, so ``PR_SET_PDEATHSIG`` (tied to the creating
        thread) fires exactly when the actor is killed.
        """
        import shutil
        import sys

        from elasim.executor.auth import write_private
        from elasim.executor.launchers import WorkerLaunch, worker_argv
        from elasim.executor.runfiles import private_temp_dir

        spec = WorkerLaunch.from_message(launch)
        local = _route_address(spec.store)
        folder = private_temp_dir("elasim-ray-slot-")  # 0700; a killed actor's: removed later
        try:
            argv = worker_argv(
                sys.executable,
                spec,
                settings_path=write_private(folder / "worker.json", settings),
                secret_path=write_private(folder / "secret", secret),
            )
            self._proc = _spawn_worker(argv, log, local, niceness)
            return int(self._proc.wait())
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def where(self) -> tuple[str, int]:
        """``(node address, worker pid)`` (pid 0 before the worker started)."""
        import ray

        pid = 0 if self._proc is None else int(self._proc.pid)
        return ray.util.get_node_ip_address(), pid

    def signal(self, sig: int) -> None:
        """Deliver ``sig`` to the worker (no-op once it is gone)."""
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(sig)


class RayProcess:
    """A worker in a Ray actor (implements ``ProcessHandle``).

    ``pid`` is -1: the worker's pid lives on another node and means nothing here.
    """

    def __init__(self, launcher: RayLauncher, wid: int, actor: Any, done: Any) -> None:
        self.launcher = launcher
        self.wid = wid
        self.actor = actor
        self.pid = -1
        self._done = done
        self._code: int | None = None

    def poll(self) -> int | None:
        """The worker's exit code; ``-SIGKILL`` when Ray reports its actor or node dead.

        Once the worker has exited its actor is killed too: an idle actor still holds
        its Ray resources, and the slot would never reach another worker (in
        ``cluster run`` a finished job's slots go to the next job).
        """
        if self._code is not None:
            return self._code
        ray = self.launcher.ray
        ready, _ = ray.wait([self._done], timeout=0)
        if not ready:
            return None
        try:
            self._code = int(ray.get(ready[0]))
        except ray.exceptions.RayError as exc:  # the actor or its node died
            log.info("ray reports worker %s gone: %s", self.wid, type(exc).__name__)
            self._code = -int(signal.SIGKILL)
        with contextlib.suppress(ray.exceptions.RayError, ValueError):
            ray.kill(self.actor, no_restart=True)  # frees its resources for the next one
        return self._code

    def send_signal(self, sig: int) -> None:
        """SIGKILL: ``ray.kill`` the actor (a preemption); else forward to the worker."""
        ray = self.launcher.ray
        with contextlib.suppress(ray.exceptions.RayError, ValueError):
            if sig == signal.SIGKILL:
                ray.kill(self.actor, no_restart=True)
            else:
                self.actor.signal.remote(int(sig))


class RayLauncher:
    """Worker slots as Ray actors on the connected Ray cluster (implements ``Launcher``).

    Attributes:
        max_slots: most workers at once (``--max-nodes``).
        resources: the Ray resources each worker's actor holds (``--ray-resources``;
            default ``CPU=1``, plus ``GPU=1`` with NCCL: one GPU per worker).  A
            custom resource (``ray start --resources '{"trainer": 4}'``) pins workers
            to the nodes that offer it.
        log_dir: each worker's stderr goes to ``worker-{wid}.log`` here, on the node
            it runs on (None: discarded).
        node_id: pin every actor to this Ray node (hex id; a node of ``cluster run``);
            its slots are then that node's alone, 0 once it is gone (None: SPREAD
            over the whole cluster).
    """

    def __init__(
        self,
        max_slots: int,
        *,
        resources: Mapping[str, float] | None = None,
        log_dir: str | Path | None = None,
        node_id: str | None = None,
        name: str = "ray",
    ) -> None:
        if max_slots < 1:
            raise ValueError(f"slots must be >= 1, got {max_slots}")
        self.ray = _ray()
        if not self.ray.is_initialized():
            raise ValueError("RayLauncher needs a Ray connection first (see RaySession)")
        self.name = name
        self.node_id = node_id
        self.max_slots = int(max_slots)
        wanted = {"CPU": 1.0} if resources is None else dict(resources)
        bad = [k for k, v in wanted.items() if not (math.isfinite(v) and v >= 0)]
        if bad:
            raise ValueError(f"--ray-resources {bad[0]} must be a number >= 0")
        self.resources = {k: float(v) for k, v in wanted.items()}
        self.num_cpus = self.resources.get("CPU", 0.0)
        self.num_gpus = self.resources.get("GPU", 0.0)
        self.log_dir = None if log_dir is None else str(log_dir)
        self._actor_class = self.ray.remote(max_concurrency=4, max_restarts=0)(_Slot)
        self._handles: list[RayProcess] = []
        self._capacity: tuple[float, int] | None = None

    def capacity(self) -> int:
        """Workers the cluster's alive nodes can hold (by their ``CPU``/``GPU``)."""
        now = time.monotonic()
        if self._capacity is not None and now - self._capacity[0] < _CAPACITY_TTL_S:
            return self._capacity[1]
        total = 0
        needs = {k: v for k, v in self.resources.items() if v > 0}
        for node in self.ray.nodes():
            if not node.get("Alive") or self.node_id not in (None, node.get("NodeID")):
                continue
            total += _fits(node, needs, self.max_slots)
        self._capacity = (now, total)
        return total

    @property
    def slots(self) -> int:
        """Slots now: what the cluster holds, capped by ``max_slots``."""
        return min(self.max_slots, self.capacity())

    def spawn(self, launch: WorkerLaunch, files: Any) -> RayProcess:
        """Place one worker's actor (SPREAD over the nodes) and start the worker in it.

        Returns at once: Ray places the actor asynchronously, and the worker reports
        ``READY`` through the store as a local one does.  ``files`` (the run's
        :class:`~.runfiles.RunFiles`) are read here and their contents shipped to the
        actor (see :meth:`_Slot.run`).
        """
        if self.num_gpus:  # Ray hands each actor its own GPU(s) via CUDA_VISIBLE_DEVICES
            launch = dataclasses.replace(launch, device_index=0)
        actor = self._actor_class.options(
            num_cpus=self.num_cpus,
            num_gpus=self.num_gpus,
            resources={k: v for k, v in self.resources.items() if k not in ("CPU", "GPU")},
            scheduling_strategy=self._placement(),
        ).remote()
        log_path = None if self.log_dir is None else f"{self.log_dir}/worker-{launch.wid}.log"
        settings = Path(files.settings_path).read_bytes()
        secret = Path(files.secret_path).read_bytes()
        niceness = os.getpriority(os.PRIO_PROCESS, 0)
        done = actor.run.remote(launch.to_message(), settings, secret, log_path, niceness)
        handle = RayProcess(self, launch.wid, actor, done)
        self._handles.append(handle)
        return handle

    def _placement(self) -> Any:
        """SPREAD over the cluster, or (a node of ``cluster run``) this node only."""
        if self.node_id is None:
            return "SPREAD"
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(self.node_id, soft=False)

    def nodes_of(self, handles: Sequence[RayProcess], timeout_s: float = 30.0) -> list[str]:
        """The node address each worker runs on (tests and the benchmark check placement)."""
        refs = [h.actor.where.remote() for h in handles]
        return [str(ip) for ip, _pid in self.ray.get(refs, timeout=timeout_s)]

    def close(self) -> None:
        """Kill every actor still alive (its worker dies with it)."""
        for handle in self._handles:
            if handle.poll() is None:
                handle.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and any(h.poll() is None for h in self._handles):
            time.sleep(0.05)
        self._handles.clear()


def _fits(node: Mapping[str, Any], needs: Mapping[str, float], unbounded: int) -> int:
    """Workers a Ray node's resources hold (``unbounded`` when a worker needs none)."""
    have = node.get("Resources", {})
    fits = [math.floor(have.get(k, 0.0) / v + 1e-9) for k, v in needs.items()]
    return min(fits) if fits else unbounded


def node_launchers(
    slots_per_node: int,
    *,
    resources: Mapping[str, float],
    log_dir: str | Path | None = None,
) -> list[RayLauncher]:
    """One :class:`RayLauncher` per alive Ray node that holds workers: the nodes of a cluster run.

    Node 0 is the node this process runs on (the controller's host, where a private
    instance's only node is), then the others by address, so the numbering is the
    same on every run of the same cluster.  Each launcher offers ``slots_per_node``
    slots; a node that holds no worker (a head without the slot resource) is left
    out.

    Raises:
        ValueError: no node holds a worker, or one holds fewer than
            ``slots_per_node`` (every node of the cluster model has the same slots).
    """
    ray = _ray()
    needs = {k: float(v) for k, v in resources.items() if v > 0}
    here = ray.get_runtime_context().get_node_id()
    nodes = [n for n in ray.nodes() if n.get("Alive") and _fits(n, needs, slots_per_node) > 0]
    nodes.sort(key=lambda n: (n.get("NodeID") != here, str(n.get("NodeManagerAddress"))))
    if not nodes:
        raise ValueError(f"--launcher ray: no Ray node holds a worker ({dict(resources)})")
    short = [n for n in nodes if _fits(n, needs, slots_per_node) < slots_per_node]
    if short:
        raise ValueError(
            f"--launcher ray: node {short[0].get('NodeManagerAddress')} holds "
            f"{_fits(short[0], needs, slots_per_node)} workers, fewer than --gpus-per-node "
            f"{slots_per_node} (every node of the cluster has the same slots)"
        )
    return [
        RayLauncher(
            slots_per_node,
            resources=resources,
            log_dir=log_dir,
            node_id=str(n["NodeID"]),
            name=f"ray:{n.get('NodeManagerAddress')}",
        )
        for n in nodes
    ]
