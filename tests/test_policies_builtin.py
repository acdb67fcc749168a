"""Hand-computed expectations for each built-in policy."""

from __future__ import annotations

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

# Deadline 10 000 s, rescale 100 s, no extra margin: the schedule ends at D' = 9 900 s.
# At now = 4 950 s the schedule requires progress 0.5; total work is 1e6 samples.


def deadline_policy(**config: Any) -> DeadlinePolicy:
    """The policy without its default safety margin, to keep the arithmetic simple."""
    config.setdefault("safety_margin_s", 0.0)
    return DeadlinePolicy(DeadlinePolicy.Config(**config))


def deadline_obs(progress: float, **overrides: Any) -> Observation:
    fields: dict[str, Any] = dict(
        now_s=4950.0,
        deadline_s=10_000.0,
        rescale_cost_s=100.0,
        progress=progress,
        remaining_samples=1e6 * (1.0 - progress),
        spot_available=1,
    )
    fields.update(overrides)
    return make_obs(**fields)


def test_deadline_adds_on_demand_to_meet_the_on_time_rate_when_behind() -> None:
    policy = deadline_policy()
    # Behind (0.4 < 0.5): rate 6e5 / 4950 = 121.2/s -> 1 spot + 1 on-demand (200/s).
    decision = policy.decide(deadline_obs(0.4))
    assert (decision.spot_nodes, decision.on_demand_nodes) == (1, 1)
    # lead = 0.4 * 9900 - 4950 = -990 s, slope = 200 * 9900 / 1e6 - 1 = 0.98,
    # release lead 10 * 100 = 1000 s -> wake after (1000 + 990) / 0.98 s.
    assert decision.wake_after_s == pytest.approx(1990.0 / 0.98)
    # Further behind (0.0): rate 1e6 / 4950 = 202/s -> 3 nodes in total.
    assert policy.decide(deadline_obs(0.0)).on_demand_nodes == 2


def test_deadline_uses_spot_only_when_ahead() -> None:
    decision = deadline_policy().decide(deadline_obs(0.6))
    assert decision == Decision(1, 0, None)
    # lead 990 s, shrinking at 1 - 100 * 9900 / 1e6 = 0.01 s/s: behind only after
    # 99 000 s, but done after 4e5 / 100 = 4 000 s -> no wake-up needed.
    slow = deadline_policy().decide(deadline_obs(0.6, per_node=50.0))
    # At 50/s the lead shrinks at 0.505 s/s: behind after 990 / 0.505 s (< 8 000 s).
    assert (slow.spot_nodes, slow.on_demand_nodes) == (1, 0)
    assert slow.wake_after_s == pytest.approx(990.0 / 0.505)


def test_deadline_releases_on_demand_only_past_the_release_lead() -> None:
    policy = deadline_policy()
    # Release lead 10 * 100 s.  lead = 0.6 * 9900 - 4950 = 990 s < 1000 s: keep it.
    kept = policy.decide(deadline_obs(0.6, on_demand_held=1))
    assert (kept.spot_nodes, kept.on_demand_nodes) == (1, 1)
    # lead = 0.7 * 9900 - 4950 = 1980 s >= 1000 s: release it.
    released = policy.decide(deadline_obs(0.7, on_demand_held=1))
    assert (released.spot_nodes, released.on_demand_nodes) == (1, 0)
    # An explicit release lead of 900 s releases at 990 s already.
    early = deadline_policy(release_lead_s=900.0)
    assert early.decide(deadline_obs(0.6, on_demand_held=1)).on_demand_nodes == 0


def test_deadline_never_reduces_on_demand_while_catching_up() -> None:
    decision = deadline_policy().decide(deadline_obs(0.4, on_demand_held=3))
    assert (decision.spot_nodes, decision.on_demand_nodes) == (1, 3)


def test_deadline_safety_margin_moves_the_schedule() -> None:
    # Margin 900 + 100 s: D' = 9 000 s, the schedule needs 0.55 at 4 950 s.
    policy = deadline_policy(safety_margin_s=900.0)
    assert policy.decide(deadline_obs(0.52)).on_demand_nodes >= 1
    assert deadline_policy().decide(deadline_obs(0.52)).on_demand_nodes == 0


def test_deadline_max_on_demand_and_best_effort() -> None:
    capped = deadline_policy(max_on_demand=0)
    assert capped.decide(deadline_obs(0.0)).total_nodes == 1
    assert capped.decide(deadline_obs(0.0, spot_available=0)) == Decision(0)
    # Past the deadline the rate is infinite: everything, best effort.
    late = deadline_policy().decide(deadline_obs(0.5, now_s=20_000.0))
    assert (late.spot_nodes, late.on_demand_nodes, late.wake_after_s) == (1, 7, None)


