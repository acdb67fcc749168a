"""``elasim cluster run`` is the simulator's cluster loop and its jobs (no torch).

* **The shell.**  The executor drives :class:`elasim.cluster.ClusterLoop` with its own
  shell (:func:`elasim.executor.cluster.drive_cluster`: a real or fake clock, scaled);
  the simulator drives the same loop with SimPy.  With a fake clock and the model's
  training (as :class:`~elasim.executor.fakes.FluidWorkerGroup` is for one job), the
  two decision logs, every job's events and every per-job row must be equal bit for
  bit, for every registered cluster policy and a user plugin.
* **The jobs.**  What ``cluster run`` builds (:func:`~elasim.executor.cluster.job_factory`:
  the model's :class:`~elasim.cluster.ClusterJob` trained by a worker group) is run
  over fake worker groups (:class:`~elasim.executor.fakes.FakeWorkerGroup`) under
  every registered cluster policy and a plugin: every job reaches its target steps,
  the quotas follow the placements, and the books the policy reads (peak GPUs,
  restarts) are the ones its placements say.  The real job used to be a subclass that
  overrode ``reallocate`` and dropped the peak update, so ``pollux`` (which caps
  growth at twice the peak) never gave a real job more than one slot.
"""

from __future__ import annotations

import math

import pytest

import elasim.policies.cluster  # noqa: F401 - registers the built-ins
from elasim.cluster import ClusterSetup, build_loop
from elasim.executor.cluster import ClusterRunConfig, drive_cluster, job_factory
from elasim.executor.controller import FakeClock
from elasim.executor.fakes import FakePooledJob, FakeWorkerGroup
from elasim.jobmodel import RescaleMode
from elasim.policies.registry import CLUSTER_KIND, describe_policies
from elasim.sim.cluster import run_cluster_loop
from elasim.traces import capacity_rows

INPLACE = RescaleMode.INPLACE  # what `elasim cluster run` re-forms by, by default

POLICIES = sorted(info.name for info in describe_policies(CLUSTER_KIND))
PLUGIN = "tests/data/plugin_cluster_policy.py:EveryoneOne"


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> str:
    """The first 40 jobs of Pollux's workload 3 (a few seconds per policy, not minutes)."""
    from elasim.traces.cluster import resolve_workload

    rows = resolve_workload("pollux-workload-3").read_text().splitlines()
    path = tmp_path_factory.mktemp("wl") / "w3-40.csv"
    path.write_text("\n".join(rows[:41]) + "\n")
    return str(path)


def _both(setup: ClusterSetup, time_scale: float, idle_poll_real_s: float = 1e9):
    """The simulator's loop and the executor's shell's, each read as its shell reads it."""
    rows, period = capacity_rows(setup.capacity)
    sim = build_loop(setup, capacity=rows, capacity_period_s=period)
    run_cluster_loop(sim)
    real = build_loop(setup, capacity=rows, capacity_period_s=period)
    drive_cluster(
        real,
        FakeClock(),
        time_scale=time_scale,
        max_wall_real_s=1e12,
        idle_poll_real_s=idle_poll_real_s,
    )
    return sim, real


def _assert_same(sim, real) -> None:
    assert sim.decisions and sim.finished and real.finished
    assert real.decisions == sim.decisions
    assert [j.events for j in real.jobs] == [j.events for j in sim.jobs]
    assert real.result().jobs == sim.result().jobs


@pytest.mark.parametrize("policy", [*POLICIES, PLUGIN])
@pytest.mark.parametrize("time_scale", [1.0, 60.0])
def test_cluster_run_shell_gives_the_simulators_decision_log_bit_for_bit(
    workload, policy, time_scale
):
    setup = ClusterSetup(workload=workload, policy=policy, num_nodes=4)
    _assert_same(*_both(setup, time_scale))


@pytest.mark.parametrize("policy", ["fifo", "pollux"])
def test_extra_turns_of_a_polling_shell_change_nothing(workload, policy):
    """Real workers are polled every 50 ms: turns between events must not matter."""
    setup = ClusterSetup(workload=workload, policy=policy, num_nodes=4)
    _assert_same(*_both(setup, 60.0, idle_poll_real_s=7.0))


#: 4 nodes, with drops that take nodes away (3, then 1) and rises that give them back,
#: over the 40 jobs' span (about 3 h); it repeats with its duration (11,000 s)
CAPACITY = [(0, 4), (1500, 3), (2600, 1), (4000, 4), (7000, 2), (9500, 4)]
CAPACITY_PERIOD_S = 11000.0


