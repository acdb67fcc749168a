"""A cluster policy's answer, checked before the loop applies any of it."""

from __future__ import annotations

from collections.abc import Callable, Container

from elasim.jobmodel import PolicyError
from elasim.policies.cluster import ClusterDecision, ClusterObservation

__all__ = ["validate_decision"]


def validate_decision(
    raw: object,
    obs: ClusterObservation,
    active: Container[str],
    bad: Callable[[str], PolicyError],
) -> ClusterDecision:
    """The decision, or ``bad(what is wrong with it)`` raised.

    Args:
        raw: what ``decide`` returned.
        obs: the observation it was given.
        active: the names of the active jobs.
        bad: the error naming the policy, for a one-line description.

    The GPUs given per node are summed over the nodes named only (a 1,024-GPU cluster
    has 256 nodes, and a decision names a few of them per job); an overfull node is
    reported by its index, the lowest first.
    """
    if not isinstance(raw, ClusterDecision):
        raise bad(f"decide() returned {type(raw).__name__} {raw!r:.60}, not a ClusterDecision")
    usable = obs.usable_nodes
    used: dict[int, int] = {}
    for name, placement in raw.allocations:
        if name not in active:
            raise bad(f"allocated GPUs to {name!r}, which is not an active job")
        for node, gpus in placement:
            if not (isinstance(node, int) and 0 <= node < usable):
                raise bad(f"placed {name!r} on node {node!r}; usable nodes are 0..{usable - 1}")
            if not (isinstance(gpus, int) and gpus > 0):
                raise bad(f"gave {name!r} {gpus!r} GPUs on node {node}; must be an int > 0")
            used[node] = used.get(node, 0) + gpus
    per_node = obs.gpus_per_node
    over = [node for node, total in used.items() if total > per_node]
    if over:
        node = min(over)
        raise bad(f"node {int(node)} given {used[node]} GPUs; it has {per_node}")
    for name, batch in raw.batch_sizes:
        if name not in active:
            raise bad(f"set the batch size of {name!r}, which is not an active job")
        if not (isinstance(batch, int) and batch >= 0):
            raise bad(f"batch size of {name!r} is {batch!r}; must be an int >= 0")
    wake = raw.wake_after_s
    if wake is not None and not (isinstance(wake, (int, float)) and wake > 0):
        raise bad(f"wake_after_s is {wake!r}; must be a number > 0 or None")
    names = [name for name, _ in raw.allocations]
    if len(set(names)) != len(names):
        raise bad("allocated to the same job twice")
    return raw
