"""The gradient noise scale: the estimator, a run's figure, the profile and the simulator."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_profile import make_profile

from elasim.noise_scale import (
    PooledNoiseScale,
    harmonic_batch,
    noise_scale_of_steps,
    run_noise_scale,
    smoothed_noise_scale,
    two_batch_estimates,
)
from elasim.profile import (
    ProfileError,
    apply_profile,
    describe_profile,
    load_profile,
    save_profile,
)


def synthetic_norms(
    true_grad: np.ndarray, noise_sd: float, workers: int, local: int, steps: int, seed: int = 0
) -> tuple[list[float], list[float]]:
    """Squared norms a data-parallel step sees when per-sample gradients are
    ``true_grad + N(0, noise_sd^2 I)``: each worker's mean and the all-reduced mean."""
    rng = np.random.default_rng(seed)
    small, big = [], []
    dim = len(true_grad)
    for _ in range(steps):
        # a mean of `local` samples has noise of variance noise_sd^2 / local
        means = true_grad + rng.normal(0.0, noise_sd / math.sqrt(local), (workers, dim))
        small.append(float((means**2).sum(axis=1).mean()))
        big.append(float((means.mean(axis=0) ** 2).sum()))
    return small, big


def test_two_batch_estimator_recovers_a_known_noise_scale():
    dim, noise_sd = 50, 2.0
    true_grad = np.full(dim, 0.1)  # |G|^2 = 0.5, tr(Sigma) = 200: B_noise = 400
    small, big = synthetic_norms(true_grad, noise_sd, workers=4, local=32, steps=4000)
    estimates = [two_batch_estimates(s, b, 32, 128) for s, b in zip(small, big, strict=True)]
    grad_sq = [g for g, _ in estimates]
    trace = [t for _, t in estimates]
    # each estimate is unbiased; their means converge on the truth
    assert np.mean(grad_sq) == pytest.approx(0.5, rel=0.05)
    assert np.mean(trace) == pytest.approx(200.0, rel=0.02)
    run = run_noise_scale(grad_sq, trace, [128.0] * len(grad_sq))
    assert run.b_noise_samples == pytest.approx(400.0, rel=0.1)
    assert run.final_b_noise_samples == pytest.approx(400.0, rel=0.5)  # one window: noisy
    assert run.steps == 4000 and run.progress_steps > 0


def test_one_worker_has_no_estimate():
    assert all(math.isnan(v) for v in two_batch_estimates(1.0, 1.0, 64, 64))
    assert all(math.isnan(v) for v in two_batch_estimates(math.nan, 1.0, 32, 64))
    run = run_noise_scale([math.nan] * 3, [math.nan] * 3, [64.0] * 3)
    assert math.isnan(run.b_noise_samples) and run.steps == 0
    assert smoothed_noise_scale([math.nan, 1.0], [math.nan, 5.0]) == [
        pytest.approx(math.nan, nan_ok=True),
        pytest.approx(5.0),
    ]


def test_uneven_shards_act_as_their_harmonic_mean():
    assert harmonic_batch([32, 32]) == 32
    assert harmonic_batch([2, 6, 0]) == pytest.approx(3.0)  # the empty shard is left out
    assert math.isnan(harmonic_batch([0, 0]))


