"""A cluster policy's batch size on real jobs, and the speed a policy sees (no torch).

* **Batches on the jobs ``cluster run`` builds.**  Over fake worker groups, under
  ``pollux`` with a profile measured at three batches
  (``tests/data/cluster_apps_2ms_batches``), each job's group is told the model's
  batch and AdaScale gain at each re-formation, the decision log records the batch
  each placed job trains with, and each job reaches the model's target progress.
* **A bad batch size from a plugin** is one log line naming the policy; the run goes
  on with the job's last good batch, in both shells (one validation path).
* **The fitted speed model** (``--speed-model fitted``): the fit recovers the
  parameters that made its samples, holds the unmeasured ones at the prior, and a
  simulation under it is a simulation like any other: both shells log the same
  decisions.
"""

from __future__ import annotations

import logging
import math

import pytest

from elasim.cluster import ClusterSetup, build_loop
from elasim.cluster.speed import SpeedFit, StepSample, ThroughputParams, fit_throughput
from elasim.executor.cluster import ClusterRunConfig, drive_cluster, job_factory
from elasim.executor.controller import FakeClock
from elasim.executor.fakes import FakePooledJob, FakeWorkerGroup
from elasim.jobmodel import RescaleMode
from elasim.sim.cluster import run_cluster_loop

APPS = "tests/data/cluster_apps_2ms_batches"
EXAMPLE = "examples/cluster_small.csv"
PLUGIN = "tests/data/plugin_cluster_policy.py:BadBatches"


def _on_fakes(policy: str, *, workload: str = EXAMPLE, speed_model: str = "oracle"):
    """The jobs ``cluster run`` builds, on fake worker groups (steps of 0.25 s / workers)."""
    setup = ClusterSetup(
        workload=workload, policy=policy, num_nodes=1, gpus_per_node=4, applications=APPS,
        rescale=RescaleMode.INPLACE, speed_model=speed_model,
    )  # fmt: skip
    config = ClusterRunConfig(setup, slots=4)
    clock, made = FakeClock(), {}

    def make(name, worker, cfg):
        group = FakeWorkerGroup(
            clock, step_time_s=lambda n: 0.25 / max(n, 1), global_batch=cfg.global_batch,
            max_steps=worker.max_steps,
        )  # fmt: skip
        group.max_progress = worker.max_progress
        made[name] = FakePooledJob(group, cfg, lambda: 0.0)
        return made[name]

    loop = build_loop(setup, job_factory=job_factory(config, make, 4))
    end, _ = drive_cluster(loop, clock, time_scale=1.0, max_wall_real_s=1e6)
    assert loop.finished and math.isfinite(end)
    return loop, made


def test_pollux_sets_real_jobs_batches_at_their_re_formations():
    loop, made = _on_fakes("pollux")
    changed = set()
    for job in loop.jobs:
        group = made[job.name].group
        assert job.done and group.progress().progress == pytest.approx(job.app.target_progress)
        plans = job.training.batches
        assert group.global_batch == plans[-1][1]  # the group was told
        assert plans and all(job.app.init_batch <= b <= job.app.max_batch for _, b, _ in plans)
        for _, batch, gain in plans:
            assert gain == pytest.approx(job.app.gain(batch, 0))
        if any(b != job.spec.requested_batch_size for _, b, _ in plans):
            changed.add(job.name)
    assert changed, [j.training.batches for j in loop.jobs]
    # the decision log says which batch each placed job trains with
    trained = {name: b for r in loop.decisions for name, b in r.trained_batches}
    assert {n for n, b in trained.items() if b != 128} == changed


def test_a_job_without_a_policy_batch_trains_at_the_models_batch_for_its_request():
    """fifo sets no batch: a job's 128 on 3 workers is 3 x 43 = 129, as the simulator has it."""
    loop, made = _on_fakes("fifo")
    for job in loop.jobs:
        shape = (job.spec.requested_gpus,)
        expected = job.app.configure(shape, 128, 0).batch_size
        assert [b for _, b, _ in job.training.batches] == [expected], job.name
        assert expected == (129 if shape == (3,) else 128)
        progress = made[job.name].group.progress()
        assert progress.progress == pytest.approx(job.app.target_progress)


