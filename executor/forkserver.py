"""Workers forked from a process that has torch imported: :class:`ForkLauncher`.

A worker's cold start is an interpreter, ``import torch`` and building the job.  On
this project's 2-core CI host under load, ``import torch`` alone takes about 4 s,
and four workers starting together took 35 s before their first step (measured with
``elasim cluster run``'s first version).  A cluster run starts a worker every time a
job arrives or grows, so there the import would dominate every job's completion
time, which says nothing about elastic scheduling.

:class:`ForkLauncher` starts workers the way ``multiprocessing``'s ``forkserver``
does: one server process imports torch and the worker module once, and every worker
is a ``fork()`` of it.  A worker still connects to its job's store, reads the job
and builds it (data, model, optimizer), and that is measured as before
(``acquire_s``); only the import is paid once per run.  It is an option
(``LocalLauncher`` stays the default of ``elasim run``, whose measured cold start
is part of what a calibration profiles), and it is Linux/CPU only: forking a
process that has initialised CUDA is not safe.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

from .launchers import ProcessHandle, WorkerLaunch, worker_args, worker_env

__all__ = ["ForkLauncher"]

#: imported once, by the server, before any worker is forked.  ``__main__`` too: a
#: forked child otherwise imports the controller's main module again (for the
#: ``elasim`` console script: the whole CLI), which costs every worker CPU seconds on
#: a loaded host; imported in the server, each child finds it there and skips it.
#: ``torch._dynamo`` is what every optimizer's constructor imports on first use (via
#: ``torch._compile``): 3 CPU-s and the larger part of a forked worker's start on the
#: CI host (profiled: 10 s of wall time under load), paid once here instead.
PRELOAD = [
    "__main__",
    "torch",
    "torch.distributed",
    "torch.optim",
    "torch._dynamo",
    "elasim.executor.worker",
]


def _forked_worker(argv: list[str], env: dict[str, str], log_path: str | None) -> None:
    """In the forked child: the worker's environment and stderr, then the worker."""
    import sys

    os.environ.update(env)
    target = log_path or os.devnull
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(fd)
    os.close(null)
    from elasim.executor._entry import main_args

    sys.exit(main_args(list(argv)))


def _start(proc: Any) -> None:
    """Start a process of the fork server, the server itself without the current folder.

    ``multiprocessing`` starts its server as ``python -c ...``, which puts the
    current folder first on ``sys.path`` (and Python 3.11's server ignores the
    ``sys_path`` it is handed).  Run from a checkout of elasim, the server would then
    preload the checkout's ``elasim/`` instead of the installed package, and every
    worker with it.  ``PYTHONSAFEPATH`` keeps the folder off the path of the server,
    the only process started while it is set (the server starts once, on the first
    fork).
    """
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        proc.start()
    finally:
        if before is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = before


class _Forked:
    """A forked worker as a :class:`~.launchers.ProcessHandle`."""

    def __init__(self, proc: Any) -> None:
        self._proc = proc
        self.pid = int(proc.pid)

    def poll(self) -> int | None:
        """Exit code (negative: the signal), or None while it runs."""
        return self._proc.exitcode

    def send_signal(self, sig: int) -> None:
        """Deliver ``sig``."""
        if self._proc.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def wait(self, timeout_s: float) -> None:
        """Reap it (bounded)."""
        self._proc.join(timeout_s)


class ForkLauncher:
    """Worker processes on this host, forked from a server with torch imported.

    The server starts with the launcher (:meth:`warm`), so the import is paid before
    the run's clock starts.  If the controller dies, the server notices and exits,
    and its children with it.

    Attributes:
        slots: most processes alive at once.
        log_dir: each worker's stderr goes to ``worker-{wid}.log`` here (None: discarded).
    """

    def __init__(
        self,
        slots: int,
        *,
        log_dir: str | Path | None = None,
        bind_host: str = "127.0.0.1",
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.name = "local-fork"
        self.slots = int(slots)
        self.log_dir = Path(log_dir) if log_dir is not None else None
        env = worker_env(bind_host, {})
        self._env = dict(env or {})
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)
        self._procs: list[_Forked] = []

    def warm(self) -> None:
        """Start the server now (imports torch once) by forking one no-op child."""
        proc = self._ctx.Process(target=os.getpid, daemon=False)
        _start(proc)
        proc.join(120.0)

    def spawn(self, launch: WorkerLaunch, files: Any) -> ProcessHandle:
        """Fork one worker with the run's private files.

        Its arguments are :func:`~.launchers.worker_args`.  No ``--parent-pid``: the
        worker's parent is the server, whose death (it follows the controller's) ends
        the worker (:mod:`.lifeline`).
        """
        wid = launch.wid
        log = None if self.log_dir is None else str(self.log_dir / f"worker-{wid}.log")
        argv = worker_args(launch, settings_path=files.settings_path, secret_path=files.secret_path)
        proc = self._ctx.Process(
            target=_forked_worker, args=(argv, self._env, log), name=f"worker-{wid}"
        )
        _start(proc)
        handle = _Forked(proc)
        self._procs.append(handle)
        return handle

    def close(self) -> None:
        """SIGKILL and reap every child still running."""
        for handle in self._procs:
            handle.send_signal(signal.SIGKILL)
        for handle in self._procs:
            handle.wait(10.0)
        self._procs.clear()
