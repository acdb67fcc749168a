"""One job of a cluster run: a worker group on a shared slot pool, as an actuator.

:class:`PooledJob` is what ``elasim cluster run`` gives the cluster loop for each
job of the workload: a :class:`~.group.ProcessWorkerGroup` (in place by default,
cold-started workers, no warm standbys) whose launchers are the job's
:class:`~.slots.SlotView`s, wrapped in the one-job executor's own
:class:`~.actuator.GroupActuator`, so a job of a cluster run measures its pauses,
steps and checkpoints exactly as ``elasim run`` does.

The only addition is the quota.  Before the group moves towards ``n`` workers the
job's quota becomes ``n`` (it can start no more than that), and after it moved, the
workers it no longer uses (dropped members, which wait as standbys, and starting
ones beyond the target) are sent home, so that their slots reach the jobs the
cluster gave them to.
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

from elasim.atomic import check_writable_dir
from elasim.policies import EventRecord

from .actuator import GroupActuator
from .controller import ControllerConfig
from .group import GroupSettings, ProcessWorkerGroup, RescaleMode
from .protocol import WorkerSettings
from .slots import SlotPool

__all__ = ["PooledJob"]

log = logging.getLogger(__name__)


class PooledJob(GroupActuator):
    """A job's worker group on a shared pool (see the module docstring).

    Args:
        name: the job's name in the workload (its key in the pool).
        pool: the shared slots.
        worker: what each of its workers runs (job spec, steps, seed, timeouts).
        config: the one-job controller settings the actuator reads (time scale,
            priors, ``max_nodes``).
        origin: ``() -> float``, the run's start on the clock (real seconds).
        mode: ``inplace`` (the default) or ``restart``.
        bind_host: address of the job's store.
        checkpoint_dir: where its checkpoints go (None: a temporary folder).
    """

    def __init__(
        self,
        name: str,
        pool: SlotPool,
        worker: WorkerSettings,
        config: ControllerConfig,
        origin: Any,
        *,
        mode: RescaleMode = RescaleMode.INPLACE,
        bind_host: str = "127.0.0.1",
        checkpoint_dir: str | None = None,
    ) -> None:
        self.name = name
        self.pool = pool
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if checkpoint_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"elasim-ckpt-{name}-")
            checkpoint_dir = self._tmp.name
        check_writable_dir(checkpoint_dir, "--checkpoint-dir")
        from dataclasses import replace

        settings = GroupSettings(
            mode=mode,
            worker=replace(worker, checkpoint_dir=checkpoint_dir),
            bind_host=bind_host,
            standby=False,  # a standby would hold a slot another job was given
        )
        group = ProcessWorkerGroup(settings, pool.views(name))
        super().__init__(group, config, origin, rescale=mode)
        self._started = False
        self._closed = False
        #: GPUs per launcher (node) the cluster placed the job on (None: anywhere)
        self.per_launcher: dict[int, int] | None = None

    def start(self) -> None:
        """Open the job's store (its workers start when the cluster grants slots)."""
        if not self._started:
            self.group.start()
            self._started = True

    def apply(self, spot: int, on_demand: int, now_s: float, fresh: bool) -> list[EventRecord]:
        """Move towards ``spot + on_demand`` workers within a quota of as many slots."""
        self.start()
        want = spot + on_demand
        self.pool.set_quota(self.name, want, self.per_launcher)
        events = super().apply(spot, on_demand, now_s, fresh)
        members = sum(self.group.held())
        if not self.group.done:
            self.group.release_standbys(keep=max(want - members, 0))
        return events

    def preempt(
        self, victims: int, graceful: bool, now_s: float, drop_s: float | None = None
    ) -> list[EventRecord]:
        """The one-job rule (the members among ``victims`` are killed), then the rest.

        A cluster preempts a job's whole allocation (its nodes are gone: a capacity
        drop, a lost host), so its quota becomes 0 and its workers still starting are
        killed too; they would otherwise hold slots on nodes the cluster no longer has.
        """
        events = super().preempt(victims, graceful, now_s, drop_s)
        self.pool.set_quota(self.name, 0)
        self.group.release_standbys(keep=0)
        return events

    def release(self) -> None:
        """The job is done: its quota goes to 0 and its idle workers are sent home.

        Its slots free up as its processes exit (they do after the last step);
        nothing here waits, so the other jobs' loop turns are not held up.
        """
        self.pool.set_quota(self.name, 0)
        if self._started:
            self.group.finish()

    def close(self) -> None:
        """Send every worker home and give the slots back (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.pool.set_quota(self.name, 0)
        try:
            self.group.close()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
