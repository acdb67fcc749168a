"""The cluster loop's queue of job events: when each job next changes on its own.

A lazy heap of ``(due, seq, job)``: a job whose event moves (a decision changed its
speed, or only brought it to the present, which moves its due by a rounding error)
gets a new entry, and an entry that is no longer the job's is dropped when it comes
to the top.  Apart from :mod:`.loop` because the rule that tells a current entry from a
stale one is subtle and run millions of times: what each job's next due time is was
recomputed from the job at every check (:meth:`~.job.Training.next_due_s`, 4 million
times on the full Philly trace at 1,024 GPUs); it is now the value the queue was last
given for the job, which is the same number as long as the job has not changed since,
and the loop :meth:`forgets <JobEvents.forget>` a job it changes without a push.
"""

from __future__ import annotations

import heapq
import math

from .job import ClusterJob

__all__ = ["JobEvents"]

_EPS = 1e-9


class JobEvents:
    """Each job's next event, earliest first (see the module's docstring).

    Args:
        remember: keep each job's due between pushes (False for jobs that poll: real
            workers change without the loop, so their due is asked every time).
    """

    __slots__ = ("heap", "known", "_queued", "_remember", "_seq")

    def __init__(self, remember: bool = True) -> None:
        self.heap: list[tuple[float, int, ClusterJob]] = []  # (due, seq, job)
        self._seq = 0
        self._queued: dict[str, float] = {}  # the due time last pushed, per job
        #: each job's next_due_s while it has not changed since it was pushed (or since
        #: the loop, which advanced it, wrote it here); never kept for jobs that poll
        self.known: dict[str, float] = {}
        self._remember = remember

    def stale(self, job: ClusterJob, due: float) -> bool:
        """Whether a queued event no longer is the job's (it finished or changed since)."""
        if job.finish_s is not None:
            return True
        now_due = self.known.get(job.name)
        if now_due is None:
            now_due = job.training.next_due_s(job)
        scale = due if due > 0.0 else -due  # max(1.0, abs(due)), without the calls
        return abs(now_due - due) > _EPS * (scale if scale > 1.0 else 1.0)

    def forget(self, name: str) -> None:
        """The job changed without a push: its due is asked of it again."""
        self.known.pop(name, None)

    def forget_all(self) -> None:
        """Every job may change without a push (a decision brings them to the present)."""
        self.known.clear()

    def top_due(self) -> float:
        """When the earliest queued job event is due (inf: none); stale ones are dropped."""
        heap = self.heap
        while heap:
            due, _, job = heap[0]
            if not self.stale(job, due):
                return due
            self.pop()  # the job changed since
        return math.inf

    def push(self, job: ClusterJob, due: float | None = None) -> None:
        """Queue the job's next event (``due``: its :meth:`next_due_s` now, when known)."""
        if due is None:
            due = job.training.next_due_s(job)
        name = job.name
        if self._remember:
            self.known[name] = due
        queued = self._queued
        if due < math.inf and due != queued.get(name):
            queued[name] = due
            self._seq += 1
            heapq.heappush(self.heap, (due, self._seq, job))

    def pop(self) -> tuple[float, ClusterJob]:
        """Take the earliest entry off the heap (a push of the same due queues it again)."""
        due, _, job = heapq.heappop(self.heap)
        queued = self._queued
        if queued.get(job.name) == due:
            del queued[job.name]
        return due, job
