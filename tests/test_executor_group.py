"""ProcessWorkerGroup's bookkeeping against fake processes and a fake store (no torch).

:class:`FakeCluster` stands in for the run's ``TCPStore`` *and* for the workers
behind it: a spawned worker reports ``READY`` at once, and every command the group
publishes is answered at once, the way real workers answer it (rank 0 reports the
pause of a new generation; ``STOP`` makes rank 0 checkpoint and report, then every
member exits with code 0).  Exits and their last events are in place before the
pool's next ``pump``, which is the order that made a planned stop look like a
crash, so nothing here depends on timing.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any

import pytest
from conftest import FakeProc

from elasim.executor.group import (
    GroupSettings,
    NodeKind,
    ProcessWorkerGroup,
    RescaleMode,
)
from elasim.executor.protocol import (
    CMDSEQ_KEY,
    Command,
    CommandOp,
    WorkerSettings,
    cmd_key,
    encode,
    event_count_key,
    event_key,
)
from elasim.policies import EventKind

UNEXPECTED = "exited unexpectedly"


class FakeCluster:
    """The store's API, with workers that answer every command at once."""

    port = 29_500

    def __init__(self) -> None:
        self.kv: dict[str, bytes] = {}
        self.procs: dict[int, FakeProc] = {}
        self.posted: dict[int, int] = defaultdict(int)
        self.members: tuple[int, ...] = ()
        self.gen = 0
        #: wid -> exit code when told to STOP (default 0); no reports from those
        self.stop_codes: dict[int, int] = {}

    # -- the store API the group uses ----------------------------------------------------

    def set(self, key: str, value: Any) -> None:
        self.kv[key] = value if isinstance(value, bytes) else str(value).encode()

    def get(self, key: str) -> bytes:
        return self.kv[key]

    def add(self, key: str, amount: int) -> int:
        value = int(self.kv.get(key, b"0")) + amount
        self.kv[key] = str(value).encode()
        if key == CMDSEQ_KEY and amount:
            self.on_command(Command.from_bytes(self.kv[cmd_key(value)]))
        return value

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return [self.kv[k] for k in keys]

    def check(self, keys: list[str]) -> bool:
        return all(k in self.kv for k in keys)

    def compare_set(self, key: str, expected: str, desired: str) -> bytes:
        if self.kv.get(key, b"") == expected.encode():
            self.kv[key] = desired.encode()
        return self.kv[key]

    # -- the workers ------------------------------------------------------------------------

    def post(self, wid: int, kind: str, **payload: Any) -> None:
        payload.setdefault("gen", self.gen)
        payload.update(type=kind, wid=wid, wall_s=time.time())
        n = self.posted[wid]
        self.kv[event_key(wid, n)] = encode(payload)
        self.posted[wid] = n + 1
        self.kv[event_count_key(wid)] = str(n + 1).encode()

    def spawned(self, wid: int) -> FakeProc:
        proc = self.procs[wid] = FakeProc(10_000 + wid)
        self.post(wid, "ready", global_batch=64, job="fake", target_accuracy=None)
        return proc

    def on_command(self, cmd: Command) -> None:
        now = time.time()
        if cmd.op is CommandOp.JOIN:
            self.gen, self.members = cmd.gen, cmd.members
            self.post(
                cmd.members[0],
                "pause",
                survivor=False,
                first_step_s=0.01,
                typical_step_s=None,
                t_cmd=now,
                t_formed=now,
                t_synced=now,
                first_end_wall_s=now,
                global_batch=64,
            )
        elif cmd.op is CommandOp.STOP:
            self.stop(cmd, now)
        elif cmd.op is CommandOp.EXIT:
            for wid in cmd.wids:
                self.procs[wid].code = 0

    def stop(self, cmd: Command, now: float) -> None:
        rank0 = self.members[0]
        if rank0 not in self.stop_codes:
            if cmd.checkpoint:
                ckpt = {"step": 5, "path": "ckpt.pt", "size_bytes": 1, "write_s": 0.001}
                self.post(rank0, "checkpoint", tag=cmd.tag, **ckpt)
            self.post(rank0, "stopped", step=5, last_end_wall_s=now)
        for wid in self.members:
            if cmd.keep:
                self.post(wid, "left", step=5, last_end_wall_s=now, exit=False)
            else:
                self.procs[wid].code = self.stop_codes.get(wid, 0)
        self.members = ()

    def finish(self) -> None:
        """Rank 0 reports DONE; every member exits (before the group reads the DONE)."""
        self.post(self.members[0], "done", step=9, samples=576, metrics={})
        for wid in self.members:
            self.procs[wid].code = 0


