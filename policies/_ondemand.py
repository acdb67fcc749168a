"""The cheapest pure on-demand plan that meets a deadline, from an observation (stdlib only).

Every deadline-aware policy needs the same yardstick: *what would it cost to run this
job on on-demand nodes only, started now (or at the start) and run straight?*  On-demand
nodes are never preempted, so that plan is deterministic: ``k`` nodes take one start
pause plus ``samples / goodput(k)`` seconds and cost ``k x price x time``.  The
cheapest ``k`` that still meets the deadline is the plan a user could have bought
without any policy at all; ``deadline`` promises never to cost more than it, and the
reports (``cost_vs_on_demand``) divide by it.

Three estimates enter, all from the observation:

* the start pause is ``obs.resume_cost_s`` (boot, group formation, checkpoint load,
  warm-up, for ``max_nodes`` nodes: an upper bound for fewer), or
  ``obs.rescale_cost_s`` when the environment gives none;
* the periodic checkpoints come as the job's schedule writes them
  (``obs.checkpoint_schedule``: ``auto``'s interval grows while nothing is
  preempted, :func:`on_demand_time_s`), or take ``1 - obs.training_share`` of the
  running time when the observation carries no schedule;
* ``overhead_fraction``, an option of the policies, is any further share of running
  time to assume lost (0 by default: the model has no other steady loss).

With these the plan's time is an upper bound of the simulated one, so the plan's
node count is the one a simulation of every count would pick, and a plan that fits
finishes in time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ._common import usable_spot
from .base import Decision, Observation

__all__ = [
    "DEFAULT_OVERHEAD_FRACTION",
    "DEFAULT_SAFETY_MARGIN_S",
    "OnDemandPlan",
    "cheapest_on_demand",
    "cost_effective_spot",
    "deadline_feasible",
    "fastest_finish_s",
    "job_plan",
    "finish_on_demand_s",
    "job_samples",
    "on_demand_time_s",
    "preemption_bound_s",
    "preemption_s",
    "preemption_usd",
    "start_pause_s",
    "taking_again_usd",
    "training_rate",
]

#: Share of running time assumed lost beyond the periodic checkpoints, for time estimates.
DEFAULT_OVERHEAD_FRACTION = 0.0
#: Seconds of slack kept before the deadline on top of one pause: a rollback (at most a
#: checkpoint interval, a few minutes for the bundled jobs) and the estimates' errors.
DEFAULT_SAFETY_MARGIN_S = 300.0


@dataclass(frozen=True)
class OnDemandPlan:
    """``nodes`` on-demand nodes run straight until the work is done.

    Attributes:
        nodes: on-demand nodes held for the whole plan.
        finish_s: seconds from the plan's start to done (start pause included).
        cost_usd: what the plan costs (nodes x price x ``finish_s``).
        usd_per_sample: USD per effective sample while it trains (checkpoints
            included, the start pause not): what a sample done elsewhere saves.
        start_pause_s: the start pause the plan pays (boot and group formation).
    """

    nodes: int
    finish_s: float
    cost_usd: float
    usd_per_sample: float
    start_pause_s: float = 0.0

    def for_budget(self, obs: Observation) -> OnDemandPlan:
        """The plan as a budget prices it: its samples without periodic checkpoints.

        The plan's price of a sample counts the checkpoints at the interval the job
        writes them now, which shortens once spot has been lost; priced so, every
        sample already done would be credited at the dearer price, and ``receding``,
        which spends its whole budget on a faster fallback, ended up to 0.6 % above
        the plan's real cost plus the bet on 16-node windows of real 1-node traces
        (the on-demand plan replayed alone keeps its longer interval).  Without the
        checkpoints the budget's plan is never dearer than the real one.
        """
        share = obs.training_share
        if share >= 1.0 or share <= 0.0:
            return self
        per_sample = self.usd_per_sample * share
        started_usd = self.nodes * obs.on_demand_price_per_hour * self.start_pause_s / 3600.0
        cost = per_sample * job_samples(obs) + started_usd
        return replace(self, usd_per_sample=per_sample, cost_usd=min(cost, self.cost_usd))


def job_samples(obs: Observation) -> float:
    """The job's whole target in effective samples (done plus remaining)."""
    if obs.progress <= 0.0:
        return obs.remaining_samples
    if obs.progress >= 1.0:
        return obs.remaining_samples
    return obs.remaining_samples / (1.0 - obs.progress)


