"""A measured profile made into a :class:`~elasim.job.TrainingJob` the simulator runs.

:func:`apply_profile` replaces a preset's analytical figures section by section: a
measured compute table, the measured batch and noise scale, checkpoint bandwidths
from the measured save and load times, and the analytical pause model fitted to the
measured pauses and cold starts (with the exact pause table looked up first).
Pure Python; no simpy, no torch.
"""

from __future__ import annotations

import dataclasses

from elasim.job import (
    BatchSemantics,
    BatchSpec,
    CheckpointSpec,
    ComputeSpec,
    NetworkSpec,
    NodesSpec,
    RescaleSpec,
    TrainingJob,
)

from .schema import Profile, ProfileError
from .stats import finite_median, fit_line

__all__ = ["apply_profile"]


def apply_profile(
    profile: Profile,
    job: TrainingJob | None = None,
    *,
    target_samples: float | None = None,
    min_nodes: int = 1,
    batch: BatchSemantics | str = BatchSemantics.FIXED,
) -> TrainingJob:
    """A job spec whose figures come from ``profile``.

    Args:
        profile: the measurements.
        job: a job spec to keep the work target from; ``None`` models the profiled
            model itself (fixed global batch, nodes = worker slots).
        target_samples: overrides the work target.
        min_nodes: fewest workers the job runs on.
        batch: ``fixed`` (the executor's semantics: the global batch stays the
            profiled one, so no convergence cost) or ``scaled`` (each worker keeps the
            profiled batch; a sample at the larger global batch is worth less, by the
            measured noise scale).  Under ``scaled`` the measured samples per second
            per world size are kept as they are: a first-order model that ignores
            how a larger per-worker batch amortises per-step overheads.

    Returns:
        A :class:`TrainingJob` with a measured compute table, measured pause table and the
        analytical pause model fitted to the measurements.

    Raises:
        ProfileError: ``scaled`` asked of a profile without a measured noise scale.
    """
    batch_spec = _batch_spec(profile, BatchSemantics(batch))
    model = dict(profile.model)
    name = str(model.get("name", "profiled"))
    state_bytes = float(model.get("state_bytes", profile.checkpoint_size_bytes))
    spec = TrainingJob(
        name=f"{name} (profile)",
        description=f"{name} as measured on {dict(profile.hardware).get('cpu', 'this machine')}",
        sources=(f"profile: {profile.source}",),
        target_samples=float(
            target_samples
            if target_samples is not None
            else (job.target_samples if job is not None else profile.global_batch * 1000)
        ),
        compute=_compute_spec(profile),
        network=NetworkSpec(gradient_bytes=0.0, latency_s=0.0, bandwidth_bytes_per_s=1e12),
        batch=batch_spec,
        nodes=NodesSpec(min=min_nodes, max=profile.max_world, gpus_per_node=1),
        checkpoint=_checkpoint_spec(profile, state_bytes),
        rescale=_rescale_spec(profile, state_bytes),
        path=profile.source,
        pause_table=tuple((p.key, p.components) for p in profile.pauses),
    )
    return dataclasses.replace(spec)


def _batch_spec(profile: Profile, semantics: BatchSemantics) -> BatchSpec:
    """The profiled global batch under ``semantics``, priced by the measured noise scale.

    A ``scaled`` batch is only as good as the noise scale that prices it, so a profile
    without one is refused rather than modelled as free of convergence cost.

    Raises:
        ProfileError: ``scaled`` asked of a profile without a measured noise scale.
    """
    b_noise = profile.gradient_noise_scale
    if semantics is BatchSemantics.SCALED and b_noise is None:
        raise ProfileError(
            "a scaled batch needs the profile's gradient noise scale, and this profile "
            "has none (calibrate again: the executor measures it on two or more workers)"
        )
    return BatchSpec(
        semantics=semantics,
        reference_batch=profile.global_batch,
        gradient_noise_scale=0.0 if b_noise is None else b_noise,
    )


def _compute_spec(profile: Profile) -> ComputeSpec:
    """The measured samples per second per world size, as a compute table.

    The executor keeps the global batch fixed, so throughput is that batch over the
    mean step time; the table replaces the all-reduce model (hence the free network).
    """
    steps = dict(profile.step_time_s)
    table = tuple(sorted((w, profile.global_batch / t) for w, t in steps.items()))
    return ComputeSpec(
        per_node_samples_per_s=profile.global_batch / steps[min(steps)],
        per_node_batch=profile.global_batch,
        table=table,
    )


def _checkpoint_spec(profile: Profile, state_bytes: float) -> CheckpointSpec:
    """Checkpoint bandwidths from the measured save and load times (1e12 B/s: unmeasured)."""
    size = profile.checkpoint_size_bytes or state_bytes or 1.0
    write_bw = size / profile.checkpoint_save_s if profile.checkpoint_save_s > 0 else 1e12
    read_bw = size / profile.checkpoint_load_s if profile.checkpoint_load_s > 0 else 1e12
    return CheckpointSpec(
        size_bytes=size,
        write_bandwidth_bytes_per_s=write_bw,
        read_bandwidth_bytes_per_s=read_bw,
    )


def _rescale_spec(profile: Profile, state_bytes: float) -> RescaleSpec:
    """The analytical pause model, fitted to the measured pauses and cold starts."""
    inplace_grow = [
        p for p in profile.pauses if p.mechanism == "inplace" and p.nodes_after > p.nodes_before
    ]
    # the analytical model stands for in-place changes (restart ones are all measured
    # in the table), so it is fitted on in-place pauses when there are any
    fitted = [p for p in profile.pauses if p.mechanism == "inplace"] or list(profile.pauses)
    rendezvous_points = [(float(p.nodes_after), p.components.rendezvous_s) for p in fitted]
    base_s, per_node_s = fit_line(rendezvous_points)
    state_s = finite_median(p.components.state_s for p in inplace_grow)
    state_bw = state_bytes / state_s if state_s > 0 and state_bytes > 0 else 1e12
    inplace = [p.components.acquire_s for p in profile.pauses if p.mechanism == "inplace"]
    # warm standbys start (and import torch) before they are needed, so a newcomer's
    # acquisition is what the in-place transitions measured, not a cold start
    boot_s = finite_median(inplace) if inplace else profile.worker_start_s
    shared = profile.shared_host_cores > 0 and profile.cold_start_alone_s > 0
    return RescaleSpec(
        detect_s=profile.detect_s,
        boot_s=boot_s,
        rendezvous_base_s=base_s,
        rendezvous_per_node_s=per_node_s,
        state_bandwidth_bytes_per_s=state_bw,
        warmup_s=finite_median(p.components.warmup_s for p in fitted),
        cold_start_s=(
            profile.cold_start_alone_s
            if shared and profile.cold_start_alone_s > 0
            else profile.worker_start_s
        ),
        cold_start_table=profile.cold_start_s,
        shared_host_cores=float(profile.shared_host_cores) if shared else 0.0,
        starting_weight=profile.starting_weight,
    )