@pytest.fixture(scope="module")
def capacity(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("cap") / "drops.csv"
    rows = "".join(f"{t},{n}\n" for t, n in CAPACITY)
    path.write_text(f"# duration_s: {CAPACITY_PERIOD_S:g}\ntime_s,available\n{rows}")
    return str(path)


def _available(time_s: float) -> int:
    into = time_s % CAPACITY_PERIOD_S
    return [n for t, n in CAPACITY if t <= into + 1e-9][-1]


@pytest.mark.parametrize("policy", POLICIES)  # the plugin ignores available_nodes
def test_a_capacity_trace_gives_the_simulators_decision_log_bit_for_bit(workload, capacity, policy):
    """``cluster run --capacity``: drops preempt and rises give back, as simulated."""
    setup = ClusterSetup(workload=workload, policy=policy, num_nodes=4, capacity=capacity)
    sim, real = _both(setup, 60.0, idle_poll_real_s=7.0)
    _assert_same(sim, real)
    assert real.preemptions > 0 and real.preemptions == sim.preemptions
    for record in real.decisions:  # no placement on a node the trace took away
        usable = _available(record.time_s)
        for _name, placement in record.decision.allocations:
            assert all(node < usable for node, _ in placement), (record, usable)


def test_the_parity_check_can_fail(workload, tmp_path):
    """One arrival moved by one second gives another log."""
    rows = open(workload).read().splitlines()
    name, t, *rest = rows[5].split(",")
    rows[5] = ",".join([name, str(int(t) + 1), *rest])
    moved = tmp_path / "moved.csv"
    moved.write_text("\n".join(rows) + "\n")
    sim = build_loop(ClusterSetup(workload=workload, policy="fifo", num_nodes=4))
    run_cluster_loop(sim)
    real = build_loop(ClusterSetup(workload=str(moved), policy="fifo", num_nodes=4))
    drive_cluster(real, FakeClock(), time_scale=1.0, max_wall_real_s=1e12, idle_poll_real_s=1e9)
    assert real.decisions != sim.decisions


APPS = "tests/data/cluster_apps"


def _fake_groups(clock: FakeClock, step_s: float, made: dict):
    """Each job's worker group: a fake one whose steps take ``step_s / workers``."""

    def make(name, worker, cfg):
        group = FakeWorkerGroup(
            clock,
            step_time_s=lambda n: step_s / max(n, 1),
            global_batch=cfg.global_batch,
            max_steps=worker.max_steps,
        )
        group.max_progress = worker.max_progress
        made[name] = FakePooledJob(group, cfg, lambda: 0.0)
        return made[name]

    return make


def _run_on_fakes(tmp_path, rows, policy, slots, *, apps=APPS, options=None, step_s=0.07):
    """The jobs ``cluster run`` builds, over fake worker groups, on one node of ``slots``."""
    workload = tmp_path / "w.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\n" + "\n".join(rows))
    options = dict(options or {})
    setup = ClusterSetup(
        workload=str(workload), policy=policy, options=options, num_nodes=1,
        gpus_per_node=slots, applications=str(apps), rescale=INPLACE,
    )  # fmt: skip
    config = ClusterRunConfig(setup, slots=slots)
    clock, made = FakeClock(), {}
    groups = _fake_groups(clock, step_s, made)  # 0.07: about the applications' one-worker step
    loop = build_loop(setup, job_factory=job_factory(config, groups, slots))
    end, _ = drive_cluster(loop, clock, time_scale=1.0, max_wall_real_s=1e6)
    assert loop.finished and math.isfinite(end)
    return loop, made


SMALL = ["a,0,synth-160,2,128", "b,5,synth-40,1,128", "c,9,synth-160,3,128", "d,12,synth-40,2,128"]


@pytest.mark.parametrize("policy", [*POLICIES, PLUGIN])
def test_the_jobs_cluster_run_builds_keep_the_models_books_on_fake_worker_groups(tmp_path, policy):
    loop, made = _run_on_fakes(tmp_path, SMALL, policy, slots=4)
    assert len(made) == len(loop.jobs) == 4
    for job in loop.jobs:
        group = job.training.actuator
        # the workers stop at the model's target progress (gain-weighted steps)
        target = job.training.target_progress
        assert target == job.app.target_progress and group.group.max_progress == target
        assert job.done and group.group.progress().progress == pytest.approx(target)
        assert group.released
        granted = [q for q, _ in group.quotas if q]
        assert granted and all(p is None or sum(p.values()) == q for q, p in group.quotas)
        # the books a policy reads are the ones the placements say
        assert job.peak_gpus == max(granted), (job.name, job.peak_gpus, granted)
        starts = sum(1 for e in job.events if e.kind.value in ("scale_up", "scale_down", "resume"))
        assert job.restarts + 1 == starts
        assert job.attained_gpu_s > 0 and job.held_s > 0
    rows = loop.result().jobs
    assert all(r.finish_s is not None and r.jct_s > 0 for r in rows)


