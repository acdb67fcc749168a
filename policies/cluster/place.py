"""Turning GPU counts into placements: one helper every cluster policy shares.

Policies mostly decide *how many* GPUs each job gets; where they go follows one rule
so that policies differ in what they decide, not in how they pack.  Jobs whose count
does not change keep their placement (a move would cost a pause for nothing); the
others are placed largest first, a job that fits on one node on the node it fits
best (least free room left), a larger one on the nodes with the most free GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .base import ClusterJobView, Placement

__all__ = ["place"]


def _keep(placement: Placement, count: int, free: list[int]) -> bool:
    """Take ``placement`` off ``free`` if it holds ``count`` GPUs, all free; else leave it.

    One pass over the cells for the count and the room, and one to take them: a
    decision on a large cluster keeps most jobs where they are.
    """
    nodes, total = len(free), 0
    for node, gpus in placement:
        if not (0 <= node < nodes and free[node] >= gpus):
            return False
        total += gpus
    if total != count:
        return False
    for node, gpus in placement:
        free[node] -= gpus
    return True


def _take(count: int, free: list[int], per_node: int) -> Placement:
    """Place ``count`` GPUs on the free ones (``free`` is updated).

    A job that fits on one node goes to the first node with the least room that
    holds it; a larger one takes the nodes with the most free GPUs first (ties by
    index).  Both search ``free`` by room with ``list.index`` (a scan in C), not node
    by node: a 1,024-GPU cluster has 256 nodes and a decision places jobs often.
    """
    if count <= per_node:
        for room in range(count, per_node + 1):
            if room in free:
                best = free.index(room)
                free[best] -= count
                return ((best, count),)
    taken: dict[int, int] = {}
    left = count
    for room in range(per_node, 0, -1):
        start = 0
        while left > 0:
            try:
                node = free.index(room, start)
            except ValueError:
                break
            give = min(room, left)
            taken[node] = give
            free[node] -= give
            left -= give
            start = node + 1
        if left <= 0:
            break
    if left > 0:
        raise ValueError(f"cannot place {count} GPUs: only {count - left} free")
    return tuple(sorted(taken.items()))


def place(
    jobs: Iterable[ClusterJobView],
    counts: Mapping[str, int],
    num_nodes: int,
    gpus_per_node: int,
) -> dict[str, Placement]:
    """Placements for ``counts`` (job name -> GPUs); jobs with 0 GPUs are left out.

    Raises:
        ValueError: the counts add up to more GPUs than the cluster has.
    """
    if sum(counts.values()) > num_nodes * gpus_per_node:
        raise ValueError("the GPU counts add up to more than the cluster has")
    free = [gpus_per_node] * num_nodes
    out: dict[str, Placement] = {}
    todo: list[tuple[int, str]] = []
    wanted = counts.get
    for job in jobs:
        count = wanted(job.name, 0)
        if count <= 0:
            continue
        placement = job.placement
        if len(placement) == 1:  # most jobs fit on one node: _keep's test, inline
            node, gpus = placement[0]
            if gpus == count and 0 <= node < num_nodes and free[node] >= gpus:
                free[node] -= gpus
                out[job.name] = placement
                continue
        elif placement and _keep(placement, count, free):
            out[job.name] = placement
            continue
        todo.append((count, job.name))
    for count, name in sorted(todo, key=lambda t: (-t[0], t[1])):
        out[name] = _take(count, free, gpus_per_node)
    return out
