"""A generated job whose gradient noise scale is known to lie in a useful range.

Why a second bundled job: checking the convergence model (``benchmarks/
bench_convergence.py``) needs a job whose gradient noise scale ``B_noise`` lies
*inside* the range of global batches tried (32 to 512): below it every batch size
is equally efficient, above it every one is equally wasteful, and neither tests the
model.  The digits job reaches its target in a few hundred samples, long before
the noise matters.

The data are generated, so the job works offline and is the same in every process:
a fixed random "teacher" network (16 inputs, 32 tanh units, 4 classes) labels
Gaussian inputs by *sampling* from its softmax.  The labels are therefore noisy by
construction, and the ``temperature`` of the teacher's logits sets how noisy: a
lower temperature means more label noise, a larger per-sample gradient variance,
and a larger ``B_noise``.  The student is a small MLP (16-64-4, tanh) trained with
plain SGD, the optimizer the noise-scale model of McCandlish et al. (2018) is
derived for.  Its target is a test loss (cross-entropy) a little above the teacher's
own, the best any model can do; :func:`bayes_loss` gives that floor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .api import ElasticJob, JobData, TrainState

__all__ = ["SYNTHETIC_INPUTS", "bayes_loss", "make_synthetic_data", "synthetic_job"]

SYNTHETIC_INPUTS = 16
_TEACHER_HIDDEN = 32
_CLASSES = 4
_TEACHER_SEED = 7
_TRAIN_SEED, _TEST_SEED = 0, 1


def _teacher_logits(x: torch.Tensor, temperature: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(_TEACHER_SEED)
    w1 = torch.randn(SYNTHETIC_INPUTS, _TEACHER_HIDDEN, generator=g) / math.sqrt(SYNTHETIC_INPUTS)
    w2 = torch.randn(_TEACHER_HIDDEN, _CLASSES, generator=g) / math.sqrt(_TEACHER_HIDDEN)
    return torch.tanh(2.0 * x @ w1) @ w2 * temperature


def _sample(seed: int, count: int, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(count, SYNTHETIC_INPUTS, generator=g)
    probs = torch.softmax(_teacher_logits(x, temperature), dim=1)
    y = torch.multinomial(probs, 1, generator=g).squeeze(1)
    return x, y


def make_synthetic_data(
    temperature: float = 1.0, train_size: int = 50_000, test_size: int = 8192
) -> JobData:
    """Train and test sets, identical in every process (fixed seeds)."""
    x, y = _sample(_TRAIN_SEED, train_size, temperature)
    xt, yt = _sample(_TEST_SEED, test_size, temperature)
    return JobData(
        train=torch.utils.data.TensorDataset(x, y),
        test=torch.utils.data.TensorDataset(xt, yt),
    )


def bayes_loss(data: JobData, temperature: float = 1.0) -> float:
    """The test loss of the teacher itself: no model does better on average."""
    x, y = data.test.tensors
    with torch.no_grad():
        return float(F.cross_entropy(_teacher_logits(x, temperature), y))


def _model(hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(SYNTHETIC_INPUTS, hidden), nn.Tanh(), nn.Linear(hidden, _CLASSES)
    )


def _train_step(state: TrainState, batch: Any) -> Mapping[str, Any]:
    x, y = batch
    return {"loss": F.cross_entropy(state.model(x), y)}


def _evaluate(state: TrainState, test: Any) -> Mapping[str, float]:
    x, y = test.tensors
    with torch.no_grad():
        logits = state.model(x)
        loss = F.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(dim=1) == y).float().mean().item()
    return {"accuracy": float(accuracy), "test_loss": float(loss)}


def synthetic_job(
    lr: float = 0.4,
    global_batch: int = 128,
    temperature: float = 1.0,
    hidden: int = 64,
    train_size: int = 50_000,
    max_local_batch: int | None = None,
) -> ElasticJob:
    """The generated teacher-student job (see the module docstring).

    Args:
        lr: SGD learning rate (no momentum).
        global_batch: samples per optimizer step.
        temperature: scale of the teacher's logits (lower: noisier labels, larger
            noise scale).
        hidden: the student's hidden units.
        train_size: generated training samples.
        max_local_batch: most samples per worker and forward pass (more accumulate).
    """
    return ElasticJob(
        name="synthetic-teacher",
        make_data=lambda: make_synthetic_data(temperature, train_size),
        make_model=lambda: _model(hidden),
        make_optimizer=lambda params: torch.optim.SGD(params, lr=lr),
        train_step=_train_step,
        evaluate=_evaluate,
        global_batch=global_batch,
        max_local_batch=None if max_local_batch is None else int(max_local_batch),
    )
