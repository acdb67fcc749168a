"""Measured profiles: what the executor measured on a machine, in a form the simulator uses.

A profile replaces a job preset's analytical figures with measurements taken on the
machine that will run the job (``elasim calibrate`` writes one; ``elasim run`` can
write one as a by-product).  It is versioned JSON and records what it was measured
with (hardware, torch version, backend, model), because a CPU profile predicts a CPU
run and nothing else.

What the simulator takes from it (:func:`apply_profile`):

* the step time per world size -> a measured ``[compute.table]`` (no all-reduce model);
* the median pause components per (mechanism, nodes before, nodes after, failure)
  -> an exact pause table that :func:`elasim.sim.pause_for` looks up first;
* a linear fit of rendezvous time on group size, the state broadcast bandwidth and the
  warm-up -> the analytical pause model for transitions that were not measured;
* checkpoint save and load times -> checkpoint bandwidths; failure detection time
  -> ``detect_s``;
* the measured cold starts of workers spawned together (version 2) -> the ready
  times of replacements for killed workers (a flat worker start time, version 1,
  is used when a profile has no batches).  When every worker ran on one host
  (``shared_host_cores``), the cold starts and the training steps compete for its
  cores, and the simulator models that sharing (:class:`elasim.job.RescaleSpec`),
  from the start time of a worker alone on the host (``cold_start_alone_s``,
  derived from every batch and the number of workers training meanwhile).
* the gradient noise scale the executor measured while training (optional: profiles
  written before it was measured lack it) -> ``B_noise`` of the convergence model.
  It costs nothing under the executor's fixed global batch; ``batch="scaled"``
  (``simulate --profile P --batch scaled``) lets each worker keep the profiled batch,
  so the global batch grows with the nodes and the measured noise scale prices it.

Pure Python plus pandas for reading runs; no simpy, no torch.

* :mod:`.schema`: :class:`Profile`, its JSON file and its description.
* :mod:`.apply`: :func:`apply_profile`, a profile made into a training job.
* :mod:`.runs`: :func:`profile_from_runs`, a profile made from executor runs.
* :mod:`.stats`: the robust median and line fit both of them use.
"""

from __future__ import annotations

from elasim.profile_coldstart import (
    ColdStartBatch,
    cold_start_alone_s,
    cold_starts_from_workers,
    starting_weight,
)

from .apply import apply_profile
from .runs import pauses_from_events, profile_from_runs, step_times_from_steps
from .schema import (
    PROFILE_VERSION,
    MeasuredPause,
    Profile,
    ProfileError,
    describe_profile,
    load_profile,
    save_profile,
)

__all__ = [
    "PROFILE_VERSION",
    "MeasuredPause",
    "Profile",
    "ProfileError",
    "apply_profile",
    "ColdStartBatch",
    "cold_start_alone_s",
    "cold_starts_from_workers",
    "describe_profile",
    "load_profile",
    "pauses_from_events",
    "profile_from_runs",
    "save_profile",
    "starting_weight",
    "step_times_from_steps",
]
