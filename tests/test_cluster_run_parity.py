"""``elasim cluster run``'s shell runs the simulator's cluster loop bit for bit (no torch).

The executor drives :class:`elasim.cluster.ClusterLoop` with its own shell
(:func:`elasim.executor.cluster.drive_cluster`: a real or fake clock, scaled); the
simulator drives the same loop with SimPy.  With a fake clock and the simulator's own
job model as the fake worker groups (as :class:`~elasim.executor.fakes.FluidWorkerGroup`
is for one job), the two decision logs, every job's events and every per-job row
must be equal bit for bit, for every registered cluster policy and a user plugin.

The real side's job (:class:`~elasim.executor.cluster.PooledClusterJob`) is then run
on fake worker groups (:class:`~elasim.executor.fakes.FakeWorkerGroup`): every job
reaches its target steps, and the quotas follow the placements.
"""

from __future__ import annotations

import math

import pytest

import elasim.policies.cluster  # noqa: F401 - registers the built-ins
from elasim.cluster import ClusterSetup, build_loop
from elasim.executor.cluster import PooledClusterJob, drive_cluster
from elasim.executor.controller import ControllerConfig, FakeClock
from elasim.executor.fakes import FakePooledJob, FakeWorkerGroup
from elasim.policies.registry import CLUSTER_KIND, describe_policies
from elasim.sim.cluster import run_cluster_loop

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
    sim = build_loop(setup)
    run_cluster_loop(sim)
    real = build_loop(setup)
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


def _fake_factory(clock, step_s: float, made: list):
    """PooledClusterJobs over fake worker groups whose steps take ``step_s`` fake s."""

    def make(spec, app, pause_job, mode, gpus_per_node):
        steps = int(round(app.target_progress))
        group = FakeWorkerGroup(
            clock, step_time_s=lambda n: step_s / n, global_batch=64, max_steps=steps
        )
        config = ControllerConfig(time_scale=1.0, max_steps=steps, max_nodes=16)
        actuator = FakePooledJob(group, config, lambda: 0.0)
        job = PooledClusterJob(spec, app, pause_job, mode, gpus_per_node, actuator=actuator)
        made.append(job)
        return job

    return make


def test_real_jobs_on_fake_groups_reach_their_target_and_follow_the_placements(tmp_path):
    workload = tmp_path / "small.csv"
    workload.write_text(
        "name,time,application,num_replicas,batch_size\n"
        "a,0,ncf,2,256\nb,5,ncf,1,256\nc,9,ncf,4,256\n"
    )
    clock = FakeClock()
    made: list[PooledClusterJob] = []
    setup = ClusterSetup(workload=str(workload), policy="fifo", num_nodes=1)
    loop = build_loop(setup, job_factory=_fake_factory(clock, 0.004, made))
    end, wall = drive_cluster(loop, clock, time_scale=1.0, max_wall_real_s=1e6)
    assert loop.finished and math.isfinite(end)
    for job in made:
        assert job.done and job.steps == job.target_steps == job.actuator.group.max_steps
        assert job.actuator.released
        granted = [q for q, _ in job.actuator.quotas]
        assert max(granted) == job.spec.requested_gpus  # fifo: the requested GPUs
        assert all(p is None or sum(p.values()) == q for q, p in job.actuator.quotas)
    rows = loop.result().jobs
    assert all(r.finish_s is not None and r.jct_s > 0 for r in rows)
    # one node of 4 GPUs: c (4 GPUs) waits until a and b are done
    by = {r.name: r for r in rows}
    assert by["c"].start_s >= max(by["a"].finish_s, by["b"].finish_s) - 1e-9
