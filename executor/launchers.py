"""Launchers: how a worker process is started on a host.

A :class:`Launcher` owns a number of worker *slots* on one host and starts
``python -m elasim.executor._entry ...`` in them; what it returns is a
:class:`ProcessHandle` the pool polls and signals.  What a worker is started with is
a :class:`WorkerLaunch` (validated fields only), and one function,
:func:`worker_argv`, turns it into the command line, whatever the launcher: the
worker's settings and the run secret are *file paths* on that command line (files
only the user can read, :mod:`.runfiles`), never values from a connection.
:class:`LocalLauncher` starts subprocesses of the controller;
:class:`~.agent.RemoteLauncher` asks an agent on another host.

Why a module of its own: starting a process is the one thing that differs between
hosts (and between local and remote runs), and nothing else in the group needs to
know how it is done; :mod:`.pool` only uses the two protocols.  :mod:`.group`
re-exports these names.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .authstore import parse_address

__all__ = [
    "Launcher",
    "LocalLauncher",
    "NoFreeSlot",
    "ProcessHandle",
    "WorkerLaunch",
    "last_log_line",
    "safe_module_argv",
    "worker_args",
    "worker_argv",
]

#: The one program a launcher ever starts for elasim's own workers.
WORKER_MODULE = "elasim.executor._entry"


@dataclass(frozen=True)
class WorkerLaunch:
    """What one worker process is started with (every field validated on creation).

    Why a closed set of typed fields: these travel to agents on other hosts; an agent
    builds the command line from them with :func:`worker_argv`, so nothing a peer
    sends becomes an argument it did not validate.

    Attributes:
        wid: worker id (>= 0).
        store: ``HOST:PORT`` of the run's store.
        spawn_wall_s: ``time.time()`` at spawn (for ``acquire_s``).
        device_index: the slot's index (its GPU with CUDA).
        idle_warmup: warm up at idle CPU priority (see ``_entry``).
    """

    wid: int
    store: str
    spawn_wall_s: float
    device_index: int = 0
    idle_warmup: bool = False

    def __post_init__(self) -> None:
        for name in ("wid", "device_index"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if not isinstance(self.spawn_wall_s, (int, float)) or not math.isfinite(self.spawn_wall_s):
            raise ValueError(f"spawn_wall_s must be a finite number, got {self.spawn_wall_s!r}")
        if not isinstance(self.idle_warmup, bool):
            raise ValueError(f"idle_warmup must be a boolean, got {self.idle_warmup!r}")
        if not isinstance(self.store, str):
            raise ValueError(f"store must be HOST:PORT, got {self.store!r}")
        parse_address(self.store)

    def to_message(self) -> dict[str, Any]:
        """The fields as a JSON object (what the controller sends an agent)."""
        return {
            "wid": self.wid,
            "store": self.store,
            "spawn_wall_s": self.spawn_wall_s,
            "device_index": self.device_index,
            "idle_warmup": self.idle_warmup,
        }

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> WorkerLaunch:
        """Inverse of :meth:`to_message`; raises ValueError/KeyError on anything else."""
        return cls(
            wid=message["wid"],
            store=message["store"],
            spawn_wall_s=float(message["spawn_wall_s"]),
            device_index=message["device_index"],
            idle_warmup=message["idle_warmup"],
        )


def worker_args(
    launch: WorkerLaunch,
    *,
    settings_path: str | Path,
    secret_path: str | Path,
    parent_pid: int | None = None,
) -> list[str]:
    """A worker's arguments, without the interpreter (what a forked worker parses).

    Args:
        launch: the worker's fields.
        settings_path: the run's worker settings on this host (a private file).
        secret_path: the run's secret on this host (a private file).
        parent_pid: the launching process: the worker exits when it dies
            (:mod:`.lifeline`; None: whatever its parent is when it starts).
    """
    args = ["--idle-warmup"] if launch.idle_warmup else []
    if parent_pid is not None:
        args += ["--parent-pid", str(int(parent_pid))]
    return [
        *args,
        "--store",
        launch.store,
        "--wid",
        str(launch.wid),
        "--spawn-wall",
        repr(float(launch.spawn_wall_s)),
        "--device-index",
        str(launch.device_index),
        "--settings",
        str(settings_path),
        "--secret-file",
        str(secret_path),
    ]


def worker_argv(
    python: str,
    launch: WorkerLaunch,
    *,
    settings_path: str | Path,
    secret_path: str | Path,
    parent_pid: int | None = None,
) -> list[str]:
    """The command line of a worker process (the only place it is built).

    ``-P`` keeps the current folder off ``sys.path``: a user who starts a run from
    a checkout of elasim (whose ``elasim/`` folder is not the installed package)
    still gets workers that import the package the controller runs.

    Args:
        python: the interpreter.
        launch: as for :func:`worker_args`.
        settings_path: as for :func:`worker_args`.
        secret_path: as for :func:`worker_args`.
        parent_pid: as for :func:`worker_args`.
    """
    args = worker_args(
        launch, settings_path=settings_path, secret_path=secret_path, parent_pid=parent_pid
    )
    return [*safe_module_argv(python, WORKER_MODULE), *args]


def safe_module_argv(python: str, module: str) -> list[str]:
    """``python -P -m module``: a module run without the current folder on ``sys.path``.

    Every interpreter elasim starts for its own code starts this way (see
    :func:`worker_argv`); a user's script is started by its path instead, as
    ``torchrun`` starts it.
    """
    return [python, "-P", "-m", module]


def last_log_line(path: Path) -> str:
    """The last non-empty line of a log (what a process died with), or ''."""
    with contextlib.suppress(OSError):
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 8192))
            lines = handle.read().decode("utf-8", errors="replace").strip().splitlines()
        return lines[-1].strip() if lines else ""
    return ""


class ProcessHandle(Protocol):
    """A started worker process, local or remote."""

    pid: int

    def poll(self) -> int | None:
        """Exit code, or None while running."""

    def send_signal(self, sig: int) -> None:
        """Deliver ``sig`` (SIGKILL emulates a preemption without notice)."""


class NoFreeSlot(RuntimeError):  # noqa: N818 - a state, as ``StopIteration`` is
    """A launcher had no free slot when asked to spawn, though ``slots`` offered one.

    A launcher's ``slots`` is what it holds *now*: a host or Ray node that dies
    between the group's read of ``slots`` and its ``spawn`` leaves nothing to start
    on.  That is the cluster changing, not a bug, so the group treats it as "full"
    and asks again at its next spawn decision.
    """


class Launcher(Protocol):
    """Starts worker processes on one host."""

    name: str
    slots: int

    def spawn(self, launch: WorkerLaunch, files: Any) -> ProcessHandle:
        """Start a worker (:func:`worker_argv`) with the run's private files.

        ``files`` is the run's :class:`~.runfiles.RunFiles`; a launcher on another
        host uses the user's copies of those files there instead.

        Raises:
            NoFreeSlot: its slots shrank since they were read (a host lost).
        """

    def close(self) -> None:
        """Stop everything this launcher started."""


def interface_of(address: str) -> str | None:
    """The name of this host's network interface that has ``address`` (Linux), or None.

    gloo picks the interface its workers listen on from the host name, which may
    resolve to a public address even when the run's store is bound to loopback.
    Naming the store's interface in ``GLOO_SOCKET_IFNAME`` keeps the workers on it.
    """
    import fcntl
    import socket
    import struct

    if address in ("localhost", "::1"):
        address = "127.0.0.1"
    try:
        wanted = socket.inet_aton(socket.gethostbyname(address))
    except OSError:
        return None
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(probe.fileno(), siocgifaddr, request)
            except OSError:
                continue  # an interface without an IPv4 address
            if reply[20:24] == wanted:
                return name
    return None


def worker_env(bind_host: str, base: dict[str, str] | None = None) -> dict[str, str] | None:
    """The environment of a worker process, gloo kept on ``bind_host``'s interface.

    ``GLOO_SOCKET_IFNAME`` already set by the user wins; binding every interface
    (``0.0.0.0``) leaves gloo's own choice alone.  Returns None (inherit everything)
    when nothing needs setting.
    """
    import os

    env = dict(os.environ if base is None else base)
    if "GLOO_SOCKET_IFNAME" in env or bind_host in ("0.0.0.0", "::", ""):
        return base
    name = interface_of(bind_host)
    if name is None:
        return base
    env["GLOO_SOCKET_IFNAME"] = name
    return env


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: SIGKILL the worker if the controller dies (no orphaned trainers)."""
    from elasim.executor.lifeline import set_death_signal

    set_death_signal()


