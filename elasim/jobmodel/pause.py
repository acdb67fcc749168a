"""The pause of one group re-formation: the job model's cost of every rescale.

One function, :func:`pause_for`, turns a change of the group (who survives, who joins,
whether it follows a failure, whether a checkpoint exists) into
:class:`~elasim.policies.PauseComponents`.  It lives apart from the fluid model because
far more than the fluid model prices pauses with it: cluster mode's jobs and loop, the
optimal planner and the profile's calibration all call it, and none of them needs the
fluid job itself.  Standard library only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from elasim.policies import PauseComponents

from .options import RescaleMode

__all__ = ["pause_for", "planned_rescale_estimate_s", "resume_estimate_s"]


def pause_for(
    job: Any,
    mode: RescaleMode,
    *,
    nodes_after: int,
    nodes_before: int | None = None,
    survivors: int,
    newcomers: int,
    failure: bool,
    has_checkpoint: bool,
    waited_boot: bool,
    checkpoint_write_s: float = 0.0,
    acquire_s: float | None = None,
) -> PauseComponents:
    """Pause components of one group re-formation (shared with calibration).

    Args:
        job: the :class:`elasim.job.TrainingJob` with the ``[rescale]`` and ``[checkpoint]``
            figures.
        mode: in-place or restart.
        nodes_after: group size after the change.
        nodes_before: group size before; with a measured pause table (a profile), the
            measured components of this exact transition are used when present.
        survivors: members that keep their process and state (in-place only).
        newcomers: members that join.
        failure: the change follows a failure nobody was warned of (adds detection).
        has_checkpoint: a checkpoint exists to restore from.
        waited_boot: nobody was training while the nodes booted (adds ``acquire_s``).
        checkpoint_write_s: a checkpoint written as part of this change (restart mode,
            planned change); reported inside ``state_s``.
        acquire_s: the acquisition actually waited for (a cold start can take longer
            than ``boot_s``); None means ``boot_s``.
    """
    waited_s = job.rescale.boot_s if acquire_s is None else acquire_s
    if job.pause_table and nodes_before is not None:
        measured = job.measured_pause(mode.value, nodes_before, nodes_after, failure)
        if measured is not None:
            if waited_boot and waited_s > measured.acquire_s:
                return dataclasses.replace(measured, acquire_s=waited_s)
            return measured
    spec = job.rescale
    detect = spec.detect_s if failure else 0.0
    acquire = waited_s if waited_boot else 0.0
    rendezvous = spec.rendezvous_s(nodes_after)
    if mode is RescaleMode.INPLACE and survivors > 0:
        state = job.checkpoint.size_bytes / spec.state_bandwidth_bytes_per_s if newcomers else 0.0
    else:
        state = job.checkpoint.read_s if has_checkpoint else 0.0
        state += checkpoint_write_s
    return PauseComponents(
        detect_s=detect,
        acquire_s=acquire,
        rendezvous_s=rendezvous,
        state_s=state,
        warmup_s=spec.warmup_s,
    )


def planned_rescale_estimate_s(
    job: Any, mode: RescaleMode, nodes: int, checkpoint_write_s: float
) -> float:
    """Pause of a representative planned scale-up: one newcomer joins ``nodes - 1``.

    The fluid job reports it to policies as its rescale cost, fixed for the run, so it
    is priced once here from the job's figures; in restart mode a planned change
    writes a checkpoint of ``checkpoint_write_s`` first.
    """
    write = checkpoint_write_s if mode is RescaleMode.RESTART else 0.0
    return pause_for(
        job,
        mode,
        nodes_after=nodes,
        survivors=max(nodes - 1, 1),
        newcomers=1,
        failure=False,
        has_checkpoint=True,
        waited_boot=False,
        checkpoint_write_s=write,
    ).pause_s


def resume_estimate_s(job: Any, mode: RescaleMode, nodes: int) -> float:
    """Pause of a start of ``nodes`` from none: every node boots, then restores.

    The fluid job reports it to policies as its resume cost (a policy that lets go of
    every node pays it to come back).
    """
    return pause_for(
        job,
        mode,
        nodes_after=nodes,
        survivors=0,
        newcomers=nodes,
        failure=False,
        has_checkpoint=True,
        waited_boot=True,
    ).pause_s
