"""The user API of the executor: bring your own model, data and optimizer.

It is deliberately close to what TorchElastic and Horovod Elastic users already write:

* a **state object** (:class:`TrainState`, like ``hvd.elastic.TorchState``) holding
  the model, the optimizer and the progress counters, with ``state_dict()`` /
  ``load_state_dict()``: that is what survivors broadcast to newcomers and what
  checkpoints store;
* a **training-step function** ``train_step(state, batch) -> {"loss": tensor, ...}``
  (like PyTorch Lightning's ``training_step``): it runs the forward pass on the
  rank's share of the global batch and returns the mean loss.  The runtime does the
  rest, because the rest is what elasticity has to control: it scales the loss by the
  rank's share of the global batch, runs ``backward``, all-reduces the gradients
  (a sum, so the result is the exact global mean even when shards are uneven),
  steps the optimizer and advances the elastic sampler;
* a **job spec** (:class:`ElasticJob`): the factories that every worker process calls
  to build identical replicas (same seed, same model), named by an import string
  ``"package.module:attribute"`` so that a process on another host can build it too.

Example (the bundled default, :mod:`elasim.executor.digits`)::

    def train_step(state, batch):
        x, y = batch
        return {"loss": F.cross_entropy(state.model(x), y)}

    JOB = ElasticJob(name="digits-mlp", make_data=load_digits_split, make_model=mlp,
                     make_optimizer=lambda params: torch.optim.Adam(params, lr=2e-3),
                     train_step=train_step, evaluate=accuracy, global_batch=64,
                     target_accuracy=0.95)

Rules a job must follow (they are what makes in-place rescaling correct):

1. ``make_model`` must be deterministic given ``torch.manual_seed`` (the runtime seeds
   before calling it), so that the first group needs no broadcast.
2. ``train_step`` must not call ``backward``, ``zero_grad`` or ``optimizer.step``.
3. Everything in ``TrainState.extra`` must be tensors or plain Python containers of
   numbers/strings, because checkpoints are loaded with ``torch.load(...,
   weights_only=True)``.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .sampler import SamplerPosition

__all__ = [
    "Batch",
    "ElasticJob",
    "JobData",
    "JobLoadError",
    "TrainState",
    "checkpoint_size_bytes",
    "default_collate",
    "load_elastic_job",
    "move_to_device",
]

#: What a collate function returns and ``train_step`` receives: usually a tuple of tensors.
Batch = Any


class JobLoadError(ValueError):
    """The job spec string cannot be imported or does not name an :class:`ElasticJob`."""


@dataclass(frozen=True)
class JobData:
    """The datasets of a job.

    Attributes:
        train: map-style dataset (``__len__`` and ``__getitem__``) to train on.
        test: optional held-out dataset for ``ElasticJob.evaluate``.
    """

    train: Any
    test: Any = None


@dataclass
class TrainState:
    """The live training state of one replica (mutable on purpose: it *is* the replica).

    Data-parallel replicas hold bitwise-identical copies; this object is what a
    survivor broadcasts to newcomers and what a checkpoint stores.

    Attributes:
        model: the replica's ``torch.nn.Module``.
        optimizer: its optimizer.
        step: committed optimizer steps.
        epoch: current epoch of the elastic sampler.
        position: samples of the current epoch already consumed.
        samples: samples consumed since the start (all epochs).
        progress: steps at the job's first global batch, each weighted by the AdaScale
            gain it was trained with (equal to ``step`` while the batch never changes).
        extra: user values that must survive rescales and restarts (tensors or plain
            containers of numbers and strings only).
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    step: int = 0
    epoch: int = 0
    position: int = 0
    samples: int = 0
    progress: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sampler_position(self) -> SamplerPosition:
        """Where the elastic sampler stands."""
        return SamplerPosition(self.epoch, self.position)

    def state_dict(self) -> dict[str, Any]:
        """Tensors and primitives only (loadable with ``weights_only=True``)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": int(self.step),
            "epoch": int(self.epoch),
            "position": int(self.position),
            "samples": int(self.samples),
            "progress": float(self.progress),
            "extra": dict(self.extra),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict` output (copies into the existing tensors)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = int(state["step"])
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
        self.samples = int(state["samples"])
        self.progress = float(state.get("progress", self.step))  # older checkpoints: steps
        self.extra = dict(state.get("extra", {}))


def default_collate(dataset: Any, ids: np.ndarray) -> Batch:
    """Gather samples ``ids`` of ``dataset`` into a batch.

    A ``TensorDataset`` is indexed with one fancy-index per tensor (fast); any other
    map-style dataset goes through ``torch.utils.data.default_collate``.
    """
    index = torch.from_numpy(np.asarray(ids, dtype=np.int64))
    if isinstance(dataset, torch.utils.data.TensorDataset):
        return tuple(t[index] for t in dataset.tensors)
    return torch.utils.data.default_collate([dataset[int(i)] for i in ids])


def move_to_device(batch: Batch, device: torch.device) -> Batch:
    """Move every tensor of a (nested tuple/list/dict) batch to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return {k: move_to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple | list):
        return type(batch)(move_to_device(v, device) for v in batch)
    return batch