def start_pause_s(obs: Observation) -> float:
    """Seconds from asking for nodes (holding none) to training on them."""
    return obs.rescale_cost_s if obs.resume_cost_s is None else obs.resume_cost_s


def taking_again_usd(obs: Observation, nodes: int) -> float:
    """What taking ``nodes`` on-demand nodes again costs: each paid through the worst pause.

    What letting committed on-demand nodes go risks: a deadline policy that may need
    them back pays their boot and the group's formation before they train.
    """
    return nodes * obs.on_demand_price_per_hour * obs.worst_pause_s / 3600.0


def training_rate(obs: Observation, nodes: int, overhead: float = 0.0) -> float:
    """Effective samples per second on ``nodes`` nodes, checkpoints and ``overhead`` taken off."""
    return obs.goodput(nodes) * obs.training_share * (1.0 - overhead)


def _time_s(obs: Observation, nodes: int, samples: float, overhead: float, pause_s: float) -> float:
    """``pause_s`` plus ``samples`` at :func:`training_rate`."""
    goodput = training_rate(obs, nodes, overhead)
    if goodput <= 0.0:
        return math.inf
    return pause_s + samples / goodput


def on_demand_time_s(
    obs: Observation,
    nodes: int,
    samples: float,
    pause_s: float,
    *,
    overhead: float = 0.0,
    from_start: bool = False,
) -> float:
    """``pause_s`` plus ``samples`` on ``nodes`` on-demand nodes, checkpoints as they come.

    Nodes that are never preempted let ``auto``'s checkpoint interval grow, so the
    time follows the job's schedule (:meth:`CheckpointSchedule.run_time_s`) rather
    than today's share; without a schedule in the observation, today's share.
    ``from_start``: the whole job's plan, from a cold start at time 0 with no
    preemption (the plan a user could buy, as it is replayed); otherwise from now,
    with one checkpoint write more where the job trains on without a pause (its next
    write may come before a full interval has passed).
    """
    schedule = obs.checkpoint_schedule
    if schedule is None or not schedule.auto:
        return _time_s(obs, nodes, samples, overhead, pause_s)
    goodput = obs.goodput(nodes) * (1.0 - overhead)
    if goodput <= 0.0:
        return math.inf
    write_s = obs.checkpoint_write_s
    if from_start:
        train_s = schedule.run_time_s(samples / goodput, write_s, 0.0, 0)
        return pause_s + train_s
    start_s = obs.now_s + pause_s
    # the interval in force, set at the last checkpoint or preemption: never longer
    # than the schedule's now (an observation made by hand may give none)
    first = min(
        obs.checkpoint_interval_s,
        schedule.current_interval_s(write_s, start_s, obs.preemptions),
    )
    train_s = schedule.run_time_s(samples / goodput, write_s, start_s, obs.preemptions, first)
    # a job training on its nodes may owe its next write before a full interval; a
    # pause (or a start) begins a fresh one
    owed_s = write_s if pause_s <= 0.0 and obs.progress > 0.0 else 0.0
    return pause_s + owed_s + train_s


def finish_on_demand_s(obs: Observation, nodes: int, *, overhead: float = 0.0) -> float:
    """Seconds to finish on ``nodes`` on-demand nodes alone from now.

    A switch to another count pays the worst pause first; the checkpoints come as
    :func:`on_demand_time_s` counts them.  The one estimate of ``deadline``'s last safe
    moment and of ``greedy``'s fallback.
    """
    switch = 0.0 if obs.on_demand_held == nodes else obs.worst_pause_s
    return on_demand_time_s(obs, nodes, obs.remaining_samples, switch, overhead=overhead)


def _one_more_loss(obs: Observation, nodes: int) -> tuple[float, float]:
    """The rest of the run on ``nodes`` nodes, as it is and after one more preemption.

    Both from a restart after the worst pause, each with the interval the schedule
    gives then (a loss sets it anew), so that they differ by the loss alone.
    """
    schedule = obs.checkpoint_schedule
    goodput = obs.goodput(nodes)
    if schedule is None or not schedule.auto or goodput <= 0.0:
        return 0.0, 0.0
    train_s, write_s = obs.remaining_samples / goodput, obs.checkpoint_write_s
    start_s = obs.now_s + obs.worst_pause_s
    now = schedule.run_time_s(train_s, write_s, start_s, obs.preemptions)
    after = schedule.run_time_s(train_s, write_s, start_s, obs.preemptions + 1)
    return now, after