class FakeLauncher:
    name = "fake"

    def __init__(self, cluster: FakeCluster, slots: int) -> None:
        self.cluster = cluster
        self.slots = slots

    def spawn(self, launch: Any, files: Any) -> FakeProc:
        return self.cluster.spawned(launch.wid)

    def close(self) -> None:
        pass


def fake_group(mode: RescaleMode, *, standby: bool = False, slots: int = 2):
    cluster = FakeCluster()
    settings = GroupSettings(
        mode=mode,
        worker=WorkerSettings(checkpoint_dir="ckpt"),
        standby=standby,
        change_timeout_s=2.0,
        ready_timeout_s=2.0,
        stop_grace_s=2.0,
        poll_interval_s=0.0,
    )
    group = ProcessWorkerGroup(settings, [FakeLauncher(cluster, slots)])
    group.pool._store = cluster  # what start() would open; nothing else in start() matters here
    group.pool._checkpoint_path = "ckpt.pt"
    return group, cluster


def unexpected(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if UNEXPECTED in r.getMessage()]


def kinds(events) -> list[EventKind]:
    return [e.kind for e in events]


# -- planned stops are no crashes -------------------------------------------------------------


def test_a_planned_restart_logs_no_unexpected_exit(caplog):
    group, _ = fake_group(RescaleMode.RESTART)
    assert kinds(group.apply(2, 0)) == [EventKind.SCALE_UP]
    with caplog.at_level(logging.WARNING):
        events = group.apply(1, 0)  # stop both (checkpoint first), cold-start one
        group.pool.pump()
    assert kinds(events) == [EventKind.CHECKPOINT, EventKind.SCALE_DOWN]
    assert group.members == (2,)
    assert unexpected(caplog) == []
    assert group.pool.crashed == []


def test_a_graceful_preemption_of_every_node_in_restart_mode_logs_no_unexpected_exit(caplog):
    group, _ = fake_group(RescaleMode.RESTART)
    group.apply(2, 0)
    with caplog.at_level(logging.WARNING):
        events = group.preempt(2, graceful=True)
        group.pool.pump()
    assert kinds(events) == [EventKind.CHECKPOINT, EventKind.PREEMPT, EventKind.PAUSE]
    assert unexpected(caplog) == []
    assert group.pool.crashed == []


def test_releasing_every_node_in_place_without_standbys_logs_no_unexpected_exit(caplog):
    group, _ = fake_group(RescaleMode.INPLACE, standby=False)
    assert kinds(group.apply(2, 0)) == [EventKind.SCALE_UP]
    with caplog.at_level(logging.WARNING):
        events = group.apply(0, 0)  # STOP without keep: the members exit
        group.pool.pump()
    assert kinds(events) == [EventKind.CHECKPOINT, EventKind.PAUSE]
    assert unexpected(caplog) == []
    assert group.pool.crashed == []


def test_members_exiting_after_done_are_no_crash(caplog):
    group, cluster = fake_group(RescaleMode.INPLACE, standby=False)
    group.apply(2, 0)
    cluster.finish()  # the exits are seen in the same pump as the DONE event
    with caplog.at_level(logging.WARNING):
        group.pool.pump()
    assert group.done
    assert unexpected(caplog) == []
    assert group.pool.crashed == []


# -- real crashes still are ------------------------------------------------------------------


def test_a_member_that_dies_on_its_own_is_reported_once(caplog):
    group, cluster = fake_group(RescaleMode.INPLACE, standby=False)
    group.apply(2, 0)
    victim = group.members[-1]
    cluster.procs[victim].code = -9  # SIGKILL from outside: nobody asked for it
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            group.pool.pump()
    assert unexpected(caplog) == [f"worker {victim} {UNEXPECTED} (code -9)"]
    assert group.pool.crashed == [victim]


def test_a_member_that_crashes_during_a_planned_stop_is_reported(caplog):
    # rank 0 dies half-way through the restart's checkpoint (exit code 17, as the
    # injected fault does): that is a crash; the other member's exit is not.
    group, cluster = fake_group(RescaleMode.RESTART)
    group.apply(2, 0)
    rank0, other = group.members
    cluster.stop_codes[rank0] = 17
    with caplog.at_level(logging.WARNING):
        group.apply(1, 0)
        group.pool.pump()
    assert unexpected(caplog) == [f"worker {rank0} {UNEXPECTED} (code 17)"]
    assert other not in group.pool.crashed


