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


def _fits(placement: Placement, free: list[int]) -> bool:
    return all(0 <= node < len(free) and free[node] >= gpus for node, gpus in placement)


def _take(count: int, free: list[int], per_node: int) -> Placement:
    """Place ``count`` GPUs on the free ones (``free`` is updated)."""
    if count <= per_node:
        best = -1
        for node, room in enumerate(free):
            if room >= count and (best < 0 or room < free[best]):
                best = node
                if room == count:
                    break
        if best >= 0:
            free[best] -= count
            return ((best, count),)
    taken: dict[int, int] = {}
    order = sorted(range(len(free)), key=lambda n: (-free[n], n))
    left = count
    for node in order:
        if left <= 0:
            break
        give = min(free[node], left)
        if give > 0:
            taken[node] = give
            free[node] -= give
            left -= give
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
    for job in jobs:
        count = counts.get(job.name, 0)
        if count <= 0:
            continue
        if job.gpus == count and _fits(job.placement, free):
            for node, gpus in job.placement:
                free[node] -= gpus
            out[job.name] = job.placement
        else:
            todo.append((count, job.name))
    for count, name in sorted(todo, key=lambda t: (-t[0], t[1])):
        out[name] = _take(count, free, gpus_per_node)
    return out