def test_a_growing_noise_scale_is_averaged_over_progress():
    # B_noise 100 for the first half of the steps, 1000 for the second; at B = 100 a
    # step in the first half makes 1/2 of an infinite-batch step, in the second 1/11
    steps = 400
    grad_sq = [1.0] * (steps // 2) + [0.1] * (steps // 2)
    trace = [100.0] * steps
    run = run_noise_scale(grad_sq, trace, [100.0] * steps, smoothing=0.0)
    expected = (0.5 * 100 + (1 / 11) * 1000) / (0.5 + 1 / 11)
    assert run.b_noise_samples == pytest.approx(expected, rel=1e-9)
    assert run.final_b_noise_samples == pytest.approx(1000.0)
    # pooling two runs weights each by its progress
    a = PooledNoiseScale(100.0, 3.0, 10)
    b = PooledNoiseScale(400.0, 1.0, 5)
    assert a.plus(b) == PooledNoiseScale(175.0, 4.0, 15)
    assert PooledNoiseScale().plus(b) == b


def test_noise_scale_of_a_steps_frame_and_of_an_old_one():
    small, big = synthetic_norms(np.full(10, 0.2), 1.0, workers=2, local=16, steps=500)
    estimates = [two_batch_estimates(s, b, 16, 32) for s, b in zip(small, big, strict=True)]
    frame = pd.DataFrame(
        {
            "time_s": np.arange(500.0),
            "samples": [32] * 500,
            "gns_grad_sq": [g for g, _ in estimates],
            "gns_noise_trace": [t for _, t in estimates],
        }
    )
    measured = noise_scale_of_steps(frame)
    assert measured.b_noise_samples == pytest.approx(10 / 0.4, rel=0.15) and measured.steps == 500
    old = noise_scale_of_steps(frame.drop(columns=["gns_grad_sq", "gns_noise_trace"]))
    assert math.isnan(old.b_noise_samples) and old.progress_steps == 0


def test_profile_round_trip_with_and_without_the_noise_scale(tmp_path: Path):
    without = make_profile()
    path = save_profile(without, tmp_path / "old.json")
    assert "gradient_noise_scale" not in json.loads(path.read_text())  # old files stay old
    assert load_profile(path) == without and without.gradient_noise_scale is None
    measured = dataclasses.replace(without, gradient_noise_scale=180.0)
    path = save_profile(measured, tmp_path / "new.json")
    assert load_profile(path) == measured
    assert dict(describe_profile(measured))["gradient noise scale B_noise (samples)"] == "180"
    assert dict(describe_profile(without))["gradient noise scale B_noise (samples)"] == (
        "not measured"
    )
    data = measured.to_json() | {"gradient_noise_scale": -1.0}
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ProfileError, match="bad.json: gradient_noise_scale must be >= 0"):
        load_profile(tmp_path / "bad.json")


def test_apply_profile_takes_the_measured_noise_scale():
    measured = dataclasses.replace(make_profile(), gradient_noise_scale=192.0)
    fixed = apply_profile(measured)
    assert fixed.batch.gradient_noise_scale == 192.0
    assert fixed.efficiency_table(4) == (1.0,) * 5  # a fixed global batch costs nothing
    scaled = apply_profile(measured, batch="scaled")
    # each worker keeps the profiled batch of 64: B = 64 n, B0 = 64
    assert scaled.global_batch(3) == 192
    assert scaled.statistical_efficiency(3) == pytest.approx((192 + 64) / (192 + 192))
    with pytest.raises(ProfileError, match="no measured|has none"):
        apply_profile(make_profile(), batch="scaled")


def test_cli_simulate_prices_a_scaled_batch_with_the_measured_noise_scale(tmp_path: Path):
    from typer.testing import CliRunner

    from elasim.cli import app

    runner = CliRunner()
    costs = {}
    for b_noise in (50.0, 5000.0):
        profile = dataclasses.replace(make_profile(), gradient_noise_scale=b_noise)
        path = save_profile(profile, tmp_path / f"p{b_noise:g}.json")
        args = ["simulate", "-t", "spot_p3_bamboo.csv", "--profile", str(path)]
        args += ["--target-samples", "1e7", "--json"]
        fixed = runner.invoke(app, args)
        assert fixed.exit_code == 0, fixed.output
        assert json.loads(fixed.stdout)["convergence_cost_h"] == 0.0
        result = runner.invoke(app, [*args, "--batch", "scaled"])
        assert result.exit_code == 0, result.output
        costs[b_noise] = json.loads(result.stdout)["convergence_cost_h"]
    # a larger noise scale makes large batches nearly as good as small ones
    assert costs[50.0] > costs[5000.0] > 0.0
    result = runner.invoke(app, ["simulate", "-t", "spot_p3_bamboo.csv", "--batch", "scaled"])
    assert result.exit_code == 2 and "--batch applies to a --profile" in result.stderr
