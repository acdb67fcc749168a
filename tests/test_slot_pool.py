"""The shared slot pool of ``elasim cluster run`` (no torch, no processes).

Several jobs' worker groups see one set of launchers through :class:`SlotView`s: a
job never has more processes alive than its quota, never more than the real slots
in all, and a slot given up reaches another job only once its process has exited.
"""

from __future__ import annotations

import signal

import pytest
from conftest import FakeProc
from hypothesis import given, settings
from hypothesis import strategies as st

from elasim.executor.group import GroupSettings, ProcessWorkerGroup
from elasim.executor.launchers import WorkerLaunch
from elasim.executor.protocol import WorkerSettings
from elasim.executor.slots import SlotPool


class FakeLauncher:
    def __init__(self, name: str, slots: int) -> None:
        self.name = name
        self.slots = slots
        self.spawned: list[tuple[int, int]] = []
        self.procs: list[FakeProc] = []
        self.closed = False

    def spawn(self, launch, files):
        self.spawned.append((launch.wid, launch.device_index))
        proc = FakeProc(len(self.procs))
        self.procs.append(proc)
        return proc

    def close(self):
        self.closed = True


def _launch(wid: int = 0, slot: int = 0) -> WorkerLaunch:
    return WorkerLaunch(wid=wid, store="x:1", spawn_wall_s=0.0, device_index=slot)


def test_a_job_sees_only_its_quota_and_the_free_slots():
    real = FakeLauncher("local", 4)
    pool = SlotPool([real])
    (a,) = pool.views("a")
    (b,) = pool.views("b")
    assert a.slots == 0  # no quota yet
    pool.set_quota("a", 3)
    pool.set_quota("b", 3)
    assert a.slots == 3 and b.slots == 3
    procs_a = [a.spawn(_launch(i), None) for i in range(3)]
    assert b.slots == 1  # only one slot is free
    b.spawn(_launch(0), None)
    assert b.slots == 1 and a.slots == 3
    with pytest.raises(RuntimeError, match="no free slot"):
        b.spawn(_launch(1), None)
    # a gives one slot up: it reaches b only once the process has exited
    pool.set_quota("a", 2)
    assert b.slots == 1
    procs_a[0].code = 0
    assert b.slots == 2 and a.slots == 2
    assert pool.alive("a") == 2 and pool.free() == 1


def test_every_worker_gets_its_own_device_index_whatever_the_group_asked():
    real = FakeLauncher("local", 3)
    pool = SlotPool([real])
    (a,) = pool.views("a")
    (b,) = pool.views("b")
    pool.set_quota("a", 2)
    pool.set_quota("b", 1)
    a.spawn(_launch(0, 0), None)
    b.spawn(_launch(0, 0), None)  # b's group numbers its own slots from 0 too
    a.spawn(_launch(1, 1), None)
    devices = [device for _, device in real.spawned]
    assert devices == [0, 1, 2]


def test_closing_a_view_kills_its_job_only_and_the_pool_closes_the_launchers():
    real = FakeLauncher("local", 2)
    pool = SlotPool([real])
    (a,) = pool.views("a")
    (b,) = pool.views("b")
    pool.set_quota("a", 1)
    pool.set_quota("b", 1)
    pa, pb = a.spawn(_launch(0), None), b.spawn(_launch(0), None)
    a.close()
    assert pa.code == -signal.SIGKILL and pb.code is None and not real.closed
    pool.close()
    assert real.closed


