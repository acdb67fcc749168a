"""Parity: the simulator and the executor's controller run the same job model.

The same trace, policy and options go through the SimPy driver and through the
executor's controller with the simulator's fluid model as a fake worker group on a
fake clock.  The two shells differ only in their clock, so the decision logs (and the
events) must be equal bit for bit: for every registered policy and a user plugin, on
every bundled spot trace, with and without notice, with and without a deadline, in
both rescale modes.  No torch needed: this runs in CI.
"""

from __future__ import annotations

import inspect
import itertools

import pytest

from elasim.executor.controller import ControllerConfig
from elasim.executor.fakes import fluid_controller
from elasim.job import load_job
from elasim.jobmodel import JobSpec
from elasim.policies import get_policy_class, make_policy, policy_names
from elasim.sim import RescaleMode, SimConfig, simulate
from elasim.traces import bundled_trace_names, load_trace

SCALE = 600.0
PLUGIN = "tests/data/plugin_policy.py:HalfPolicy"
SPOT_TRACES = [n for n in bundled_trace_names() if load_trace(n).kind == "capacity"]
POLICIES = [*policy_names(), PLUGIN]


def _job():
    return load_job("resnet50_v100").with_nodes(1, 4)


def _pair(trace_name: str, policy: str, mode: RescaleMode, notice_s: float, deadline_s):
    """The same spec through the simulator and through the executor's controller."""
    trace = load_trace(trace_name)
    job = _job()
    horizon_s = 3 * 86400.0
    spec = JobSpec(
        trace=trace_name,
        policy=policy,
        min_nodes=job.nodes.min,
        max_nodes=job.nodes.max,
        rescale=mode,
        notice_s=notice_s,
        deadline_s=deadline_s,
        seed=3,
    )
    sim = simulate(spec, SimConfig(max_sim_time_s=horizon_s), trace=trace, job=job)
    config = ControllerConfig(
        time_scale=SCALE,
        max_steps=1,
        max_nodes=job.nodes.max,
        max_wall_real_s=horizon_s / SCALE,
        idle_poll_real_s=1e9,
    )
    ctl = fluid_controller(spec, trace, make_policy(policy, seed=3), job, config)
    real = ctl.run()
    return sim, real


#: ``on_demand`` holds nothing where on-demand nodes are not offered (a trace without an
#: on-demand price): such a run has no events to compare.
CASES = [
    case
    for case in itertools.product(
        SPOT_TRACES, POLICIES, list(RescaleMode), (0.0, 120.0), (None, 30 * 3600.0)
    )
    if case[1] != "on_demand" or load_trace(case[0]).metadata.on_demand_price_per_hour
]


@pytest.mark.parametrize(
    ("trace", "policy", "mode", "notice_s", "deadline_s"),
    CASES,
    ids=[
        f"{t}-{p.rsplit(':', 1)[-1]}-{m.value}-n{int(n)}-d{d is not None}"
        for t, p, m, n, d in CASES
    ],
)
def test_decision_logs_are_equal_bit_for_bit(trace, policy, mode, notice_s, deadline_s):
    sim, real = _pair(trace, policy, mode, notice_s, deadline_s)
    assert sim.decisions and sim.events
    assert list(real.decisions) == list(sim.decisions)
    assert list(real.events) == list(sim.events)
    assert real.summary["completed"] == sim.completed
    assert real.summary["cost_usd"] == sim.cost_usd


def test_the_parity_check_can_fail():
    """A controller on another clock rate than the simulator's gives another log."""
    trace = load_trace("spot_us_east.csv")
    job = _job()
    spec = JobSpec(policy="greedy", min_nodes=1, max_nodes=4)
    sim = simulate(spec, SimConfig(max_sim_time_s=86400.0), trace=trace, job=job)
    config = ControllerConfig(
        time_scale=SCALE, max_wall_real_s=86400.0 / SCALE, idle_poll_real_s=1e9
    )
    other = spec.replace(start_offset_s=60.0)  # a different window of the same trace
    real = fluid_controller(other, trace, make_policy("greedy"), job, config).run()
    assert list(real.decisions) != list(sim.decisions)


def test_the_plugin_policy_is_a_user_file():
    cls = get_policy_class(PLUGIN)
    assert inspect.getsourcefile(cls).endswith("tests/data/plugin_policy.py")
