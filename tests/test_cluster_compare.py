"""Cluster run vs simulation: the per-job join, the error summary, the measured pauses."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from elasim.cluster import ClusterSetup, build_loop
from elasim.cluster.compare import compare_jobs, jct_errors
from elasim.cluster.pauses import measured_pause_job
from elasim.cluster.results import JobResult
from elasim.job import load_job
from elasim.jobmodel import RescaleMode
from elasim.policies import JobState
from elasim.sim.cluster import run_cluster_loop

APPS = "tests/data/cluster_apps"


def _row(name: str, arrival: float, start: float | None, finish: float | None) -> JobResult:
    jct = None if finish is None else finish - arrival
    return JobResult(name, "app", arrival, start, finish, jct, 1.0, 0, 128, 1.0, 0.0)


def test_rows_are_joined_by_name_and_errors_are_relative_to_the_real_jct():
    real = [_row("a", 0, 0, 10), _row("b", 1, 2, 21), _row("c", 2, None, None)]
    sim = [_row("b", 1, 1, 16), _row("a", 0, 0, 12), _row("c", 2, 3, 9)]
    rows = {r.name: r for r in compare_jobs(real, sim)}
    assert rows["a"].error == pytest.approx(0.2) and rows["b"].error == pytest.approx(-0.25)
    assert rows["c"].error is None  # not finished on real workers
    summary = jct_errors(list(rows.values()))
    assert summary["jobs_compared"] == 2
    assert summary["real_avg_jct_s"] == pytest.approx(15.0)
    assert summary["sim_avg_jct_s"] == pytest.approx(13.5)
    assert summary["avg_jct_error"] == pytest.approx(-0.1)
    assert summary["median_abs_job_error"] == pytest.approx(0.225)
    assert summary["max_abs_job_error"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="different jobs"):
        compare_jobs(real, sim[:2])
    assert jct_errors([]) == {"jobs_compared": 0}


def test_measured_pauses_replace_the_preset_where_measured(tmp_path):
    job = measured_pause_job("resnet50_v100", APPS, ["synth-40"])
    start = job.measured_pause("inplace", 0, 1, False)
    rows = json.loads(open(f"{APPS}/synth-40/pauses.json").read())
    first = next(r for r in rows if (r["before"], r["after"]) == (0, 1))
    assert start is not None and start.acquire_s == first["acquire_s"] > 0
    assert job.measured_pause("inplace", 4, 1, False) is None  # not measured: the model
    assert measured_pause_job("resnet50_v100", None, ["x"]).pause_table == ()
    broken = tmp_path / "app"
    broken.mkdir()
    (broken / "pauses.json").write_text('[{"mode": "inplace"}]')
    with pytest.raises(ValueError, match="pauses.json: not a pause table"):
        measured_pause_job("resnet50_v100", tmp_path, ["app"])


def _example(policy: str = "fifo", applications: str = APPS) -> ClusterSetup:
    """The README's example on one node of 4 slots, re-formed in place."""
    return ClusterSetup(
        workload="examples/cluster_small.csv", policy=policy, num_nodes=1, gpus_per_node=4,
        rescale=RescaleMode.INPLACE, applications=applications,
    )  # fmt: skip


def test_cluster_simulate_with_measured_profiles_takes_their_pauses(tmp_path):
    """A setup whose applications have ``pauses.json`` is priced by them, nothing else.

    The same simulation as the preset completed by hand with the measured table, and
    not the preset's own figures: so ``cluster simulate --applications`` and a run's
    ``--compare`` give the same numbers.
    """
    setup = _example()
    pause_job = measured_pause_job("resnet50_v100", APPS, ["synth-160", "synth-40"])
    by_hand = build_loop(dataclasses.replace(setup, pause_job=pause_job))
    run_cluster_loop(by_hand)
    import shutil

    unmeasured = tmp_path / "apps"
    shutil.copytree(APPS, unmeasured)
    for pauses in unmeasured.glob("*/pauses.json"):
        pauses.unlink()
    plain = build_loop(dataclasses.replace(setup, applications=str(unmeasured)))
    run_cluster_loop(plain)
    measured = build_loop(setup)
    run_cluster_loop(measured)
    rows = [dataclasses.astuple(r) for r in measured.result().jobs]
    assert rows == [dataclasses.astuple(r) for r in by_hand.result().jobs]
    assert rows != [dataclasses.astuple(r) for r in plain.result().jobs]  # the preset's
    assert all(r.jct_s is not None and math.isfinite(r.jct_s) for r in measured.result().jobs)


