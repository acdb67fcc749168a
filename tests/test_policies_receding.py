"""Hand-computed expectations for ``receding``.

The job of ``test_policies_builtin``'s deadline tests: 1e6 samples at 100/s per node
(up to 8), deadline 10 000 s, 60 s per pause, a free checkpoint every 60 s, on-demand
3 USD/h, spot 1 USD/h; the cheapest on-demand plan is k0 = 2 nodes (5 060 s, 8.43
USD), a sample on it costs 3 / 3600 / 100 USD.  Without the safety margin the spare
is ``10 000 - now - 60 (pause) - remaining / rate(fallback) - 60 (margin: one pause)``
and the price of work must make ``remaining / (10 000 - now - 120)`` samples/s.
The prior (4 h) spreads 1 600 s over each of the nine levels 0..8.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from spot_windows import benchmark_window
from test_policies_builtin import deadline_obs

from elasim.policies import Decision, RecedingPolicy
from elasim.policies._frontier import best_at, spot_markup
from elasim.sim import simulate
from elasim.traces import load_trace

SPOT_STEP = 1.0 / 3600.0 / 100.0  # USD per sample on spot: from here spot is worth it
OD_STEP = 3.0 / 3600.0 / 100.0  # ... and on-demand nodes
#: Sub-linear scaling on up to 4 nodes: one on-demand node makes the cheapest samples.
SUBLINEAR = {"max_nodes": 4, "throughput_samples_per_s": (0.0, 100.0, 150.0, 180.0, 200.0)}


def receding(**config: Any) -> RecedingPolicy:
    """Without the safety margin, to keep the arithmetic simple."""
    config.setdefault("safety_margin_s", 0.0)
    return RecedingPolicy(RecedingPolicy.Config(**config))


def test_frontier_is_spot_then_on_demand_with_their_prices_of_work() -> None:
    # linear scaling: every spot count costs the same per sample, and every on-demand
    # one: two steps, the spot nodes at the spot price, all of the rest at on-demand's
    obs = deadline_obs()
    vertices = receding().frontier(obs, 3, receding().deadline.plan(obs).usd_per_sample)
    assert [v.config for v in vertices] == [(0, 0), (3, 0), (3, 5)]
    assert [v.from_lam for v in vertices[1:]] == [pytest.approx(SPOT_STEP), pytest.approx(OD_STEP)]


def test_waits_without_spot_at_the_prior_and_looks_again() -> None:
    # the prior's mean availability (4 nodes, 400/s) covers 1e6 / 9 880 s at the spot
    # price, so no on-demand work yet; the fallback is 8 nodes (linear scaling: no
    # extra cost), spare 10 000 - 60 - 1 250 - 60 = 8 630 s; look again in half an hour
    policy = receding()
    obs = deadline_obs()
    assert policy.price_of_work(obs, policy.deadline.plan(obs), {}) == pytest.approx(SPOT_STEP)
    assert policy.decide(deadline_obs()) == Decision(0, 0, 1800.0)
    assert receding().decide(deadline_obs(spot_available=3)) == Decision(3, 0, 1800.0)


def test_buys_on_demand_once_spot_has_stayed_away() -> None:
    # 6 000 s seen without spot: levels 0: 7 600 s, 1..8: 1 600 s each; the expected
    # spot rate 100 x 1 600 x 36 / 20 400 = 282/s still covers 1e6 / 3 880 s = 258/s
    policy = receding()
    policy.decide(deadline_obs())
    assert policy.decide(deadline_obs(now_s=6000.0)).total_nodes == 0
    # 7 000 s: 269/s against 1e6 / 2 880 s = 347/s: the price rises to on-demand's,
    # at which every on-demand count ties (linear): the most work
    # (the wait down to a reserve, which the next test checks, turned off)
    policy = receding(loss_cover=0.0)
    policy.decide(deadline_obs())
    assert policy.decide(deadline_obs(now_s=7000.0)) == Decision(0, 8, 1800.0)
    # with it, and a look every 12 minutes, the 8 nodes the price of work buys wait
    # while their spare (10 000 - 7 000 - 60 - 1 250 - 60 = 1 630 s) less the time to
    # the next look (720 s) keeps the reserve (725 s): they can do the work later
    policy = receding(replan_h=0.2)
    policy.decide(deadline_obs())
    obs = deadline_obs(now_s=7000.0)
    assert policy.spare_s(obs, 8) - 720.0 > policy.reserve_s(obs, 8) == pytest.approx(725.0)
    assert policy.decide(obs) == Decision(0, 0, 720.0)
    # looking again only in half an hour, the reserve would not hold until then: they come
    policy = receding()
    policy.decide(deadline_obs())
    assert policy.decide(obs) == Decision(0, 8, 1800.0)
    # a fresh policy has seen nothing: the prior alone still waits (its state is
    # what it observed)
    assert receding().decide(deadline_obs(now_s=7000.0)).total_nodes == 0


#: One node, 1e6 samples at 100/s, due at 20 000 s: the fallback is the one node.
ONE_NODE = {"max_nodes": 1, "throughput_samples_per_s": (0.0, 100.0), "deadline_s": 20_000.0}


def test_one_node_waits_out_an_outage_down_to_the_reserve() -> None:
    # 10 % done at 6 000 s, spot never seen: behind the line (30 %), the expected wait
    # (3 600 + 6 000 s) is far above half the spare, and the history (13 200 s at
    # level 0 of 20 400) prices work at on-demand's: the plan would buy the node now.
    # The node does the work put off later at the same price, so it waits while its
    # spare (20 000 - 6 000 - 60 - 9 000 - 60 = 4 880 s) keeps the reserve: the release
    # lead (480 s) and a failure (120 s) for 1 + 5 x 14 000 / 20 400 expected losses
    def history(policy: RecedingPolicy) -> RecedingPolicy:
        policy.decide(deadline_obs(**ONE_NODE))
        return policy

    obs = deadline_obs(0.1, now_s=6000.0, **ONE_NODE)
    assert history(receding(loss_cover=0.0)).decide(obs) == Decision(0, 1, 1800.0)
    policy = history(receding())
    assert policy.decide(obs) == Decision(0, 0, 1800.0)
    assert policy.reserve_s(obs, 1) == pytest.approx(480.0 + 120.0 * (1 + 5 * 14_000 / 20_400))
    # at 10 400 s the spare (480 s) is below the reserve (832 s): the node comes
    late = deadline_obs(0.1, now_s=10_400.0, **ONE_NODE)
    assert policy.spare_s(late, 1) == pytest.approx(480.0)
    assert policy.decide(late) == Decision(0, 1, 1800.0)


def test_the_cheapest_on_demand_node_waits_on_its_own_spare() -> None:
    # sub-linear scaling up to 4 nodes, due at 20 000 s, 60 % done at 14 000 s without
    # spot: behind the line (70 %), and the expected spot rate (2 880 s at each of the
    # levels 1..4 of 28 400 s: 64/s) is short of 4e5 / 5 880 s = 68/s, so the price of
    # work buys one on-demand node (the cheapest samples; the fallback is 4 nodes).
    # That node could do the work later at the same price: it waits while its own
    # spare (20 000 - 14 000 - 60 - 4 000 - 60 = 1 880 s), less the 15 minutes to
    # the next look, keeps the reserve (727 s)
    setting = {**SUBLINEAR, "deadline_s": 20_000.0}
    obs = deadline_obs(0.6, now_s=14_000.0, **setting)
    for loss_cover, nodes in ((0.0, 1), (5.0, 0)):
        policy = receding(loss_cover=loss_cover, replan_h=0.25)
        policy.decide(deadline_obs(**setting))
        assert policy.decide(obs) == Decision(0, nodes, 900.0)
    # looking again only in half an hour, the spare would be below the reserve by then
    late = receding()
    late.decide(deadline_obs(**setting))
    assert late.decide(obs) == Decision(0, 1, 1800.0)
    assert policy.spare_s(obs, 1) == pytest.approx(1880.0)
    assert policy.reserve_s(obs, 1) == pytest.approx(480.0 + 120.0 * (1 + 5 * 6000 / 28_400))


def test_buys_the_cheapest_on_demand_count_not_the_plans() -> None:
    # 4 nodes, deadline 6 000 s: k0 = 3 (5 616 s, 14.04 USD; 4 nodes 16.87).  An hour
    # on 4 spot nodes (7.2e5 samples; call it 0.7 done, 4 USD spent), then spot goes:
    # shares 0.16 at 0..3, 0.36 at 4; at one on-demand node's price (3 / 3600 / 100)
    # the expected rate is 0.16 x (100 + 100 + 150 + 150) + 0.36 x 150 = 134/s, enough
    # for 3e5 / 2 280 s = 132/s: one on-demand node, not k0's three.  The fallback is 4
    # nodes (3e5 x (1.667e-5 - 1.389e-5) = 0.83 USD, within the budget), spare
    # 6 000 - 3 600 - 60 - 1 500 - 60 = 780 s, spent at half a second per second down
    # to the return reserve (a failure, 120 s, and a pause: 4 spot nodes were seen):
    # (780 - 180) / 0.5 = 1 200 s.
    # (Without the pace: at 0.7 done the job is ahead of the line 3 600 / 6 000.)
    policy = receding(pace=False)
    policy.decide(deadline_obs(deadline_s=6000.0, spot_available=4, **SUBLINEAR))
    later = deadline_obs(
        0.7, now_s=3600.0, deadline_s=6000.0, spot_held=4, spent_usd=4.0, **SUBLINEAR
    )
    assert policy.deadline.plan(later).nodes == 3
    decision = policy.decide(later)
    assert (decision.spot_nodes, decision.on_demand_nodes) == (0, 1)
    assert decision.wake_after_s == pytest.approx(1200.0)


def test_puts_off_on_demand_nodes_ahead_of_the_line() -> None:
    # the same hour: the price of work buys one on-demand node; 0.8 done is ahead of
    # the line (0.6) and the node's own spare (6 000 - 3 600 - 2 000 - 60 - 60 = 280 s)
    # lasts until the next look 3 minutes away, so the node is put off
    start = deadline_obs(deadline_s=6000.0, spot_available=4, **SUBLINEAR)
    setting = {"now_s": 3600.0, "deadline_s": 6000.0, "spot_held": 4, "spent_usd": 4.0}
    policy = receding(replan_h=0.05)
    policy.decide(start)
    ahead = deadline_obs(0.8, **setting, **SUBLINEAR)
    assert policy.spare_at_next_look_s(ahead, 1) == pytest.approx(100.0)
    assert policy.decide(ahead).total_nodes == 0
    # 0.7 done: one node can no longer finish alone (its spare is -720 s), and waiting
    # ahead of the line would only leave the rest to the 4-node fallback, whose
    # samples cost twice as much: the node comes now
    policy = receding()
    policy.decide(start)
    ahead = deadline_obs(0.7, **setting, **SUBLINEAR)
    assert policy.spare_at_next_look_s(ahead, 1) == pytest.approx(-720.0 - 1800.0)
    decision = policy.decide(ahead)
    assert (decision.spot_nodes, decision.on_demand_nodes) == (0, 1)
    # behind the line (0.55 done), the plan's on-demand work is bought now
    policy = receding()
    policy.decide(start)
    behind = deadline_obs(0.55, **setting, **SUBLINEAR)
    assert policy.decide(behind).on_demand_nodes > 0


def test_waits_ahead_of_the_line_only_while_the_nodes_own_spare_lasts() -> None:
    # a 4-node, 1.5x window of spot_us_west.csv: twice the job was ahead of the line
    # at an outage with one on-demand node's spare below the next look; it waited
    # half an hour each time, then finished on its 4-node fallback (53.42 USD, 1.25x
    # the optimum); now one node runs through those outages (44.29 USD, 1.03x)
    spec, job = benchmark_window(4, 1.5, 1358287.229040848)
    run = simulate(spec, trace=load_trace("spot_us_west.csv"), policy=RecedingPolicy(), job=job)
    assert run.summary()["deadline_met"]
    assert run.cost_usd < 46.0


def test_fallback_is_the_fastest_count_the_budget_covers() -> None:
    obs = deadline_obs(deadline_s=6000.0, **SUBLINEAR)
    policy = receding()
    plan = policy.deadline.plan(obs)
    # 1e6 x (4 x 3 / 3600 / 200 - 3 x 3 / 3600 / 180) = 2.78 USD over the plan, plus
    # the fourth node's start (60 s at 3 USD/h): 0.05 USD
    assert policy.switch_usd(obs, plan, 4) == pytest.approx(0.05)
    assert policy.fallback_nodes(obs, plan, 2.8) == 3  # would cover the samples alone
    assert policy.fallback_nodes(obs, plan, 2.82) == 3
    assert policy.fallback_nodes(obs, plan, 2.83) == 4
    # a group of 3 on-demand nodes growing to 4: the new node boots (60 s) and all
    # four pause to re-form (60 s): 300 node-seconds at 3 USD/h = 0.25 USD
    held = dataclasses.replace(obs, on_demand_held=3)
    assert policy.switch_usd(held, plan, 4) == pytest.approx(0.25)
    assert policy.fallback_nodes(held, plan, 3.02) == 3
    assert policy.fallback_nodes(held, plan, 3.03) == 4


def test_commits_at_the_last_safe_moment() -> None:
    # linear: the fallback is 8 nodes, whose spare is 0 at 8 630 s: on-demand to the end
    assert receding().decide(deadline_obs(now_s=8630.0)) == Decision(0, 8, None)
    # 10 s before, the price of work has bought them already (1e6 / 1 260 s = 794/s
    # needs on-demand nodes at every level), looking again in half an hour
    assert receding().decide(deadline_obs(now_s=8620.0)) == Decision(0, 8, 1800.0)


def test_commits_to_a_count_that_keeps_the_safety_margin() -> None:
    # sub-linear, 0.7 done at 4 080 s, 4 USD spent: the plan is 3 nodes, and the budget
    # (6.42 USD) covers the fallback's 4 (0.83 USD of dearer samples and a start);
    # their spare is 6 000 - 4 080 - 60 - 3e5 / 200 - 300 - 60 = 0: the last safe moment.
    # The plan's 3 nodes would finish 193 s before the deadline by the estimate, less
    # than the margin (300 + one pause): committing to them spends the margin kept for
    # the estimate's errors (a SkyPilot window finished 27 s late so), so 4 it is
    policy = receding(safety_margin_s=300.0)
    obs = deadline_obs(0.7, now_s=4080.0, deadline_s=6000.0, spent_usd=4.0, **SUBLINEAR)
    plan = policy.deadline.plan(obs)
    assert plan is not None and plan.nodes == 3
    assert policy.deadline.slack_s(obs, 3) == pytest.approx(193.33, abs=0.01)
    assert policy.decide(obs) == Decision(0, 4, None)
    assert policy.margin_nodes(obs, plan, 4) == 4
    # with the margin's room still there, the plan's count keeps it (a fallback of 4)
    early = dataclasses.replace(obs, now_s=3000.0)
    assert policy.margin_nodes(early, plan, 4) == 3


def test_keeps_on_demand_nodes_without_the_slack_to_take_them_again() -> None:
    # 4 on-demand nodes held (the fallback), 0.7 done at 4 000 s: spare 6 000 - 4 000 -
    # 60 - 3e5 / 200 - 60 = 380 s, below the release lead 4 x (60 + 60) = 480 s, so
    # they stay (the plan alone would drop to two nodes and come back at 380 s; not
    # to one, whose own spare is gone: 2 000 - 3 000 - 120 s)
    held = deadline_obs(
        0.7, now_s=4000.0, deadline_s=6000.0, on_demand_held=4, spent_usd=4.0, **SUBLINEAR
    )
    assert receding().decide(held) == Decision(0, 4, None)
    assert receding(release_lead_s=0.0).decide(held).on_demand_nodes == 2


def test_spot_past_the_last_safe_moment_only_while_the_margin_covers_a_loss() -> None:
    # half done, 1 USD spent: the budget 0.42 + 4.17 - 1 covers 8 spot nodes' venture
    # (0.73).  With a safety margin of 120 s the spare is 0 at 10 000 - 60 - 625 - 180
    # = 9 135 s; 8 spot nodes keep the fallback's pace, and a loss costs 60 s
    # (rescale) + 60 s (an interval rolled back), which the margin covers once the
    # job is on spot; moving onto spot is a start (60 s) too, which it does not cover:
    # the fallback's 8 on-demand nodes (deadline's fewest in time, 7, would keep less
    # than the margin), without the spot node deadline puts beside its 7
    late = {"progress": 0.5, "spent_usd": 1.0, "spot_available": 8}
    obs = deadline_obs(now_s=9135.0, **late)
    policy = receding(safety_margin_s=120.0)
    assert policy.decide(obs) == Decision(0, 8, None)
    plan = policy.deadline.plan(obs)
    budget = policy.deadline.budget_usd(obs, plan.for_budget(obs))
    assert policy.deadline.commit(obs, plan, budget) == Decision(1, 7, None)
    on_spot = deadline_obs(now_s=9135.0, spot_held=8, **late)
    assert receding(safety_margin_s=120.0).decide(on_spot) == Decision(8, 0, 1800.0)
    # a margin of 180 s covers the start and a loss: spare 0 at 9 075 s, spot
    obs = deadline_obs(now_s=9075.0, **late)
    assert receding(safety_margin_s=180.0).decide(obs) == Decision(8, 0, 1800.0)
    # without the margin the spare is 0 at 9 255 s and nothing covers a loss
    assert receding().decide(deadline_obs(now_s=9255.0, **late)) == Decision(0, 8, None)


def test_history_counts_time_at_the_level_seen_before() -> None:
    policy = receding(prior_h=0.0)
    policy.history.observe(0.0, 2)
    policy.history.observe(100.0, 0)
    policy.history.observe(400.0, 0)
    assert policy.history.shares(4) == [(0, 0.75), (2, 0.25)]
    assert policy.history.dwell_s() == 400.0


def test_history_counts_outages_and_their_time() -> None:
    # two outages of 100 s ended, a third 300 s old: (prior 600 + 500) / 3 each
    history = RecedingPolicy(RecedingPolicy.Config()).history
    for now_s, level in ((0.0, 0), (100.0, 2), (200.0, 0), (300.0, 1), (400.0, 0), (700.0, 0)):
        history.observe(now_s, level)
    assert history.outages == 2
    assert history.outage_left_s(600.0) == pytest.approx(1100.0 / 3)


def short_outages(policy: RecedingPolicy, until_s: float) -> None:
    """100 s without spot, 100 s with one node, ... up to ``until_s``."""
    for step in range(int(until_s // 100.0)):
        policy.history.observe(step * 100.0, step % 2)


def test_rides_out_an_outage_that_the_slack_covers_twice() -> None:
    # 35 outages of 100 s ended by 7 000 s: one waits (3 600 + 3 500) / 36 = 197 s,
    # twice that is within the spare (10 000 - 7 000 - 60 - 1 250 - 60 = 1 630 s); the
    # expected spot rate (285/s) is short of 1e6 / 2 880 s, so the price of work is
    # on-demand's and the job is behind the line: without the outages' model it buys.
    # (35 losses in 2 h make a reserve for the losses to come above the spare, so the
    # expected wait decides, not the reserve)
    policy = receding()
    short_outages(policy, 7000.0)
    obs = deadline_obs(now_s=7000.0)
    assert policy.decide(obs).total_nodes == 0
    assert policy.reserve_s(obs, 8) > policy.spare_s(obs, 8)
    policy = receding(outage_cover=0.0)
    short_outages(policy, 7000.0)
    assert policy.decide(deadline_obs(now_s=7000.0)) == Decision(0, 8, 1800.0)
    # an outage of 3 100 s by then: (3 600 + 1 900 + 3 100) / 20 = 430 s, twice that
    # is still covered; at 8 000 s it is (3 600 + 1 900 + 4 100) / 20 = 480 s, and
    # twice that is more than the spare (630 s): the line decides, and it buys
    policy = receding()
    short_outages(policy, 3900.0)
    assert policy.decide(deadline_obs(now_s=7000.0)).total_nodes == 0
    assert policy.decide(deadline_obs(now_s=8000.0)).on_demand_nodes == 8


def test_waits_on_a_dearer_fallback_only_while_the_spare_covers_its_premium() -> None:
    # sub-linear, half done, due at 12 000 s; 5 outages of 100 s ended by 1 000 s, then
    # spot's level 1 to 7 100 s: one waits (3 600 + 500) / 6 = 683 s.  The budget
    # covers a 4-node fallback, spare 12 000 - 7 100 - 60 - 5e5 / 200 - 60 = 2 280 s:
    # two waits (1 367 s) fit, but a sample on 4 nodes costs 4 x 100 / 200 = 2x one on
    # the one node the price of work buys, so the waits count twice (2 733 s): it buys
    # the node now rather than bet the work on the fallback (a 4-node window, 1.49x)
    obs = deadline_obs(progress=0.5, now_s=7100.0, deadline_s=12_000.0, **SUBLINEAR)
    policy = receding()
    short_outages(policy, 1000.0)
    assert policy.decide(obs) == Decision(0, 1, 1800.0)
    assert policy.spare_s(obs, 4) == pytest.approx(2280.0)
    assert policy.premium(obs, 1, 4) == pytest.approx(2.0)
    assert policy.premium(obs, 4, 4) == 1.0 and policy.premium(obs, 2, 1) == 1.0
    flat = receding()
    flat.premium = lambda *args: 1.0  # type: ignore[method-assign]
    short_outages(flat, 1000.0)
    assert flat.decide(obs).total_nodes == 0  # without the premium, it waits


def test_committed_nodes_keep_only_the_held_spot_nodes_that_help() -> None:
    # as uniform_progress's case: spot at 0.01 USD/h, one spot node held beside one
    # on-demand node where two nodes train slower than one; no budget for new ones
    dip = {"max_nodes": 4, "throughput_samples_per_s": (0.0, 100.0, 90.0, 95.0, 120.0)}
    held = {"spot_available": 3, "spot_held": 1, "on_demand_held": 1}
    for now_s in (14_750.0, 14_900.0, 15_000.0):
        obs = deadline_obs(
            0.5, now_s=now_s, deadline_s=20_000.0, spot_price_per_hour=0.01, spent_usd=5.0,
            **held, **dip,
        )  # fmt: skip
        decision = receding(safety_margin_s=300.0).decide(obs)
        assert (decision.spot_nodes, decision.on_demand_nodes) == (0, 1), now_s


def test_commits_early_enough_to_take_returning_spot_back() -> None:
    # 4 spot nodes seen, then an outage: 0.6 done at 3 700 s on one on-demand node,
    # the fallback's 4 nodes' spare is 6 000 - 3 700 - 60 - 2 000 - 60 = 180 s, the
    # return reserve (a failure: 60 s rescale + 60 s interval, and a 60 s pause):
    # commit now, to the fallback (3 nodes would keep 18 s of the 60 s margin).
    # (No release lead: below it the held node would be topped up to the fallback's
    # count anyway, and on real windows the lead is below the reserve.)
    setting = {**SUBLINEAR, "deadline_s": 6000.0, "spent_usd": 4.0}
    committed = deadline_obs(0.6, now_s=3700.0, on_demand_held=1, **setting)
    policy = receding(release_lead_s=0.0)
    policy.decide(deadline_obs(spot_available=4, **setting))
    assert policy.return_reserve_s(committed, 4, 180.0) == pytest.approx(180.0)
    # far above it, an upper bound stands in (deciding the same, without the walks)
    assert policy.return_reserve_s(committed, 4, 1e6) >= 180.0
    assert policy.decide(committed) == Decision(0, 4, None)
    # spot returns 10 minutes later: the fallback's spare (still 180 s) covers the
    # move onto it and a loss, so spot is taken back
    back = deadline_obs(0.72, now_s=4300.0, on_demand_held=4, spot_available=4, **setting)
    assert policy.spare_s(back, 4) == pytest.approx(180.0)
    assert policy.decide(back) == Decision(4, 0, 1800.0)
    # without the reserve the commitment comes at a spare of 0 (here 360 s later on
    # the one node, spent at half a second per second); the fallback's spare stays 0,
    # and spot returning 10 minutes later is never taken back
    late = receding(release_lead_s=0.0, spot_return=False)
    late.decide(deadline_obs(spot_available=4, **setting))
    assert late.decide(committed).wake_after_s is not None
    zero = deadline_obs(0.636, now_s=4060.0, on_demand_held=1, **setting)
    assert late.decide(zero) == Decision(0, 4, None)
    back = deadline_obs(0.756, now_s=4660.0, on_demand_held=4, spot_available=4, **setting)
    assert late.spare_s(back, 4) == pytest.approx(0.0, abs=1e-6)
    assert late.decide(back) == Decision(0, 4, None)
    # a window whose spot never kept the fallback's pace commits at 0, as before
    one = receding()
    one.decide(deadline_obs(spot_available=1, **setting))
    assert one.return_reserve_s(committed, 4, 180.0) == 0.0


def test_new_spot_leaves_the_budget_what_its_loss_would_cost() -> None:
    # sub-linear, due at 6 000 s, 0.45 done at 2 800 s on the plan's 3 on-demand nodes,
    # 5 USD spent: the budget is 1.95 USD and the fallback 4 nodes.  The 3 nodes' spare
    # (24 s) cannot absorb a loss (a 120 s rollback), so losing spot would leave the
    # job on 4 on-demand nodes, 1.78 USD of dearer samples beyond the plan.  Four spot
    # nodes' venture (0.32 USD) fits the budget but not what that loss leaves of it
    # (0.17 USD): no new spot.  Weighed against the whole budget they were taken, and a
    # search window ended 0.7 % above the plan plus the bet after losing them.
    setting = {**SUBLINEAR, "deadline_s": 6000.0}
    obs = deadline_obs(
        0.45, now_s=2800.0, spent_usd=5.0, on_demand_held=3, spot_available=4, **setting
    )
    policy = receding()
    policy.decide(deadline_obs(spot_available=4, **setting))
    plan = policy.deadline.plan(obs)
    assert policy.kept_usd(obs, plan, 4) == pytest.approx(1.7778, abs=1e-4)
    assert policy.decide(obs) == Decision(0, 4, None)
    whole = receding()
    whole.decide(deadline_obs(spot_available=4, **setting))
    whole.kept_usd = lambda *args: 0.0  # type: ignore[method-assign]
    assert whole.decide(obs) == Decision(4, 0, 1800.0)


def test_spot_past_the_last_safe_moment_keeps_the_fallbacks_pace_or_none() -> None:
    # the last safe moment of the margin test above (9 075 s, a 180 s margin) with one
    # spot node and 7 on-demand ones held and 3.5 USD spent: the budget (1.09 USD) no
    # longer covers 8 new spot nodes' venture.  The one held is no substitute for the
    # fallback's 8 nodes: on-demand to the end (it once replaced all 8, and was late)
    obs = deadline_obs(
        now_s=9075.0, progress=0.5, spent_usd=3.5, spot_available=8, spot_held=1, on_demand_held=7
    )
    policy = receding(safety_margin_s=180.0)
    plan = policy.deadline.plan(obs)
    budget = policy.deadline.budget_usd(obs, plan.for_budget(obs))
    assert budget == pytest.approx(1.088, abs=1e-3)
    assert policy._afford_spot(obs, 8, 0, plan, (budget, 8)) == 1
    assert policy._spot_at_last_moment(obs, 8, policy.spare_s(obs, 8), plan, budget) == 0
    assert policy.decide(obs) == Decision(0, 8, None)


def test_the_markup_buys_spot_nodes_never_on_demand_ones() -> None:
    # sub-linear scaling on 4 spot nodes: the k-th spot node is worth its price from
    # 1, 2, 3.33 and 5 x SPOT_STEP (marginal rates 100, 50, 30 and 20 /s at 1 USD/h)
    policy = receding()
    obs = deadline_obs(spot_available=4, **SUBLINEAR)
    plan = policy.deadline.plan(obs)
    spot = policy.frontier(obs, 4, plan.usd_per_sample)
    assert [round(v.from_lam / SPOT_STEP, 2) for v in spot[1:]] == [1.0, 2.0, 3.33, 5.0]
    # at 3.1 x the third node is not worth it; 10 % more is, so it runs
    marked = spot_markup(spot, 3.1 * SPOT_STEP, 3.41 * SPOT_STEP)
    assert marked == pytest.approx(3.41 * SPOT_STEP)
    assert best_at(spot, marked).config == (3, 0)
    # no spot: one on-demand node is worth it from 3 x (3 USD/h for 100 /s); at 2.9 x
    # the markup stops just below it, and at 3 x (its tie) it adds nothing: the
    # pacing rules decide the tie (test_puts_off_on_demand_nodes_ahead_of_the_line)
    none = policy.frontier(obs, 0, plan.usd_per_sample)
    assert none[1].config == (0, 1) and none[1].from_lam == pytest.approx(3 * SPOT_STEP)
    assert best_at(none, spot_markup(none, 2.9 * SPOT_STEP, 3.19 * SPOT_STEP)).config == (0, 0)
    assert spot_markup(none, 3 * SPOT_STEP, 3.3 * SPOT_STEP) == 3 * SPOT_STEP


def test_the_markup_runs_more_spot_while_it_is_plentiful() -> None:
    # a 16-node, 2x window of spot_us_east.csv: at the certainty-equivalent price the
    # job ran few spot nodes while spot was plentiful, fell behind, and caught up on
    # 9.25 on-demand node-hours (99.30 USD, 1.17x the optimum's 84.89); marked up,
    # it runs more spot early and needs 3.9 (87.50 USD, 1.03x)
    spec, job = benchmark_window(16, 2.0, 83430.85371460448)
    trace = load_trace("spot_us_east.csv")
    runs = {}
    for markup in (0.0, 0.1):
        policy = RecedingPolicy(RecedingPolicy.Config(work_markup=markup))
        runs[markup] = simulate(spec, trace=trace, policy=policy, job=job)
    plain, marked = (runs[m].summary() for m in (0.0, 0.1))
    assert plain["deadline_met"] and marked["deadline_met"]
    assert marked["spot_node_hours"] > plain["spot_node_hours"] + 4.0
    assert marked["on_demand_node_hours"] < plain["on_demand_node_hours"] - 5.0
    assert runs[0.1].cost_usd < 0.93 * runs[0.0].cost_usd
