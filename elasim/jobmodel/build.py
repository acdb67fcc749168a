"""A :class:`~.spec.JobSpec` made into the job loop both shells drive.

The simulator (:func:`elasim.sim.simulate`) and the executor's controller
(:class:`elasim.executor.controller.Controller`) used to wire the loop themselves,
and the two copies drifted (one scaled ``auto`` checkpointing for a compressed trace,
the other did not; one thinned the timeline, the other could not turn it off).  Both
call :func:`build_job_loop` now; they differ only in what they pass for what is
theirs: the actuator (the fluid model, or real workers), the horizon (a simulated
400 days, or a wall-clock budget times the time scale) and the timeline's grain.

What a spec leaves to be resolved against the trace and the job (a random start
offset, the trace's own on-demand price, the job's own node bounds) is resolved by
the shells before, with the same functions (:mod:`elasim.traces.model`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from elasim.policies import Policy

from .actuator import Actuator
from .loop import JobLoop
from .options import JobRules
from .replay import CapacityReplay
from .spec import JobSpec
from .zones import ZoneMoves, ZoneReplay, zone_move_s

__all__ = ["build_job_loop", "job_rules"]


def job_rules(
    spec: JobSpec,
    *,
    on_demand_price_per_hour: float,
    horizon_s: float = math.inf,
    trace_scale: float = 1.0,
) -> JobRules:
    """The loop's rules of a resolved spec (node bounds and prices known).

    Args:
        spec: the job, its node bounds resolved.
        on_demand_price_per_hour: the price that applies (``inf``: none offered).
        horizon_s: give up at this trace time.
        trace_scale: the clock runs this many times faster than the trace's own.
    """
    if spec.min_nodes is None or spec.max_nodes is None:
        raise ValueError("resolve the spec's node bounds first (min_nodes, max_nodes)")
    return JobRules(
        min_nodes=spec.min_nodes,
        max_nodes=spec.max_nodes,
        rescale=spec.rescale,
        checkpoint_interval_s=spec.checkpoint_interval_s,
        deadline_s=spec.deadline_s,
        on_demand_price_per_hour=on_demand_price_per_hour,
        horizon_s=horizon_s,
        trace_scale=trace_scale,
    )


def build_job_loop(
    spec: JobSpec,
    trace: Any,
    policy: Policy,
    make_actuator: Callable[[JobRules], Actuator],
    *,
    on_demand_price_per_hour: float,
    horizon_s: float,
    trace_scale: float = 1.0,
    capacity: Any | None = None,
    record_timeline: bool = True,
    timeline_every_s: float = 0.0,
) -> JobLoop:
    """The job loop of ``spec`` on ``trace`` under ``policy``.

    Args:
        spec: the job, resolved (a start offset, node bounds).
        trace: the capacity trace (anything with ``time_s``, ``available``,
            ``price_per_hour`` and ``duration_s``); its replay starts at the spec's
            offset, gives the spec's notice, and reports no more than ``max_nodes``.
            A zone set (``kind == "zones"``, its ``traces``) is replayed so, zone by
            zone, the loop given a :class:`~.zones.ZoneMoves` whose moves take the
            spec's checkpoint size over its transfer bandwidth.
        policy: the scaling policy.
        make_actuator: builds the environment's side of the job from the rules.
        on_demand_price_per_hour: the price that applies (``inf``: none offered).
        horizon_s: give up at this trace time.
        trace_scale: the clock runs this many times faster than the trace's own.
        capacity: another source of capacity instead of the trace's replay (the
            simulator's shared cluster, which gives no notice).
        record_timeline: keep timeline rows at all.
        timeline_every_s: least trace time between rows that differ only in progress.
    """
    rules = job_rules(
        spec,
        on_demand_price_per_hour=on_demand_price_per_hour,
        horizon_s=horizon_s,
        trace_scale=trace_scale,
    )
    shown = {"record_timeline": record_timeline, "timeline_every_s": timeline_every_s}
    if capacity is None:
        if spec.start_offset_s is None:
            raise ValueError("resolve the spec's start offset first")
        replayed = {
            "start_offset_s": spec.start_offset_s,
            "notice_s": spec.notice_s,
            "cap_nodes": rules.max_nodes,
            "default_price_per_hour": spec.spot_price_per_hour or 0.0,
        }
        if getattr(trace, "kind", None) == "zones":
            return _zoned_loop(spec, trace, policy, make_actuator(rules), rules, replayed, **shown)
        capacity = CapacityReplay.from_trace(trace, **replayed)
    return JobLoop(
        policy,
        make_actuator(rules),
        rules,
        replay=capacity,
        record_timeline=record_timeline,
        timeline_every_s=timeline_every_s,
    )


def _zoned_loop(
    spec: JobSpec,
    zones: Any,
    policy: Policy,
    actuator: Actuator,
    rules: JobRules,
    replayed: dict[str, Any],
    **kwargs: Any,
) -> JobLoop:
    """The loop of a job in several zones (:mod:`.zones`), each zone replayed alike."""
    if spec.checkpoint_size_gb is None:
        raise ValueError("resolve the spec's checkpoint size first (checkpoint_size_gb)")
    replay = ZoneReplay.from_traces(zones.traces, **replayed)
    move_s = zone_move_s(spec.checkpoint_size_gb, spec.transfer_gbps)
    zoned = ZoneMoves(replay, move_s)
    return JobLoop(policy, actuator, rules, replay=replay, zones=zoned, **kwargs)