def test_deadline_on_the_line_counts_as_behind() -> None:
    # lead = 0.5 * 9900 - 4950 = 0 and no spot: on-demand starts now, at the on-time
    # rate 5e5 / 4950 = 101/s -> 2 nodes.
    assert deadline_policy().decide(deadline_obs(0.5, spot_available=0)).on_demand_nodes == 2
    # Ahead by 990 s with no spot: idle, and wake when the lead is used up...
    idle = deadline_policy().decide(deadline_obs(0.6, spot_available=0))
    assert (idle.total_nodes, idle.wake_after_s) == (0, pytest.approx(990.0))
    # ...when the lead is zero up to rounding, and on-demand starts.
    woken = deadline_obs(0.6, spot_available=0, now_s=4950.0 + idle.wake_after_s)
    assert deadline_policy().decide(woken).on_demand_nodes > 0


@settings(max_examples=100, deadline=None)
@given(
    progress=st.floats(0.0, 0.999),
    now_s=st.floats(0.0, 20_000.0),
    spot_available=st.integers(0, 8),
    on_demand_held=st.integers(0, 8),
    per_node=st.floats(1.0, 1000.0),
    rescale_cost_s=st.floats(0.0, 600.0),
)
def test_deadline_never_idles_without_a_wake_up(
    progress: float,
    now_s: float,
    spot_available: int,
    on_demand_held: int,
    per_node: float,
    rescale_cost_s: float,
) -> None:
    """With a deadline, holding nothing is only safe with a wake-up at the crossing."""
    obs = deadline_obs(
        progress,
        now_s=now_s,
        spot_available=spot_available,
        on_demand_held=on_demand_held,
        per_node=per_node,
        rescale_cost_s=rescale_cost_s,
    )
    decision = DeadlinePolicy().decide(obs)
    assert decision.total_nodes > 0 or decision.wake_after_s is not None


def test_deadline_without_deadline_is_greedy() -> None:
    obs = make_obs(spot_available=5, on_demand_held=2)
    assert DeadlinePolicy().decide(obs) == GreedyPolicy().decide(obs) == Decision(5)


def replay_deadline(spot_available: list[int], step_s: float = 10.0) -> tuple[float, float]:
    """A tiny driver: 1e6 samples, 100/s per node, deadline 5 000 s, 30 s per rescale.

    Every change of the nodes held (when some remain) pauses progress for 30 s, as
    the simulator would.  Capacity comes from ``spot_available``, one entry per
    5 minutes, repeated.  Returns (finish time, on-demand node-seconds).
    """
    policy = DeadlinePolicy()
    done, now_s, held, pause_s, on_demand_s = 0.0, 0.0, (0, 0), 0.0, 0.0
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
        )
        decision = clamp(policy.decide(obs), obs)
        if (decision.spot_nodes, decision.on_demand_nodes) != held and decision.total_nodes:
            pause_s = 30.0
        held = (decision.spot_nodes, decision.on_demand_nodes)
        paused = min(pause_s, step_s)
        pause_s -= paused
        done += obs.goodput(decision.total_nodes) * (step_s - paused)
        on_demand_s += decision.on_demand_nodes * step_s
        now_s += step_s
    return now_s, on_demand_s


@pytest.mark.parametrize(
    "spot_available", [[0], [1], [0, 8, 0, 0, 2, 4, 0, 8, 8, 0]], ids=["none", "one", "bursty"]
)
def test_deadline_meets_a_feasible_deadline(spot_available: list[int]) -> None:
    finish_s, on_demand_s = replay_deadline(spot_available)
    assert finish_s <= 5000.0
    # Uniform progress, not a sprint: 1e6 samples need 10 000 node-seconds, and the
    # policy pays on-demand for at most that plus a modest rescale overhead.
    assert on_demand_s <= 1.25 * 10_000.0


def test_deadline_uses_less_on_demand_when_spot_comes_and_goes() -> None:
    _, without_spot = replay_deadline([0])
    _, with_spot = replay_deadline([0, 8, 0, 0, 2, 4, 0, 8, 8, 0])
    assert with_spot < 0.5 * without_spot


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
        ("deadline", {"max_on_demand": -2}, "max_on_demand must be >= 0"),
    ],
)
def test_config_errors_are_clear(name: str, options: dict[str, Any], fragment: str) -> None:
    cls = type(make_policy(name))
    with pytest.raises(ValueError, match=fragment):
        cls.Config(**options)
