"""``deadline``: meet a deadline on spot, never paying more than on-demand alone would."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

from ._common import (
    HOLD_NOTHING,
    TIME_EPS_S,
    all_usable_spot,
    check_bool,
    check_float,
    usable_spot,
    wake_after,
)
from ._ondemand import (
    DEFAULT_OVERHEAD_FRACTION,
    DEFAULT_SAFETY_MARGIN_S,
    OnDemandPlan,
    cost_effective_spot,
    fastest_count,
    finish_on_demand_s,
    flat_out,
    held_spot_beside,
    job_plan,
    job_samples,
    preemption_usd,
    taking_again_usd,
    training_rate,
)
from ._zones import ZoneUptime
from .base import Decision, Observation, PolicyBase
from .registry import register


@register
class DeadlinePolicy(PolicyBase):
    """Meet a deadline cheaply: spot while it pays, on-demand from the last safe moment.

    The yardstick is the cheapest pure on-demand plan that meets the deadline:
    ``k0`` on-demand nodes run straight from the start (see
    :func:`~elasim.policies._ondemand.job_plan`), costing ``usd_per_sample`` per
    effective sample.  Can't Be Late (Wu et al., NSDI'24) decides between spot,
    on-demand and idling for one node; this is its N-node version, built so that
    it cannot lose to that plan by more than a small, stated bet:

    * **Slack.**  ``slack_s = time left - (pause + remaining / rate(k0))``: how long
      the job can still wait before it must run on ``k0`` on-demand nodes to the end
      (``rate`` is goodput less the periodic checkpoints).  The policy keeps
      ``margin = safety_margin_s + obs.worst_pause_s`` of it in reserve for what spot
      can do wrong (work rolled back, estimates off), and spends the rest.
    * **Budget.**  ``budget = risk_fraction x plan cost + usd_per_sample x done -
      obs.spent_usd``: what the work done so far would have cost on the plan,
      minus what was spent on it.  Spot that makes progress cheaper than the plan
      raises it; boots, pauses and lost work lower it.
    * **While the slack exceeds the margin**: hold spot only, as many nodes as each
      add samples cheaper than the plan (sub-linear scaling makes the 16th node's
      samples dearer than on-demand ones: see
      :func:`~elasim.policies._ondemand.cost_effective_spot`), or nothing when
      there is no such spot.  New spot nodes are only added while the budget covers
      their boot and pause; when it is spent, the policy holds nothing.
    * **At the last safe moment** (slack down to the margin): commit: the fewest
      on-demand nodes that finish in time (``k0``, unless spot lost more than the
      margin), plus the spot nodes that make the remaining samples cheaper still.
      On-demand nodes are never reduced while committed: each change would cost a
      pause.  Committing to ``k0`` at any time costs what the plan costs.
    * **Back to spot** only when spot capacity goes unused and the slack, counted
      as if the on-demand nodes were released now, exceeds the margin by
      ``release_lead_s`` (default ``payback_factor x (obs.worst_pause_s +
      obs.rescale_cost_s)``): the on-demand nodes then stay off for at least that
      long, enough to pay back switching them off and on again.  With no spot at
      all the slack never grows on on-demand alone, so the policy cannot flap.

    Cost: while it follows these rules, the policy pays at most the plan's cost plus
    ``risk_fraction`` of it (the budget counts progress at the plan's price).  A
    policy that bet nothing would never try spot: the first spot nodes are paid
    before anyone knows whether they will survive their boot.

    Without a deadline it behaves like ``greedy``; without on-demand nodes it holds
    every usable spot node; when no on-demand count can meet the deadline it runs
    as fast as it can (every usable spot node and on-demand nodes up to
    ``max_nodes``).  Stateless in one zone: everything follows from the observation
    (spend, progress, nodes held), so a restarted controller picks up where it left
    off.  In several zones it may move (``failover``) and remembers how long each
    zone has offered spot, its only state.
    """

    name: ClassVar[str] = "deadline"
    moves_between_zones: ClassVar[bool] = True
    plans_for_deadline: ClassVar[bool] = True

    @dataclass(frozen=True)
    class Config:
        """Options of the ``deadline`` policy.

        Attributes:
            safety_margin_s: seconds of slack, on top of one pause
                (``obs.worst_pause_s``), that spot may not use: it absorbs work
                rolled back by a preemption and the estimates' errors.
            overhead_fraction: share of running time assumed lost beyond the
                periodic checkpoints the observation reports, for time estimates.
            risk_fraction: the most, as a share of the on-demand plan's cost, that
                the policy bets on spot before spot has earned it.
            payback_factor: on-demand nodes are released only with this many
                switch costs of slack, so that turning them off pays back.
            release_lead_s: slack, in seconds, at which committed on-demand nodes
                may be released for spot; None means ``payback_factor`` times one
                switch (a start from nothing plus a rescale).
            pace: spend the slack evenly over time (Uniform Progress): without spot,
                run on-demand once the job is behind that pace, and give the nodes
                back when spot returns; off, wait for spot until the last safe
                moment (Can't Be Late's Greedy).
            failover: in several zones, move to another zone's spot when this one
                has none worth holding and the move fits in the time the policy
                would otherwise wait idle (see :meth:`DeadlinePolicy.move`).
        """

        safety_margin_s: float = DEFAULT_SAFETY_MARGIN_S
        overhead_fraction: float = DEFAULT_OVERHEAD_FRACTION
        risk_fraction: float = 0.005
        payback_factor: float = 4.0
        release_lead_s: float | None = None
        pace: bool = True
        failover: bool = True

        def __post_init__(self) -> None:
            check_float("safety_margin_s", self.safety_margin_s)
            check_float("overhead_fraction", self.overhead_fraction)
            if self.overhead_fraction >= 1.0:
                raise ValueError(f"overhead_fraction must be < 1, got {self.overhead_fraction!r}")
            check_float("risk_fraction", self.risk_fraction)
            check_float("payback_factor", self.payback_factor)
            check_float("release_lead_s", self.release_lead_s, optional=True)
            check_bool("pace", self.pace)
            check_bool("failover", self.failover)

    config: Config

    # -- the quantities --------------------------------------------------------------

    def margin_s(self, obs: Observation) -> float:
        """Slack, in seconds, that spot may not use."""
        return self.config.safety_margin_s + obs.worst_pause_s

    def plan(self, obs: Observation) -> OnDemandPlan | None:
        """The cheapest pure on-demand plan for the whole job (None: there is none)."""
        return job_plan(obs, overhead_fraction=self.config.overhead_fraction)

    def release_lead_s(self, obs: Observation) -> float:
        """Slack beyond the margin at which committed on-demand nodes may go."""
        if self.config.release_lead_s is not None:
            return self.config.release_lead_s
        return self.config.payback_factor * (obs.worst_pause_s + obs.rescale_cost_s)

    def rate(self, obs: Observation, nodes: int) -> float:
        """Goodput on ``nodes`` nodes, checkpoints and the assumed overhead taken off."""
        return training_rate(obs, nodes, self.config.overhead_fraction)

    def usd_per_sample(self, obs: Observation, nodes: int, price_per_hour: float) -> float:
        """USD per sample on ``nodes`` nodes at ``price_per_hour`` each (inf at no goodput).

        One price of a sample for every comparison of node counts, so that the
        thrifty spot count, a fallback's extra cost and its premium cannot drift apart.
        """
        rate = self.rate(obs, nodes)
        return nodes * price_per_hour / 3600.0 / rate if rate > 0.0 else math.inf

    def finish_s(self, obs: Observation, on_demand: int) -> float:
        """Seconds to finish on ``on_demand`` on-demand nodes alone from now.

        The checkpoints as the job's schedule writes them on nodes never preempted
        (:func:`on_demand_time_s`): today's interval for the rest of the run
        overestimates, and made ``deadline`` commit one node more than the plan
        (2.6 % above it on 16-node windows at a 1.1x deadline).
        """
        return finish_on_demand_s(obs, on_demand, overhead=self.config.overhead_fraction)

    def slack_s(self, obs: Observation, on_demand: int) -> float:
        """How long the job could still wait before ``on_demand`` nodes must take over."""
        assert obs.deadline_s is not None
        return obs.deadline_s - obs.now_s - self.finish_s(obs, on_demand)

    def budget_usd(self, obs: Observation, plan: OnDemandPlan) -> float:
        """The plan's price of the work done, plus the bet, minus the money spent.

        The plan pays one start of its nodes; a job that holds them already will not
        pay it again when it commits, so that start is counted as the plan's too, as
        far as it has been paid: nodes still booting will spend the rest of it (a
        budget that counted it whole while they booted let ``receding`` grow to 16
        on-demand nodes 20 s in, and end 0.3 % above the plan plus its bet).
        """
        done = job_samples(obs) - obs.remaining_samples
        started = 0.0
        if obs.on_demand_held >= plan.nodes:
            hourly = plan.nodes * obs.on_demand_price_per_hour
            started = min(hourly * plan.start_pause_s / 3600.0, obs.on_demand_spent_usd)
        return (
            self.config.risk_fraction * plan.cost_usd
            + plan.usd_per_sample * done
            + started
            - obs.spent_usd
        )

    def _pace(self, obs: Observation, plan: OnDemandPlan) -> float:
        """Seconds of slack the uniform pace lets go per second."""
        assert obs.deadline_s is not None
        if not self.config.pace:
            return 0.0
        total = obs.deadline_s - plan.finish_s - self.margin_s(obs)
        return max(total, 0.0) / obs.deadline_s

    def reserve_s(self, obs: Observation, plan: OnDemandPlan) -> float:
        """Slack to keep for later: the plan's spare slack, spent evenly over time.

        Spending the whole slack on waiting for spot early (Can't Be Late's "Greedy")
        leaves none for what comes later: once the job runs on on-demand nodes at the
        last safe moment it can never afford to go back to spot.  Kept in reserve,
        the slack lets it buy on-demand nodes only while spot is away, and return to
        spot when it comes back (Can't Be Late's Uniform Progress, in slack).
        """
        assert obs.deadline_s is not None
        return self._pace(obs, plan) * max(obs.deadline_s - obs.now_s, 0.0)

    def venture_usd(
        self,
        obs: Observation,
        nodes: int,
        new: int,
        usd_per_sample: float,
        alone: bool = True,
    ) -> float:
        """What adding ``new`` spot nodes (to reach ``nodes``) costs before it pays.

        Their boot, the group's pause and, when spot nodes are the whole group
        (``alone``), the work a drop that takes every node without notice rolls back:
        half a checkpoint interval on average.  Beside on-demand nodes a drop costs
        the survivors a failure pause instead, bounded by the worst pause.  Either
        way a drop shortens the checkpoint interval for the rest of the run
        (:func:`preemption_usd`: on a flaky trace one early loss can cost more than
        the 0.5 % bet, so the bet then rules early ventures out).
        """
        if new <= 0:
            return 0.0
        boot_usd = new * obs.spot_price_per_hour * obs.worst_pause_s / 3600.0
        interval_usd = preemption_usd(obs, nodes, usd_per_sample)
        if alone:
            lost_s = obs.rescale_cost_s + 0.5 * min(obs.checkpoint_interval_s, 86400.0)
        else:  # the survivors' failure pause (detection included) when the nodes go
            lost_s = obs.rescale_cost_s + obs.worst_pause_s
        return boot_usd + interval_usd + usd_per_sample * obs.goodput(nodes) * lost_s

    # -- the decision -----------------------------------------------------------------

    def __init__(self, config: Config | None = None) -> None:
        super().__init__(config)
        self._uptime = ZoneUptime()  # several zones only: how long each offered spot

    def preamble(self, obs: Observation) -> tuple[OnDemandPlan | None, Decision | None]:
        """``(plan, None)``, or ``(None, decision)`` in the cases with nothing to weigh.

        No deadline or no on-demand nodes: every usable spot node; done: nothing; no
        on-demand count makes it: the fastest count, flat out.
        """
        if obs.deadline_s is None:
            return None, all_usable_spot(obs)
        if obs.progress >= 1.0 or obs.remaining_samples <= 0.0:
            return None, HOLD_NOTHING
        if not math.isfinite(obs.on_demand_price_per_hour):
            return None, all_usable_spot(obs)  # spot is all there is
        plan = self.plan(obs)
        if plan is None:
            return None, flat_out(obs)
        return plan, None

    def observe_zones(self, obs: Observation) -> None:
        """Count how long each zone has offered spot (several zones only: :meth:`move`)."""
        if len(obs.zones) > 1:
            self._uptime.update(obs)

    def decide(self, obs: Observation) -> Decision:
        """Spot while there is slack and budget; on-demand from the last safe moment."""
        self.observe_zones(obs)
        plan, early = self.preamble(obs)
        if early is not None:
            return early
        assert plan is not None
        budget = self.budget_usd(obs, plan)
        if obs.on_demand_held > 0:
            return self._committed(obs, plan, budget)
        spare = self.slack_s(obs, plan.nodes) - self.margin_s(obs)
        if spare <= TIME_EPS_S:
            return self.commit(obs, plan, budget)
        spot = self._spot_alone(obs, plan, budget)
        if spot:
            wake = self._wake(obs, plan, spot, spare)
            ahead = spare - self.reserve_s(obs, plan)
            growth = self.rate(obs, spot) / self.rate(obs, plan.nodes) - 1.0
            growth += self._pace(obs, plan)
            lead = self.release_lead_s(obs)
            if self.config.pace and ahead < lead and growth > 0.0:
                # ahead enough to save (the thrifty count) then: look again
                switch = wake_after((lead - ahead) / growth)
                wake = switch if wake is None or (switch or math.inf) < wake else wake
            return Decision(spot, 0, wake)
        ahead = spare - self.reserve_s(obs, plan)
        move = self.move(obs, plan, budget, (spare, ahead)) if len(obs.zones) > 1 else None
        if move is not None:
            return move
        if ahead <= TIME_EPS_S:  # behind the uniform pace: on-demand until spot returns
            return self.commit(obs, plan, budget)
        return Decision(0, 0, wake_after(ahead / (1.0 - self._pace(obs, plan))))

    def move(
        self, obs: Observation, plan: OnDemandPlan, budget: float, slack: tuple[float, float]
    ) -> Decision | None:
        """Another zone's spot, when this zone has none worth holding (None: stay).

        ``slack`` is ``(spare, ahead)``: the slack beyond the margin, and beyond the
        uniform pace's reserve too.  Only when the transfer fits in the spare slack: a
        move holds nothing while it lasts, a wait like any, so the deadline keeps the
        margin it had; the start there is a spot start like any, paid from the budget
        (:meth:`_spot_alone`).  Behind the pace the alternative is on-demand nodes,
        so spot elsewhere is worth the slack.  A zone dearer than this one only once
        the wait runs short (ahead by less than ``release_lead_s`` beyond the
        transfer): before that, waiting here for cheaper spot costs nothing.  The
        zone whose spot trains fastest wins; at a tie the cheaper, then the one that
        has offered spot longest so far (:class:`._zones.ZoneUptime`).
        """
        spare, ahead = slack
        if not self.config.failover or spare <= obs.zone_move_s + TIME_EPS_S:
            return None
        short = ahead < obs.zone_move_s + self.release_lead_s(obs)
        uptime = self._uptime
        best, key = None, (0.0, -math.inf, -math.inf)
        for index, zone in enumerate(obs.zones):
            dearer = zone.spot_price_per_hour > obs.spot_price_per_hour
            if index == obs.zone or (dearer and not short):
                continue
            there = replace(
                obs,
                spot_available=min(zone.spot_available, obs.max_nodes),
                spot_price_per_hour=zone.spot_price_per_hour,
                spot_held=0,
                zone=index,
            )
            nodes = self._spot_alone(there, plan, budget)
            candidate = (self.rate(obs, nodes), -zone.spot_price_per_hour, uptime.of(index))
            if nodes and candidate > key:
                best, key = Decision(nodes, 0, None, index), candidate
        return best

    def spot_nodes(self, obs: Observation, plan: OnDemandPlan) -> int:
        """Spot nodes to run on alone: build slack when behind the pace, save when ahead.

        Two counts are weighed.  *Thrifty*: among the counts whose samples are cheaper
        than the plan's and whose rate is at least the plan's (the slack does not
        shrink), the one with the cheapest samples.  *Saving*: the count that saves the
        most against the plan's price of a sample
        (:func:`~elasim.policies._ondemand.cost_effective_spot`), usually faster: it
        builds slack, which later pays for fewer on-demand nodes (cheaper samples) or
        for waiting out an outage.  Behind the pace (or without one) the saving count;
        ahead of it by ``release_lead_s``, the thrifty one; in between, whichever is
        held (so the count does not flap).
        """
        saving = cost_effective_spot(obs, 0, plan.usd_per_sample)
        plan_rate = self.rate(obs, plan.nodes)
        thrifty, best_cost = 0, math.inf
        for spot in range(obs.min_nodes, min(usable_spot(obs), obs.max_nodes) + 1):
            if self.rate(obs, spot) < plan_rate:
                continue
            cost = self.usd_per_sample(obs, spot, obs.spot_price_per_hour)
            if cost < plan.usd_per_sample and cost < best_cost * (1.0 - 1e-12):
                thrifty, best_cost = spot, cost
        if not thrifty or not self.config.pace:
            return saving
        ahead = self.slack_s(obs, plan.nodes) - self.margin_s(obs) - self.reserve_s(obs, plan)
        if ahead >= self.release_lead_s(obs):
            return thrifty
        if ahead < 0.0 or obs.spot_held != thrifty:
            return saving
        return thrifty

    def _spot_alone(self, obs: Observation, plan: OnDemandPlan, budget: float) -> int:
        """Spot nodes to hold before the last safe moment (0: hold nothing)."""
        spot = self.spot_nodes(obs, plan)
        held = obs.spot_held
        if spot > held and budget < self.venture_usd(obs, spot, spot - held, plan.usd_per_sample):
            spot = held if budget >= 0.0 else 0  # no money to add nodes
        elif budget < 0.0:
            spot = 0  # spot lost money: stop spending until the last safe moment
        return spot if spot >= obs.min_nodes else 0

    def on_demand_needed(self, obs: Observation, least: int) -> int:
        """Fewest on-demand nodes, at least ``least``, that finish in time (else the fastest)."""
        high = obs.max_nodes
        least = min(max(least, obs.min_nodes), high)
        for nodes in range(least, high + 1):
            if self.slack_s(obs, nodes) >= 0.0:
                return nodes
        return fastest_count(obs, least)

    def top_up(self, obs: Observation, on_demand: int, budget: float) -> int:
        """Spot nodes next to ``on_demand`` committed ones that make samples cheaper."""
        price = obs.on_demand_price_per_hour / 3600.0
        per_sample = on_demand * price / obs.goodput(on_demand) if obs.goodput(on_demand) else 0.0
        spot = cost_effective_spot(obs, on_demand, per_sample) if per_sample else 0
        held = obs.spot_held
        if spot > held and budget < self.venture_usd(
            obs, on_demand + spot, spot - held, per_sample, alone=False
        ):
            spot = held_spot_beside(obs, on_demand)  # no new ones: of the held, those that help
        return spot

    def commit(self, obs: Observation, plan: OnDemandPlan, budget: float) -> Decision:
        """The last safe moment: on-demand nodes to the end, spot on top where it pays."""
        on_demand = self.on_demand_needed(obs, plan.nodes)
        return Decision(self.top_up(obs, on_demand, budget), on_demand, None)

    def _committed(self, obs: Observation, plan: OnDemandPlan, budget: float) -> Decision:
        """Holding on-demand nodes: keep them, unless spot can carry the job again."""
        spot = self.spot_nodes(obs, plan)
        unused = usable_spot(obs) > obs.spot_held
        wake = None
        if unused and spot >= obs.min_nodes and budget >= 0.0:
            spare = self.slack_s(obs, plan.nodes) - self.margin_s(obs)
            if obs.on_demand_held == plan.nodes:  # taking them back later costs a start
                spare -= obs.worst_pause_s
            short = self.reserve_s(obs, plan) + self.release_lead_s(obs) - spare
            new = max(spot - obs.spot_held, 0)
            # going back to spot also risks taking the on-demand nodes again (a start)
            again_usd = taking_again_usd(obs, plan.nodes)
            venture = self.venture_usd(obs, spot, new, plan.usd_per_sample) + again_usd
            if short <= 0.0 and budget >= venture:
                return Decision(spot, 0, self._wake(obs, plan, spot, spare))
            pace = self._pace(obs, plan)
            if short > 0.0 and pace > 0.0:  # the reserve shrinks: look again when it has
                wake = wake_after(short / pace)
        on_demand = self.on_demand_needed(obs, obs.on_demand_held)
        return Decision(self.top_up(obs, on_demand, budget), on_demand, wake)

    def _wake(
        self, obs: Observation, plan: OnDemandPlan, spot: int, slack_s: float
    ) -> float | None:
        """When the slack, shrinking on ``spot`` spot nodes, reaches zero (None: never)."""
        fall = 1.0 - self.rate(obs, spot) / self.rate(obs, plan.nodes)
        if fall <= 0.0:
            return None
        seconds = slack_s / fall
        rate = self.rate(obs, spot)
        if rate > 0.0 and seconds >= obs.remaining_samples / rate:
            return None  # done on spot before the last safe moment comes
        return wake_after(seconds)