def test_fifo_gives_real_jobs_what_they_ask_and_queues_the_rest(tmp_path):
    loop, _ = _run_on_fakes(tmp_path, SMALL, "fifo", slots=4)
    for job in loop.jobs:
        assert job.peak_gpus == job.spec.requested_gpus
    by = {r.name: r for r in loop.result().jobs}
    # one node of 4 GPUs: c (3 GPUs) waits until a (2) and b (1) leave room
    assert by["c"].start_s >= min(by["a"].finish_s, by["b"].finish_s) - 1e-9


def _scaling_apps(tmp_path):
    """The measured test applications with *synthetic* ideal scaling (step time / workers).

    The measured ones were profiled on a loaded host where more workers barely helped,
    and there no policy should grow a job; this fixture is where one should.
    """
    import shutil

    apps = tmp_path / "apps"
    shutil.copytree(APPS, apps)
    for placements in apps.glob("*/placements.csv"):
        lines = placements.read_text().splitlines()
        one = float(lines[1].split(",")[2])
        rows = [lines[0]]
        for line in lines[1:]:
            n, bsz, _, sync = line.split(",")
            rows.append(f"{n},{bsz},{one / int(n)},{sync}")
        placements.write_text("\n".join(rows) + "\n")
    return apps


def test_pollux_grows_real_jobs_into_idle_slots(tmp_path):
    """The README's example under pollux on 4 slots: some job gets more than one slot.

    Pollux grows a job to at most twice the GPUs it has held (``peak_gpus``); a real
    job's peak stayed 0, so it never did.  With the observed rescale cost as the
    restart penalty (``restart_delay_s=0``; its 30 s default outweighs jobs of seconds)
    and applications that scale, the simulator grows ``j1`` to 2 GPUs here, pricing each
    change at the profiles' measured pauses, as the real run's loop does.
    """
    rows = open("examples/cluster_small.csv").read().splitlines()[1:]
    apps, options = _scaling_apps(tmp_path), {"restart_delay_s": "0"}
    # steps of 0.1 s on one worker (the profile's 0.07 s, and about 1 s of measured
    # start that a fake group, which starts at once, does not take): jobs of 4 and 16 s
    loop, _ = _run_on_fakes(tmp_path, rows, "pollux", 4, apps=apps, options=options, step_s=0.1)
    grown = [job for job in loop.jobs if job.peak_gpus > 1]
    assert grown, [d.decision for d in loop.decisions]
    for job in grown:
        assert max(q for q, _ in job.training.actuator.quotas) == job.peak_gpus
    sim = build_loop(
        ClusterSetup(workload=str(tmp_path / "w.csv"), policy="pollux", options=options,
                     num_nodes=1, gpus_per_node=4, applications=str(apps), rescale="inplace")
    )  # fmt: skip
    run_cluster_loop(sim)
    assert {j.name for j in sim.jobs if j.peak_gpus > 1} == {j.name for j in grown}


@pytest.mark.parametrize("policy", ["fifo", "pollux"])
def test_parity_holds_with_periodic_checkpoints_and_notices(workload, policy):
    """Checkpoints (Young/Daly ``auto``) and warned leaves: the same, bit for bit."""
    import dataclasses

    setup = ClusterSetup(
        workload=workload, policy=policy, num_nodes=4, checkpoint_interval_s=None, notice_s=120.0
    )
    capacity = ((0.0, 4), (1800.0, 1), (5400.0, 4), (9000.0, 2))
    sim = build_loop(setup, capacity=capacity, capacity_period_s=12000.0)
    run_cluster_loop(sim)
    real = build_loop(setup, capacity=capacity, capacity_period_s=12000.0)
    drive_cluster(real, FakeClock(), time_scale=60.0, max_wall_real_s=1e12, idle_poll_real_s=1e9)
    _assert_same(sim, real)
    kinds = {e.kind.value for j in sim.jobs for e in j.events}
    assert {"checkpoint", "preempt_notice", "preempt"} <= kinds
    off = build_loop(dataclasses.replace(setup, checkpoint_interval_s=math.inf, notice_s=0.0))
    run_cluster_loop(off)
    assert off.decisions != sim.decisions or [j.events for j in off.jobs] != [
        j.events for j in sim.jobs
    ]


