"""``fixed``: the non-elastic baseline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ._common import HOLD_NOTHING, check_bool, check_int
from .base import Decision, Observation, PolicyBase
from .registry import register


@register
class FixedPolicy(PolicyBase):
    """Non-elastic baseline: run on exactly N nodes or not at all.

    This is how a job launched with a fixed world size (plain ``torchrun`` without
    ``--nnodes MIN:MAX``, or an MPI job) behaves on spot capacity: it runs while N
    nodes can be had; when one is preempted the whole job stops and waits, holding
    nothing, until N are available again.  Every elastic policy should beat it.

    With ``use_on_demand`` it instead keeps running by filling the missing nodes
    with on-demand ones (the classic "spot with on-demand fallback" set-up), so it
    never waits but pays on-demand prices while spot is short.

    ``n_nodes`` outside the job's ``[min_nodes, max_nodes]`` is moved to the nearest
    bound, so the baseline can always run.
    """

    name: ClassVar[str] = "fixed"

    @dataclass(frozen=True)
    class Config:
        """Options of the ``fixed`` policy.

        Attributes:
            n_nodes: the fixed world size N; None means the job's ``max_nodes``.
            use_on_demand: fill spot shortfalls with on-demand nodes instead of
                waiting for N spot nodes.
        """

        n_nodes: int | None = None
        use_on_demand: bool = False

        def __post_init__(self) -> None:
            check_int("n_nodes", self.n_nodes, minimum=1, optional=True)
            check_bool("use_on_demand", self.use_on_demand)

    config: Config

    def decide(self, obs: Observation) -> Decision:
        """N spot nodes if available; else N with on-demand filling, or nothing."""
        n = obs.max_nodes if self.config.n_nodes is None else self.config.n_nodes
        n = min(max(n, obs.min_nodes), obs.max_nodes)
        if obs.spot_available >= n:
            return Decision(n, 0, None)
        if self.config.use_on_demand:
            spot = obs.spot_available
            return Decision(spot, n - spot, None)
        return HOLD_NOTHING
