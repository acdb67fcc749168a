"""Hand-computed expectations for each built-in policy."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasim.policies import (
    DeadlinePolicy,
    Decision,
    FixedPolicy,
    GoodputPolicy,
    GreedyPolicy,
    HysteresisPolicy,
    Observation,
    PricePolicy,
    clamp,
    deadline_feasible,
    make_policy,
)
from elasim.policies.hysteresis import breakeven_dwell_s


def make_obs(**overrides: Any) -> Observation:
    """A small job: linear 100 samples/s per node, efficiency 1, 60 s per rescale."""
    max_nodes = overrides.pop("max_nodes", 8)
    per_node = overrides.pop("per_node", 100.0)
    fields: dict[str, Any] = dict(
        now_s=0.0,
        spot_available=max_nodes,
        spot_held=0,
        on_demand_held=0,
        spot_price_per_hour=1.0,
        on_demand_price_per_hour=3.0,
        progress=0.0,
        remaining_samples=1e6,
        throughput_samples_per_s=tuple(per_node * n for n in range(max_nodes + 1)),
        statistical_efficiency=(1.0,) * (max_nodes + 1),
        rescale_cost_s=60.0,
        deadline_s=None,
        min_nodes=1,
        max_nodes=max_nodes,
    )
    fields.update(overrides)
    return Observation(**fields)


# ----------------------------------------------------------------------------- fixed


@pytest.mark.parametrize(
    ("available", "expected"),
    [(0, Decision(0)), (3, Decision(0)), (4, Decision(4)), (10, Decision(4))],
)
def test_fixed_runs_only_with_exactly_n(available: int, expected: Decision) -> None:
    policy = FixedPolicy(FixedPolicy.Config(n_nodes=4))
    assert policy.decide(make_obs(spot_available=available)) == expected


def test_fixed_defaults_to_max_nodes_and_fills_with_on_demand() -> None:
    assert FixedPolicy().decide(make_obs(spot_available=7)) == Decision(0)
    assert FixedPolicy().decide(make_obs(spot_available=8)) == Decision(8)
    filling = FixedPolicy(FixedPolicy.Config(n_nodes=4, use_on_demand=True))
    assert filling.decide(make_obs(spot_available=3)) == Decision(3, 1)
    assert filling.decide(make_obs(spot_available=0)) == Decision(0, 4)
    assert filling.decide(make_obs(spot_available=9)) == Decision(4, 0)


def test_fixed_n_outside_job_bounds_is_moved_to_the_nearest_bound() -> None:
    big = FixedPolicy(FixedPolicy.Config(n_nodes=100))
    assert big.decide(make_obs(spot_available=8)) == Decision(8)
    small = FixedPolicy(FixedPolicy.Config(n_nodes=1))
    assert small.decide(make_obs(min_nodes=2, spot_available=5)) == Decision(2)


# ---------------------------------------------------------------------------- greedy


@pytest.mark.parametrize(
    ("available", "expected"),
    [(0, Decision(0)), (1, Decision(0)), (5, Decision(5)), (20, Decision(8))],
)
def test_greedy_takes_all_usable_spot(available: int, expected: Decision) -> None:
    assert GreedyPolicy().decide(make_obs(spot_available=available, min_nodes=2)) == expected


def test_greedy_fill_with_on_demand_tops_up_to_min_nodes() -> None:
    policy = GreedyPolicy(GreedyPolicy.Config(fill_with_on_demand=True))
    assert policy.decide(make_obs(spot_available=1, min_nodes=3)) == Decision(1, 2)
    assert policy.decide(make_obs(spot_available=5, min_nodes=3)) == Decision(5, 0)


# ----------------------------------------------------------------------------- price


@pytest.mark.parametrize(
    ("price", "expected"), [(0.2, Decision(5)), (1.5, Decision(5)), (1.51, Decision(0))]
)
def test_price_cap_is_a_fraction_of_on_demand(price: float, expected: Decision) -> None:
    # Default cap: 0.5 * on-demand 3.0 = 1.5 USD/h; at the cap still runs.
    obs = make_obs(spot_available=5, spot_price_per_hour=price, on_demand_price_per_hour=3.0)
    assert PricePolicy().decide(obs) == expected


def test_price_absolute_cap_wins_over_fraction() -> None:
    policy = PricePolicy(PricePolicy.Config(max_price_per_hour=0.9))
    assert policy.decide(make_obs(spot_available=5, spot_price_per_hour=0.9)) == Decision(5)
    assert policy.decide(make_obs(spot_available=5, spot_price_per_hour=1.0)) == Decision(0)


def test_price_below_cap_but_too_few_nodes_holds_nothing() -> None:
    obs = make_obs(spot_available=1, min_nodes=2, spot_price_per_hour=0.1)
    assert PricePolicy().decide(obs) == Decision(0)


# ------------------------------------------------------------------------ hysteresis


def test_breakeven_dwell_formula() -> None:
    # C (g_t + g_c) / (g_t - g_c) = 60 * 600 / 200
    assert breakeven_dwell_s(60.0, 200.0, 400.0) == 180.0
    assert breakeven_dwell_s(60.0, 0.0, 400.0) == 0.0
    assert breakeven_dwell_s(60.0, 400.0, 400.0) == math.inf


def test_hysteresis_waits_exactly_the_breakeven_dwell() -> None:
    policy = HysteresisPolicy()
    # Holding 2 (200/s), 4 available (400/s), C = 60 s -> dwell 180 s.
    assert policy.decide(make_obs(now_s=1000.0, spot_held=2, spot_available=4)) == Decision(
        2, 0, 180.0
    )
    assert policy.decide(make_obs(now_s=1100.0, spot_held=2, spot_available=4)) == Decision(
        2, 0, 80.0
    )
    assert policy.decide(make_obs(now_s=1180.0, spot_held=2, spot_available=4)) == Decision(4)


def test_hysteresis_clock_restarts_when_extra_capacity_vanishes() -> None:
    policy = HysteresisPolicy()
    policy.decide(make_obs(now_s=1000.0, spot_held=2, spot_available=4))
    assert policy.decide(make_obs(now_s=1100.0, spot_held=2, spot_available=2)) == Decision(2)
    assert policy.decide(make_obs(now_s=1150.0, spot_held=2, spot_available=4)) == Decision(
        2, 0, 180.0
    )
    assert policy.decide(make_obs(now_s=1329.0, spot_held=2, spot_available=4)) == Decision(
        2, 0, 1.0
    )
    assert policy.decide(make_obs(now_s=1330.0, spot_held=2, spot_available=4)) == Decision(4)


def test_hysteresis_target_follows_capacity_but_clock_keeps_running() -> None:
    policy = HysteresisPolicy()
    # 3 available: 60 * (300 + 200) / 100 = 300 s.
    assert policy.decide(make_obs(now_s=0.0, spot_held=2, spot_available=3)) == Decision(
        2, 0, 300.0
    )
    # 4 available from t=100: dwell 180 s counted from t=0 -> 80 s left.
    assert policy.decide(make_obs(now_s=100.0, spot_held=2, spot_available=4)) == Decision(
        2, 0, 80.0
    )


def test_hysteresis_payback_factor_scales_the_dwell() -> None:
    policy = HysteresisPolicy(HysteresisPolicy.Config(payback_factor=2.0))
    obs = make_obs(now_s=0.0, spot_held=2, spot_available=4)
    assert policy.decide(obs) == Decision(2, 0, 360.0)
    eager = HysteresisPolicy(HysteresisPolicy.Config(payback_factor=0.0))
    assert eager.decide(obs) == Decision(4)


def test_hysteresis_scales_down_and_starts_at_once() -> None:
    policy = HysteresisPolicy()
    assert policy.decide(make_obs(spot_held=4, spot_available=3)) == Decision(3)
    assert policy.decide(make_obs(spot_held=0, spot_available=5)) == Decision(5)
    assert policy.decide(make_obs(spot_held=2, spot_available=1, min_nodes=2)) == Decision(0)


def test_hysteresis_ignores_capacity_that_would_not_speed_up() -> None:
    # Throughput peaks at 3 nodes: 4+ nodes are never worth waiting for.
    table = (0.0, 100.0, 200.0, 300.0, 250.0, 200.0)
    policy = HysteresisPolicy()
    obs = make_obs(max_nodes=5, throughput_samples_per_s=table, statistical_efficiency=(1.0,) * 6)
    assert policy.decide(make_obs_like(obs, spot_held=3, spot_available=5)) == Decision(3)
    # From 2 nodes the target is 3 (300/s): dwell 60 * 500 / 100 = 300 s.
    assert policy.decide(make_obs_like(obs, spot_held=2, spot_available=5)) == Decision(2, 0, 300.0)


def make_obs_like(obs: Observation, **changes: Any) -> Observation:
    fields = {name: getattr(obs, name) for name in obs.__dataclass_fields__}
    fields.update(changes)
    return Observation(**fields)


# -------------------------------------------------------------------------- deadline

# 1e6 samples at 100/s per node, deadline 10 000 s, 60 s per pause (no resume estimate,
# so the start pause and the worst pause are 60 s too), a free checkpoint every 60 s
# (nothing lost to it, at most 60 s rolled back), on-demand 3 USD/h, spot 1 USD/h.
# k on-demand nodes take 60 + 10 000 / k s, so the cheapest plan that meets the
# deadline is k0 = 2 (5 060 s, 8.43 USD; 3 nodes cost 8.48).
# A sample on the plan costs 2 * 3 / 3600 / 200 USD.  The policy keeps a margin of
# its safety margin (0 here) plus one pause (60 s) that spot may not use.

PLAN_USD_PER_SAMPLE = 2 * 3.0 / 3600.0 / 200.0


def deadline_policy(**config: Any) -> DeadlinePolicy:
    """The policy without margin, overhead or pace, to keep the arithmetic simple."""
    config.setdefault("safety_margin_s", 0.0)
    config.setdefault("overhead_fraction", 0.0)
    config.setdefault("pace", False)
    return DeadlinePolicy(DeadlinePolicy.Config(**config))


def deadline_obs(progress: float = 0.0, **overrides: Any) -> Observation:
    fields: dict[str, Any] = dict(
        now_s=0.0,
        deadline_s=10_000.0,
        rescale_cost_s=60.0,
        progress=progress,
        remaining_samples=1e6 * (1.0 - progress),
        spot_available=0,
        checkpoint_interval_s=60.0,
    )
    fields.update(overrides)
    return make_obs(**fields)


def test_deadline_on_demand_plan() -> None:
    plan = deadline_policy().plan(deadline_obs())
    assert plan is not None
    assert plan.nodes == 2
    assert plan.finish_s == pytest.approx(5060.0)
    assert plan.cost_usd == pytest.approx(2 * 3.0 * 5060.0 / 3600.0)
    assert plan.usd_per_sample == pytest.approx(PLAN_USD_PER_SAMPLE)


def test_deadline_waits_without_spot_until_the_last_safe_moment() -> None:
    # slack = 10 000 - 0 - (60 + 1e6 / 200) = 4 940 s, of which 4 880 s beyond the margin
    idle = deadline_policy().decide(deadline_obs())
    assert (idle.total_nodes, idle.wake_after_s) == (0, pytest.approx(4880.0))
    # at the last safe moment: the plan's two on-demand nodes, to the end
    woken = deadline_policy().decide(deadline_obs(now_s=4880.0))
    assert woken == Decision(0, 2, None)


def test_deadline_never_flaps_on_demand_without_spot() -> None:
    """Once on on-demand with no spot, it stays, however far ahead it gets."""
    policy = deadline_policy()
    for progress, now_s in [(0.0, 4880.0), (0.5, 6000.0), (0.9, 6500.0), (0.99, 9000.0)]:
        decision = policy.decide(deadline_obs(progress, now_s=now_s, on_demand_held=2))
        assert decision == Decision(0, 2, None)


def test_deadline_takes_spot_only_while_the_bet_covers_its_start() -> None:
    # the budget at the start is the bet: risk_fraction x 8.43 USD; starting 8 spot
    # nodes risks 8 x 60 s of spot, and 60 s of pause plus 30 s rolled back (half an
    # interval, on average) of 800 samples/s at the plan's price
    start_usd = 8 * 1.0 * 60 / 3600 + PLAN_USD_PER_SAMPLE * 800 * (60 + 30)
    assert start_usd == pytest.approx(0.7333, abs=1e-4)
    timid = deadline_policy(risk_fraction=0.005).decide(deadline_obs(spot_available=8))
    assert timid.total_nodes == 0  # 0.042 USD cannot pay it
    bold = deadline_policy(risk_fraction=0.2).decide(deadline_obs(spot_available=8))
    assert bold == Decision(8, 0, None)  # 8 spot nodes are faster than 2 on-demand: no wake


def test_deadline_never_buys_spot_dearer_than_the_plan() -> None:
    dear = deadline_obs(spot_available=8, spot_price_per_hour=4.0)
    assert deadline_policy(risk_fraction=1.0).decide(dear).total_nodes == 0


def test_deadline_stops_spot_when_it_lost_money() -> None:
    # 10 % done (worth 0.83 USD at the plan's price) but 10 USD spent: budget < 0
    obs = deadline_obs(0.1, now_s=1000.0, spot_available=8, spot_held=8, spent_usd=10.0)
    decision = deadline_policy(risk_fraction=0.1).decide(obs)
    assert decision.total_nodes == 0 and decision.wake_after_s is not None


def test_deadline_gives_on_demand_back_only_with_enough_slack() -> None:
    policy = deadline_policy(risk_fraction=0.2)
    # release lead 4 x (60 + 60) = 480 s.  At 3 000 s with 30 % done, released now the
    # job could still wait 10 000 - 3 000 - (60 + 3 500) = 3 440 s, 3 380 s beyond the
    # margin: give them back.
    ahead = deadline_obs(0.3, now_s=3000.0, spot_available=8, on_demand_held=2, spent_usd=1.0)
    assert policy.decide(ahead) == Decision(8, 0, None)
    # At 4 500 s with nothing done it could wait 440 - 60 = 380 s < 480 s: keep them, and add the
    # spot nodes whose samples are cheaper than the on-demand ones (6 fit beside 2).
    behind = deadline_obs(0.0, now_s=4500.0, spot_available=8, on_demand_held=2)
    assert policy.decide(behind) == Decision(6, 2, None)
    # An explicit lead of 300 s gives them back at 380 s already.
    assert deadline_policy(risk_fraction=0.2, release_lead_s=300.0).decide(behind) == Decision(8)


def test_deadline_paces_its_slack_and_returns_to_spot() -> None:
    """Uniform Progress in slack: 4 880 s of spare slack spent evenly over 10 000 s."""
    policy = deadline_policy(pace=True)
    plan = policy.plan(deadline_obs())
    assert policy.reserve_s(deadline_obs(), plan) == pytest.approx(4880.0)
    # no spot at the start: behind the pace at once, so on-demand now (not at 4 880 s)
    assert policy.decide(deadline_obs()) == Decision(0, 2, None)
    # half-way through the spare, with spot back: give the on-demand nodes back only
    # when the spare (4 380 s) exceeds the reserve (0.488 x 7 000 s) by the lead (480 s);
    # that far ahead of the pace, the cheapest spot count that keeps it: 2 nodes
    back = deadline_obs(0.5, now_s=3000.0, spot_available=8, on_demand_held=2, spent_usd=3.0)
    assert policy.decide(back) == Decision(2, 0, None)
    # not yet: keep them, add spot on top, and look again when the reserve has shrunk
    early = deadline_obs(0.2, now_s=2000.0, spot_available=8, on_demand_held=2)
    kept = policy.decide(early)
    assert (kept.spot_nodes, kept.on_demand_nodes) == (6, 2)
    assert kept.wake_after_s == pytest.approx((0.488 * 8000 + 480 - 3880) / 0.488)


def test_deadline_runs_flat_out_when_no_plan_meets_the_deadline() -> None:
    # 1 000 s: even 8 nodes take 60 + 1 250 s
    late = deadline_obs(deadline_s=1000.0, spot_available=1)
    assert deadline_feasible(late) is False
    assert deadline_policy().decide(late) == Decision(1, 7, None)
    assert deadline_feasible(deadline_obs()) is True
    assert deadline_feasible(make_obs()) is None


def test_deadline_without_on_demand_holds_all_spot() -> None:
    obs = deadline_obs(spot_available=3, on_demand_price_per_hour=math.inf)
    assert deadline_policy().decide(obs) == Decision(3)


@settings(max_examples=100, deadline=None)
@given(
    progress=st.floats(0.0, 0.999),
    now_s=st.floats(0.0, 20_000.0),
    spot_available=st.integers(0, 8),
    on_demand_held=st.integers(0, 8),
    per_node=st.floats(1.0, 1000.0),
    rescale_cost_s=st.floats(0.0, 600.0),
    spent_usd=st.floats(0.0, 100.0),
)
def test_deadline_never_idles_without_a_wake_up(
    progress: float,
    now_s: float,
    spot_available: int,
    on_demand_held: int,
    per_node: float,
    rescale_cost_s: float,
    spent_usd: float,
) -> None:
    """With a deadline, holding nothing is only safe with a wake-up at the crossing."""
    obs = deadline_obs(
        progress,
        now_s=now_s,
        spot_available=spot_available,
        on_demand_held=on_demand_held,
        per_node=per_node,
        rescale_cost_s=rescale_cost_s,
        spent_usd=spent_usd,
    )
    decision = DeadlinePolicy().decide(obs)
    assert decision.total_nodes > 0 or decision.wake_after_s is not None


def test_deadline_without_deadline_is_greedy() -> None:
    obs = make_obs(spot_available=5, on_demand_held=2)
    assert DeadlinePolicy().decide(obs) == GreedyPolicy().decide(obs) == Decision(5)


def replay_deadline(
    spot_available: list[int], step_s: float = 10.0, risk_fraction: float = 0.005
) -> tuple[float, float]:
    """A tiny driver: 1e6 samples, 100/s per node, deadline 5 000 s, 30 s per rescale.

    Every change of the nodes held (when some remain) pauses progress for 30 s, as
    the simulator would.  Capacity comes from ``spot_available``, one entry per
    5 minutes, repeated.  Spot costs 1 USD/h, on-demand 3.  Returns (finish time,
    USD spent).  The toy's pauses are long for its length (30 s in a 1-hour job), so
    starting 8 spot nodes risks 8 % of its on-demand plan.
    """
    policy = DeadlinePolicy(DeadlinePolicy.Config(risk_fraction=risk_fraction))
    done, now_s, held, pause_s, spent = 0.0, 0.0, (0, 0), 0.0, 0.0
    while done < 1e6 and now_s < 10_000.0:
        available = spot_available[int(now_s // 300) % len(spot_available)]
        held = (min(held[0], available), held[1])
        obs = make_obs(
            now_s=now_s,
            spot_available=available,
            spot_held=held[0],
            on_demand_held=held[1],
            progress=done / 1e6,
            remaining_samples=1e6 - done,
            deadline_s=5000.0,
            rescale_cost_s=30.0,
            spent_usd=spent,
            checkpoint_interval_s=60.0,
        )
        decision = clamp(policy.decide(obs), obs)
        if (decision.spot_nodes, decision.on_demand_nodes) != held and decision.total_nodes:
            pause_s = 30.0
        held = (decision.spot_nodes, decision.on_demand_nodes)
        paused = min(pause_s, step_s)
        pause_s -= paused
        done += obs.goodput(decision.total_nodes) * (step_s - paused)
        spent += (held[0] * 1.0 + held[1] * 3.0) * step_s / 3600.0
        now_s += step_s
    return now_s, spent


#: The toy's on-demand plan: 3 nodes (30 + 10 000 / 3 s within 5 000 - 600 - 30 s).
TOY_PLAN_USD = 3 * 3.0 * (30.0 + 10_000.0 / 3) / 3600.0


@pytest.mark.parametrize(
    "spot_available", [[0], [1], [0, 8, 0, 0, 2, 4, 0, 8, 8, 0]], ids=["none", "one", "bursty"]
)
@pytest.mark.parametrize("risk_fraction", [0.005, 0.1])
def test_deadline_meets_a_feasible_deadline_within_the_plan_cost(
    spot_available: list[int], risk_fraction: float
) -> None:
    finish_s, spent = replay_deadline(spot_available, risk_fraction=risk_fraction)
    assert finish_s <= 5000.0
    assert spent <= TOY_PLAN_USD * (1 + risk_fraction) + 0.01


def test_deadline_saves_when_spot_comes_and_goes() -> None:
    _, without_spot = replay_deadline([0], risk_fraction=0.1)
    _, with_spot = replay_deadline([0, 8, 0, 0, 2, 4, 0, 8, 8, 0], risk_fraction=0.1)
    assert without_spot == pytest.approx(TOY_PLAN_USD, rel=0.01)
    assert with_spot < 0.8 * without_spot


# ----------------------------------------------------------- greedy with fallback


def test_greedy_with_fallback_is_greedy_until_the_last_safe_moment() -> None:
    policy = GreedyPolicy(GreedyPolicy.Config(deadline_fallback=True))
    # the plan: 2 on-demand nodes (60 + 5 000 s); the deadline policy's default margin,
    # 300 s and one pause, is kept in reserve
    early = policy.decide(deadline_obs(spot_available=3))
    assert early == Decision(3, 0, None)  # 3 spot nodes are faster than the plan
    spare = 10_000 - 5060 - 360
    idle = policy.decide(deadline_obs())
    assert (idle.total_nodes, idle.wake_after_s) == (0, pytest.approx(spare))
    late = policy.decide(deadline_obs(now_s=spare + 1, spot_available=1))
    assert late == Decision(1, 2, None)  # the plan's nodes, and the spot there is
    later = policy.decide(deadline_obs(now_s=5000.0, spot_available=1))
    assert later == Decision(1, 3, None)  # 2 nodes no longer make it: 3
    kept = policy.decide(deadline_obs(0.95, now_s=9000.0, spot_available=8, on_demand_held=3))
    assert kept == Decision(5, 3, None)  # never gives on-demand back; spot fills the rest


# --------------------------------------------------------------------------- goodput

# goodput(n) = throughput * efficiency = 100, 171, 208, 210 for n = 1..4.
TABLE = dict(
    max_nodes=4,
    throughput_samples_per_s=(0.0, 100.0, 190.0, 260.0, 300.0),
    statistical_efficiency=(1.0, 1.0, 0.9, 0.8, 0.7),
    remaining_samples=1e5,
)


def goodput_policy(**config: Any) -> GoodputPolicy:
    return GoodputPolicy(GoodputPolicy.Config(**config))


def test_goodput_objective_picks_the_argmax() -> None:
    policy = goodput_policy(objective="goodput")
    assert policy.decide(make_obs(**TABLE)) == Decision(4)
    assert policy.decide(make_obs(**TABLE, spot_available=3)) == Decision(3)


def test_goodput_per_usd_picks_the_cheapest_samples() -> None:
    # Per node: 100, 85.5, 69.3, 52.5 samples/s per USD/h -> 1 node.
    assert goodput_policy().decide(make_obs(**TABLE)) == Decision(1)
    assert goodput_policy().decide(make_obs(**TABLE, min_nodes=2)) == Decision(2)
    superlinear = dict(max_nodes=3, throughput_samples_per_s=(0.0, 100.0, 250.0, 300.0))
    superlinear["statistical_efficiency"] = (1.0,) * 4
    # Per node: 100, 125, 100 -> 2 nodes.
    assert goodput_policy().decide(make_obs(**superlinear)) == Decision(2)


def test_goodput_free_spot_takes_the_most_goodput() -> None:
    assert goodput_policy().decide(make_obs(**TABLE, spot_price_per_hour=0.0)) == Decision(4)


def test_goodput_on_free_spot_scales_back_up_after_a_preemption() -> None:
    """Free nodes cost nothing either way: the faster configuration wins (time decides)."""
    cut = make_obs(**TABLE, spot_price_per_hour=0.0, spot_held=1, spot_available=4)
    assert goodput_policy().decide(cut) == Decision(4)
    # a gain below min_speedup still keeps what is held
    near = make_obs(**TABLE, spot_price_per_hour=0.0, spot_held=3, spot_available=4)
    assert goodput_policy(min_speedup=0.5).decide(near) == Decision(3)


def test_goodput_skips_a_rescale_that_does_not_pay() -> None:
    policy = goodput_policy(objective="goodput")
    # Staying on 3: 1e5 / 208 = 481 s; moving to 4: 60 + 1e5 / 210 = 536 s -> stay.
    assert policy.decide(make_obs(**TABLE, spot_held=3)) == Decision(3)
    # From 1 node: 1000 s vs 536 s -> move.
    assert policy.decide(make_obs(**TABLE, spot_held=1)) == Decision(4)
    # Free rescales and no threshold: 210 > 208 is enough.
    eager = goodput_policy(objective="goodput", min_speedup=0.0)
    assert eager.decide(make_obs(**TABLE, spot_held=3, rescale_cost_s=0.0)) == Decision(4)
    # ...but a 5 % threshold is not met by 1 %.
    assert policy.decide(make_obs(**TABLE, spot_held=3, rescale_cost_s=0.0)) == Decision(3)


def test_goodput_replaces_a_configuration_that_cannot_be_kept() -> None:
    policy = goodput_policy(objective="goodput")
    assert policy.decide(make_obs(**TABLE, spot_held=4, spot_available=3)) == Decision(3)
    assert policy.decide(make_obs(**TABLE, on_demand_held=2, spot_available=2)) == Decision(2)


def test_goodput_on_demand_fills_from_the_cheaper_market() -> None:
    policy = goodput_policy(objective="goodput", allow_on_demand=True)
    assert policy.decide(make_obs(**TABLE, spot_available=1)) == Decision(1, 3)
    dear_spot = make_obs(**TABLE, spot_available=4, spot_price_per_hour=5.0)
    assert policy.decide(dear_spot) == Decision(0, 4)


def test_goodput_with_on_demand_disabled_by_an_infinite_price() -> None:
    # The simulator reports inf when on-demand is off; 0 nodes * inf must not be NaN.
    obs = make_obs(**TABLE, on_demand_price_per_hour=math.inf)
    assert goodput_policy().decide(obs) == Decision(1)
    # An infinitely dear market is closed, whatever the objective.
    for objective in ("goodput", "goodput_per_usd"):
        policy = goodput_policy(allow_on_demand=True, objective=objective)
        closed = make_obs(**TABLE, spot_available=2, on_demand_price_per_hour=math.inf)
        assert policy.decide(closed).on_demand_nodes == 0
        assert policy.decide(make_obs_like(closed, spot_available=0)) == Decision(0)


def test_goodput_holds_nothing_when_nothing_runs() -> None:
    assert goodput_policy().decide(make_obs(**TABLE, spot_available=0)) == Decision(0)


# ----------------------------------------------------------------- config messages


@pytest.mark.parametrize(
    ("name", "options", "fragment"),
    [
        ("hysteresis", {"payback_factor": -1.0}, "payback_factor must be >= 0"),
        ("price", {"cap_fraction_of_on_demand": 0.0}, "cap_fraction_of_on_demand must be > 0"),
        ("goodput", {"objective": "speed"}, "objective must be one of"),
        ("fixed", {"n_nodes": 0}, "n_nodes must be >= 1"),
        ("deadline", {"risk_fraction": -2.0}, "risk_fraction must be >= 0"),
        ("deadline", {"overhead_fraction": 1.0}, "overhead_fraction must be < 1"),
    ],
)
def test_config_errors_are_clear(name: str, options: dict[str, Any], fragment: str) -> None:
    cls = type(make_policy(name))
    with pytest.raises(ValueError, match=fragment):
        cls.Config(**options)


def test_deadline_budget_credits_the_plans_start_as_far_as_on_demand_paid_it() -> None:
    # the plan's two nodes held and booting (60 s start: 0.1 USD), after 5 USD of spot:
    # the start is credited as far as on-demand money paid it, not the spot money
    # (crediting it whole while the nodes booted let receding grow past its bet)
    policy = deadline_policy()
    booting = deadline_obs(now_s=3000.0, on_demand_held=2, spent_usd=5.02)
    plan = policy.plan(booting)
    assert plan is not None and plan.nodes == 2
    start_usd = 2 * 3.0 * plan.start_pause_s / 3600.0
    half = dataclasses.replace(booting, on_demand_spent_usd=0.02)
    paid = dataclasses.replace(booting, spent_usd=5.0 + start_usd, on_demand_spent_usd=start_usd)
    assert policy.budget_usd(half, plan) == pytest.approx(policy.budget_usd(booting, plan) + 0.02)
    # paid in full: the start's money and its credit cancel
    spot_only = dataclasses.replace(booting, spent_usd=5.0)
    assert policy.budget_usd(paid, plan) == pytest.approx(policy.budget_usd(spot_only, plan))