@dataclass(frozen=True)
class ElasticJob:
    """What to train: factories every worker calls, and the step function.

    Attributes:
        name: short identifier for logs and summaries.
        make_data: ``() -> JobData``; must return the same data in every process.
        make_model: ``() -> nn.Module``; called after ``torch.manual_seed(seed)``.
        make_optimizer: ``(parameters) -> Optimizer``.
        train_step: ``(state, batch) -> {"loss": scalar tensor (mean over the batch),
            ...}``; must not call ``backward`` (see the module docstring).
        global_batch: samples per optimizer step across all workers ("fixed"
            global-batch semantics: the per-worker batch shrinks as workers join, so
            the trajectory does not depend on the world size).
        evaluate: optional ``(state, test_dataset) -> {"accuracy": ..., ...}``, run by
            rank 0 on the test set at the end of the run.
        target_accuracy: the stated target of the job (reported, and used by
            ``stop_at_target``).
        collate: ``(dataset, ids) -> batch``; default :func:`default_collate`.
        max_local_batch: the most samples one worker puts through one forward and
            backward (its memory); a larger share of the global batch is split into
            gradient-accumulation steps (None: no limit).  A cluster policy that
            raises the global batch on few workers relies on it.
    """

    name: str
    make_data: Callable[[], JobData]
    make_model: Callable[[], torch.nn.Module]
    make_optimizer: Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]
    train_step: Callable[[TrainState, Batch], Mapping[str, Any]]
    global_batch: int
    evaluate: Callable[[TrainState, Any], Mapping[str, float]] | None = None
    target_accuracy: float | None = None
    collate: Callable[[Any, np.ndarray], Batch] = default_collate
    max_local_batch: int | None = None

    def __post_init__(self) -> None:
        if self.max_local_batch is not None and self.max_local_batch < 1:
            raise ValueError(f"max_local_batch must be >= 1, got {self.max_local_batch}")
        if self.global_batch < 1:
            raise ValueError(f"global_batch must be >= 1, got {self.global_batch}")
        if self.target_accuracy is not None and not 0.0 < self.target_accuracy <= 1.0:
            raise ValueError(f"target_accuracy must be in (0, 1], got {self.target_accuracy}")


def check_job_spec(spec: str) -> None:
    """Fail early, in one line, when ``spec`` names nothing importable.

    The controller checks before any worker starts: a worker that cannot load its job
    dies, and the run would otherwise end much later with "no worker became ready".
    The factory itself is not called (it may build data sets).

    Raises:
        JobLoadError: the spec is malformed, or its module or attribute is missing.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise JobLoadError(f"job spec must look like 'package.module:attribute', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a user's module may fail in any way
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise JobLoadError(f"--job {spec}: cannot import {module_name!r} ({detail})") from None
    if not hasattr(module, attr):
        raise JobLoadError(f"--job {spec}: module {module_name!r} has no attribute {attr!r}")


def load_elastic_job(spec: str, options: Mapping[str, Any] | None = None) -> ElasticJob:
    """Import ``"package.module:attribute"`` and return the :class:`ElasticJob` it names.

    The attribute is either an ``ElasticJob`` or a factory returning one; a factory is
    called with ``**options`` (so ``--set``-style options can size the model).

    Raises:
        JobLoadError: the module or attribute is missing, or it is not a job.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise JobLoadError(f"job spec must look like 'package.module:attribute', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a user's module may fail in any way
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise JobLoadError(f"cannot import job module {module_name!r}: {detail}") from None
    try:
        target = getattr(module, attr)
    except AttributeError:
        raise JobLoadError(f"module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(target, ElasticJob):
        if options:
            raise JobLoadError(f"{spec} is a job object and takes no options")
        return target
    if callable(target):
        job = target(**dict(options or {}))
        if isinstance(job, ElasticJob):
            return job
    raise JobLoadError(f"{spec} is not an ElasticJob or a factory returning one")


def checkpoint_size_bytes(job: ElasticJob) -> int:
    """Bytes of one checkpoint of ``job`` (its :meth:`TrainState.state_dict`, saved).

    Why before any worker starts: a move between zones transfers the job's checkpoint,
    and the run prices that transfer up front (``--checkpoint-size-gb``'s default).
    The optimizer steps once on zero gradients first, so that state it creates lazily
    (Adam's moments) is counted, as in every checkpoint after the first step.
    """
    model = job.make_model()
    optimizer = job.make_optimizer(model.parameters())
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    buffer = io.BytesIO()
    torch.save(TrainState(model, optimizer).state_dict(), buffer)
    return buffer.getbuffer().nbytes