def preemption_bound_s(obs: Observation, nodes: int) -> float:
    """An upper bound of :func:`preemption_s`, from the walk the spare already took.

    A loss at most halves ``auto``'s estimate of the time between failures, and the
    interval shrinks no faster than that estimate, so the writes at most double: the
    extra is at most today's checkpoint time for the rest of the run, plus one write.
    Why: the exact figure is two more walks of the schedule per decision (a tenth of
    a long simulation), and it matters only where the spare lies within this bound.
    """
    schedule = obs.checkpoint_schedule
    goodput = obs.goodput(nodes)
    if schedule is None or not schedule.auto or goodput <= 0.0:
        return 0.0  # as preemption_s: no schedule to shorten
    pause = obs.worst_pause_s
    total_s = on_demand_time_s(obs, nodes, obs.remaining_samples, pause)
    return max(total_s - pause - obs.remaining_samples / goodput, 0.0) + obs.checkpoint_write_s


def preemption_s(obs: Observation, nodes: int) -> float:
    """Seconds of checkpoints one more preemption adds to the rest of the run.

    ``auto``'s interval shortens with every preemption and stays shorter, so a loss
    of spot costs time beyond its pause and its rollback: every remaining sample on
    ``nodes`` nodes then carries more checkpoint writes (36 to 56 s over four hours
    of training on ``spot_p3_bamboo.csv``).  0 without an ``auto`` schedule.
    """
    now, after = _one_more_loss(obs, nodes)
    return max(after - now, 0.0)


def preemption_usd(obs: Observation, nodes: int, usd_per_sample: float) -> float:
    """What one more preemption adds in checkpoints over the rest of the run, in USD.

    The money side of :func:`preemption_s`, at ``usd_per_sample``.  A top-up of one
    spot node beside 14 on-demand ones that was lost ended 0.5 % above the plan (its
    budget covered the pauses, not this).
    """
    now, after = _one_more_loss(obs, nodes)
    if not now > 0.0:
        return 0.0
    return usd_per_sample * obs.remaining_samples * max(after / now - 1.0, 0.0)


def cheapest_on_demand(
    obs: Observation,
    samples: float,
    within_s: float,
    *,
    pause_s: float,
    overhead_fraction: float = DEFAULT_OVERHEAD_FRACTION,
    from_start: bool = False,
) -> OnDemandPlan | None:
    """The cheapest on-demand node count that does ``samples`` within ``within_s``.

    Returns None when on-demand nodes are not offered or no count is fast enough.
    Ties go to fewer nodes.  ``from_start``: see :func:`on_demand_time_s`.
    """
    price = obs.on_demand_price_per_hour
    if not math.isfinite(price):
        return None
    best: OnDemandPlan | None = None
    for nodes in range(obs.min_nodes, obs.max_nodes + 1):
        finish = on_demand_time_s(
            obs, nodes, samples, pause_s, overhead=overhead_fraction, from_start=from_start
        )
        if finish > within_s:
            continue
        cost = nodes * price * finish / 3600.0
        if best is None or cost < best.cost_usd * (1.0 - 1e-12):
            per_sample = nodes * price / 3600.0 / training_rate(obs, nodes, overhead_fraction)
            best = OnDemandPlan(nodes, finish, cost, per_sample, pause_s)
    return best


def job_plan(
    obs: Observation, *, overhead_fraction: float = DEFAULT_OVERHEAD_FRACTION
) -> OnDemandPlan | None:
    """The cheapest pure on-demand plan for the *whole* job, started at time 0.

    It depends only on the job, the deadline and the prices, not on how far the job
    has got, so every decision of a run sees the same plan (the policies stay
    stateless).  No margin: the plan is what an on-demand user could buy, and a
    policy that commits to it in time pays no more.  None: no deadline, no
    on-demand nodes, or not even ``max_nodes`` nodes make it.
    """
    if obs.deadline_s is None:
        return None
    return cheapest_on_demand(
        obs,
        job_samples(obs),
        obs.deadline_s,
        pause_s=start_pause_s(obs),
        overhead_fraction=overhead_fraction,
        from_start=True,
    )