def test_cluster_run_asks_its_workers_for_periodic_checkpoints(tmp_path):
    """``cluster run --checkpoint-interval-s``: the model's schedule, written by the group."""
    import dataclasses

    rows = ["a,0,synth-160,1,128"]
    workload = tmp_path / "w.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\n" + "\n".join(rows))
    setup = ClusterSetup(
        workload=str(workload), policy="fifo", num_nodes=1, gpus_per_node=1,
        applications=APPS, rescale=INPLACE, checkpoint_interval_s=2.0,
    )  # fmt: skip
    config = ClusterRunConfig(setup, slots=1)
    clock, made = FakeClock(), {}
    loop = build_loop(setup, job_factory=job_factory(config, _fake_groups(clock, 0.07, made), 1))
    drive_cluster(loop, clock, time_scale=1.0, max_wall_real_s=1e6)
    job = loop.jobs[0]
    writes = [e.time_s for e in job.events if e.kind.value == "checkpoint"]
    assert job.done and len(writes) >= 3
    gaps = [b - a for a, b in zip(writes, writes[1:], strict=False)]
    assert all(1.9 <= g <= 2.6 for g in gaps), gaps  # every 2 s of training, polled
    off = build_loop(
        dataclasses.replace(setup, checkpoint_interval_s=math.inf),
        job_factory=job_factory(config, _fake_groups(FakeClock(), 0.07, {}), 1),
    )
    assert off.jobs[0].schedule is None


class _Node:
    """A launcher of the pool: its slots drop to 0 when its host is gone (a Ray node)."""

    def __init__(self, name: str, slots: int) -> None:
        self.name, self.slots = name, slots

    def close(self) -> None:
        pass


def test_a_lost_host_is_a_capacity_drop_the_loop_hears_of(tmp_path):
    """``cluster run --launcher ray``: a dead Ray node preempts its jobs, never used again."""
    from elasim.executor.cluster import lose_hosts
    from elasim.executor.slots import SlotPool

    workload = tmp_path / "w.csv"
    rows = ["a,0,synth-160,2,128", "b,0,synth-160,2,128", "c,1,synth-40,2,128"]
    workload.write_text("name,time,application,num_replicas,batch_size\n" + "\n".join(rows))
    setup = ClusterSetup(
        workload=str(workload), policy="fifo", num_nodes=2, gpus_per_node=2,
        applications=APPS, rescale=INPLACE,
    )  # fmt: skip
    config = ClusterRunConfig(setup, slots=2)
    clock, made = FakeClock(), {}
    loop = build_loop(setup, job_factory=job_factory(config, _fake_groups(clock, 0.07, made), 4))
    nodes = [_Node("here", 2), _Node("there", 2)]
    pool = SlotPool(nodes)

    def on_turn(turned):
        if clock.now() >= 3.0:
            nodes[1].slots = 0  # the host of node 1 is gone
        lose_hosts(turned, pool)

    drive_cluster(loop, clock, time_scale=1.0, max_wall_real_s=1e6, on_turn=on_turn)
    assert loop.finished and loop.lost_from == 1 and loop.available_nodes == 1
    assert loop.preemptions == 1  # b was on node 1
    late = [r for r in loop.decisions if r.time_s >= 3.0]
    assert late and all(n == 0 for r in late for _, p in r.decision.allocations for n, _ in p)
    for job in loop.jobs:  # each reaches its target progress (gain-weighted steps)
        done = job.training.actuator.group.progress().progress
        assert job.done and done == pytest.approx(job.training.target_progress), job.name


def test_a_runs_loop_and_cluster_simulate_price_pauses_from_the_same_profiles():
    """``build_loop`` (both shells) takes the applications' measured pauses, not the preset."""
    setup = ClusterSetup(
        workload="examples/cluster_small.csv", policy="fifo", num_nodes=1, gpus_per_node=4,
        applications=APPS, rescale=INPLACE,
    )  # fmt: skip
    loop = build_loop(setup)
    pause_job = next(iter(loop._pause_job.values()))
    assert pause_job.measured_pause("inplace", 0, 1, False) is not None
