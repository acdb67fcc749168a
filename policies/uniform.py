"""``uniform_progress``: Can't Be Late's Uniform Progress, one node and N nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ._common import HOLD_NOTHING, TIME_EPS_S, all_usable_spot, check_float, usable_spot, wake_after
from ._ondemand import (
    DEFAULT_SAFETY_MARGIN_S,
    OnDemandPlan,
    fastest_count,
    flat_out,
    held_spot_beside,
    job_plan,
    job_samples,
    training_rate,
)
from .base import Decision, Observation, PolicyBase
from .registry import register

__all__ = ["UniformProgressPolicy"]


@register
class UniformProgressPolicy(PolicyBase):
    """Can't Be Late's Uniform Progress: keep up with the straight line to the deadline.

    Wu et al. (NSDI'24) track the *uniform progress line*: by time ``t`` a job of
    ``C`` compute seconds due at ``D`` should have done ``C x t / D``.  Their rule,
    for one node, with restart overhead ``d``:

    1. spot available: run on spot;
    2. no spot and behind the line: run on on-demand;
    3. no spot and on (or ahead of) the line: idle;
    4. hysteresis: once on on-demand, stay on it until the job is ahead of the line
       by one restart overhead (``d`` of work), so that it does not flap on the line;
    5. safety net: when the slack left (time left less the time to finish on
       on-demand, a restart included) falls to ``d`` plus a margin, switch to
       on-demand for good (Greedy's "must go on-demand" rule).

    Here ``C`` is the job's samples, the line ``samples x now / deadline``, ``d`` the
    observation's worst pause and the margin ``safety_margin_s`` (the ``deadline``
    policy's default, 300 s).  With spot back while on on-demand the on-demand nodes
    go only when spot alone keeps the pace (rule 4's hysteresis otherwise).

    **N nodes** (our generalisation): the on-demand unit is ``k0``, the node count of
    the cheapest pure on-demand plan (:func:`~elasim.policies._ondemand.job_plan`),
    and "on the line" means progressing at least at ``k0`` on-demand nodes' rate.
    Spot is used whenever available: the usable spot count that trains fastest, every
    usable node where more nodes train faster (rule 1).  Behind the line, on-demand
    nodes *top up* the spot ones: the fewest whose total rate is at least ``k0``'s,
    ``k0`` without spot (rule 2).  At the safety net the fewest on-demand nodes (``k0``
    or more) that still finish hold to the end, with the fastest spot count beside
    them, new spot nodes only while the slack covers taking and losing them (else the
    held ones that help).  At one node this is the published rule.  Unlike
    ``deadline``, it promises nothing about cost: it is the published baseline.

    Stateless: the hysteresis reads the nodes held.  Without a deadline, or without
    on-demand nodes, it holds every usable spot node; when no on-demand count meets
    the deadline it runs flat out.
    """

    name: ClassVar[str] = "uniform_progress"
    plans_for_deadline: ClassVar[bool] = True

    @dataclass(frozen=True)
    class Config:
        """Options of the ``uniform_progress`` policy.

        Attributes:
            safety_margin_s: seconds of slack, on top of one restart, at which the
                safety net commits to on-demand nodes until done.
            hysteresis_s: on-demand nodes held behind the line go only once the job
                is this many seconds of work (at ``k0`` nodes' rate) ahead of the
                line; None means one restart overhead (``obs.worst_pause_s``).
        """

        safety_margin_s: float = DEFAULT_SAFETY_MARGIN_S
        hysteresis_s: float | None = None

        def __post_init__(self) -> None:
            check_float("safety_margin_s", self.safety_margin_s)
            check_float("hysteresis_s", self.hysteresis_s, optional=True)

    config: Config

    def ahead_s(self, obs: Observation, plan: OnDemandPlan) -> float:
        """Seconds of work (at ``k0`` nodes' rate) that the job is ahead of the line."""
        assert obs.deadline_s is not None
        total = job_samples(obs)
        line = total * min(max(obs.now_s / obs.deadline_s, 0.0), 1.0)
        done = total - obs.remaining_samples
        return (done - line) / training_rate(obs, plan.nodes)

    def slack_s(self, obs: Observation, on_demand: int) -> float:
        """Time left less the time to finish on ``on_demand`` nodes (a restart if new)."""
        assert obs.deadline_s is not None
        rate = training_rate(obs, on_demand)
        if rate <= 0.0:
            return -math.inf
        switch = 0.0 if obs.on_demand_held == on_demand else obs.worst_pause_s
        return obs.deadline_s - obs.now_s - switch - obs.remaining_samples / rate

    def decide(self, obs: Observation) -> Decision:
        """Spot when there is spot; on-demand behind the line or at the safety net."""
        if obs.deadline_s is None or not math.isfinite(obs.on_demand_price_per_hour):
            return all_usable_spot(obs)
        if obs.remaining_samples <= 0.0:
            return HOLD_NOTHING
        plan = job_plan(obs)
        if plan is None:
            return flat_out(obs)
        spare = self.slack_s(obs, plan.nodes) - self.config.safety_margin_s - obs.worst_pause_s
        if spare <= TIME_EPS_S:
            return self._safety_net(obs, plan)
        spot = self._fastest_spot(obs)
        ahead = self.ahead_s(obs, plan)
        lead = self.config.hysteresis_s
        lead = obs.worst_pause_s if lead is None else lead
        behind = ahead <= 0.0 or (obs.on_demand_held > 0 and ahead < lead)
        target = training_rate(obs, plan.nodes)
        pace = training_rate(obs, spot) / target
        if behind and pace < 1.0:  # on-demand nodes top the spot ones up to the pace
            spot, on_demand = self._top_up(obs, spot, target)
            short = training_rate(obs, spot + on_demand) < target  # no count reaches it
            return Decision(spot, on_demand, wake_after(spare) if short else None)
        if spot < obs.min_nodes:
            spot, pace = 0, 0.0
        # look again at the safety net, or when the line catches up with the job
        gain = job_samples(obs) / obs.deadline_s / target - pace
        catch_up = ahead / gain if gain > 0.0 else math.inf
        return Decision(spot, 0, wake_after(min(catch_up, spare)))

    @staticmethod
    def _fastest_spot(obs: Observation) -> int:
        """The usable spot count that trains fastest (ties: fewer nodes).

        Rule 1 says "run on spot"; at one node that is the node, and at N nodes every
        usable one only where more nodes train faster.  Where scaling is poor (ResNet-50
        on p3.2xlarge trains slower on 2 nodes than on 1) every usable node fell
        behind the on-demand plan's pace with no room left to top it up, and the job
        finished late.
        """
        best, best_rate = 0, 0.0
        for spot in range(obs.min_nodes, usable_spot(obs) + 1):
            rate = training_rate(obs, spot)
            if rate > best_rate:
                best, best_rate = spot, rate
        return best

    def _top_up(self, obs: Observation, spot: int, target: float) -> tuple[int, int]:
        """Spot nodes and the fewest on-demand ones beside them that reach ``target``."""
        for on_demand in range(1, obs.max_nodes - spot + 1):
            nodes = spot + on_demand
            if nodes >= obs.min_nodes and training_rate(obs, nodes) >= target:
                return spot, on_demand
        fastest = fastest_count(obs, max(spot, 1))  # none does: as fast as it goes
        return spot, fastest - spot

    def _safety_net(self, obs: Observation, plan: OnDemandPlan) -> Decision:
        """The fewest on-demand nodes (``k0`` or more) that finish, spot beside them.

        Spot beside the committed nodes is :meth:`_beside`'s: at one node there is no
        room for any (the published rule).
        """
        assert obs.deadline_s is not None
        least = max(plan.nodes, obs.on_demand_held)
        on_demand = fastest_count(obs, least)
        for nodes in range(least, obs.max_nodes + 1):
            if self.slack_s(obs, nodes) >= 0.0:
                on_demand = nodes
                break
        return Decision(self._beside(obs, on_demand), on_demand, None)

    def _beside(self, obs: Observation, on_demand: int) -> int:
        """Usable spot nodes next to ``on_demand`` committed ones: the count that is fastest.

        Not simply every usable one (greedy with fallback's rule): where scaling is
        poor, more nodes train slower (ResNet-50 on p3.2xlarge, 100 MB of gradients
        over "up to 10 Gbps", trains slower on 2 nodes than on 1), and the safety net
        that added a spot node to one on-demand node finished 77 s late.  New nodes
        re-form a running group (a rescale), and losing them pauses it (the worst
        pause): they come only while the slack covers both.  At one node there is no
        room for spot beside the on-demand node: the published rule.
        """
        best, best_rate = 0, training_rate(obs, on_demand)
        for spot in range(1, min(usable_spot(obs), obs.max_nodes - on_demand) + 1):
            rate = training_rate(obs, on_demand + spot)
            if rate > best_rate:
                best, best_rate = spot, rate
        joins = obs.rescale_cost_s if obs.spot_held + obs.on_demand_held else 0.0
        if best > obs.spot_held and self.slack_s(obs, on_demand) < joins + obs.worst_pause_s:
            best = held_spot_beside(obs, on_demand)  # no new ones: the held that help
        return best