def test_a_restart_is_priced_as_the_measured_start_of_its_new_size():
    """Calibration measures starts, not restarts: a restart ``b -> a`` is a start ``0 -> a``.

    Without it, every change of a ``--rescale restart`` run (its first start too) fell to
    the preset: the README's example under pollux simulated 45 s of pauses against
    6.8 s real.
    """
    job = measured_pause_job("resnet50_v100", APPS, ["synth-160", "synth-40"])
    for before in range(0, 5):
        for after in range(1, 5):
            if before != after:
                assert job.measured_pause("restart", before, after, False) == job.measured_pause(
                    "inplace", 0, after, False
                ), (before, after)
    setup = dataclasses.replace(_example("pollux"), rescale=RescaleMode.RESTART)
    loop = build_loop(dataclasses.replace(setup, options={"restart_delay_s": "0"}))
    run_cluster_loop(loop)
    starts = {e.pause_s for j in loop.jobs for e in j.events if e.nodes_after > 0 and e.pause_s}
    measured = {job.measured_pause("inplace", 0, a, False).pause_s for a in range(1, 5)}
    assert starts and starts <= measured, (starts, measured)


def test_the_comparison_is_cluster_simulate_of_what_the_loop_ran():
    """No model of its own (issue 22): ``--compare`` simulates the run's own setup.

    A "run" whose rows are ``cluster simulate``'s rows of its setup compares with no
    error at all, for the batch-choosing policies too; any other simulation (another
    pause model, shape or policy) would not.
    """
    from types import SimpleNamespace

    from elasim.cli.cluster_run import _compare
    from elasim.sim.cluster import simulate_cluster

    for policy in ("pollux", "srtf", "fifo"):
        setup = _example(policy)
        run = SimpleNamespace(setup=setup, result=simulate_cluster(setup, record_timeline=False))
        rows, errors, warning = _compare(run)
        assert len(rows) == 4 and warning is None, policy
        assert all(r.error == 0.0 for r in rows), (policy, rows)
        assert errors["avg_jct_error"] == 0.0, (policy, errors)


def test_the_comparison_trains_at_the_policys_batches_as_real_jobs_do():
    """With profiles at several batches, pollux's batch is applied on both sides.

    Real jobs take the policy's batch at each re-formation (issue 22, items 1-2), so the
    comparison's simulation must too (no fixed-batch model): its rows are those of a
    loop whose decisions train the jobs at the batches the real jobs train at, not at
    their requested 128.
    """
    from test_cluster_batches import _on_fakes

    from elasim.sim.cluster import simulate_cluster

    setup = _example("pollux", "tests/data/cluster_apps_2ms_batches")
    result = simulate_cluster(setup, record_timeline=False)
    loop = build_loop(setup)
    run_cluster_loop(loop)
    assert [dataclasses.astuple(r) for r in result.jobs] == [
        dataclasses.astuple(r) for r in loop.result().jobs
    ]
    simulated = {name: b for r in loop.decisions for name, b in r.trained_batches}
    real, _ = _on_fakes("pollux")
    trained = {name: b for r in real.decisions for name, b in r.trained_batches}
    assert {n for n, b in simulated.items() if b != 128}, simulated
    assert {n for n, b in simulated.items() if b != 128} == {
        n for n, b in trained.items() if b != 128
    }


def test_unmeasured_transitions_are_priced_like_the_nearest_measured_one_of_their_kind():
    from elasim.cluster.pauses import _fill_gaps
    from elasim.policies import PauseComponents

    start, grow, shrink = (PauseComponents(acquire_s=s) for s in (1.0, 0.01, 0.02))
    table = {
        ("inplace", 0, 1, False): start,
        ("inplace", 1, 2, False): grow,
        ("inplace", 3, 2, False): shrink,
    }
    filled = _fill_gaps(table)
    assert filled[("inplace", 0, 3, False)] is start  # a start from nothing
    assert filled[("inplace", 1, 3, False)] is grow and filled[("inplace", 2, 3, False)] is grow
    assert filled[("inplace", 3, 1, False)] is shrink and filled[("inplace", 2, 1, False)] is shrink
    assert ("inplace", 2, 2, False) not in filled  # not a change
    assert {k: filled[k] for k in table} == table  # what was measured stays


def _pair(name, real_jct, sim_jct):
    return JobResult(
        name=name, application="a", arrival_s=0.0, start_s=0.0, finish_s=real_jct,
        jct_s=real_jct, gpu_s=0.0, rescales=0, final_batch_size=1, running_s=real_jct - 1.0,
        rescale_s=1.0,
    ), JobResult(
        name=name, application="a", arrival_s=0.0, start_s=0.0, finish_s=sim_jct,
        jct_s=sim_jct, gpu_s=0.0, rescales=0, final_batch_size=1, running_s=1.0,
        rescale_s=sim_jct - 1.0,
    )  # fmt: skip


