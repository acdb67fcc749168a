"""How a worker group manages its processes: :class:`GroupSettings`.

Why a module of its own: the settings are read by every part of the group (the
pool opens the store and spawns with them, the mechanisms time their waits by them,
the script group stops its processes by them), so they must sit *below* all of
those parts.  They lived in :mod:`.group`, and the pool, which :mod:`.group` builds
on, had to import them back from there: an import cycle.  :mod:`.group` re-exports
the class, so ``from elasim.executor.group import GroupSettings`` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from elasim.jobmodel import RescaleMode  # the one definition, shared with the simulator

from .protocol import WorkerSettings

__all__ = ["GroupSettings"]


@dataclass(frozen=True)
class GroupSettings:
    """How the group manages processes.

    Attributes:
        mode: ``inplace`` or ``restart``.
        worker: settings every worker receives.
        bind_host: address the run's store listens on (loopback by default).
        store_port: 0 picks a free port.
        standby: keep free slots filled with warm standbys (``inplace`` only).
        change_timeout_s: bound on one generation change.
        ready_timeout_s: bound on a cold start (spawn to ``READY``).
        poll_interval_s: how often waits poll processes and the store.
        max_attempts: generations tried for one change before giving up.
        stop_grace_s: after SIGTERM, wait this long before SIGKILL.
        advertise_host: the address workers on other hosts use to reach the store
            (None: ``bind_host``, or this host's name when binding every interface).
        resume_step: the checkpoint in ``worker.checkpoint_dir`` is at this step (a
            run resumed after its controller died): the first group restores it.
        idle_warmup: standbys warm up at idle CPU priority (see ``_entry``), so a
            "booting node" does not slow down training on the same host.
        run_files: the run's secret and worker-settings files
            (:class:`~.runfiles.RunFiles`); None: the group writes them into a
            temporary private folder when it starts (and removes it when closed).
    """

    mode: RescaleMode = RescaleMode.INPLACE
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    bind_host: str = "127.0.0.1"
    store_port: int = 0
    standby: bool = True
    change_timeout_s: float = 60.0
    ready_timeout_s: float = 120.0
    poll_interval_s: float = 0.005
    max_attempts: int = 4
    stop_grace_s: float = 5.0
    advertise_host: str | None = None
    idle_warmup: bool = False
    resume_step: int | None = None
    run_files: Any = None
