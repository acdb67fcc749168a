"""A user's cluster policy from a file (tests: plugins reach both shells the same way).

Every active job gets one GPU, on the nodes in arrival order, as long as GPUs are
free; it asks to be asked again every 10 minutes.
"""

from elasim.policies.cluster import ClusterDecision


class EveryoneOne:
    name = "everyone_one"

    def decide(self, obs):
        free = [obs.gpus_per_node] * obs.num_nodes
        alloc = {}
        for job in obs.jobs:
            node = next((i for i, f in enumerate(free) if f), None)
            if node is None:
                break
            free[node] -= 1
            alloc[job.name] = ((node, 1),)
        return ClusterDecision.of(alloc, wake_after_s=600.0)
