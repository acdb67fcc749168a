"""A worker's lifeline to its controller: it dies with it, whatever killed it.

Why: a worker process without its controller is an orphan that keeps a CPU (or a GPU)
busy, and possibly a gloo port, for nobody.  A SIGKILLed controller runs no cleanup,
so the workers must notice on their own.  Two mechanisms, because either can miss:

* **``PR_SET_PDEATHSIG``** (Linux, via ``ctypes``): the kernel SIGKILLs the worker
  the moment its parent dies.  The launcher sets it between ``fork`` and ``exec``
  and the worker sets it again itself (an agent or another launcher may not have).
  It misses when the parent died *before* the call (the worker was already
  re-parented), and it does not exist off Linux.
* **A watcher thread**: every ``interval_s`` it compares ``os.getppid()`` with the
  parent the launcher named; once it differs (re-parented to init or a subreaper),
  the process ends with ``os._exit`` at once, even if the main thread is blocked in
  a collective or a store wait.

The watcher is a daemon thread that only reads ``getppid``: it costs nothing on the
hot path.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

__all__ = [
    "EXIT_PARENT_GONE",
    "descendants",
    "hold_lifeline",
    "set_death_signal",
    "still_alive",
]

log = logging.getLogger(__name__)

#: Exit code of a worker whose controller is gone (the same as the worker's
#: ``EXIT_CONTROLLER_GONE``).
EXIT_PARENT_GONE = 3
_PR_SET_PDEATHSIG = 1


def set_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies.

    Returns whether it was set (False off Linux or when ``prctl`` refused).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _exit_now() -> None:  # pragma: no cover - ends the process
    os._exit(EXIT_PARENT_GONE)


def hold_lifeline(
    parent_pid: int | None = None,
    *,
    interval_s: float = 0.25,
    death_signal: bool = True,
    on_gone: Callable[[], None] = _exit_now,
) -> threading.Thread | None:
    """Tie this process's life to ``parent_pid`` (default: the current parent).

    Args:
        parent_pid: the process that started this one (the controller or agent), as
            the launcher saw it: if the parent is already gone, the current parent
            differs and ``on_gone`` runs at once.
        interval_s: how often the watcher looks.
        death_signal: also set ``PR_SET_PDEATHSIG`` (tests turn it off to exercise
            the watcher alone).
        on_gone: what to do once the parent is gone (default: ``os._exit(3)``).

    Returns:
        The watcher thread, or None when the parent was already gone.
    """
    expected = os.getppid() if parent_pid is None else int(parent_pid)
    if death_signal:
        set_death_signal()
    if os.getppid() != expected:  # died before we could ask (re-parented already)
        log.warning("controller %s is gone before the worker started; exiting", expected)
        on_gone()
        return None
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(interval_s):
            if os.getppid() != expected:
                with contextlib.suppress(Exception):
                    log.warning("controller %s is gone; exiting", expected)
                on_gone()
                return

    thread = threading.Thread(target=watch, name="elasim-lifeline", daemon=True)
    thread.start()
    return thread


def _stat(pid: int) -> tuple[int, str, int] | None:
    """``(ppid, state, start ticks)`` of ``pid`` from ``/proc`` (None: no such process)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the command may hold spaces
    return int(fields[1]), fields[0], int(fields[19])


def descendants(pid: int) -> dict[int, int]:
    """Every live process below ``pid`` (Linux ``/proc``): pid -> start ticks.

    The start time names a process for good: :func:`still_alive` tells a survivor
    from a new process that reused its pid.
    """
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is None or stat[1] == "Z":
            continue
        children.setdefault(stat[0], []).append(int(entry))
        starts[int(entry)] = stat[2]
    out: dict[int, int] = {}
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        out[child] = starts[child]
        todo += children.get(child, ())
    return out


def still_alive(processes: dict[int, int]) -> list[int]:
    """The pids of ``processes`` (from :func:`descendants`) still running (zombies are not)."""
    alive = []
    for pid, start in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[1] != "Z" and stat[2] == start:
            alive.append(pid)
    return alive
