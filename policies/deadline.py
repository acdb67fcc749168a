"""``deadline``: Can't Be Late's Uniform Progress, generalised to N nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ._common import (
    HOLD_NOTHING,
    TIME_EPS_S,
    all_usable_spot,
    check_float,
    check_int,
    usable_spot,
    wake_after,
)
from .base import Decision, Observation, PolicyBase
from .registry import register

#: Default release lead, in rescale pauses.  Without spot the policy cycles: idle
#: while the lead lasts, add on-demand nodes (one pause ``C``), catch up to the
#: release lead ``L``, release.  The pause is about ``C / (L + 2C)`` of the on-demand
#: time when catching up at roughly twice the schedule's pace; ``L = 10 C`` keeps it
#: near 8 %.  Two pauses (the bare break-even) cycled so often that, in a toy replay
#: with pauses, the overhead ate the margin.
_DEFAULT_RELEASE_LEAD_RESCALES = 10.0


@register
class DeadlinePolicy(PolicyBase):
    """Meet a deadline cheaply: spot while on schedule, on-demand top-up when behind.

    Can't Be Late (Wu et al., NSDI'24) shows that for a single-node job with a
    deadline, the *Uniform Progress* rule is a strong, simple policy: the job should
    have done at least the fraction ``t / D`` of its work at time ``t``; while it is
    ahead of that line it uses spot only (or idles when there is none), and while
    it is behind it uses on-demand.  This policy generalises the rule to N nodes:

    * **Schedule.**  The plan is to finish ``margin_s = safety_margin_s +
      obs.worst_pause_s`` before the deadline, so that one more pause (a
      preemption at the worst moment, or a resume from no nodes) still fits.
      With ``D' = deadline_s - margin_s`` the schedule line is
      ``progress = now_s / D'`` and the job's *lead* is
      ``lead_s = progress * D' - now_s`` seconds (> 0: ahead).
    * **Ahead** (``lead_s > 0``): hold all usable spot nodes and no on-demand.
    * **Behind** (``lead_s <= 0``): hold all usable spot nodes plus the fewest
      on-demand nodes (at most ``max_on_demand``) whose goodput meets the rate
      that finishes on time, ``remaining_samples / (deadline_s - margin_s -
      now_s)``.  If no count reaches it, the count with the most goodput
      (best effort).  Being behind the line implies this rate exceeds the
      line's slope, so the job catches up.
    * **Hysteresis.**  On-demand nodes, once added, are not reduced while catching
      up, and are released (all at once) only when the lead reaches
      ``release_lead_s`` (default ``10 * obs.rescale_cost_s``, so that the pauses
      of releasing and re-adding stay a small part of the on-demand time).
      Without it the job would flap between the two modes at every decision
      near the line.

    The decision's ``wake_after_s`` is the time at which, at the chosen goodput,
    the lead will cross the next threshold (zero when ahead on spot only, the
    release lead when catching up); capacity changes wake the policy anyway.

    Without a deadline in the observation, it behaves like ``greedy``.  The policy is
    stateless: its mode follows from the observation (the lead and the on-demand
    nodes held), so a restarted controller picks up where it left off.
    """

    name: ClassVar[str] = "deadline"

    @dataclass(frozen=True)
    class Config:
        """Options of the ``deadline`` policy.

        Attributes:
            safety_margin_s: seconds of slack kept before the deadline on top of
                one pause (``obs.worst_pause_s``: the larger of a planned rescale and a
                resume from no nodes).  It absorbs what the goodput table and the
                pause estimates leave out: failure detection, rolled-back work and
                checkpoint time.
            max_on_demand: most on-demand nodes to add when behind; None means up to
                the job's ``max_nodes``.
            release_lead_s: lead over the schedule, in seconds, at which on-demand
                nodes are released; None means ten times ``obs.rescale_cost_s``.
        """

        safety_margin_s: float = 600.0
        max_on_demand: int | None = None
        release_lead_s: float | None = None

        def __post_init__(self) -> None:
            check_float("safety_margin_s", self.safety_margin_s)
            check_int("max_on_demand", self.max_on_demand, minimum=0, optional=True)
            check_float("release_lead_s", self.release_lead_s, optional=True)

    config: Config

    def margin_s(self, obs: Observation) -> float:
        """Seconds before the deadline by which the schedule plans to finish."""
        return self.config.safety_margin_s + obs.worst_pause_s

    def release_lead_s(self, obs: Observation) -> float:
        """Lead over the schedule at which on-demand nodes are released."""
        if self.config.release_lead_s is not None:
            return self.config.release_lead_s
        return _DEFAULT_RELEASE_LEAD_RESCALES * obs.rescale_cost_s

    def decide(self, obs: Observation) -> Decision:
        """Spot only when on schedule; spot plus enough on-demand when behind."""
        if obs.deadline_s is None:
            return all_usable_spot(obs)
        if obs.progress >= 1.0 or obs.remaining_samples <= 0.0:
            return HOLD_NOTHING
        total_samples = obs.remaining_samples / (1.0 - obs.progress)
        end_s = obs.deadline_s - self.margin_s(obs)  # D'
        lead_s = obs.progress * end_s - obs.now_s if end_s > 0.0 else -math.inf
        release_s = self.release_lead_s(obs)
        spot = usable_spot(obs)

        # Exactly on the line counts as behind: a wake-up scheduled for the crossing
        # arrives with a lead of +-1 ulp, and idling there would never wake again.
        ahead = lead_s > TIME_EPS_S
        if ahead and (obs.on_demand_held == 0 or lead_s >= release_s - TIME_EPS_S):
            decision = all_usable_spot(obs)
            # Falling behind on spot only: wake when the lead reaches zero.
            slope = self._lead_slope(obs, decision.total_nodes, end_s, total_samples)
            wake = lead_s / -slope if slope < 0.0 and lead_s > 0.0 else math.inf
            return Decision(decision.spot_nodes, 0, self._wake(obs, decision.total_nodes, wake))

        on_demand = self._on_demand_needed(obs, spot, end_s)
        if spot + on_demand < obs.min_nodes:
            return HOLD_NOTHING  # max_on_demand too small to reach min_nodes
        # Catching up: wake when the lead reaches the release threshold.
        slope = self._lead_slope(obs, spot + on_demand, end_s, total_samples)
        wake = (release_s - lead_s) / slope if slope > 0.0 and end_s > 0.0 else math.inf
        return Decision(spot, on_demand, self._wake(obs, spot + on_demand, wake))

    def _on_demand_needed(self, obs: Observation, spot: int, end_s: float) -> int:
        """Fewest on-demand nodes meeting the on-time rate, never fewer than held.

        Never fewer than already held: each change is a rescale, and a job that is
        behind schedule cannot afford pauses.  The release happens in one step, at
        the release lead.
        """
        cap = obs.max_nodes if self.config.max_on_demand is None else self.config.max_on_demand
        high = min(cap, obs.max_nodes - spot)
        low = min(obs.on_demand_held, high)
        time_left_s = end_s - obs.now_s
        rate = obs.remaining_samples / time_left_s if time_left_s > 0.0 else math.inf
        best_k, best_g = low, -math.inf
        for k in range(low, high + 1):
            g = obs.goodput(spot + k)
            if g >= rate:
                return k
            if g > best_g:
                best_k, best_g = k, g
        return best_k

    @staticmethod
    def _wake(obs: Observation, nodes: int, crossing_s: float) -> float | None:
        """``crossing_s`` as a wake-up, unless the job finishes first on ``nodes`` nodes.

        The lead grows linearly only until the work is done, so a crossing projected
        past the end of the job (say, the release lead after the deadline) never comes.
        """
        goodput = obs.goodput(nodes)
        if goodput > 0.0 and crossing_s >= obs.remaining_samples / goodput:
            return None
        return wake_after(crossing_s)

    @staticmethod
    def _lead_slope(obs: Observation, nodes: int, end_s: float, total_samples: float) -> float:
        """d(lead_s)/dt on ``nodes`` nodes: ``goodput * D' / total - 1``."""
        return obs.goodput(nodes) * end_s / total_samples - 1.0
