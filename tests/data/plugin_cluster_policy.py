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


class BadBatches:
    """Everyone one GPU; the first job's batch is 256, then four bad ones, then 256.

    Decisions 2..5 ask for -5, 10**6 (above any validated batch), 2.5 and 0 (adaptive
    is for policies that declare ``adaptive_batches``): each must be one log line
    naming the policy, and the job must keep 256 meanwhile.
    """

    name = "bad_batches"
    bad = (256, -5, 10**6, 2.5, 0)
    good = 256

    def __init__(self):
        self.asked = 0

    def decide(self, obs):
        free = [obs.gpus_per_node] * obs.num_nodes
        alloc = {}
        for job in obs.jobs:
            node = next((i for i, f in enumerate(free) if f), None)
            if node is None:
                break
            free[node] -= 1
            alloc[job.name] = ((node, 1),)
        bad = self.bad
        batch = bad[self.asked] if self.asked < len(bad) else self.good
        self.asked += 1
        batches = {obs.jobs[0].name: batch} if obs.jobs else {}
        return ClusterDecision.of(alloc, batches, wake_after_s=600.0)


class AdaptiveBadBatches(BadBatches):
    """An adaptive policy (0 is legal) that asks 0, then False: not an int, though equal.

    Every other batch it sends is 0, so only False may be logged: a check that lets a
    decision of zeros through at once must not let a bool through.
    """

    name = "adaptive_bad_batches"
    adaptive_batches = True
    bad = (0, False, 0)
    good = 0
