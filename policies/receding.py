"""``receding``: re-plan the offline optimum's price of work at every decision, online."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import ClassVar

from ._common import check_bool, check_float, cost_per_hour, usable_spot, wake_after
from ._frontier import PUT_OFF, Vertex, best_at, spot_first, spot_markup
from ._history import AvailabilityHistory
from ._ondemand import (
    DEFAULT_OVERHEAD_FRACTION,
    DEFAULT_SAFETY_MARGIN_S,
    OnDemandPlan,
    held_spot_beside,
    job_samples,
    on_demand_time_s,
    preemption_bound_s,
    preemption_s,
    taking_again_usd,
)
from .base import Decision, Observation, PolicyBase
from .deadline import DeadlinePolicy
from .registry import register

__all__ = ["AvailabilityHistory", "RecedingPolicy"]


#: The price of work is sought up to this many times the plan's price of a sample: at
#: that price the fastest configuration the plan's price allows wins.
_LAM_RANGE = 1e3
#: Seconds of spare at which the last safe moment has come (no wake-ups closer).
_SPARE_EPS_S = 1.0
#: What a spot venture is weighed against: the budget (USD) and the fallback's count.
_Money = tuple[float, int]


@register
class RecedingPolicy(PolicyBase):
    """Receding-horizon planning: the offline optimum's rule, re-solved on what was seen.

    **The optimum's structure.**  The offline optimum (:mod:`elasim.optimal`) solves
    "cheapest schedule that does the work by the deadline" through its Lagrangian: for
    a price ``lam`` of an effective sample, every segment holds the configuration
    ``(spot, on-demand)`` that maximises ``lam x rate - cost`` given the spot there,
    and ``lam`` is the least price at which the schedule's work reaches the target.
    Two things follow, and ``deadline`` has neither: the right node count depends on
    the price of work (with sub-linear scaling one on-demand node makes samples three
    times cheaper than four: a job with slack buys one while spot is away, not the
    on-demand plan's ``k0``), and on-demand work is bought when spot is away, not
    only at the last safe moment.

    **Online.**  The future availability is unknown, so at every decision the policy
    re-solves the same program over a model of it fitted to what it has seen: the
    share of time each availability level was seen (:class:`AvailabilityHistory`,
    with a prior), taken as the future's (certainty equivalence).  ``lam`` is the
    least price whose expected work over the time left (less the margin) covers the
    remaining samples (a bisection over ``O(max_nodes**2)`` per step); the policy
    acts on the first step: the best configuration at ``lam`` for the spot there now
    (ties to the one doing more work: the plan's on-demand work is not put off).  As
    spot stays away ``lam`` rises, so on-demand nodes come in the cheapest counts
    first; as spot proves plentiful ``lam`` falls and they go.  A change of
    configuration is made only when its gain at ``lam`` over the mean time between
    changes of availability pays for its pause and boots.  On-demand nodes that only
    tie at ``lam`` are put off while the job is ahead of the uniform progress line, or,
    with no spot, while their own spare keeps a reserve for the losses to come (the
    same nodes can do the work later at the same price) or the spare covers
    ``outage_cover`` expected waits for spot (the mean outage seen so far, with a prior
    one), times the fallback's premium per sample: the past underrates spot after a
    window that opened with an outage.

    **Guarantees** (``deadline``'s).  ``lam`` is capped at the on-demand plan's price
    of a sample, so every configuration chosen makes samples no dearer than the plan,
    and spot nodes are added only while the budget (``deadline``'s: the bet plus the
    plan's price of the work done, less the money spent) covers their venture.  At
    the last safe moment, kept early enough to take spot back (:meth:`return_reserve_s`),
    it commits to on-demand nodes, counted against the *fallback*: the fastest
    on-demand count whose extra cost over the plan for the remaining samples the
    budget covers (``k0`` when it covers none), and a faster fallback leaves spot more
    of the slack; it commits to the fewest count up to it that keeps the safety
    margin.  So it meets every deadline the plan meets and pays at most the plan plus
    ``risk_fraction`` of it: the stated bet, 5 % by default (``deadline``'s 0.5 %
    cannot pay the fallback's speed).  The plan is priced from what the job observes,
    its checkpoints as the job's schedule writes them, to within one write of it alone.
    Time per decision: a frontier per level seen and a sweep, ``O(max_nodes**2)``.
    """

    name: ClassVar[str] = "receding"
    moves_between_zones: ClassVar[bool] = True
    plans_for_deadline: ClassVar[bool] = True

    @dataclass(frozen=True)
    class Config:
        """Options of the ``receding`` policy.

        Attributes:
            safety_margin_s: seconds of slack, on top of one pause, that spot may not use.
            overhead_fraction: share of running time assumed lost beyond the
                periodic checkpoints, for time estimates.
            risk_fraction: the most, as a share of the on-demand plan's cost, that
                the policy bets on spot and on a faster fallback.
            payback_factor: on-demand nodes held are let go for a slower
                configuration only with this many switch costs of spare.
            release_lead_s: that spare in seconds; None means ``payback_factor``
                times one switch (a start from nothing plus a rescale).
            pace: put off the on-demand nodes the plan would add at its price of
                work while the job is ahead of the uniform progress line.
            prior_h: hours of prior weight, spread evenly over the availability
                levels, before anything is seen.
            outage_h: the prior mean length of an outage (one prior outage).
            outage_cover: with no spot, on-demand nodes are put off (as ahead of the
                line) while the spare covers this many expected waits for spot, times
                the fallback's premium per sample (:meth:`premium`); 0 turns this off.
            loss_cover: with no spot, the on-demand nodes the price of work buys wait
                while their own spare keeps a reserve for this many times the losses
                of spot expected at the rate seen (:meth:`reserve_s`); 0 turns this
                off.
            spot_return: commit to the fallback while its spare still covers a
                move back onto spot (:meth:`return_reserve_s`), so spot that returns
                after the commitment is taken; False commits at a spare of 0.
            replan_h: the policy asks to be woken at least this often (hours), so
                that ``lam`` follows the time passing without changes.
            work_markup: the price of work is raised by this share over the certainty
                equivalent's, to the plan's at most (:meth:`price_of_work`); 0: off.
            failover: in several zones, move to another zone's spot when this one
                has none and the transfer fits in the spare slack (``deadline``'s
                rule, so the deadline keeps its margin).
        """

        safety_margin_s: float = DEFAULT_SAFETY_MARGIN_S
        overhead_fraction: float = DEFAULT_OVERHEAD_FRACTION
        risk_fraction: float = 0.05
        payback_factor: float = 4.0
        release_lead_s: float | None = None
        pace: bool = True
        failover: bool = True
        prior_h: float = 4.0
        outage_h: float = 1.0
        outage_cover: float = 2.0
        loss_cover: float = 5.0
        spot_return: bool = True
        replan_h: float = 0.5
        work_markup: float = 0.1

        def __post_init__(self) -> None:
            self.deadline_config()  # checks the options ``deadline`` shares
            check_float("prior_h", self.prior_h)
            check_float("outage_h", self.outage_h)
            check_float("outage_cover", self.outage_cover)
            check_float("loss_cover", self.loss_cover)
            check_bool("spot_return", self.spot_return)
            check_float("replan_h", self.replan_h, strict=True)
            check_float("work_markup", self.work_markup)

        def deadline_config(self) -> DeadlinePolicy.Config:
            """The options ``deadline`` shares, for the ``deadline`` policy held inside."""
            shared = {f.name for f in fields(DeadlinePolicy.Config)}
            return DeadlinePolicy.Config(**{k: getattr(self, k) for k in shared})

    config: Config

    def __init__(self, config: Config | None = None) -> None:
        super().__init__(config)
        #: ``deadline``'s quantities (the plan, the budget, rates, the margin) and its
        #: moves (commit, top up, another zone), on the options the two share
        self.deadline = DeadlinePolicy(self.config.deadline_config())
        self.history = AvailabilityHistory(self.config.prior_h * 3600.0)

    # -- the quantities --------------------------------------------------------------

    def fallback_nodes(self, obs: Observation, plan: OnDemandPlan, budget_usd: float) -> int:
        """The fastest on-demand count (``k0`` or more) whose extra cost the budget covers.

        ``plan`` as the budget prices it (``plan.for_budget``).  The extra cost is the
        dearer samples left plus what taking that count costs beyond the plan's own
        start (:meth:`extra_usd`).  Without the switch, a committed group whose budget
        had shrunk to the price of dearer samples grew by one node late in a run and
        ended above the plan plus the bet (0.2 % over, on a 16-node window of a real
        1-node trace: the property test found it).
        """
        best, best_rate = plan.nodes, self.deadline.rate(obs, plan.nodes)
        for nodes in range(plan.nodes + 1, obs.max_nodes + 1):
            rate = self.deadline.rate(obs, nodes)
            if rate > best_rate and self.extra_usd(obs, plan, nodes) <= budget_usd:
                best, best_rate = nodes, rate
        return best

    def extra_usd(self, obs: Observation, plan: OnDemandPlan, nodes: int) -> float:
        """What finishing on ``nodes`` on-demand nodes costs beyond the plan (0 at ``k0``).

        The remaining samples at their dearer price, plus taking that count beyond the
        plan's own start (:meth:`switch_usd`).  ``plan`` as the budget prices it
        (``plan.for_budget``): the plan's price of a sample at today's checkpoint
        interval, which a loss of spot shortens, credits the remaining samples at more
        than the plan pays, and a 16-node window ended 0.5 % above the plan plus the
        bet after committing to a fallback the budget seemed to cover.
        """
        if nodes <= plan.nodes:
            return 0.0
        price = self.deadline.usd_per_sample(obs, nodes, obs.on_demand_price_per_hour)
        extra = (price - plan.usd_per_sample) * obs.remaining_samples
        return extra + self.switch_usd(obs, plan, nodes)

    @staticmethod
    def switch_usd(obs: Observation, plan: OnDemandPlan, nodes: int) -> float:
        """What taking ``nodes`` on-demand nodes costs beyond the plan's start of its own.

        A group that holds on-demand nodes already grows: the new nodes boot
        (``worst_pause_s``) and every node pauses while it re-forms
        (``rescale_cost_s``).  A job that holds none pays a start either way, the
        plan's on ``k0`` nodes, so only the extra nodes' start counts.
        """
        price = obs.on_demand_price_per_hour / 3600.0
        held = obs.on_demand_held
        if held <= 0:
            return max(nodes - plan.nodes, 0) * plan.start_pause_s * price
        if nodes <= held:
            return 0.0
        return ((nodes - held) * obs.worst_pause_s + nodes * obs.rescale_cost_s) * price

    def spare_s(self, obs: Observation, fallback: int) -> float:
        """Slack beyond the margin, counting a switch to the fallback even if held.

        Counting the switch always keeps the spare from jumping when the fallback's
        nodes are taken or released (which would flap between the two).
        """
        assert obs.deadline_s is not None
        finish = on_demand_time_s(
            obs,
            fallback,
            obs.remaining_samples,
            obs.worst_pause_s,
            overhead=self.deadline.config.overhead_fraction,
        )
        return obs.deadline_s - obs.now_s - finish - self.deadline.margin_s(obs)

    def frontier(self, obs: Observation, available: int, cap: float) -> list[Vertex]:
        """The configurations worth holding at some price of work (:func:`spot_first`)."""
        prices = (obs.spot_price_per_hour / 3600.0, obs.on_demand_price_per_hour / 3600.0)
        nodes = (obs.min_nodes, obs.max_nodes)
        return spot_first(lambda n: self.deadline.rate(obs, n), nodes, available, prices, cap)

    def price_of_work(
        self, obs: Observation, plan: OnDemandPlan, frontiers: dict[int, list[Vertex]]
    ) -> float:
        """The least ``lam`` whose expected work covers what is left (``_LAM_RANGE`` x cap).

        The expected rate is a step function of ``lam`` (each level's frontier steps at
        its vertices' prices): its steps swept in order, exact, ``O(levels x max_nodes)``.

        The policy raises it by ``work_markup``, to the plan's at most, as far as that
        buys spot nodes only (:func:`spot_markup`): certainty equivalence prices work
        at the mean future, but catching up after an outage costs more than linearly
        (a sample on 16 nodes costs 4.6x one node's), so work's expected price is
        higher; at the mean, a job that reads spot as plentiful runs too few spot
        nodes, then catches up on on-demand ones (measured in the policies guide).
        """
        assert obs.deadline_s is not None
        high = plan.usd_per_sample * _LAM_RANGE
        left_s = obs.deadline_s - obs.now_s - self.deadline.margin_s(obs) - obs.worst_pause_s
        if left_s <= 0.0:
            return high
        need = obs.remaining_samples / left_s
        steps: list[tuple[float, float]] = []
        rate = 0.0
        for level, share in self.history.shares(obs.max_nodes):
            vertices = frontiers.setdefault(level, self.frontier(obs, level, plan.usd_per_sample))
            first = best_at(vertices, 0.0)
            rate += share * first.rate
            for before, after in zip(vertices, vertices[1:], strict=False):
                if after.from_lam > 0.0:
                    steps.append((after.from_lam, share * (after.rate - before.rate)))
        if rate >= need:
            return 0.0
        for lam, gain in sorted(steps):
            rate += gain
            if rate >= need * (1.0 - 1e-12):
                return lam
        return high

    # -- the decision -----------------------------------------------------------------

    def decide(self, obs: Observation) -> Decision:
        """Fit the history, then the optimum's rule at the re-planned price of work."""
        self.history.observe(obs.now_s, usable_spot(obs))
        self.deadline.observe_zones(obs)
        plan, early = self.deadline.preamble(obs)
        if early is not None:
            return early
        assert plan is not None
        priced = plan.for_budget(obs)
        budget = self.deadline.budget_usd(obs, priced)
        fallback = self.fallback_nodes(obs, priced, budget)
        spare = self.spare_s(obs, fallback)
        if spare <= _SPARE_EPS_S + self.return_reserve_s(obs, fallback, spare):
            spot = self._spot_at_last_moment(obs, fallback, spare, plan, budget)
            if spot:
                return Decision(spot, 0, wake_after(self.config.replan_h * 3600.0))
            return self._commit(obs, priced, budget, spare, fallback)
        frontiers: dict[int, list[Vertex]] = {}
        lam = self.price_of_work(obs, plan, frontiers)
        available = usable_spot(obs) if self.spot_safe(obs, spare, fallback) else 0
        if not available and not obs.on_demand_held and len(obs.zones) > 1:
            ahead = spare - self.deadline.reserve_s(obs, plan)
            move = self.deadline.move(obs, plan, budget, (spare, ahead))
            if move is not None:  # no spot here: another zone's, as deadline moves
                return move
        if available not in frontiers:
            frontiers[available] = self.frontier(obs, available, plan.usd_per_sample)
        high = min(lam * (1.0 + self.config.work_markup), plan.usd_per_sample)
        lam = spot_markup(frontiers[available], lam, high)  # (:meth:`price_of_work`)
        lam = self._put_off(obs, lam, frontiers[available], (spare, fallback))
        spot, on_demand = self._switch_or_hold(obs, lam, frontiers[available])
        if self._afford_spot(obs, spot, on_demand, plan, (budget, fallback)) < spot:
            level = obs.spot_held if budget >= 0.0 else 0  # no new spot: the best without
            held = frontiers.get(level) or self.frontier(obs, level, plan.usd_per_sample)
            spot, on_demand = self._switch_or_hold(obs, lam, held)
        if spot + on_demand < obs.min_nodes:
            spot, on_demand = 0, 0
        slower = self.deadline.rate(obs, spot + on_demand) < self.deadline.rate(obs, fallback)
        again_usd = taking_again_usd(obs, fallback)
        short = spare < self.deadline.release_lead_s(obs) or budget < again_usd
        if obs.on_demand_held and slower and short:
            # committed nodes go only with slack to pay for taking them again, so a
            # spare that creeps back above zero on them does not flap (deadline's rule),
            # and with the money for it: the fallback's start, which a budget spent on a
            # lost venture may not cover (released to wait, 4 on-demand nodes came back
            # as 3 at the last safe moment, 0.02 USD above the plan plus the bet)
            # (at least the fallback's count: its spare is the margin kept for errors)
            on_demand = self.deadline.on_demand_needed(obs, max(obs.on_demand_held, fallback))
            return Decision(self.deadline.top_up(obs, on_demand, budget), on_demand, None)
        return Decision(spot, on_demand, self._wake_at(obs, spot + on_demand, fallback, spare))

    def _commit(
        self, obs: Observation, plan: OnDemandPlan, budget: float, spare: float, fallback: int
    ) -> Decision:
        """``deadline``'s commitment keeping the margin; new spot only while a loss is covered.

        The on-demand count is the fewest from the plan's up to the fallback that
        still keeps the safety margin (:meth:`margin_nodes`).  Adding spot nodes to the
        committed group re-forms it (a pause) and risks a loss; past the point where
        the spare and the margin cover one failure, the new nodes could make the job
        late (a top-up of 3 spot nodes to 13 on-demand ones 70 s before the end
        finished 3.7 s late on a 16-node window of ``spot_us_west.csv``: the
        random-window search found it).
        """
        on_demand = self.deadline.on_demand_needed(obs, self.margin_nodes(obs, plan, fallback))
        # the budget left once the count's dearer samples are paid: what spot may risk
        left = budget - self.extra_usd(obs, plan, on_demand)
        decision = Decision(self.deadline.top_up(obs, on_demand, left), on_demand, None)
        if decision.spot_nodes <= obs.spot_held:
            return decision
        # the spare of the count committed to, which may be fewer nodes than the
        # fallback whose spare the caller holds (less slack to lose spot in)
        spare = min(spare, self.spare_s(obs, decision.on_demand_nodes))
        if self.spot_safe(obs, spare, decision.on_demand_nodes):
            return decision
        spot = held_spot_beside(obs, decision.on_demand_nodes)  # no new ones
        return Decision(spot, decision.on_demand_nodes, decision.wake_after_s)

    def margin_nodes(self, obs: Observation, plan: OnDemandPlan, fallback: int) -> int:
        """The fewest on-demand nodes, from the plan's to the fallback's, that keep the margin.

        At the last safe moment (the fallback's), the plan's count may still finish in
        time by the estimate but inside the safety margin kept for its errors: the
        fewest count in time at all (``deadline``'s rule) then finished 27 s late on a
        16-node window of a SkyPilot 1-node trace.  Failing every count up to the
        fallback (a commitment already late), the fallback.
        """
        margin = self.deadline.margin_s(obs)
        return self._fewest(plan, fallback, lambda n: self.deadline.slack_s(obs, n) >= margin)

    @staticmethod
    def _fewest(plan: OnDemandPlan, fallback: int, keeps: Callable[[int], bool]) -> int:
        """The fewest on-demand count from the plan's up to the fallback that ``keeps``."""
        return next((n for n in range(min(plan.nodes, fallback), fallback) if keeps(n)), fallback)

    def failure_s(self, obs: Observation, nodes: int) -> float:
        """Slack one loss of spot nodes can cost, the job finishing on ``nodes`` nodes.

        A checkpoint interval rolled back, a rescale (:meth:`rollback_s`), and the
        shorter intervals the loss leaves (:func:`preemption_s`).  The restart on
        on-demand nodes is counted in the spare already.
        """
        return self.rollback_s(obs) + preemption_s(obs, nodes)

    @staticmethod
    def rollback_s(obs: Observation) -> float:
        """A loss's rescale and the checkpoint interval it rolls back."""
        interval = min(obs.checkpoint_interval_s + obs.checkpoint_write_s, 86400.0)
        return obs.rescale_cost_s + interval

    def spot_safe(self, obs: Observation, spare_s: float, nodes: int) -> bool:
        """Whether the spare and the safety margin cover one loss of spot nodes.

        ``nodes``: the on-demand count the spare is counted for.  Without this a loss
        near the last safe moment (a checkpoint interval of seven minutes rolled back
        against the margin's five) makes the job late even on every on-demand node.
        """
        covered = spare_s + self.config.safety_margin_s
        plain = self.rollback_s(obs)
        if covered < plain:
            return False
        if covered >= plain + preemption_bound_s(obs, nodes):
            return True  # covered whatever the shorter intervals cost: not walked again
        return covered >= plain + preemption_s(obs, nodes)  # failure_s, its rollback known

    def _spot_at_last_moment(
        self, obs: Observation, fallback: int, spare: float, plan: OnDemandPlan, budget: float
    ) -> int:
        """Spot nodes that keep the fallback's pace past the last safe moment (0: none).

        Spot as fast as the fallback's on-demand nodes does not use slack, and losing
        it costs one failure (the pause, the rescale, a checkpoint interval rolled
        back) before the on-demand nodes take over: taken while the margin left still
        covers that, so the job goes back to spot when it returns after the last safe
        moment (the optimum does), at most until one failure has spent the margin.
        """
        on_spot = obs.spot_held > 0 and obs.on_demand_held == 0
        if not self.spot_safe(obs, spare if on_spot else spare - obs.worst_pause_s, fallback):
            return 0  # moving onto spot is a start too: a loss then costs both
        need = self.deadline.rate(obs, fallback)
        for spot in range(obs.min_nodes, usable_spot(obs) + 1):
            if self.deadline.rate(obs, spot) >= need:
                afforded = self._afford_spot(obs, spot, 0, plan, (budget, fallback))
                return spot if afforded == spot else 0  # all of it, or none (too slow)
        return 0

    def _put_off(
        self, obs: Observation, lam: float, frontier: list[Vertex], spare: tuple[float, int]
    ) -> float:
        """A price just below ``lam`` when it would buy on-demand nodes ahead of the line.

        The plan takes the future from the past: a window that opens with hours
        without spot makes it buy on-demand work that spot arriving later would have
        done.  While the job is ahead of Can't Be Late's uniform progress line
        (``samples x now / deadline``), the on-demand nodes the plan adds at exactly
        ``lam`` (its tie with the same spot and fewer on-demand nodes) are put off;
        behind it, or when ``lam`` has risen past them, they come.  Spot is never put
        off.  With no spot, ahead of the line counts only while the nodes' own spare
        lasts until the next look, or the wait turns their cheap work into the dearer
        fallback's (measured in the guide); behind it, they are put off while they may
        wait (:meth:`_rides_out`; ``spare``: the spare and the fallback it is counted on).
        """
        assert obs.deadline_s is not None
        if not self.config.pace:
            return lam
        total = job_samples(obs)
        line = total * min(max(obs.now_s / obs.deadline_s, 0.0), 1.0)
        at = best_at(frontier, lam).config
        ahead = total - obs.remaining_samples > line
        if ahead and not usable_spot(obs) and at[1]:  # the nodes' own spare must last
            ahead = self.spare_at_next_look_s(obs, at[1]) >= 0.0
        if not ahead and not self._rides_out(obs, spare, at[1]):
            return lam
        below = lam * (1.0 - PUT_OFF)
        lower = best_at(frontier, below).config
        if lower[0] == at[0] and lower[1] < at[1]:
            return below
        return lam

    def _rides_out(self, obs: Observation, spare: tuple[float, int], nodes: int) -> bool:
        """Whether, with no spot now, the plan's ``nodes`` on-demand nodes may wait.

        They wait while the spare *on those nodes* keeps the reserve for the losses
        still to come (:meth:`reserve_s`): work put off then costs nothing even if spot
        never returns, as the same nodes do it later at the same price per sample,
        while slack left at the end is on-demand time bought for nothing (one-node
        held-out worst 1.45x -> 1.16x; measured in the policies guide).  The reserve
        must hold until the next look (:meth:`spare_at_next_look_s`).

        Otherwise, while the spare counted on the fallback covers ``outage_cover``
        expected waits for spot, from the outages seen
        (:meth:`AvailabilityHistory.outage_left_s`, with one prior outage of
        ``outage_h``), so it grows with the current outage's age: a long outage is
        waited out only while the slack stays several times what is left of it, then
        the uniform progress line decides.  Those waits count times the fallback's
        premium per sample over ``nodes`` (:meth:`premium`): if spot does not return,
        the work put off is done on the fallback, and a 4-node fallback's samples
        cost 3x one node's for ResNet-50 (a 4-node 2x window: 1.49x -> 1.14x).
        """
        if self.config.outage_cover <= 0.0 or usable_spot(obs) > 0:
            return False
        if self.config.loss_cover > 0.0 and nodes > 0:
            if self.spare_at_next_look_s(obs, nodes) >= self.reserve_s(obs, nodes):
                return True
        wait_s = self.history.outage_left_s(self.config.outage_h * 3600.0)
        spare_s, fallback = spare
        return spare_s >= self.config.outage_cover * self.premium(obs, nodes, fallback) * wait_s

    def spare_at_next_look_s(self, obs: Observation, nodes: int) -> float:
        """The spare on ``nodes`` on-demand nodes at the next look (``replan_h``), waiting."""
        return self.spare_s(obs, nodes) - self.config.replan_h * 3600.0

    def premium(self, obs: Observation, nodes: int, fallback: int) -> float:
        """How many times a sample on ``fallback`` nodes costs one on ``nodes`` (>= 1)."""
        price = self.deadline.usd_per_sample
        od = obs.on_demand_price_per_hour
        return max(price(obs, fallback, od) / price(obs, max(nodes, 1), od), 1.0)

    def reserve_s(self, obs: Observation, nodes: int) -> float:
        """Spare kept while on-demand ``nodes`` wait out an outage: the losses to come.

        Each loss of spot costs a failure (:meth:`failure_s`); a spare below the
        release lead keeps the on-demand nodes to the end (no slack to take them
        again), a costly trap on a long remaining run.  So the reserve is the lead
        plus a failure for the loss now and ``loss_cover`` times the losses expected
        in the time left at the rate seen (one prior loss over ``prior_h``): the rate
        of a window's first hours underrates its later losses: 1x or 2x the expected
        losses were trapped on 1.1x deadlines (1.6x the optimum), 5x was not.
        """
        per_s = self.history.drops_per_s(self.config.prior_h * 3600.0)
        losses = 1.0 + self.config.loss_cover * per_s * (obs.time_left_s or 0.0)
        return self.deadline.release_lead_s(obs) + losses * self.failure_s(obs, nodes)

    def _switch_or_hold(
        self, obs: Observation, lam: float, frontier: list[Vertex]
    ) -> tuple[int, int]:
        """The best configuration now, unless keeping the one held loses less than a switch."""
        best = best_at(frontier, lam).config
        held = (obs.spot_held, obs.on_demand_held)
        available = max(v.config[0] for v in frontier)
        if best == held or sum(held) < obs.min_nodes or obs.spot_held > available:
            return best

        def value(config: tuple[int, int]) -> float:
            rate = self.deadline.rate(obs, sum(config))
            return lam * rate - cost_per_hour(obs, *config) / 3600.0

        new = max(best[0] - held[0], 0) + max(best[1] - held[1], 0)
        boot = obs.worst_pause_s * (
            new * obs.on_demand_price_per_hour / 3600.0 if best[1] > held[1] else 0.0
        )
        boot += obs.worst_pause_s * max(best[0] - held[0], 0) * obs.spot_price_per_hour / 3600.0
        switch_usd = lam * self.deadline.rate(obs, sum(best)) * obs.rescale_cost_s + boot
        horizon = min(self.history.dwell_s(), obs.time_left_s or 0.0)
        if (value(best) - value(held)) * max(horizon, 0.0) > switch_usd:
            return best
        return held

    def _afford_spot(
        self, obs: Observation, spot: int, on_demand: int, plan: OnDemandPlan, money: _Money
    ) -> int:
        """New spot nodes only while the budget covers their venture (``deadline``'s rule).

        ``money``: the budget and the fallback.  The venture is weighed against the
        budget less what a loss would cost (:meth:`kept_usd`): against all of it, 8
        lost spot nodes left a job on 4 on-demand nodes 0.7 % above the plan plus the bet.
        """
        held, (budget, fallback) = obs.spot_held, money
        if spot <= held:
            return spot
        alone = on_demand == 0
        venture = self.deadline.venture_usd(
            obs, spot + on_demand, spot - held, plan.usd_per_sample, alone
        )
        if budget - self.kept_usd(obs, plan, fallback) >= venture:
            return spot
        return min(held, spot) if budget >= 0.0 else 0

    def kept_usd(self, obs: Observation, plan: OnDemandPlan, fallback: int) -> float:
        """The extra cost of the on-demand count a loss of spot would leave the job on."""
        nodes = self._fewest(plan, fallback, lambda n: self.spot_safe(obs, self.spare_s(obs, n), n))
        return self.extra_usd(obs, plan.for_budget(obs), nodes)  # as the budget prices it

    def return_reserve_s(
        self, obs: Observation, fallback: int, spare_s: float, within_s: float = 0.0
    ) -> float:
        """Spare at which to commit to the fallback: a move back onto spot (0: none).

        Committed spot is taken back only while the spare covers a start on it and a
        loss (:meth:`_spot_at_last_moment`), never from a spare of 0 (a window whose
        spot came back 46 minutes after: 1.52x the optimum, 1.14x so).  Only where the
        most spot seen at once keeps the fallback's pace: elsewhere it would only move
        work onto the dearer count.  A ``spare_s`` above its upper bound by more than
        ``within_s`` gets the bound, which decides the same (the exact loss walks the
        schedule twice more: 2.4x the time per decision at one node).
        """
        if not self.config.spot_return:
            return 0.0
        seen = min(self.history.most_seen(), obs.max_nodes)
        if self.deadline.rate(obs, seen) < self.deadline.rate(obs, fallback):
            return 0.0
        bound = self.rollback_s(obs) + preemption_bound_s(obs, fallback) + obs.worst_pause_s
        if spare_s > bound + max(within_s, _SPARE_EPS_S):
            return bound
        return self.failure_s(obs, fallback) + obs.worst_pause_s

    def _wake_at(self, obs: Observation, nodes: int, fallback: int, spare: float) -> float | None:
        """When to look again: the last safe moment on ``nodes`` nodes, or ``replan_h``.

        Not when the waiting nodes' spare reaches their reserve: measured in the guide.
        """
        wake = self.config.replan_h * 3600.0
        fall = 1.0 - self.deadline.rate(obs, nodes) / self.deadline.rate(obs, fallback)
        if fall > 0.0:
            spare -= self.return_reserve_s(obs, fallback, spare, wake * fall)
            wake = min(wake, spare / fall)
        return wake_after(wake)
