"""Cluster mode: many elastic jobs sharing one cluster under one cluster policy.

Standard library only (no SimPy, no torch), so the simulator's shell
(:mod:`elasim.sim.cluster`) and the executor's run the same :class:`ClusterLoop`.

* :mod:`.application`: throughput per placement and batch, statistical efficiency
  per batch and epoch, from a measured profile.
* :mod:`.job`: one job's life on the GPUs it is granted, whoever trains it
  (:class:`ModelTraining` here, real workers in the executor).
* :mod:`.loop`: :class:`ClusterLoop`, arrivals -> decide -> reallocate.
* :mod:`.setup`: building a loop from a workload name and options.
* :mod:`.pauses`: the measured pauses of calibrated profiles (``pauses.json``).
* :mod:`.results`: per-job rows and the summary.

Above both shells, and not imported by this package (they use pandas, NumPy,
matplotlib or the simulator, none of which a loop needs):

* :mod:`.sweep`: workloads x policies, simulated on the sweep backends.
* :mod:`.output`: a run's tables and figures (``jobs.parquet``, JCT CDF, ...).
* :mod:`.compare`: a real run against its simulation, job by job.
"""

from __future__ import annotations

from .application import EPOCH_LIMITS, Application, BatchChoice
from .job import ADAPTIVE, ClusterJob, JobSpeedModel, Training
from .loop import ClusterLoop
from .results import ClusterResult, ClusterSummary, JobResult, summarize_jobs
from .setup import DEFAULT_PAUSE_JOB, ClusterSetup, build_loop, load_applications
from .training import ModelTraining, model_job

__all__ = [
    "ADAPTIVE",
    "DEFAULT_PAUSE_JOB",
    "EPOCH_LIMITS",
    "Application",
    "BatchChoice",
    "ClusterJob",
    "ClusterLoop",
    "ClusterResult",
    "ClusterSetup",
    "ClusterSummary",
    "JobResult",
    "JobSpeedModel",
    "ModelTraining",
    "Training",
    "build_loop",
    "load_applications",
    "model_job",
    "summarize_jobs",
]
