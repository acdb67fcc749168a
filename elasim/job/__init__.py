"""Training jobs: what the elastic job trains, and how fast it runs on ``n`` nodes.

A :class:`TrainingJob` is a TOML file (presets ship in ``elasim/jobs/``; see its README
for the citations behind every number), named with ``--job``.  It says what is
trained; :class:`elasim.jobmodel.JobSpec` says how one run of it goes (trace, policy,
nodes, notice, checkpoints, deadline, prices).  It is deliberately an *analytical* model that a
measured profile can replace:

* **Throughput.** One step on ``n`` nodes takes ``compute_s(n) + (1 - overlap) *
  allreduce_s(n)``, where compute is the per-node batch divided by the per-node
  compute-only throughput and the all-reduce follows the alpha-beta ring model
  ``2 (n - 1) alpha + 2 (n - 1) / n * bytes / bandwidth`` (Thakur et al. 2005).  An
  optional measured ``[compute.table]`` of ``n = samples_per_s`` overrides this.
* **Global batch.** ``scaled`` keeps the per-node batch, so the global batch grows with
  ``n``; ``fixed`` keeps the global batch (accumulation / smaller per-node batches).
* **Statistical efficiency.** Under ``scaled``, a sample at global batch ``B`` is worth
  ``(B_noise + B0) / (B_noise + B)`` reference samples (McCandlish et al. 2018, the
  gradient-noise-scale model Pollux uses).  Under ``fixed`` it is 1.
* **Pause components** of a rescale (boot, rendezvous, state transfer, warm-up) and
  checkpoint costs come from the ``[rescale]`` and ``[checkpoint]`` tables.

The package is pure (no simpy, no torch): the executor imports it too.

* :mod:`.model`: :class:`TrainingJob` and its sections, the formulas and their range
  checks.
* :mod:`.load`: the bundled presets (:func:`job_presets`) and TOML files
  (:func:`load_job`, :func:`parse_job`).
* :mod:`.errors`: :class:`TrainingJobError`, one line naming file, line and column.
"""

from __future__ import annotations

from .errors import TrainingJobError
from .load import job_presets, load_job, parse_job
from .model import (
    BatchSemantics,
    BatchSpec,
    CheckpointSpec,
    ComputeSpec,
    NetworkSpec,
    NodesSpec,
    RescaleSpec,
    TrainingJob,
)

__all__ = [
    "BatchSemantics",
    "BatchSpec",
    "CheckpointSpec",
    "ComputeSpec",
    "NetworkSpec",
    "NodesSpec",
    "RescaleSpec",
    "TrainingJob",
    "TrainingJobError",
    "job_presets",
    "load_job",
    "parse_job",
]