def fastest_count(obs: Observation, least: int = 1) -> int:
    """The node count, ``least`` or more, that trains fastest (the smallest of equals).

    Not always ``max_nodes``: for a job whose all-reduce costs more than a node adds
    (the ResNet-50 preset's two nodes are slower than one), running "flat out" on
    ``max_nodes`` would be slower than the plan it is meant to rescue.
    """
    counts = range(max(obs.min_nodes, least, 1), obs.max_nodes + 1)
    return max(counts, key=lambda n: (obs.goodput(n), -n))


def held_spot_beside(obs: Observation, on_demand: int) -> int:
    """The spot nodes held to keep beside ``on_demand`` committed ones: those that finish soonest.

    For a policy that may not take new spot nodes (the slack no longer covers their
    pause and their loss) but holds some: keeping them all is not always fastest
    (where two nodes train slower than one, a spot node beside one on-demand node slows
    the job), so each count from the held ones down to none is weighed, a change
    costing one rescale; ties keep what is held.
    """
    held = min(obs.spot_held, usable_spot(obs))
    best, best_s = held, math.inf
    for spot in range(held, -1, -1):
        rate = training_rate(obs, on_demand + spot)
        if rate <= 0.0:
            continue
        pause = 0.0 if spot == obs.spot_held else obs.rescale_cost_s
        finish_s = pause + obs.remaining_samples / rate
        if finish_s < best_s:
            best, best_s = spot, finish_s
    return best


def flat_out(obs: Observation) -> Decision:
    """The fastest count, now: on-demand nodes held first, then usable spot, then on-demand.

    Keeping the on-demand nodes held avoids swapping them for spot, which would cost a
    boot and two pauses a job in a hurry cannot afford.
    """
    fastest = fastest_count(obs)
    spot = min(usable_spot(obs), fastest - min(obs.on_demand_held, fastest))
    return Decision(spot, fastest - spot, None)


def fastest_finish_s(obs: Observation, samples: float, *, overhead_fraction: float = 0.0) -> float:
    """Seconds to do ``samples`` from a cold start on the fastest node count."""
    pause = start_pause_s(obs)
    return min(
        _time_s(obs, n, samples, overhead_fraction, pause)
        for n in range(obs.min_nodes, obs.max_nodes + 1)
    )


def deadline_feasible(obs: Observation) -> bool | None:
    """Whether the whole job could meet its deadline with ``max_nodes`` nodes from the start.

    Optimistic on purpose (no checkpoint overhead, no preemption, the best node count
    from time 0): when even this fails, no policy can meet the deadline, and the user
    should hear it before the run rather than read "deadline met: no" after it.
    None without a deadline.
    """
    if obs.deadline_s is None:
        return None
    return fastest_finish_s(obs, job_samples(obs)) <= obs.deadline_s


def cost_effective_spot(obs: Observation, on_demand: int, usd_per_sample: float) -> int:
    """The spot nodes, beside ``on_demand`` ones, that save the most against the plan.

    At the plan's price a sample is worth ``usd_per_sample``; ``s`` spot nodes next to
    the on-demand ones then save ``usd_per_sample x (g(od + s) - g(od)) - s x price``
    per second.  The count that saves the most wins (ties: fewer nodes), 0 when none
    saves anything.  With sub-linear scaling the 16th node's samples can cost more
    than on-demand ones, and with a dip in the goodput table (two nodes slower than
    one, as for the ResNet-50 preset) the best count can lie beyond it, so every
    count is weighed, not only the next one.
    """
    usable = min(usable_spot(obs), obs.max_nodes - on_demand)
    per_s = obs.spot_price_per_hour / 3600.0
    base = obs.goodput(on_demand)
    best, best_saving = 0, 0.0
    for spot in range(max(obs.min_nodes - on_demand, 1), usable + 1):
        saving = usd_per_sample * (obs.goodput(on_demand + spot) - base) - spot * per_s
        if saving > best_saving * (1.0 + 1e-12) and saving > 0.0:
            best, best_saving = spot, saving
    return best
