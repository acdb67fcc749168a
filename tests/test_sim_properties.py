"""Property tests of the simulator: accounting identities on random tiny traces."""

from __future__ import annotations

import math

import pytest
from conftest import ScriptedPolicy, capacity
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from elasim.jobmodel import JobSpec
from elasim.policies import Decision, make_policy, policy_names
from elasim.sim import RescaleMode, SimConfig, simulate


@st.composite
def traces(draw):
    rows = draw(st.integers(min_value=1, max_value=12))
    gaps = draw(st.lists(st.integers(60, 7200), min_size=rows, max_size=rows))
    times = [0.0]
    for gap in gaps[:-1]:
        times.append(times[-1] + gap)
    available = draw(st.lists(st.integers(0, 4), min_size=rows, max_size=rows))
    if not any(available):
        available[0] = 1
    prices = draw(st.lists(st.floats(0.1, 5.0), min_size=rows, max_size=rows))
    return capacity(times, available, prices, duration_s=times[-1] + gaps[-1], od_price=4.0)


configs = st.builds(
    JobSpec,
    checkpoint_interval_s=st.one_of(st.none(), st.just(math.inf), st.floats(120, 20000)),
    checkpoint_cost_s=st.one_of(st.none(), st.floats(0, 300)),
    notice_s=st.sampled_from([0.0, 30.0, 120.0, 1000.0]),
    rescale=st.sampled_from(list(RescaleMode)),
)
HORIZON = SimConfig(max_sim_time_s=300 * 3600.0)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(trace=traces(), config=configs, policy=st.sampled_from(sorted(policy_names())))
@example(  # CI found it: more work lost than run (a final write took back a periodic one)
    trace=capacity(
        [60.0 * i for i in range(12)],
        [2, 3, 4, 1, 1, 2, 2, 3, 4, 0, 2, 3],
        [4.0, 1.02, 1.573, 2.0, 2.603, 3.743, 3.453, 4.315, 4.337, 1.0, 1.0, 1.0],
        duration_s=720.0,
        od_price=4.0,
    ),
    config=JobSpec(
        checkpoint_cost_s=236.55789632102696, notice_s=1000.0, rescale=RescaleMode.RESTART
    ),
    policy="deadline",
)
def test_time_and_cost_accounting_add_up(tiny_job, trace, config, policy):
    result = simulate(config, HORIZON, trace=trace, policy=make_policy(policy), job=tiny_job)
    parts = (
        result.running_h + result.rescale_overhead_h + result.checkpoint_overhead_h + result.idle_h
    )
    assert parts == pytest.approx(result.sim_time_h, rel=1e-9, abs=1e-9)
    assert result.cost_usd == pytest.approx(result.spot_cost_usd + result.on_demand_cost_usd)
    assert result.lost_work_h <= result.running_h + 1e-9
    assert min(result.cost_usd, result.lost_work_h, result.rescale_overhead_h) >= 0
    assert result.spot_cost_usd <= result.spot_node_hours * 5.0 + 1e-9  # price <= 5
    if result.completed:
        # 36,000 samples need at least 2.5 h of training at 4 nodes, at most 10 h at one
        useful_h = result.running_h - result.lost_work_h
        assert 36000 / 4 / 3600 - 1e-6 <= useful_h <= 10.0 + 1e-6
    for record in result.decisions:
        assert record.decision.spot_nodes <= record.spot_available


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(trace=traces(), config=configs)
def test_same_inputs_same_result(tiny_job, trace, config):
    first = simulate(
        config,
        HORIZON,
        trace=trace,
        policy=ScriptedPolicy(lambda o: Decision(o.spot_available)),
        job=tiny_job,
    )
    again = simulate(
        config,
        HORIZON,
        trace=trace,
        policy=ScriptedPolicy(lambda o: Decision(o.spot_available)),
        job=tiny_job,
    )
    assert first.summary() == again.summary()
    assert first.events == again.events
