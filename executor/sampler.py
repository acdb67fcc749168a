"""The elastic sampler: which sample ids each rank trains on, at any world size.

Why not ``torch.utils.data.DistributedSampler``?  It shards a whole epoch up front
(rank ``r`` gets every ``world``-th index), so when the world changes mid-epoch the
shards of the old world no longer line up with the new one: samples get skipped or
repeated.  Elastic frameworks (Horovod Elastic's ``ElasticSampler``, TorchElastic's
examples) instead remember *how far into the epoch* the job is and re-shard the rest.

This sampler goes one step further and makes the global batch the unit of progress:

* each epoch is a seeded permutation of ``range(dataset_size)``
  (``numpy.random.default_rng([seed, epoch])``), identical in every process;
* step ``k`` of an epoch consumes the *global* batch
  ``perm[position : position + global_batch]`` and ``position`` advances by its size;
* the global batch is dealt to the current world with ``numpy.array_split``
  (contiguous, sizes differ by at most one; a rank may get none in a tiny last batch).

At a membership change nothing but ``world_size`` changes, so the epoch's *remaining*
indices ``perm[position:]`` are re-sharded across the new world automatically: no
sample of an epoch is skipped or seen twice across graceful rescales, and the
sequence of global batches (hence, up to floating-point summation order, the training
trajectory) does not depend on the world size.  The whole sampler state is three
integers (``epoch``, ``position``, plus the seed), which travel inside
:class:`~elasim.executor.api.TrainState`.

Pure numpy: no torch import, so the controller and tests can use it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ElasticSampler", "SamplerPosition"]


@dataclass(frozen=True)
class SamplerPosition:
    """Where the job is in its data stream.

    Attributes:
        epoch: current epoch (0-based).
        position: samples of this epoch already consumed by committed steps.
    """

    epoch: int = 0
    position: int = 0


@dataclass(frozen=True)
class ElasticSampler:
    """Deterministic, world-size-independent global batches (see the module docstring).

    Attributes:
        dataset_size: number of training samples.
        global_batch: samples per optimizer step across all ranks (the last batch of
            an epoch may be smaller: ``drop_last=False`` semantics).
        seed: seeds the per-epoch permutations.
    """

    dataset_size: int
    global_batch: int
    seed: int = 0

    def __post_init__(self) -> None:
        if self.dataset_size < 1:
            raise ValueError(f"dataset_size must be >= 1, got {self.dataset_size}")
        if self.global_batch < 1:
            raise ValueError(f"global_batch must be >= 1, got {self.global_batch}")

    def permutation(self, epoch: int) -> np.ndarray:
        """The order of epoch ``epoch`` (int64 array of ``dataset_size`` ids)."""
        rng = np.random.default_rng([int(self.seed) & 0xFFFFFFFF, int(epoch)])
        return rng.permutation(self.dataset_size).astype(np.int64)

    def global_ids(self, pos: SamplerPosition) -> np.ndarray:
        """Sample ids of the next global batch from ``pos``."""
        if not 0 <= pos.position < self.dataset_size:
            raise ValueError(f"position {pos.position} outside [0, {self.dataset_size})")
        perm = self.permutation(pos.epoch)
        return perm[pos.position : pos.position + self.global_batch]

    @staticmethod
    def shard(global_ids: np.ndarray, world_size: int, rank: int) -> np.ndarray:
        """The contiguous share of ``rank`` in a world of ``world_size``."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside [0, {world_size})")
        return np.array_split(global_ids, world_size)[rank]

    def advance(self, pos: SamplerPosition, consumed: int) -> SamplerPosition:
        """The position after a committed step that consumed ``consumed`` samples."""
        position = pos.position + consumed
        if position >= self.dataset_size:
            return SamplerPosition(pos.epoch + 1, 0)
        return SamplerPosition(pos.epoch, position)
