"""The gradient noise scale, from squared gradient norms at two batch sizes.

The simulator prices a larger global batch with the gradient-noise-scale model of
McCandlish et al. (2018, "An Empirical Model of Large-Batch Training"): a sample at
global batch ``B`` is worth ``(B_noise + B0) / (B_noise + B)`` reference samples.
``B_noise = tr(Sigma) / |G|^2`` (their "simple" noise scale ``B_simple``) is the
ratio of the per-sample gradient noise to the squared true gradient.

Neither quantity is observable in one step, but data-parallel training sees the
gradient at two batch sizes for free: each worker's local gradient (batch
``B_small``) and the all-reduced one (``B_big``).  Since ``E|G_B|^2 = |G|^2 +
tr(Sigma) / B``, two batch sizes give unbiased estimates of both (their appendix
A.1, the estimator Pollux uses)::

    |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)

Each step's estimates are very noisy (``|G|^2`` is often negative), so a ratio of
one step's estimates means nothing: like Pollux we smooth the two estimates
*separately* (a bias-corrected exponential moving average) and only then divide.

A run's single ``B_noise`` (what a profile carries) must also account for the noise
scale growing as training goes on.  Under the model, a step at batch ``B`` makes
``1 / (1 + B_noise(t) / B)`` of the progress of a step at infinite batch, and the
samples to a target are ``E_min + S_min B`` with ``E_min / S_min`` the average of
``B_noise(t)`` over that progress.  :func:`run_noise_scale` therefore averages the
smoothed trajectory with those weights (steps in the early, low-noise phase count
more per step than late ones).

Pure Python (no numpy, no torch, no pandas import; a frame is read by column): the
executor computes the squared norms, this module does the arithmetic for both the
executor and ``elasim calibrate``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_SMOOTHING",
    "PooledNoiseScale",
    "RunNoiseScale",
    "harmonic_batch",
    "noise_scale_of_steps",
    "run_noise_scale",
    "smoothed_noise_scale",
    "two_batch_estimates",
]

#: Decay of the moving averages (about a 20-step window): long enough to tame the
#: per-step noise of a 2-worker estimate, short enough to follow the growth of the
#: noise scale over a run of a few hundred steps.
DEFAULT_SMOOTHING = 0.95


def harmonic_batch(shard_sizes: Iterable[int]) -> float:
    """The small batch of the estimator when workers hold shards of unequal size.

    ``E[mean_i |G_i|^2] = |G|^2 + tr(Sigma) mean_i(1 / b_i)``, so uneven shards act
    as one batch of their harmonic mean.  Empty shards hold no gradient and are left
    out (NaN when none is left).
    """
    sizes = [int(s) for s in shard_sizes if int(s) > 0]
    if not sizes:
        return math.nan
    return len(sizes) / sum(1.0 / s for s in sizes)


def two_batch_estimates(
    grad_sq_small: float, grad_sq_big: float, batch_small: float, batch_big: float
) -> tuple[float, float]:
    """Unbiased estimates of ``|G|^2`` and ``tr(Sigma)`` from one step (McCandlish A.1).

    Args:
        grad_sq_small: mean over workers of the squared norm of each worker's own
            mean gradient (batch ``batch_small``).
        grad_sq_big: squared norm of the all-reduced mean gradient.
        batch_small: samples behind each small gradient (:func:`harmonic_batch`).
        batch_big: samples behind the all-reduced gradient.

    Returns:
        ``(grad_sq, noise_trace)``; both NaN when the two batches are not distinct
        (one worker: the local gradient *is* the global one).
    """
    values = (grad_sq_small, grad_sq_big, batch_small, batch_big)
    if not all(math.isfinite(v) for v in values) or not batch_big > batch_small > 0:
        return math.nan, math.nan
    grad_sq = (batch_big * grad_sq_big - batch_small * grad_sq_small) / (batch_big - batch_small)
    noise_trace = (grad_sq_small - grad_sq_big) / (1.0 / batch_small - 1.0 / batch_big)
    return grad_sq, noise_trace


def smoothed_noise_scale(
    grad_sq: Sequence[float], noise_trace: Sequence[float], smoothing: float = DEFAULT_SMOOTHING
) -> list[float]:
    """``B_noise`` after each step: bias-corrected moving averages, then their ratio.

    Steps without an estimate (NaN: one worker) leave the averages as they were.  A
    step before any estimate, or whose averaged ``|G|^2`` is not positive (the true
    gradient is lost in the noise), has NaN.
    """
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    out: list[float] = []
    sum_g = sum_s = weight = 0.0
    for g, s in zip(grad_sq, noise_trace, strict=True):
        if math.isfinite(g) and math.isfinite(s):
            sum_g = smoothing * sum_g + (1.0 - smoothing) * g
            sum_s = smoothing * sum_s + (1.0 - smoothing) * s
            weight = smoothing * weight + (1.0 - smoothing)
        if weight > 0 and sum_g > 0:
            out.append(max(sum_s, 0.0) / sum_g)  # the weight cancels in the ratio
        else:
            out.append(math.nan)
    return out


@dataclass(frozen=True)
class RunNoiseScale:
    """A run's gradient noise scale.

    Attributes:
        b_noise_samples: progress-weighted mean of the smoothed ``B_noise`` (samples).
        final_b_noise_samples: the smoothed value at the last step (Pollux's view).
        progress_steps: the run's progress in infinite-batch steps (the weights' sum).
        steps: steps that carried an estimate.
    """

    b_noise_samples: float
    final_b_noise_samples: float
    progress_steps: float
    steps: int


def run_noise_scale(
    grad_sq: Sequence[float],
    noise_trace: Sequence[float],
    batch: Sequence[float],
    smoothing: float = DEFAULT_SMOOTHING,
) -> RunNoiseScale:
    """One ``B_noise`` for a run (see the module docstring for the weighting).

    Args:
        grad_sq: per-step ``|G|^2`` estimates (NaN where none).
        noise_trace: per-step ``tr(Sigma)`` estimates (NaN where none).
        batch: each step's global batch (samples).
        smoothing: decay of the moving averages.

    Returns:
        NaN figures and ``steps == 0`` when no step carried an estimate.
    """
    trajectory = smoothed_noise_scale(grad_sq, noise_trace, smoothing)
    weighted = total = 0.0
    for b_noise, b in zip(trajectory, batch, strict=True):
        if math.isfinite(b_noise) and b > 0:
            progress = b / (b + b_noise)  # this step's share of an infinite-batch step
            weighted += progress * b_noise
            total += progress
    counted = sum(1 for g, s in zip(grad_sq, noise_trace, strict=True) if math.isfinite(g + s))
    finite = [v for v in trajectory if math.isfinite(v)]
    return RunNoiseScale(
        b_noise_samples=weighted / total if total > 0 else math.nan,
        final_b_noise_samples=finite[-1] if finite else math.nan,
        progress_steps=total,
        steps=counted,
    )


@dataclass(frozen=True)
class PooledNoiseScale:
    """``B_noise`` of several runs, each weighted by the progress it made.

    Attributes:
        b_noise_samples: the pooled noise scale (NaN: no run had an estimate).
        progress_steps: infinite-batch steps behind it (the pooling weight).
        steps: steps that carried an estimate.
    """

    b_noise_samples: float = math.nan
    progress_steps: float = 0.0
    steps: int = 0

    def plus(self, later: PooledNoiseScale) -> PooledNoiseScale:
        """Pool with another run's (weights add; NaN parts count for nothing)."""
        parts = [p for p in (self, later) if p.progress_steps > 0]
        total = sum(p.progress_steps for p in parts)
        return PooledNoiseScale(
            sum(p.b_noise_samples * p.progress_steps for p in parts) / total if total else math.nan,
            total,
            self.steps + later.steps,
        )


def noise_scale_of_steps(steps: Any, smoothing: float = DEFAULT_SMOOTHING) -> PooledNoiseScale:
    """One run's ``B_noise`` from its ``steps.parquet`` frame (:func:`run_noise_scale`).

    Runs written before the executor measured the noise scale lack the columns: they
    give an empty estimate, as a run on one worker does.
    """
    if steps is None or not {"gns_grad_sq", "gns_noise_trace", "samples"} <= set(steps.columns):
        return PooledNoiseScale()
    if "time_s" in steps.columns:
        steps = steps.sort_values("time_s", kind="stable")
    run = run_noise_scale(
        [float(v) for v in steps["gns_grad_sq"]],
        [float(v) for v in steps["gns_noise_trace"]],
        [float(v) for v in steps["samples"]],
        smoothing,
    )
    if not math.isfinite(run.b_noise_samples):
        return PooledNoiseScale(steps=run.steps)
    return PooledNoiseScale(run.b_noise_samples, run.progress_steps, run.steps)