class LocalLauncher:
    """Worker processes on this host, as ``subprocess.Popen`` children.

    Attributes:
        slots: most processes alive at once.
        log_dir: each worker's stderr goes to ``worker-{wid}.log`` here (None: discarded).
        env: the workers' environment: gloo's interface is the one ``bind_host`` (the
            run's store) is on (:func:`worker_env`).
    """

    def __init__(
        self,
        slots: int,
        *,
        log_dir: str | Path | None = None,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
        bind_host: str = "127.0.0.1",
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.name = "local"
        self.slots = int(slots)
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.python = python
        # gloo on the store's interface (loopback by default), unless told otherwise
        self.env = worker_env(bind_host, env)
        self._procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, launch: WorkerLaunch, files: Any) -> ProcessHandle:
        """Start one worker process with the run's private files."""
        log = None if self.log_dir is None else self.log_dir / f"worker-{launch.wid}.log"
        argv = worker_argv(
            self.python,
            launch,
            settings_path=files.settings_path,
            secret_path=files.secret_path,
            parent_pid=os.getpid(),  # the worker exits if the controller dies (.lifeline)
        )
        return self.start(argv, env=self.env, log_path=log)

    def start(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        with_stdout: bool = False,
    ) -> ProcessHandle:
        """Start any command as a child that dies with the controller.

        Args:
            argv: the command.
            env: its environment (None: inherit the controller's).
            log_path: its stderr is appended here (None: discarded).
            with_stdout: its stdout goes to ``log_path`` too (a user's script prints).
        """
        stderr: Any = subprocess.DEVNULL
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            stderr = open(log_path, "ab")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=stderr if with_stdout else subprocess.DEVNULL,
                stderr=stderr,
                env=env,
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
