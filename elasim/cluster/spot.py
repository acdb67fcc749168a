"""Spot capacity of a cluster: the trace's rows, its preemption notices and the leaves.

Cluster mode reads a capacity trace through the single job's
:class:`~elasim.jobmodel.CapacityReplay` (rows, and with ``notice_s`` a notice before
every drop), not a copy of it, and a warned job leaves by the single job's rule
(:func:`~elasim.jobmodel.leave_lead_s`): :data:`~elasim.jobmodel.LEAVE_STEPS` steps to
reach a step boundary, plus a checkpoint write (a cluster job that loses a node loses
its whole placement, so nobody survives to keep the state).  A notice shorter than
that is no notice: the job dies at the drop and loses the work since its last
checkpoint.  :class:`SpotFeed` is what the loop asks: when it next has something,
what is due (rows, notices, leaves), and how many nodes a policy may use now (the
nodes a warned job gave up stay given up until their drop, as a single job's cap).
Standard library only.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from elasim.jobmodel import CapacityReplay, ReplayItem, RescaleMode, leave_lead_s
from elasim.policies import EventKind, EventRecord

__all__ = ["Leave", "SpotFeed", "leave_at_s"]

_EPS = 1e-9


class Leave(NamedTuple):
    """The doomed nodes are vacated at ``time_s``, before their drop at ``drop_s``.

    One per notice, at the latest time every job warned in time can still leave
    gracefully (the earliest of their leave times): from then on the nodes are given
    up, as a single job's cap, so no job may still hold them (a policy sees usable
    nodes and the jobs on them, never a job on a node that is not usable).  A job
    that could not leave in time goes then too, as without notice: the work it would
    do until the drop would be rolled back at the drop anyway.

    Attributes:
        time_s: when the nodes are vacated.
        drop_s: when the capacity drops.
        available: nodes left after the drop (jobs on any node above leave).
        graceful: the jobs that leave gracefully (a final checkpoint, nothing lost).
    """

    time_s: float
    drop_s: float
    available: int
    graceful: frozenset[str]


def leave_at_s(
    *, now_s: float, drop_s: float, step_s: float, checkpoint_write_s: float, mode: RescaleMode
) -> float | None:
    """When a job warned at ``now_s`` of a drop at ``drop_s`` leaves (None: it cannot).

    The single job's rule (:func:`~elasim.jobmodel.leave_lead_s`), with no survivors.
    """
    lead_s = leave_lead_s(
        step_s=step_s, checkpoint_write_s=checkpoint_write_s, survivors=0, mode=mode
    )
    if drop_s - now_s < lead_s - _EPS:
        return None
    return max(drop_s - lead_s, now_s)


class SpotFeed:
    """The capacity rows (and notices) of a cluster, and the leaves the loop planned.

    Args:
        rows: ``((time_s, nodes available), ...)`` from time 0, sorted.
        period_s: the rows repeat with this period (None: the last row holds).
        num_nodes: the cluster's nodes (capacity above is not a change).
        notice_s: notice before every drop (0: none).

    Raises:
        ValueError: the rows do not start at time 0, or a bad notice.
    """

    def __init__(
        self,
        rows: Sequence[tuple[float, int]],
        period_s: float | None,
        *,
        num_nodes: int,
        notice_s: float = 0.0,
    ) -> None:
        if rows[0][0] > 0:
            raise ValueError("a capacity trace starts at time 0")
        self.replay = CapacityReplay(
            [t for t, _ in rows],
            [max(int(a), 0) for _, a in rows],
            None,
            duration_s=period_s or math.inf,
            notice_s=notice_s,
            cap_nodes=num_nodes,
        )
        self.started = False
        self._leaves: list[tuple[float, int, Leave]] = []
        self._seq = 0
        self._caps: list[tuple[float, int]] = []  # (until_s, nodes) given up under notice

    @property
    def prior_mtbf_s(self) -> float:
        """The trace's mean time between drops (Young/Daly's prior; inf: none)."""
        return self.replay.prior_mtbf_s

    def next_time_s(self) -> float:
        """When the next row, notice or leave is due (0 before the first row)."""
        if not self.started:
            return 0.0
        best = self.replay.next_time_s()
        if self._leaves and self._leaves[0][0] < best:
            best = self._leaves[0][0]
        return best

    def pop_due(self, now_s: float) -> list[object]:
        """Rows, notices (:class:`~elasim.jobmodel.ReplayItem`) and :class:`Leave` due by now.

        In time order; a leave before a row or notice at the same time.  The first
        call gives the row at time 0 (the initial capacity).
        """
        if not self.started:
            self.started = True
            return [ReplayItem(0.0, False, self.replay.initial[0])]
        out: list[tuple[float, int, object]] = []
        while self._leaves and self._leaves[0][0] <= now_s + _EPS:
            leave = heapq.heappop(self._leaves)[2]
            out.append((leave.time_s, 0, leave))
        out += [(item.time_s, 1, item) for item in self.replay.pop_due(now_s)]
        out.sort(key=lambda x: (x[0], x[1]))
        return [x[2] for x in out]

    def plan(self, leave: Leave) -> None:
        """Queue a graceful leave."""
        self._seq += 1
        heapq.heappush(self._leaves, (leave.time_s, self._seq, leave))

    def warn(
        self,
        jobs: Iterable[Any],
        drop_s: float,
        available: int,
        now_s: float,
        mode: RescaleMode,
        pause_of: Callable[[Any], Any],
    ) -> None:
        """A drop to ``available`` at ``drop_s``: warn the jobs on the doomed nodes.

        Each gets a ``PREEMPT_NOTICE`` event; the jobs for which the notice is long
        enough (their step time and checkpoint write, the pause job's,
        ``pause_of(job)``) will leave gracefully, all at the earliest of their leave
        times (:class:`Leave`).
        """
        times: dict[str, float] = {}
        for job in jobs:
            if job.choice is None or not any(node >= available for node, _ in job.placement):
                continue
            job.record([EventRecord(now_s, EventKind.PREEMPT_NOTICE, job.gpus, 0)])
            leave_s = leave_at_s(
                now_s=now_s,
                drop_s=drop_s,
                step_s=job.choice.step_s,
                checkpoint_write_s=pause_of(job).checkpoint.write_s,
                mode=mode,
            )
            if leave_s is not None:
                times[job.name] = leave_s
        if times:
            self.plan(Leave(min(times.values()), drop_s, available, frozenset(times)))

    def cap(self, until_s: float, nodes: int) -> None:
        """Nodes from ``nodes`` on stay given up until ``until_s`` (a job left them)."""
        self._caps.append((until_s, nodes))

    def usable(self, available: int | None, now_s: float) -> int | None:
        """``available``, less the nodes given up under a notice whose drop is to come."""
        if not self._caps:
            return available
        self._caps = [c for c in self._caps if c[0] > now_s + _EPS]
        for _, nodes in self._caps:
            available = nodes if available is None else min(available, nodes)
        return available
