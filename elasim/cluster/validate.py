"""A cluster policy's answer, checked before the loop applies any of it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Container, Mapping, MutableSet
from operator import lt

from elasim.jobmodel import PolicyError
from elasim.jobmodel.loop import _policy_error
from elasim.policies.cluster import (
    ClusterDecision,
    ClusterObservation,
    ClusterPolicy,
    Placement,
)

from .job import ClusterJob

__all__ = ["validate_decision"]

log = logging.getLogger(__name__)


def validate_decision(
    raw: object,
    obs: ClusterObservation,
    policy: ClusterPolicy,
    jobs: Mapping[str, ClusterJob],
    active: Container[str],
    warned: MutableSet[tuple[str, object]] | None = None,
) -> ClusterDecision:
    """The decision, or a :class:`PolicyError` naming ``policy`` and what is wrong.

    Args:
        raw: what ``decide`` returned.
        obs: the observation it was given.
        policy: the policy that answered.
        jobs: every job by name.
        active: the names of the active jobs.
        warned: ``(job, batch)`` pairs already logged (each bad batch is one line).

    A decision that keeps the very placement tuple a job holds needs no check of its
    cells: they were checked when it was given (a job on a lost node was preempted).
    Any other is checked and sorted where it is not (:func:`_entering`), once.

    The GPUs given per node are summed in a list by node index, not a dict: a decision
    on 1,024 GPUs names hundreds of cells, each a list index instead of a dict lookup;
    an overfull node is reported by its index, the lowest first.  A bad batch size does
    not end the run (:func:`_good_batches`).
    """

    def bad(detail: str) -> PolicyError:
        return _policy_error(policy, None, detail)  # type: ignore[arg-type]

    if not isinstance(raw, ClusterDecision):
        raise bad(f"decide() returned {type(raw).__name__} {raw!r:.60}, not a ClusterDecision")
    usable, per_node = obs.usable_nodes, obs.gpus_per_node
    used = [0] * obs.num_nodes  # GPUs given per node (any node a job holds is one of them)
    unsorted: dict[str, Placement] = {}
    for name, placement in raw.allocations:
        if name not in active:
            raise bad(f"allocated GPUs to {name!r}, which is not an active job")
        if placement is not jobs[name].placement:
            if (kept := _entering(name, placement, usable, bad)) is not placement:
                unsorted[name] = kept
        for node, gpus in placement:
            used[node] += gpus
    if max(used, default=0) > per_node:
        node = next(node for node, total in enumerate(used) if total > per_node)
        raise bad(f"node {node} given {used[node]} GPUs; it has {per_node}")
    for name, _ in raw.batch_sizes:
        if name not in active:
            raise bad(f"set the batch size of {name!r}, which is not an active job")
    wake = raw.wake_after_s
    if wake is not None and not (isinstance(wake, (int, float)) and wake > 0):
        raise bad(f"wake_after_s is {wake!r}; must be a number > 0 or None")
    names = [name for name, _ in raw.allocations]
    if len(set(names)) != len(names):
        raise bad("allocated to the same job twice")
    if unsorted:  # a policy's own tuple, or a ClusterDecision built without ``of``
        sort = tuple((n, unsorted.get(n, p)) for n, p in raw.allocations)
        raw = dataclasses.replace(raw, allocations=sort)
    return _good_batches(raw, policy, jobs, set() if warned is None else warned)


def _entering(
    name: str, placement: Placement, usable: int, bad: Callable[[str], PolicyError]
) -> Placement:
    """A new placement for job ``name``, checked, as the loop keeps it.

    That is a tuple of tuple cells sorted by node: ``placement`` itself where it is one
    already (what :func:`~elasim.policies.cluster.place` builds), else a sorted copy.
    The loop hands a policy only such tuples, so a policy that keeps a job's placement
    returns one the loop need not sort or check again: the job's own, by identity.
    """
    for node, gpus in placement:
        if not (isinstance(node, int) and 0 <= node < usable):
            raise bad(f"placed {name!r} on node {node!r}; usable nodes are 0..{usable - 1}")
        if not (isinstance(gpus, int) and gpus > 0):
            raise bad(f"gave {name!r} {gpus!r} GPUs on node {node}; must be an int > 0")
    if (
        type(placement) is tuple
        and all(type(cell) is tuple for cell in placement)
        and all(map(lt, placement, placement[1:]))
    ):
        return placement
    return tuple(sorted(tuple(cell) for cell in placement))


def _good_batches(
    raw: ClusterDecision,
    policy: ClusterPolicy,
    jobs: Mapping[str, ClusterJob],
    warned: MutableSet[tuple[str, object]],
) -> ClusterDecision:
    """``raw`` with each bad batch size replaced by the job's last good one.

    Bad: not an int, negative, zero from a policy that does not declare
    ``adaptive_batches`` (for those 0 is :data:`~elasim.cluster.job.ADAPTIVE`), or above
    the job's largest validated batch.  Each is logged once, in one line naming the
    policy.  Why not an error, as a bad placement is: a batch is a hint the job can
    go without, while a bad placement leaves nothing sensible to apply.
    """
    low = 0 if getattr(policy, "adaptive_batches", False) else 1
    sizes = [batch for _, batch in raw.batch_sizes]
    if low == 0 and set(map(type, sizes)) <= {int} and not any(sizes):
        return raw  # every job adapts its own batch (an elastic policy's every decision)
    batches, changed = [], False
    for name, batch in raw.batch_sizes:
        job = jobs[name]
        ok = isinstance(batch, int) and not isinstance(batch, bool)
        if not (ok and low <= batch <= job.app.max_batch):
            if (name, batch) not in warned:
                warned.add((name, batch))
                detail = (
                    f"batch size of {name!r} is {batch!r}; must be an int in {low}.."
                    f"{job.app.max_batch}; it keeps {job.batch_target}"
                )
                log.warning("%s", _policy_error(policy, None, detail))  # type: ignore[arg-type]
            batch, changed = job.batch_target, True
        batches.append((name, batch))
    return dataclasses.replace(raw, batch_sizes=tuple(batches)) if changed else raw