@pytest.mark.parametrize("shell", ["sim", "fakes"])
def test_a_bad_batch_size_is_one_line_naming_the_policy_and_the_run_goes_on(shell, caplog):
    """BadBatches asks -5, 10**6, 2.5 and 0 for the first job: each is logged once."""
    caplog.set_level(logging.WARNING, logger="elasim.cluster.validate")
    if shell == "sim":
        loop = build_loop(
            ClusterSetup(workload=EXAMPLE, policy=PLUGIN, num_nodes=1, gpus_per_node=4,
                         applications=APPS)
        )  # fmt: skip
        run_cluster_loop(loop)
    else:
        loop, _ = _on_fakes(PLUGIN)
    assert loop.finished and all(job.done for job in loop.jobs)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines
    for bad, line in zip(("-5", "1000000", "2.5", "0"), lines, strict=True):
        assert "bad_batches" in line and f"is {bad};" in line and "keeps 256" in line
    # the job kept its last good batch (256) through the bad ones
    first = loop.jobs[0].name
    asked = [dict(r.decision.batch_sizes).get(first) for r in loop.decisions]
    assert asked[:5] == [256, 256, 256, 256, 256], asked


def test_an_adaptive_policys_bool_batch_is_a_line_too(caplog):
    """0 is an adaptive policy's batch; False is not, though it equals 0."""
    caplog.set_level(logging.WARNING, logger="elasim.cluster.validate")
    loop = build_loop(
        ClusterSetup(workload=EXAMPLE, policy=PLUGIN.replace("BadBatches", "AdaptiveBadBatches"),
                     num_nodes=1, gpus_per_node=4, applications=APPS)
    )  # fmt: skip
    run_cluster_loop(loop)
    assert loop.finished
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "adaptive_bad_batches" in lines[0] and "is False;" in lines[0], lines


def test_the_fit_recovers_its_parameters_and_holds_the_blind_ones_at_the_prior():
    truth = ThroughputParams(alpha_c=0.01, beta_c=0.002, alpha_r=0.02, beta_r=0.005)
    samples = [StepSample(r, m, truth.step_s(r, m)) for r in (1, 2, 3, 4) for m in (32, 64, 128)]
    fitted = fit_throughput(samples, ThroughputParams(beta_c=0.001, alpha_n=0.5))
    for name in ("alpha_c", "beta_c", "alpha_r", "beta_r"):
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=1e-3), name
    assert fitted.alpha_n == pytest.approx(0.5) and fitted.beta_n == 0.0  # never across nodes
    # one replica count, one batch: the data pin one line, the prior picks the point
    one = fit_throughput([StepSample(1, 128, 0.26)], ThroughputParams(beta_c=0.26 / 128))
    assert one.step_s(1, 128) == pytest.approx(0.26) and one.alpha_r == 0.0


def test_a_fit_stands_on_the_profile_until_the_job_measured_a_step():
    loop = build_loop(ClusterSetup(workload=EXAMPLE, policy="pollux", applications=APPS,
                                   num_nodes=1, gpus_per_node=4, speed_model="fitted"))  # fmt: skip
    job = loop.jobs[0]
    assert isinstance(job.fit, SpeedFit) and job.speed_app() is job.app
    job.fit.steps([StepSample(1, 128.0, 0.5)])  # twice the profile's step
    model = job.speed_app()
    assert model is not job.app and model.step_time((1,), 128)[0] == pytest.approx(0.5)
    assert model.grad_stats(128, 0) == job.app.grad_stats(128, 0)  # none estimated yet
    job.fit.gradients(1.0, 3.0)
    assert job.speed_app().grad_stats(512, 0) == (1.0, 3.0)


def test_a_fitted_simulation_gives_both_shells_the_same_decisions(tmp_path):
    from elasim.traces.cluster import resolve_workload

    rows = resolve_workload("pollux-workload-3").read_text().splitlines()
    workload = tmp_path / "w3-20.csv"
    workload.write_text("\n".join(rows[:21]) + "\n")
    setup = ClusterSetup(workload=str(workload), policy="pollux", num_nodes=2,
                         speed_model="fitted")  # fmt: skip
    sim = build_loop(setup)
    run_cluster_loop(sim)
    real = build_loop(setup)
    drive_cluster(real, FakeClock(), time_scale=60.0, max_wall_real_s=1e12, idle_poll_real_s=1e9)
    assert sim.finished and real.decisions == sim.decisions
    assert any(job.fit.samples for job in sim.jobs)
    oracle = build_loop(ClusterSetup(workload=str(workload), policy="pollux", num_nodes=2))
    run_cluster_loop(oracle)
    assert oracle.decisions != sim.decisions  # the fit is what the policy saw


def test_an_unknown_speed_model_is_one_line():
    with pytest.raises(ValueError, match="--speed-model must be one of oracle, fitted"):
        ClusterSetup(workload=EXAMPLE, policy="pollux", speed_model="psychic")


def test_the_fits_smoothing_is_the_noise_scales():
    from elasim.cluster.speed import SMOOTHING
    from elasim.noise_scale import DEFAULT_SMOOTHING

    assert SMOOTHING == DEFAULT_SMOOTHING
