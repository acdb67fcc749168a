"""The default job: a small MLP on scikit-learn's bundled ``digits`` data set.

Why this job: it is real data (1,797 8x8 handwritten digits, UCI ML hand-written
digits data set, shipped inside scikit-learn, so it works offline), it trains in a
few hundred milliseconds per hundred steps on one CPU core, and its accuracy is a
meaningful target.

**Stated target:** test accuracy >= 0.95 on a fixed, seeded 20 % hold-out split
(360 images).  With the defaults below (MLP 64-256-256-10, Adam lr 2e-3, global
batch 64) the target is reached in about 200 steps, whatever the world size,
because the elastic sampler makes the sequence of global batches independent of
the number of workers; runs use 300 steps by default for a margin.

``width`` scales the hidden layers, so benchmarks can make a step heavier (more
compute and a bigger all-reduce) without changing anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .api import ElasticJob, JobData, TrainState

__all__ = ["DIGITS_TARGET_ACCURACY", "digits_job"]

#: The accuracy the default job must reach (see the module docstring).
DIGITS_TARGET_ACCURACY = 0.95
_TEST_FRACTION = 0.2
_SPLIT_SEED = 0


def _load_data() -> JobData:
    """Digits as float32 in [0, 1], split 80/20 with a fixed seed (same in every process)."""
    from sklearn.datasets import load_digits

    features, labels = load_digits(return_X_y=True)
    x = torch.tensor(features / 16.0, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.int64)
    order = np.random.default_rng(_SPLIT_SEED).permutation(len(x))
    n_test = int(round(_TEST_FRACTION * len(x)))
    test, train = torch.from_numpy(order[:n_test]), torch.from_numpy(order[n_test:])
    return JobData(
        train=torch.utils.data.TensorDataset(x[train], y[train]),
        test=torch.utils.data.TensorDataset(x[test], y[test]),
    )


def _train_step(state: TrainState, batch: Any) -> Mapping[str, Any]:
    x, y = batch
    return {"loss": F.cross_entropy(state.model(x), y)}


def _evaluate(state: TrainState, test: Any) -> Mapping[str, float]:
    x, y = test.tensors
    device = next(state.model.parameters()).device
    state.model.eval()
    try:
        with torch.no_grad():
            logits = state.model(x.to(device))
            loss = F.cross_entropy(logits, y.to(device)).item()
            accuracy = (logits.argmax(dim=1).cpu() == y).float().mean().item()
    finally:
        state.model.train()
    return {"accuracy": float(accuracy), "test_loss": float(loss)}


def digits_job(
    width: int = 256,
    lr: float = 2e-3,
    global_batch: int = 64,
    depth: int = 2,
    max_local_batch: int | None = None,
) -> ElasticJob:
    """The default :class:`ElasticJob` (see the module docstring).

    Args:
        width: hidden units per layer.
        lr: Adam learning rate.
        global_batch: samples per step across all workers.
        depth: hidden layers.
        max_local_batch: most samples per worker and forward pass (more accumulate).
    """
    width, depth, global_batch = int(width), int(depth), int(global_batch)
    if width < 1 or depth < 1:
        raise ValueError("width and depth must be >= 1")

    def make_model() -> nn.Module:
        layers: list[nn.Module] = []
        fan_in = 64
        for _ in range(depth):
            layers += [nn.Linear(fan_in, width), nn.ReLU()]
            fan_in = width
        layers.append(nn.Linear(fan_in, 10))
        return nn.Sequential(*layers)

    def make_optimizer(params: Any) -> torch.optim.Optimizer:
        return torch.optim.Adam(params, lr=float(lr))

    return ElasticJob(
        name=f"digits-mlp{width}x{depth}",
        make_data=_load_data,
        make_model=make_model,
        make_optimizer=make_optimizer,
        train_step=_train_step,
        evaluate=_evaluate,
        global_batch=global_batch,
        target_accuracy=DIGITS_TARGET_ACCURACY,
        max_local_batch=None if max_local_batch is None else int(max_local_batch),
    )
