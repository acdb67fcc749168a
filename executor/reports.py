"""What elasim's workers report through the store, and what the group learns from it.

Every worker appends *events* (``READY``, ``PAUSE``, ``CHECKPOINT``, ``LEFT``,
``DONE``, ...) and, from rank 0, batches of *step records* to its own numbered keys
in the run's store (:mod:`.protocol`).  :class:`WorkerReports` reads what is new,
decodes it, and keeps what it establishes: whether training is done and its final
metrics, the newest checkpoint, the job's batch size, target and name, the failed
collectives, the step log (:class:`~.records.StepLog`), and an *inbox* of events for
whoever waits on one (a generation's ``PAUSE``, a ``STOPPED``, a checkpoint).  An
event about a worker itself (it is ready, it left, it hit an injected fault) is
written into that worker's record.

Why a module of its own: this is the part that changes with the wire protocol, and
it changes on its own (a new event is decoded here and usually moves a worker's
status here), not with how processes are started or how a change is made.  It reads
the store it is given and never writes it: commands are the pool's (:mod:`.pool`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from .protocol import (
    WorkerEventType,
    decode,
    event_count_key,
    event_key,
    steps_count_key,
    steps_key,
)
from .records import StepLog, StepRecord
from .workertable import Worker, WorkerStatus

__all__ = ["WorkerReports"]

log = logging.getLogger(__name__)

#: which events :meth:`WorkerReports.take` and :meth:`WorkerReports.has` look for
Match = Callable[[dict[str, Any]], bool]


class WorkerReports:
    """The workers' events and step records, read from the store (module docstring).

    Args:
        clock_of: turns a worker's ``time.time()`` into the controller's clock.
        checkpoint_step: the step of a checkpoint the run starts from (a resumed
            run), until a worker reports a newer one.

    Attributes:
        steps: every step rank 0 reported.
        failed_collectives: ``COLLECTIVE_FAILED`` events not yet handled; whoever
            handles them removes them.
    """

    def __init__(self, clock_of: Callable[[float], float], checkpoint_step: int | None) -> None:
        self._clock_of = clock_of
        self.steps = StepLog()
        self.failed_collectives: list[dict[str, Any]] = []
        self._inbox: list[dict[str, Any]] = []
        self._done = False
        self._metrics: dict[str, float] = {}
        self._last_checkpoint_step = checkpoint_step
        self._global_batch: int | None = None
        self._target_accuracy: float | None = None
        self._job_name: str | None = None

    # -- what it learned ---------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Whether rank 0 reported that training finished."""
        return self._done

    @property
    def metrics(self) -> dict[str, float]:
        """The final metrics rank 0 reported with ``DONE``."""
        return self._metrics

    @property
    def last_checkpoint_step(self) -> int | None:
        """Step of the newest checkpoint (written in this run, or resumed from)."""
        return self._last_checkpoint_step

    @property
    def global_batch(self) -> int | None:
        """Samples per step, from the first ``READY``."""
        return self._global_batch

    @property
    def target_accuracy(self) -> float | None:
        """The job's stated accuracy target, from the first ``READY``."""
        return self._target_accuracy

    @property
    def job_name(self) -> str | None:
        """The job's name, from the first ``READY``."""
        return self._job_name

    # -- the inbox ---------------------------------------------------------------------------

    def take(self, match: Match) -> dict[str, Any] | None:
        """Remove and return the oldest event in the inbox that ``match`` accepts."""
        for i, event in enumerate(self._inbox):
            if match(event):
                return self._inbox.pop(i)
        return None

    def has(self, match: Match) -> bool:
        """Whether the inbox holds an event that ``match`` accepts (it stays there)."""
        return any(match(event) for event in self._inbox)

    def forget_before(self, gen: int) -> None:
        """Drop the events of generations before ``gen``: they were answered by it."""
        self._inbox = [e for e in self._inbox if e.get("gen", gen) >= gen]
        self.failed_collectives = [e for e in self.failed_collectives if e.get("gen", 0) >= gen]

    # -- reading -----------------------------------------------------------------------------

    def read(self, store: Any, workers: Sequence[Worker]) -> bool:
        """Read the new events and step records of ``workers`` from ``store``.

        A worker that is gone is read once more (its last reports were posted before
        it exited), then no longer.  Returns whether a worker reported ``READY``.
        """
        pending = [w for w in workers if not w.drained]
        if not pending:
            return False
        keys: list[str] = []
        for w in pending:
            keys += [event_count_key(w.wid), steps_count_key(w.wid)]
        counts = store.multi_get(keys)
        ready = False
        for i, w in enumerate(pending):
            n_events, n_steps = int(counts[2 * i]), int(counts[2 * i + 1])
            if n_events > w.events_read:
                raw = store.multi_get([event_key(w.wid, k) for k in range(w.events_read, n_events)])
                w.events_read = n_events
                for item in raw:
                    ready = self._on_event(w, decode(item)) or ready
            if n_steps > w.steps_read:
                raw = store.multi_get([steps_key(w.wid, k) for k in range(w.steps_read, n_steps)])
                w.steps_read = n_steps
                for item in raw:
                    self._on_steps(item)
            if w.status is WorkerStatus.DEAD:
                w.drained = True
        return ready

    def _on_event(self, worker: Worker, event: dict[str, Any]) -> bool:
        """Learn from one event of ``worker``; returns whether it was ``READY``."""
        kind = WorkerEventType(event["type"])
        if kind is WorkerEventType.READY:
            worker.ready_wall_s = float(event["wall_s"])
            if self._global_batch is None:
                self._global_batch = int(event["global_batch"])
                self._target_accuracy = event.get("target_accuracy")
                self._job_name = event.get("job")
            if worker.status is WorkerStatus.STARTING:
                worker.status = WorkerStatus.STANDBY
            return True
        if kind is WorkerEventType.DONE:
            self._done = True
            self._metrics = {k: float(v) for k, v in event.get("metrics", {}).items()}
        elif kind is WorkerEventType.PAUSE and event.get("global_batch"):
            # a generation's first step: its batch (a cluster policy may have changed it)
            self._global_batch = int(event["global_batch"])
        elif kind is WorkerEventType.CHECKPOINT:
            # the path is the settings' checkpoint_dir: a path from the store is not kept
            self._last_checkpoint_step = int(event["step"])
        elif kind is WorkerEventType.LEFT:
            if worker.status is not WorkerStatus.DEAD:
                if event.get("exit", True):
                    worker.status = WorkerStatus.LEAVING
                else:  # back in the warm pool: it stands for a node that has booted
                    worker.kind = None
                    worker.status = WorkerStatus.STANDBY
        elif kind is WorkerEventType.COLLECTIVE_FAILED:
            self.failed_collectives.append(event)
        elif kind is WorkerEventType.ERROR:
            # a worker that fails while starting is reported once, by whoever waits
            # for it to be ready (with its log); one that fails later, here
            starting = worker.status is WorkerStatus.STARTING
            level = logging.DEBUG if starting else logging.ERROR
            log.log(level, "worker %s error: %s", worker.wid, event.get("reason"))
        elif kind is WorkerEventType.FAULT:
            worker.fault_wall_s = float(event["wall_s"])
        self._inbox.append(event)
        return False

    def _on_steps(self, raw: bytes) -> None:
        for row in json.loads(raw):
            t_end, step, world, loss, samples, gen, epoch, total, *gns = row
            record = StepRecord(
                self._clock_of(float(t_end)),
                int(step),
                int(world),
                float(loss),
                int(samples),
                int(gen),
                int(epoch),
                int(total),
                *(float(v) for v in gns),  # the noise-scale norms, when the worker sent them
            )
            self.steps.add(record, float(t_end))
