"""A policy of your own: copy this file, edit ``decide``, run it by path.

``elasim policies --template > my_policy.py`` writes this file;
``elasim simulate -t spot_us_east.csv -p my_policy.py:HalfPolicy --set fraction=0.25``
runs it, and ``elasim run`` runs the same object on real workers.  A policy is a pure
decision object: an immutable observation in, a decision out (see ``elasim
policies`` for what the built-in ones do, and the documentation's policy guide).
"""

from __future__ import annotations

from dataclasses import dataclass

from elasim.policies import Decision, Observation, PolicyBase


class HalfPolicy(PolicyBase):
    """Hold a share of the available spot nodes (never fewer than the job's minimum)."""

    name = "half"

    @dataclass(frozen=True)
    class Config:
        """Options, set with ``--set key=value``.

        Attributes:
            fraction: share of the available spot nodes to hold.
        """

        fraction: float = 0.5

        def __post_init__(self) -> None:
            if not 0 < self.fraction <= 1:
                raise ValueError(f"fraction must be in (0, 1], got {self.fraction}")

    def decide(self, obs: Observation) -> Decision:
        """Spot nodes only: ``fraction`` of what is offered, or nothing below the minimum."""
        spot = int(obs.spot_available * self.config.fraction)
        return Decision(spot if spot >= obs.min_nodes else 0)
