"""Fast executor tests: sampler, protocol, checkpoints, and the controller loop on a fake clock.

No worker processes here (except one short-lived checkpoint writer that is killed on
purpose), so this file runs in a few seconds.
"""

from __future__ import annotations

import multiprocessing
import os

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
from elasim.executor.protocol import (  # noqa: E402
    Command,
    CommandOp,
    FaultInjection,
    WorkerSettings,
)
from elasim.executor.sampler import ElasticSampler, SamplerPosition  # noqa: E402
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


def test_a_rollback_costs_the_measured_time_of_the_lost_steps():
    from elasim.executor.group import GroupSettings, LocalLauncher, ProcessWorkerGroup, StepRecord

    group = ProcessWorkerGroup(GroupSettings(), [LocalLauncher(slots=4)])

    def steps(gen: int, world: int, first: int, count: int, start_s: float, step_s: float):
        return [
            StepRecord(start_s + i * step_s, first + i, world, 0.0, 64, gen, 0, 64 * (first + i))
            for i in range(count)
        ]

    # 1 worker at 1 ms/step (steps 1-100), then 4 workers at 6 ms/step (steps 101-200)
    log = group.pool.reports.steps
    log.records = steps(0, 1, 1, 100, 0.001, 0.001) + steps(1, 4, 101, 100, 0.2, 0.006)
    # from a checkpoint at step 50: steps 51-100 (50 ms), 101 (first of a generation:
    # a typical 4-worker step), 102-200 (99 x 6 ms), plus one 4-worker step in flight
    expected = 50 * 0.001 + 0.006 + 99 * 0.006 + 0.006
    assert group.pauses.rollback_run_s(50, 4) == pytest.approx(expected)
    # the old estimate, 151 lost steps x today's 6 ms step, overstated it by 38 %
    assert 151 * 0.006 / expected == pytest.approx(1.38, abs=0.01)
    # a redone step counts once, as last run: a restart redid 101-200 at 2 ms/step
    log.records += steps(2, 2, 101, 100, 1.0, 0.002)
    redone = 50 * 0.001 + 0.002 + 99 * 0.002 + 0.006
    assert group.pauses.rollback_run_s(50, 4) == pytest.approx(redone)


def test_a_second_total_loss_counts_only_what_was_committed_since_the_restart():
    """Issue: lost_steps took the highest step ever seen, so a second loss re-counted the first."""
    from elasim.executor.group import GroupSettings, LocalLauncher, ProcessWorkerGroup, StepRecord

    group = ProcessWorkerGroup(GroupSettings(), [LocalLauncher(slots=4)])

    def steps(gen: int, first: int, count: int, start_s: float):
        return [
            StepRecord(start_s + i * 0.001, first + i, 2, 0.0, 64, gen, 0, 64 * (first + i))
            for i in range(count)
        ]

    # steps 1-8,999, a total loss with no checkpoint (back to 0), then 1-272 again
    log = group.pool.reports.steps
    log.records = steps(0, 1, 8999, 0.0) + steps(1, 1, 272, 100.0)
    assert group.last_checkpoint_step is None
    assert log.last_step() == 272
    assert group.pauses.lost_since(0) == 272  # not 8,999: those were lost the first time
    # the step ids logged since the restart are exactly the ones a second loss loses
    since_restart = {r.step for r in log.records if r.gen == 1}
    assert group.pauses.lost_since(0) == len(since_restart)
    # a checkpoint at 200 after the restart: only 201-272 are lost
    assert group.pauses.lost_since(200) == 72
    assert group.pauses.rollback_run_s(200, 2) == pytest.approx(72 * 0.001 + 0.001)
