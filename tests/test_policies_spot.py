"""Hand-computed expectations for ``uniform_progress``.

The job of ``test_policies_builtin``'s deadline tests: 1e6 samples at 100/s per node,
deadline 10 000 s, 60 s per pause, on-demand 3 USD/h, spot 1 USD/h; the cheapest
on-demand plan is k0 = 2 nodes (5 060 s), so the uniform progress line is
``1e6 x now / 10 000`` samples and k0 does 200 samples/s.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_policies_builtin import deadline_obs

from elasim.policies import Decision, UniformProgressPolicy


def uniform(**config: Any) -> UniformProgressPolicy:
    """Without the safety margin, to keep the arithmetic simple."""
    config.setdefault("safety_margin_s", 0.0)
    return UniformProgressPolicy(UniformProgressPolicy.Config(**config))


def test_uniform_runs_on_spot_whenever_there_is_spot() -> None:
    decision = uniform().decide(deadline_obs(spot_available=3))
    assert (decision.spot_nodes, decision.on_demand_nodes) == (3, 0)


def test_uniform_idles_ahead_of_the_line_and_wakes_when_it_catches_up() -> None:
    # 30 % done at 2 000 s: the line is at 20 %, 1e5 samples = 500 s of k0's work ahead;
    # the line gains 100 samples/s = 0.5 s of k0's work per second: caught up in 1 000 s
    decision = uniform().decide(deadline_obs(0.3, now_s=2000.0))
    assert decision.total_nodes == 0
    assert decision.wake_after_s == pytest.approx(1000.0)


def test_uniform_buys_k0_on_demand_nodes_behind_the_line() -> None:
    assert uniform().decide(deadline_obs(0.1, now_s=2000.0)) == Decision(0, 2, None)


def test_uniform_tops_spot_up_to_k0s_rate_behind_the_line() -> None:
    # one spot node does 100/s: one on-demand node beside it reaches k0's 200/s
    decision = uniform().decide(deadline_obs(0.1, now_s=2000.0, spot_available=1))
    assert decision == Decision(1, 1, None)


def test_uniform_keeps_on_demand_until_one_restart_ahead() -> None:
    # 20.5 % done at 2 000 s: 5e3 samples = 25 s of k0's work ahead, under one 60 s pause
    held = deadline_obs(0.205, now_s=2000.0, on_demand_held=2)
    assert uniform().decide(held) == Decision(0, 2, None)
    assert uniform(hysteresis_s=10.0).decide(held).on_demand_nodes == 0
    # without on-demand nodes held the same point is ahead: idle
    assert uniform().decide(deadline_obs(0.205, now_s=2000.0)).total_nodes == 0


def test_uniform_drops_on_demand_when_spot_alone_keeps_the_pace() -> None:
    held = deadline_obs(0.1, now_s=2000.0, on_demand_held=2, spot_available=2)
    # 3 500 s of slack on k0's nodes held, less one pause: the safety net's time
    decision = uniform().decide(held)
    assert (decision.spot_nodes, decision.on_demand_nodes) == (2, 0)
    assert decision.wake_after_s == pytest.approx(3440.0)


def test_uniform_safety_net_commits_to_on_demand_with_spot_beside() -> None:
    # 4 000 s of k0's work left at 5 900 s: 60 s pause + 4 000 s leaves 40 s, under a pause
    late = deadline_obs(0.2, now_s=5900.0, spot_available=3)
    assert uniform().decide(late) == Decision(0, 2, None)  # no time to pause for spot
    assert uniform().decide(deadline_obs(0.2, now_s=5800.0)) == Decision(0, 2, None)
    # with the default 300 s margin the net comes at 360 s of slack: at 5 700 s the 240 s
    # left cover the pause of taking three spot nodes and the pause of losing them
    policy = uniform(safety_margin_s=300.0)
    assert policy.decide(deadline_obs(0.2, now_s=5700.0, spot_available=3)) == Decision(3, 2, None)
    assert policy.decide(late) == Decision(0, 2, None)
    # spot already held stays beside them
    held = deadline_obs(0.2, now_s=5900.0, spot_available=3, spot_held=3)
    assert policy.decide(held) == Decision(3, 2, None)


def test_uniform_safety_net_takes_no_spot_that_slows_the_job() -> None:
    # one node does 100/s, two 90/s (poor scaling): k0 is one node (10 060 s of a
    # 20 000 s deadline); at 14 700 s, half done, 240 s of slack: the net, where a spot
    # node beside the on-demand one would slow the job down
    slow = {"max_nodes": 2, "throughput_samples_per_s": (0.0, 100.0, 90.0)}
    obs = deadline_obs(0.5, now_s=14_700.0, spot_available=1, deadline_s=20_000.0, **slow)
    policy = uniform(safety_margin_s=300.0)
    assert policy.decide(obs) == Decision(0, 1, None)


def test_uniform_runs_on_the_spot_count_that_trains_fastest() -> None:
    # one node does 100/s, two 90/s: two usable spot nodes, but one trains faster
    slow = {"max_nodes": 2, "throughput_samples_per_s": (0.0, 100.0, 90.0)}
    obs = deadline_obs(spot_available=2, deadline_s=20_000.0, **slow)
    decision = uniform().decide(obs)
    assert (decision.spot_nodes, decision.on_demand_nodes) == (1, 0)
    assert decision.wake_after_s is not None  # it looks again (the safety net's time)


def test_the_net_keeps_only_the_held_spot_nodes_that_help() -> None:
    # one node 100/s, two 90/s: a spot node held beside the one on-demand node slows the
    # job (5 556 s of work left for 5 100 s); with no slack for new spot nodes the net
    # keeps none rather than the one held (a reviewer's case: it kept it and was late)
    dip = {"max_nodes": 4, "throughput_samples_per_s": (0.0, 100.0, 90.0, 95.0, 120.0)}
    held = {"spot_available": 3, "spot_held": 1, "on_demand_held": 1}
    obs = deadline_obs(0.5, now_s=14_900.0, deadline_s=20_000.0, **held, **dip)
    assert uniform(safety_margin_s=300.0).decide(obs) == Decision(0, 1, None)