def test_a_job_has_one_set_of_views_and_quotas_are_not_negative():
    pool = SlotPool([FakeLauncher("local", 1)])
    pool.views("a")
    with pytest.raises(ValueError, match="already"):
        pool.views("a")
    with pytest.raises(ValueError, match=">= 0"):
        pool.set_quota("a", -1)
    with pytest.raises(ValueError, match="at least one"):
        SlotPool([])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=1, max_size=3),
    st.lists(
        st.tuples(st.sampled_from("sqx"), st.integers(0, 2), st.integers(0, 4)),
        max_size=40,
    ),
)
def test_the_pool_never_overcommits(sizes, ops):
    """Whatever the order of quotas, spawns and exits: quota and capacity always hold."""
    pool = SlotPool([FakeLauncher(f"h{i}", n) for i, n in enumerate(sizes)])
    jobs = ["j0", "j1", "j2"]
    views = {j: pool.views(j) for j in jobs}
    owned: dict[str, list[FakeProc]] = {j: [] for j in jobs}
    for op, j, n in ops:
        job = jobs[j]
        if op == "q":
            pool.set_quota(job, n)
        elif op == "s":
            before, free = pool.alive(job), pool.free()
            try:
                owned[job].append(views[job][n % len(sizes)].spawn(_launch(0), None))
            except RuntimeError:
                assert before >= pool.quota(job) or free == 0 or len(sizes) > 1
            else:
                assert before < pool.quota(job) and free > 0
        elif owned[job]:
            owned[job][n % len(owned[job])].code = 0
        alive = {k: sum(1 for p in owned[k] if p.code is None) for k in jobs}
        assert [pool.alive(k) for k in jobs] == [alive[k] for k in jobs]
        assert pool.free() == sum(sizes) - sum(alive.values()) >= 0


def test_a_placement_caps_each_launcher():
    hosts = [FakeLauncher("h0", 2), FakeLauncher("h1", 2)]
    pool = SlotPool(hosts)
    v0, v1 = pool.views("a")
    pool.set_quota("a", 3, {0: 1, 1: 2})
    assert (v0.slots, v1.slots) == (1, 2)
    v0.spawn(_launch(0), None)
    assert v0.slots == 1  # its one process, no room for more
    with pytest.raises(RuntimeError):
        v0.spawn(_launch(1), None)
    v1.spawn(_launch(1), None)
    v1.spawn(_launch(2), None)
    assert pool.alive("a") == 3 and pool.free() == 1
    assert pool.launchers == hosts


def test_a_capacity_drop_takes_whole_nodes_away_and_a_rise_gives_them_back():
    """``cluster run --capacity``: the pool follows the loop's usable nodes (0 .. n-1)."""
    launchers = [FakeLauncher(f"node{i}", 2) for i in range(3)]
    pool = SlotPool(launchers)
    views = pool.views("a")
    usable: list[int | None] = [None]
    pool.follow(lambda: usable[0])
    pool.set_quota("a", 6)
    assert [v.slots for v in views] == [2, 2, 2] and pool.usable() == 3
    usable[0] = 1  # the trace dropped nodes 1 and 2
    assert [v.slots for v in views] == [2, 0, 0] and pool.usable() == 1
    with pytest.raises(RuntimeError, match="no free slot"):
        views[2].spawn(_launch(0), None)
    usable[0] = 2  # a rise gives node 1 back, at once
    assert [v.slots for v in views] == [2, 2, 0]
    views[1].spawn(_launch(0), None)
    assert launchers[1].spawned == [(0, 0)]
    usable[0] = 99  # more than the cluster has: every node
    assert pool.usable() == 3


class _Store:
    port = 29500

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        self.keys[key] = value

    def delete_key(self, key: str) -> bool:
        return self.keys.pop(key, None) is not None


class _HostDiesOnStart(_Store):
    """A store whose first write kills ``launcher``'s host: after the group counted its
    slots, before it started anything (as a Ray node read afresh can vanish)."""

    def __init__(self, launcher: FakeLauncher) -> None:
        super().__init__()
        self.launcher = launcher

    def set(self, key: str, value: str) -> None:
        self.launcher.slots = 0
        super().set(key, value)


def test_a_host_lost_between_the_count_and_the_start_leaves_the_group_full_not_broken():
    """CI once saw ``cluster run`` die with "no free slot" after a Ray host was lost."""
    real = FakeLauncher("ray:10.0.0.2", 2)
    pool = SlotPool([real])
    group = ProcessWorkerGroup(GroupSettings(worker=WorkerSettings()), pool.views("b"))
    pool.set_quota("b", 2)
    store = group.pool._store = _HostDiesOnStart(real)  # what start() would open
    assert group.pool.spawn() is None  # full now, not an error
    assert real.spawned == [] and pool.alive("b") == 0
    assert store.keys == {}  # the worker that never ran leaves no counters behind
    real.slots = 2  # the host is back: the next decision starts there
    group.pool._store = _Store()
    worker = group.pool.spawn()
    assert worker is not None and real.spawned == [(worker.wid, 0)]