def test_an_error_beyond_the_bounds_is_one_line_saying_where_and_why():
    from elasim.cluster.compare import explain_gap

    close = [_pair("a", 10.0, 10.5), _pair("b", 20.0, 21.0)]
    real, sim = [r for r, _ in close], [s for _, s in close]
    assert explain_gap(compare_jobs(real, sim), real, sim) is None
    # the newcomer's case: the simulation twice as long, all of it in the pauses
    far = [_pair("a", 7.4, 15.3), _pair("b", 7.4, 15.3)]
    real, sim = [r for r, _ in far], [s for _, s in far]
    line = explain_gap(compare_jobs(real, sim), real, sim, load_avg=3.5, cores=2)
    assert line is not None and "\n" not in line
    assert "+107%" in line and "pauses" in line and "cold starts" in line
    assert "load average 3.5 on 2 cores" in line


def test_calibration_visits_every_change_between_sizes():
    pytest.importorskip("torch")
    from elasim.executor.cluster_profile import tour

    for slots in (1, 2, 4):
        sizes = tour(slots)
        changes = set(zip([slots, *sizes], sizes, strict=False))
        wanted = {(a, b) for a in range(1, slots + 1) for b in range(1, slots + 1) if a != b}
        assert changes >= wanted and all(a != b for a, b in changes)


def test_calibration_times_every_size_in_interleaved_rounds(monkeypatch):
    """Each size's steps come from every pass over 1..slots, not from one spell of the host."""
    pytest.importorskip("torch")
    from types import SimpleNamespace

    from elasim.executor import cluster_profile as cp

    class Group:
        size, records = 0, []

        def held(self):
            return [self.size]

        def step_records(self):
            return tuple(self.records)

        def progress(self):
            return SimpleNamespace(step=len(self.records))

    class Job:
        group, visits = Group(), []

        def apply(self, size, *_):
            if not self.visits or self.visits[-1] != size:
                self.visits.append(size)
            self.group.size = size
            return []

        def poll(self, _now):  # one step at the size held, at batch 128
            self.group.records.append(SimpleNamespace(world_size=self.group.size, samples=128))
            return []

    monkeypatch.setattr(cp.time, "sleep", lambda _s: None)
    job = Job()
    cp._step_through_sizes(job, 0.0, slots=4, steps=200, steps_per_size=40, timeout_s=1e9)
    assert job.visits == cp.size_rounds(4) == [1, 2, 3, 4] * cp.MEASURE_ROUNDS
    per_size = [sum(1 for r in job.group.records if r.world_size == n) for n in (1, 2, 3)]
    assert min(per_size) > 40 and len(job.group.records) >= 200
    # the transitions' tour is the same loop, one timed step per visit
    visits, records = len(job.visits), len(job.group.records)
    cp._tour_transitions(job, 0.0, slots=4, timeout_s=1e9)
    assert job.visits[visits:] == cp.tour(4)
    assert len(job.group.records) - records == 2 * len(cp.tour(4))  # one held, one timed


def test_a_growth_waits_for_its_newcomers_while_the_old_group_trains():
    """With a measured start, newcomers join after it, as real workers do (in place)."""
    from elasim.cluster.setup import load_applications
    from elasim.cluster.training import model_job
    from elasim.traces.cluster import WorkloadJob

    pause_job = measured_pause_job("resnet50_v100", APPS, ["synth-160"])
    start_s = pause_job.measured_pause("inplace", 0, 1, False).acquire_s
    grow = pause_job.measured_pause("inplace", 1, 2, False).pause_s
    app = load_applications(["synth-160"], APPS)["synth-160"]
    spec = WorkloadJob(name="j", arrival_s=0.0, application="synth-160", requested_gpus=1,
                       requested_batch_size=128)  # fmt: skip
    job = model_job(spec, app, pause_job, RescaleMode.INPLACE, 4)
    job.reallocate(((0, 1),), 0.0)
    job.advance(10.0)
    one = app.choose((1,), job.batch_target, 0).goodput
    job.reallocate(((0, 2),), 10.0)
    before = job.progress
    job.advance(10.0 + start_s / 2)  # the newcomer is starting: one worker trains on
    assert job.state is JobState.RUNNING
    assert job.progress - before == pytest.approx(one * start_s / 2)
    job.advance(10.0 + start_s + grow / 2)  # then the group re-forms
    assert job.state is JobState.RESCALING
    assert job.progress - before == pytest.approx(one * start_s)
    plain = model_job(spec, app, load_job("resnet50_v100"), RescaleMode.INPLACE, 4)
    assert plain.training.newcomer_start_s == 0.0  # no measured start: at once, as before
