"""Entry point of a worker process: warm up at idle priority, then run the worker.

Why: the executor emulates several nodes on a few hosts.  A standby that starts (an
interpreter, ``import torch``, building the job: seconds of CPU) stands for a node
booting *somewhere else*; on a shared host it would steal CPU from the training
workers and slow them down, which no real cluster does.  So the warm-up runs under
``SCHED_IDLE`` (Linux) and the worker switches back to normal scheduling once it is
ready.  Opt-in (``--idle-warmup``, ``GroupSettings.idle_warmup``): on a host whose
CPUs are always busy an idle-priority warm-up can starve for a long time.  It is only
done when switching back is permitted (root, or an ``RLIMIT_NICE`` that allows nice
0); otherwise the priority is left alone.
"""

from __future__ import annotations

import os
import sys


def _can_restore() -> bool:
    if not hasattr(os, "sched_setscheduler") or not hasattr(os, "SCHED_IDLE"):
        return False
    if os.geteuid() == 0:
        return True
    try:
        import resource

        return resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20
    except (ImportError, ValueError, OSError):
        return False


def restore_priority() -> None:
    """Back to ``SCHED_OTHER`` for every thread of this process (best effort)."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass


def main() -> int:
    """``python -m elasim.executor._entry [--idle-warmup] [--parent-pid N] ...``.

    The worker's own arguments follow.
    """
    return main_args(sys.argv[1:])


def main_args(argv: list[str]) -> int:
    """The entry point on ``argv`` (also the target of a forked worker, :mod:`.forkserver`).

    First of all the worker ties its life to its launcher (:mod:`.lifeline`): no orphan
    outlives a killed controller.
    """
    idle = "--idle-warmup" in argv
    argv = [a for a in argv if a != "--idle-warmup"]
    parent_pid: int | None = None
    if "--parent-pid" in argv:  # the launcher's pid: the worker dies with it
        at = argv.index("--parent-pid")
        parent_pid = int(argv[at + 1])
        del argv[at : at + 2]
    from elasim.executor.lifeline import hold_lifeline

    hold_lifeline(parent_pid)
    lowered = False
    if idle and _can_restore():
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            lowered = True
        except OSError:
            lowered = False
    from elasim.executor.worker import main as worker_main

    return worker_main(argv, on_ready=restore_priority if lowered else None)


if __name__ == "__main__":
    sys.exit(main())
