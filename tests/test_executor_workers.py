"""Multi-process executor tests: real gloo workers on CPU, each with a hard time bound.

Every test starts its own worker processes and tears them down in ``finally``
(``ProcessWorkerGroup.close`` SIGKILLs whatever is left; workers also die with this
process through ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from elasim.executor.group import (  # noqa: E402
    GroupSettings,
    LocalLauncher,
    ProcessWorkerGroup,
    RescaleMode,
)
from elasim.executor.protocol import FaultInjection, WorkerSettings  # noqa: E402
from elasim.executor.run import RunConfig, run_trace  # noqa: E402
from elasim.executor.run_output import write_run  # noqa: E402
from elasim.executor.sampler import ElasticSampler  # noqa: E402
from elasim.jobmodel import JobSpec  # noqa: E402
from elasim.policies import EVENT_COLUMNS, EventKind  # noqa: E402

pytestmark = [pytest.mark.executor]

DIGITS_TRAIN = 1438  # scikit-learn's 1,797 digits minus the 359 held out


@contextlib.contextmanager
def worker_group(
    tmp_path: Path, slots: int, mode: RescaleMode = RescaleMode.INPLACE, **worker: object
) -> Iterator[ProcessWorkerGroup]:
    settings = WorkerSettings(checkpoint_dir=str(tmp_path / "ckpt"), **worker)  # type: ignore[arg-type]
    group = ProcessWorkerGroup(
        GroupSettings(mode=mode, worker=settings, change_timeout_s=30.0, ready_timeout_s=60.0),
        [LocalLauncher(slots, log_dir=tmp_path / "logs")],
    )
    try:
        group.start()
        yield group
    finally:
        group.close()


def wait_steps(group: ProcessWorkerGroup, at_least: int, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        step = group.progress().step
        if step >= at_least or group.done:
            return step
        group.wait(0.02)
    raise AssertionError(f"training stalled below step {at_least}")


def kinds(events) -> list[EventKind]:
    return [e.kind for e in events]


# -- the whole pipeline -------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_run_over_a_real_trace_segment_completes_and_reaches_the_target(tmp_path):
    # spot_us_east.csv (real availability, us-east-2b) from t = 127,500 s, capped at 3 nodes:
    # 3 nodes, a drop to 2 at +2,100 s (no notice: SIGKILL), back to 3 at +3,000 s.
    config = RunConfig(
        spec=JobSpec(
            trace="spot_us_east.csv",
            start_offset_s=127_500.0,
            policy="greedy",
            max_nodes=3,
            checkpoint_interval_s=1500.0,
        ),
        time_scale=1000.0,
        local_slots=4,  # one spare warm standby for the scale-up after the SIGKILL
        max_steps=400,
        step_delay_real_s=0.015,
        log_dir=str(tmp_path / "logs"),
        max_wall_real_s=90.0,
    )
    result = run_trace(config)
    summary = result.summary
    assert summary["completed"] is True
    assert summary["steps"] == 400
    assert summary["final_accuracy"] >= summary["target_accuracy"] == 0.95
    seen = kinds(result.events)
    assert seen[0] is EventKind.SCALE_UP and seen[-1] is EventKind.DONE
    assert EventKind.PREEMPT in seen and EventKind.CHECKPOINT in seen
    assert seen.count(EventKind.SCALE_UP) >= 2
    preempt = next(e for e in result.events if e.kind is EventKind.PREEMPT)
    assert (preempt.nodes_before, preempt.nodes_after, preempt.lost_steps) == (3, 2, 1)
    assert 2000.0 <= preempt.time_s <= 2400.0  # trace seconds since the start of the segment
    paths = write_run(result, tmp_path / "out")
    events = pd.read_parquet(paths["events"])
    assert list(events.columns[: len(EVENT_COLUMNS)]) == list(EVENT_COLUMNS)
    assert {"real_time_s", "interval_s"} <= set(events.columns)
    steps = pd.read_parquet(paths["steps"])
    assert steps["step"].max() == 400 and set(steps["world_size"]) <= {1, 2, 3}
    assert {"time_s", "trace_time_s", "loss", "samples"} <= set(steps.columns)
    written = json.loads(paths["summary"].read_text())
    for key in (
        "completion_time_h",
        "cost_usd",
        "rescales",
        "preemptions",
        "lost_work_h",
        "wall_time_s",
        "final_loss",
        "final_accuracy",
        "steps",
    ):
        assert key in written
    assert paths["plot"].stat().st_size > 1000


# -- failures -----------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_sigkill_in_the_middle_of_a_step_is_survived_without_a_hang(tmp_path):
    # worker 0 is rank 0 of the group; it SIGKILLs itself after its backward pass of
    # step 40, before the gradient all-reduce: the step is in flight on every rank.
    faults = FaultInjection(kill_wid=0, kill_at_step=40)
    with worker_group(tmp_path, slots=3, max_steps=120, faults=faults, step_delay_s=0.005) as g:
        g.apply(3, 0)
        deadline = time.monotonic() + 40
        handled = []
        while not handled and time.monotonic() < deadline:
            g.wait(0.05)
            handled = g.poll()
        assert kinds(handled) == [EventKind.PREEMPT, EventKind.SCALE_DOWN]
        preempt, down = handled
        assert (down.nodes_before, down.nodes_after) == (3, 2)
        assert preempt.lost_steps == 1
        assert 0 < down.pause.detect_s < 5.0  # noticed by a failing collective, not a timeout
        assert down.pause.pause_s < 5.0
        assert g.members == (1, 2)
        assert wait_steps(g, 120, timeout_s=40) == 120
        deadline = time.monotonic() + 10  # rank 0 reports DONE just after its last step
        while not g.done and time.monotonic() < deadline:
            g.wait(0.05)
        assert g.done
        steps = [r.step for r in g.step_records()]
        assert steps == sorted(steps) and steps[-1] == 120  # no rollback beyond the step in flight


@pytest.mark.timeout(90)
def test_a_hung_worker_is_timed_out_and_removed(tmp_path):
    # SIGSTOP: the process is alive but never answers.  Survivors' collectives time
    # out, the re-formation barrier names the member that never arrived, and the
    # controller kills it instead of waiting forever.
    with worker_group(
        tmp_path, slots=3, max_steps=10**6, collective_timeout_s=2.0, rendezvous_timeout_s=3.0
    ) as g:
        g.apply(3, 0)
        wait_steps(g, 20)
        victim = g.members[-1]
        g.pool.workers[victim].proc.send_signal(signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 40
            handled = []
            while not handled and time.monotonic() < deadline:
                g.wait(0.05)
                handled = g.poll()
            assert EventKind.SCALE_DOWN in kinds(handled)
            assert victim not in g.members and len(g.members) == 2
            step = g.progress().step
            assert wait_steps(g, step + 20) >= step + 20
        finally:
            with contextlib.suppress(ProcessLookupError):
                g.pool.workers[victim].proc.send_signal(signal.SIGKILL)


# -- scale up and down, both modes ---------------------------------------------------------------


@pytest.mark.timeout(120)
def test_scale_up_and_down_in_place(tmp_path):
    with worker_group(tmp_path, slots=3, max_steps=100_000) as g:
        first = g.apply(1, 0)
        assert kinds(first) == [EventKind.SCALE_UP] and g.held() == (1, 0)
        wait_steps(g, 20)
        up = g.apply(3, 0)
        assert kinds(up) == [EventKind.SCALE_UP] and g.held() == (3, 0)
        detail = dict(up[0].detail)
        assert detail["receivers"] == 2 and detail["state_bytes"] > 0  # broadcast, not disk
        assert up[0].pause.acquire_s == 0.0  # warm standbys were ready
        assert up[0].interval_s is not None and up[0].pause.pause_s <= up[0].interval_s + 1e-6
        step = wait_steps(g, g.progress().step + 20)
        down = g.apply(2, 0)
        assert kinds(down) == [EventKind.SCALE_DOWN] and g.held() == (2, 0)
        assert dict(down[0].detail)["receivers"] == 0  # survivors already hold the state
        assert down[0].lost_steps == 0
        hard = g.preempt(1, graceful=False)
        assert kinds(hard) == [EventKind.PREEMPT, EventKind.SCALE_DOWN]
        assert g.held() == (1, 0) and hard[0].lost_steps == 1
        back = g.apply(2, 1)
        assert g.held() == (2, 1) and kinds(back) == [EventKind.SCALE_UP]
        after = wait_steps(g, step + 40)
        assert after > step
        # on-demand nodes are never preempted
        gone = g.preempt(5, graceful=True)
        assert g.held() == (0, 1) and EventKind.PREEMPT in kinds(gone)
        steps = [r.step for r in g.step_records()]
        assert steps == sorted(steps)


@pytest.mark.timeout(150)
def test_scale_up_and_down_with_restarts(tmp_path):
    with worker_group(tmp_path, slots=2, mode=RescaleMode.RESTART, max_steps=100_000) as g:
        first = g.apply(1, 0)
        assert kinds(first) == [EventKind.SCALE_UP] and g.held() == (1, 0)
        assert first[0].pause.acquire_s > 0  # a cold start: interpreter + torch import
        wait_steps(g, 30)
        up = g.apply(2, 0)
        # the planned restart checkpoints at a step boundary, then restores it
        assert kinds(up) == [EventKind.CHECKPOINT, EventKind.RESTORE, EventKind.SCALE_UP]
        assert up[-1].pause.acquire_s > 0 and up[-1].pause.state_s > 0 and up[-1].lost_steps == 0
        restored = dict(up[-1].detail)["restored_step"]
        assert restored >= 30
        wait_steps(g, restored + 30)
        hard = g.preempt(1, graceful=False)
        assert kinds(hard)[0] is EventKind.PREEMPT and g.held() == (1, 0)
        # everything since the last checkpoint (the one of the planned restart) is lost
        assert hard[0].lost_steps >= 30
        # rolled back: the steps after the checkpoint are done twice, once the restarted
        # worker has trained some (on a busy host it may not have when preempt returns)
        # (its step records reach us through the reports, later than the progress counter),
        # so wait for the repeated steps themselves rather than for a step count
        deadline = time.monotonic() + 120.0
        redo = [r.step for r in g.step_records()]
        while redo == sorted(redo) and time.monotonic() < deadline:
            g.wait(0.05)
            redo = [r.step for r in g.step_records()]
        assert redo != sorted(redo)


# -- data ---------------------------------------------------------------------------------------


def _sample_log(log_dir: Path) -> dict[int, dict[int, list[int]]]:
    """step -> rank -> ids, from every worker's log (each committed step once per rank)."""
    by_step: dict[int, dict[int, list[int]]] = defaultdict(dict)
    worlds: dict[int, int] = {}
    for path in log_dir.glob("samples-*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            assert row["rank"] not in by_step[row["step"]], "a rank logged a step twice"
            by_step[row["step"]][row["rank"]] = row["ids"]
            assert worlds.setdefault(row["step"], row["world"]) == row["world"]
    for step, ranks in by_step.items():
        assert sorted(ranks) == list(range(worlds[step])), f"step {step} is missing a rank"
    return by_step


def _check_exactly_once(
    by_step: dict[int, dict[int, list[int]]], max_steps: int, batches: dict[int, int] | None = None
) -> set[int]:
    """Every committed step's global batch is the sampler's next one: none skipped or repeated.

    ``batches``: the global batch of each step where it changed (64 before).
    """
    sampler = ElasticSampler(DIGITS_TRAIN, 64, seed=0)
    assert sorted(by_step) == list(range(1, max_steps + 1))
    per_epoch: dict[int, list[int]] = defaultdict(list)
    worlds = set()
    position, epoch, batch = 0, 0, 64
    for step in range(1, max_steps + 1):
        ranks = by_step[step]
        worlds.add(len(ranks))
        batch = (batches or {}).get(step, batch)
        ids = [i for r in sorted(ranks) for i in ranks[r]]
        expected = sampler.permutation(epoch)[position : position + batch]
        assert ids == [int(i) for i in expected], f"step {step}: wrong global batch"
        per_epoch[epoch] += ids
        position += len(ids)
        if position >= DIGITS_TRAIN:
            epoch, position = epoch + 1, 0
    for e, ids in per_epoch.items():
        assert len(ids) == len(set(ids)), f"epoch {e}: a sample was seen twice"
        if e < epoch:
            assert sorted(ids) == list(range(DIGITS_TRAIN)), f"epoch {e}: samples skipped"
    return worlds


@pytest.mark.timeout(120)
def test_exactly_once_sampling_across_graceful_rescales(tmp_path):
    logs = tmp_path / "samples"
    max_steps = 240  # ten epochs of 22.5 steps: the changes land mid-epoch
    with worker_group(
        tmp_path, slots=4, max_steps=max_steps, sample_log_dir=str(logs), step_delay_s=0.03
    ) as g:
        g.apply(2, 0)
        for target, after in ((4, 10), (3, 12), (1, 12)):
            wait_steps(g, g.progress().step + after)
            g.apply(target, 0)
            assert g.held() == (target, 0)
        assert g.warm(1) == 1  # a cold start while one worker trains on
        wait_steps(g, g.progress().step + 5)
        g.apply(2, 0)
        assert g.held() == (2, 0)
        wait_steps(g, g.progress().step + 10)
        g.preempt(1, graceful=True)  # a noticed preemption leaves at a step boundary
        assert g.held() == (1, 0)
        assert wait_steps(g, max_steps, timeout_s=60) == max_steps
    worlds = _check_exactly_once(_sample_log(logs), max_steps)
    assert worlds == {1, 2, 3, 4}


def _batch_of_steps(log_dir: Path) -> dict[int, int]:
    """step -> the global batch each rank logged for it (one per step, or the test fails)."""
    out: dict[int, int] = {}
    for path in log_dir.glob("samples-*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            assert out.setdefault(row["step"], row["batch"]) == row["batch"], row
    return out


@pytest.mark.timeout(120)
def test_exactly_once_sampling_across_batch_changes_with_accumulation(tmp_path):
    """A cluster policy's batch applies at the next re-formation, on every rank at once.

    64 -> 160 -> 96 -> 200 over 1..3 workers, with at most 40 samples per forward pass
    (160 on one worker accumulates 4 times): the sampler's global batches follow, no
    sample of an epoch is skipped or seen twice, and progress counts each step's gain.
    """
    logs = tmp_path / "samples"
    max_steps = 60
    worker = {"max_local_batch": 40}
    with worker_group(
        tmp_path, slots=3, max_steps=max_steps, sample_log_dir=str(logs),
        step_delay_s=0.02, job_options=worker,
    ) as g:  # fmt: skip
        g.apply(2, 0)
        plans = ((1, 160, 2.0), (3, 96, 1.5), (2, 200, 3.0))
        for target, batch, gain in plans:
            wait_steps(g, g.progress().step + 8)
            g.set_batch(batch, gain)
            g.apply(target, 0)
            assert g.held() == (target, 0) and g.global_batch == batch
        assert wait_steps(g, max_steps, timeout_s=60) == max_steps
        records = g.step_records()
    batches = _batch_of_steps(logs)
    changes = {s: b for s, b in sorted(batches.items()) if b != batches.get(s - 1, 64)}
    assert list(changes.values()) == [160, 96, 200], changes
    worlds = _check_exactly_once(_sample_log(logs), max_steps, changes)
    assert worlds == {1, 2, 3}
    # progress: 1 per step at 64, then each generation's gain
    gains = {64: 1.0, 160: 2.0, 96: 1.5, 200: 3.0}
    expected = sum(gains[batches[s]] for s in range(1, max_steps + 1))
    assert max(r.progress for r in records) == pytest.approx(expected)


@pytest.mark.timeout(150)
def test_exactly_once_sampling_across_planned_restarts(tmp_path):
    logs = tmp_path / "samples"
    max_steps = 60
    with worker_group(
        tmp_path,
        slots=2,
        mode=RescaleMode.RESTART,
        max_steps=max_steps,
        sample_log_dir=str(logs),
        step_delay_s=0.02,
    ) as g:
        g.apply(1, 0)
        wait_steps(g, 15)
        g.apply(2, 0)
        wait_steps(g, 35)
        g.apply(1, 0)
        assert wait_steps(g, max_steps, timeout_s=60) == max_steps
    worlds = _check_exactly_once(_sample_log(logs), max_steps)
    assert worlds == {1, 2}


# -- checkpoints inside a worker ------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_a_worker_killed_while_writing_a_checkpoint_leaves_the_previous_one_intact(tmp_path):
    from elasim.executor.checkpoint import load_checkpoint, save_checkpoint

    ckpt = tmp_path / "ckpt" / "checkpoint.pt"
    save_checkpoint(ckpt, {"step": 7, "sentinel": np.int64(1).item()})
    faults = FaultInjection(crash_checkpoint_after_bytes=4096)
    with worker_group(tmp_path, slots=2, max_steps=100_000, faults=faults) as g:
        g.apply(2, 0)
        wait_steps(g, 10)
        events = g.checkpoint()  # rank 0 dies half-way through the write
        assert events == []
        handled = []
        deadline = time.monotonic() + 30
        while not handled and time.monotonic() < deadline:
            g.wait(0.05)
            handled = g.poll()
        assert EventKind.PREEMPT in kinds(handled) and g.held() == (1, 0)
    assert load_checkpoint(ckpt) == {"step": 7, "sentinel": 1}