def test_a_member_killed_by_the_group_is_no_crash(caplog):
    group, _ = fake_group(RescaleMode.INPLACE, standby=False)
    group.apply(2, 0)
    victim = group.members[-1]
    with caplog.at_level(logging.WARNING):
        events = group.preempt(1, graceful=False)
        group.pool.pump()
    assert kinds(events)[0] is EventKind.PREEMPT
    assert group.held() == (1, 0) and group.pool.workers[victim].kind is NodeKind.SPOT
    assert unexpected(caplog) == []


# -- a shared pool: dropped workers give their slots back -----------------------------------


class DroppingCluster(FakeCluster):
    """Members a JOIN leaves out say so (``LEFT``, staying as standbys), as real ones do."""

    def on_command(self, cmd: Command) -> None:
        if cmd.op is CommandOp.JOIN:
            for wid in self.members:
                if wid not in cmd.members:
                    self.post(wid, "left", step=5, last_end_wall_s=time.time(), exit=False)
        super().on_command(cmd)


def test_release_standbys_sends_dropped_members_home_and_keeps_what_is_asked(caplog):
    group, cluster = fake_group(RescaleMode.INPLACE, slots=3)
    cluster.__class__ = DroppingCluster
    assert kinds(group.apply(3, 0)) == [EventKind.SCALE_UP]
    group.apply(1, 0)  # two members dropped: in place they wait as standbys
    alive = [w for w, p in cluster.procs.items() if p.code is None]
    assert len(alive) == 3 and group.held() == (1, 0)
    with caplog.at_level(logging.WARNING):
        assert group.release_standbys(keep=1) == 1
        group.pool.pump()
    assert sum(1 for p in cluster.procs.values() if p.code is None) == 2  # one standby kept
    assert group.release_standbys(keep=0) == 1
    group.pool.pump()
    assert [w for w, p in cluster.procs.items() if p.code is None] == list(group.members)
    assert group.held() == (1, 0) and not unexpected(caplog)


# -- starts that always fail --------------------------------------------------------------------


class DyingLauncher(FakeLauncher):
    """Every worker exits with code 1 before it is ready (a job that cannot be built)."""

    def __init__(self, cluster: FakeCluster, slots: int, log_dir: Any) -> None:
        super().__init__(cluster, slots)
        self.log_dir = log_dir
        self.spawns = 0

    def spawn(self, launch: Any, files: Any) -> FakeProc:
        self.spawns += 1
        (self.log_dir / f"worker-{launch.wid}.log").write_text("RuntimeError: no data here\n")
        proc = self.cluster.procs[launch.wid] = FakeProc(10_000 + launch.wid)
        proc.code = 1
        return proc


def test_workers_that_never_start_end_the_group_in_one_line_not_in_a_loop(tmp_path):
    """A fork server that imported the wrong elasim restarted dying workers for 5 minutes."""
    from elasim.executor.records import ExecutorError

    cluster = FakeCluster()
    launcher = DyingLauncher(cluster, 2, tmp_path)
    group, _ = fake_group(RescaleMode.INPLACE)
    group.launchers = [launcher]
    group.pool._store = cluster
    with pytest.raises(ExecutorError) as info:
        for _ in range(50):  # a caller retrying the scale-up, as a cluster job does
            group.apply(2, 0)
    assert launcher.spawns == 4  # 2 x slots failed starts in a row, then no more
    assert str(info.value) == (
        "no worker became ready: worker 0 exited with code 1 before it was ready: "
        f"RuntimeError: no data here (log: {tmp_path / 'worker-0.log'})"
    )


class LostHostLauncher(DyingLauncher):
    """Every worker is SIGKILLed before it is ready: its host (a Ray node) is gone."""

    def spawn(self, launch: Any, files: Any) -> FakeProc:
        proc = super().spawn(launch, files)
        proc.code = -9
        return proc


def test_starts_killed_by_a_lost_host_are_not_failed_starts(tmp_path):
    """``cluster run --launcher ray``: until Ray reports the node dead, the job retries
    there; that must not end the whole run as a job whose workers cannot start."""
    cluster = FakeCluster()
    launcher = LostHostLauncher(cluster, 2, tmp_path)
    group, _ = fake_group(RescaleMode.INPLACE)
    group.launchers = [launcher]
    group.pool._store = cluster
    for _ in range(10):
        group.apply(2, 0)
    assert launcher.spawns > 4
