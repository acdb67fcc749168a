"""Fast executor tests: sampler, protocol, checkpoints, and the controller loop on a fake clock.

No worker processes here (except one short-lived checkpoint writer that is killed on
purpose), so this file runs in a few seconds.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from elasim.executor.checkpoint import (  # noqa: E402
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
)
from elasim.executor.controller import (  # noqa: E402
    Controller,
    ControllerConfig,
    FakeClock,
    TraceReplay,
)
from elasim.executor.fakes import FakeWorkerGroup  # noqa: E402
from elasim.executor.protocol import (  # noqa: E402
    Command,
    CommandOp,
    FaultInjection,
    WorkerSettings,
)
from elasim.executor.sampler import ElasticSampler, SamplerPosition  # noqa: E402
from elasim.policies import Decision, EventKind, Observation, PolicyBase  # noqa: E402
from elasim.traces import CapacityTrace, TraceMetadata  # noqa: E402

pytestmark = [pytest.mark.executor]


def synthetic_trace(rows: list[tuple[float, int]], duration_s: float) -> CapacityTrace:
    """A tiny *synthetic* capacity trace (labelled as such) for hand-computed tests."""
    return CapacityTrace(
        name="synthetic",
        time_s=np.array([r[0] for r in rows], dtype=float),
        available=np.array([r[1] for r in rows], dtype=np.int64),
        price_per_hour=np.full(len(rows), 1.0),
        metadata=TraceMetadata(source="unit test", synthetic=True, on_demand_price_per_hour=3.0),
        duration_s=duration_s,
    )


# -- sampler ---------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 300),
    batch=st.integers(1, 64),
    worlds=st.lists(st.integers(1, 8), min_size=1, max_size=200),
    seed=st.integers(0, 2**31),
)
def test_sampler_exactly_once_per_epoch_whatever_the_world_sizes(size, batch, worlds, seed):
    sampler = ElasticSampler(size, batch, seed)
    pos = SamplerPosition()
    seen: dict[int, list[int]] = {}
    for world in worlds:
        ids = sampler.global_ids(pos)
        shards = [sampler.shard(ids, world, r) for r in range(world)]
        assert np.array_equal(np.concatenate(shards), ids)  # re-sharded, nothing lost
        seen.setdefault(pos.epoch, []).extend(int(i) for s in shards for i in s)
        pos = sampler.advance(pos, len(ids))
    for epoch, ids in seen.items():
        assert len(ids) == len(set(ids)), f"epoch {epoch} repeated a sample"
        if epoch < pos.epoch:
            assert sorted(ids) == list(range(size)), f"epoch {epoch} skipped samples"


def test_sampler_is_deterministic_and_seeded():
    a, b, c = ElasticSampler(100, 8, 1), ElasticSampler(100, 8, 1), ElasticSampler(100, 8, 2)
    assert np.array_equal(a.permutation(3), b.permutation(3))
    assert not np.array_equal(a.permutation(3), c.permutation(3))
    assert not np.array_equal(a.permutation(0), a.permutation(1))


# -- protocol ---------------------------------------------------------------------------------


def test_command_and_settings_round_trip():
    cmd = Command(CommandOp.JOIN, gen=3, members=(4, 1, 7), failure_wall_s=1.5, restore="/x")
    assert Command.from_bytes(cmd.to_bytes()) == cmd
    ws = WorkerSettings(max_steps=7, faults=FaultInjection(kill_wid=2, kill_at_step=5))
    assert WorkerSettings.from_bytes(ws.to_bytes()) == ws
    with pytest.raises(ValueError, match="backend"):
        WorkerSettings(backend="mpi")


# -- checkpoints ------------------------------------------------------------------------------


def _state(value: float) -> dict[str, object]:
    return {"model": {"w": torch.full((64, 64), value)}, "step": int(value), "extra": {"a": [1]}}


def test_checkpoint_round_trip_weights_only(tmp_path):
    path = tmp_path / "ckpt" / "checkpoint.pt"
    info = save_checkpoint(path, _state(3.0))
    assert info.size_bytes == path.stat().st_size
    loaded = load_checkpoint(path)
    assert loaded["step"] == 3 and torch.equal(loaded["model"]["w"], torch.full((64, 64), 3.0))
    assert not list(path.parent.glob(".*.tmp"))


def test_checkpoint_refuses_code(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"f": print}, path)  # a pickled callable is not data
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


def _write_then_die(path: str) -> None:
    """Child process: start a checkpoint write and die half-way through it."""

    def die(written: int) -> None:
        if written >= 4096:
            os._exit(17)

    save_checkpoint(path, _state(2.0), on_chunk=die, chunk_bytes=4096)


@pytest.mark.timeout(60)
def test_checkpoint_killed_half_written_never_corrupts_the_previous(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, _state(1.0))
    before = path.read_bytes()
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=_write_then_die, args=(str(path),))
    child.start()
    try:
        child.join(timeout=50)
        assert child.exitcode == 17
    finally:
        if child.is_alive():
            child.kill()
            child.join()
    assert path.read_bytes() == before  # the previous checkpoint is untouched
    assert load_checkpoint(path)["step"] == 1
    leftovers = list(tmp_path.glob(".checkpoint.pt.*.tmp"))
    assert leftovers and leftovers[0].stat().st_size < len(before) * 2  # the torn temp file
    save_checkpoint(path, _state(4.0))  # the next writer cleans it up
    assert not list(tmp_path.glob(".checkpoint.pt.*.tmp"))
    assert load_checkpoint(path)["step"] == 4


# -- trace replay -----------------------------------------------------------------------------


def test_trace_replay_caps_capacity_and_gives_notices():
    trace = synthetic_trace([(0, 2), (100, 6), (200, 5), (300, 1)], duration_s=400)
    replay = TraceReplay(trace, notice_s=30, cap_nodes=4)
    assert replay.initial == (2, 1.0)
    items = replay.pop_due(1000)
    kinds = [(k, t, a) for k, t, a, _ in items]
    # 6 -> 5 is above the cap: neither a change nor a notice; the drop to 1 is noticed
    assert kinds[:3] == [("capacity", 100, 4), ("notice", 270, 1), ("capacity", 300, 1)]
    # the trace repeats: at t=400 it is back to 2 (a rise, no notice)
    assert ("capacity", 400, 2) in kinds


# -- the controller loop on a fake clock --------------------------------------------------------


@dataclass(frozen=True)
class _Script:
    pass


class ScriptedPolicy(PolicyBase):
    """Holds ``min(available, cap)`` spot nodes and records what it saw."""

    name: ClassVar[str] = "scripted-test"
    Config = _Script

    def __init__(self, cap: int = 8, wake_after_s: float | None = None) -> None:
        super().__init__(_Script())
        self.cap = cap
        self.wake = wake_after_s
        self.seen: list[Observation] = []

    def decide(self, obs: Observation) -> Decision:
        self.seen.append(obs)
        return Decision(min(obs.spot_available, self.cap), 0, self.wake)


def _run(trace, policy, *, notice_s=0.0, max_steps=1000, step_s=1.0, **cfg):
    clock = FakeClock()
    group = FakeWorkerGroup(clock, step_time_s=step_s, max_steps=max_steps)
    config = ControllerConfig(
        time_scale=10.0,
        max_steps=max_steps,
        max_nodes=4,
        notice_s=notice_s,
        graceful_margin_s=0.0,
        prior_step_s=1e-3,
        idle_poll_s=1e9,
        **cfg,
    )
    return Controller(trace, policy, group, clock, config).run(), group


@pytest.mark.timeout(30)
def test_controller_decides_at_trace_changes_and_preempts_newest_without_notice():
    trace = synthetic_trace([(0, 2), (100, 4), (200, 1), (300, 3)], duration_s=400)
    policy = ScriptedPolicy()
    result, group = _run(trace, policy, max_steps=60, step_s=1.0)
    times = [d.time_s for d in result.decisions]
    assert times[:4] == [0.0, 100.0, 200.0, 300.0]  # exact: the fake clock snaps to rows
    assert [d.decision.spot_nodes for d in result.decisions[:4]] == [2, 4, 1, 3]
    assert ("preempt", 3, 0) in group.calls  # 4 held, 1 available: three SIGKILLs
    kinds = [e.kind for e in result.events]
    assert EventKind.PREEMPT in kinds and kinds[-1] is EventKind.DONE
    preempt = next(e for e in result.events if e.kind is EventKind.PREEMPT)
    assert preempt.time_s == 200.0 and preempt.lost_steps == 1
    # the policy saw the preemption, and trace-time throughput (samples / trace second)
    after = policy.seen[2]
    kinds_seen = [e.kind for e in after.recent_events]
    # the previous decision's scale-up, then what the preemption did
    assert kinds_seen == [EventKind.SCALE_UP, EventKind.PREEMPT, EventKind.SCALE_DOWN]
    # measured on 1 node: 64 samples per real second = 6.4 per trace second; other sizes
    # are extrapolated linearly (documented)
    assert after.throughput_samples_per_s[1] == pytest.approx(64 / 1.0 / 10.0)
    assert after.throughput_samples_per_s[4] == pytest.approx(4 * 6.4)
    assert result.completed


@pytest.mark.timeout(30)
def test_controller_leaves_gracefully_with_enough_notice():
    trace = synthetic_trace([(0, 4), (200, 1)], duration_s=10_000)
    result, group = _run(trace, ScriptedPolicy(), notice_s=60.0, max_steps=100, step_s=1.0)
    assert ("preempt_graceful", 3, 0) in group.calls
    assert not any(c[0] == "preempt" for c in group.calls)
    notice = next(e for e in result.events if e.kind is EventKind.PREEMPT_NOTICE)
    assert notice.time_s == 140.0 and (notice.nodes_before, notice.nodes_after) == (4, 1)
    preempt = next(e for e in result.events if e.kind is EventKind.PREEMPT)
    assert preempt.lost_steps == 0
    # a decision was taken at the notice, with the notice in recent_events
    at_notice = [d for d in result.decisions if d.time_s == 140.0]
    assert at_notice and at_notice[0].spot_held == 4


@pytest.mark.timeout(30)
def test_controller_honours_wake_after_and_checkpoint_interval():
    trace = synthetic_trace([(0, 2)], duration_s=100_000)
    result, group = _run(
        trace,
        ScriptedPolicy(wake_after_s=50.0),
        max_steps=30,
        step_s=1.0,
        checkpoint_interval_s=40.0,
    )
    times = [d.time_s for d in result.decisions]
    assert times[:4] == [0.0, 50.0, 100.0, 150.0]
    checkpoints = [e.time_s for e in result.events if e.kind is EventKind.CHECKPOINT]
    assert checkpoints[:3] == pytest.approx([40.0, 80.0, 120.0])
    # 30 steps at 1 real s each on 2 nodes = 300 trace seconds
    assert result.completion_time_s == pytest.approx(300.0)
    assert result.spot_node_s == pytest.approx(2 * 300.0)
    assert result.spot_cost_usd == pytest.approx(2 * 300.0 / 3600.0)


@pytest.mark.timeout(30)
def test_controller_config_validates():
    with pytest.raises(ValueError, match="time_scale"):
        ControllerConfig(time_scale=0)
    with pytest.raises(ValueError, match="min_nodes"):
        ControllerConfig(min_nodes=3, max_nodes=2)


@pytest.mark.timeout(60)
def test_decision_log_matches_the_simulator_on_a_real_trace():
    """Parity: the same trace and policy through the SimPy driver and the controller."""
    sim_mod = pytest.importorskip("elasim.sim")
    from elasim.job import load_job
    from elasim.policies import make_policy
    from elasim.traces import load_capacity_trace

    trace = load_capacity_trace("spot_us_east.csv")
    job = load_job("resnet50_v100").with_nodes(1, 4)
    for name, notice_s in (("greedy", 0.0), ("greedy", 120.0), ("fixed", 0.0)):
        sim = sim_mod.simulate(
            trace,
            make_policy(name),
            job,
            sim_mod.SimConfig(checkpoint_interval_s=math.inf, notice_s=notice_s),
        )
        clock = FakeClock()
        group = FakeWorkerGroup(clock, step_time_s=1e9, max_steps=10**9)
        scale = 600.0
        config = ControllerConfig(
            time_scale=scale,
            max_steps=10**9,
            max_nodes=4,
            notice_s=notice_s,
            graceful_margin_s=0.0,
            throughput_samples_per_s=job.throughput_table(4),
            statistical_efficiency=job.efficiency_table(4),
            max_wall_s=sim.sim_time_h * 3600 / scale,
            idle_poll_s=1e9,
            prior_step_s=1e-3,
        )
        result = Controller(trace, make_policy(name), group, clock, config).run()
        n = len(sim.decisions)
        assert n > 10
        assert list(result.decisions[:n]) == list(sim.decisions), (name, notice_s)


def test_a_rollback_costs_the_measured_time_of_the_lost_steps():
    from elasim.executor.group import GroupSettings, LocalLauncher, ProcessWorkerGroup, StepRecord

    group = ProcessWorkerGroup(GroupSettings(), [LocalLauncher(slots=4)])

    def steps(gen: int, world: int, first: int, count: int, start_s: float, step_s: float):
        return [
            StepRecord(start_s + i * step_s, first + i, world, 0.0, 64, gen, 0, 64 * (first + i))
            for i in range(count)
        ]

    # 1 worker at 1 ms/step (steps 1-100), then 4 workers at 6 ms/step (steps 101-200)
    group._steps = steps(0, 1, 1, 100, 0.001, 0.001) + steps(1, 4, 101, 100, 0.2, 0.006)
    # from a checkpoint at step 50: steps 51-100 (50 ms), 101 (first of a generation:
    # a typical 4-worker step), 102-200 (99 x 6 ms), plus one 4-worker step in flight
    expected = 50 * 0.001 + 0.006 + 99 * 0.006 + 0.006
    assert group._rollback_run_s(50, 4) == pytest.approx(expected)
    # the old estimate, 151 lost steps x today's 6 ms step, overstated it by 38 %
    assert 151 * 0.006 / expected == pytest.approx(1.38, abs=0.01)
    # a redone step counts once, as last run: a restart redid 101-200 at 2 ms/step
    group._steps += steps(2, 2, 101, 100, 1.0, 0.002)
    redone = 50 * 0.001 + 0.002 + 99 * 0.002 + 0.006
    assert group._rollback_run_s(50, 4) == pytest.approx(redone)
