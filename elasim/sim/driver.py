"""The simulator's shell: the job model (:mod:`elasim.jobmodel`) on SimPy's clock.

Everything that defines the job's life, the decision step, the trace replay and its
notices, the graceful-leave rule, the checkpoint schedule and the books, lives in
:class:`~elasim.jobmodel.JobLoop`; the fluid progress model in
:class:`~elasim.jobmodel.FluidJob`.  The executor runs the same two objects (the loop
always, the fluid model in its parity test).  This module only supplies the clock:
a SimPy process calls :meth:`JobLoop.turn` and sleeps until the time it returns.

The model's assumptions are stated in :mod:`elasim.jobmodel.fluid` and the README.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Iterator
from typing import Any

import simpy

from elasim.job import TrainingJob
from elasim.jobmodel import (
    FluidJob,
    JobLoop,
    JobRules,
    JobSpec,
    build_job_loop,
    pause_for,
    summarize,
)
from elasim.policies import Observation, Policy, is_oracle
from elasim.policies._ondemand import fastest_finish_s
from elasim.traces.model import (
    CapacityTrace,
    JobTrace,
    on_demand_price_of,
    scale_trace,
    start_offset_of,
)
from elasim.traces.zones import ZoneSet

from .capacity import ClusterCapacity
from .config import SimConfig, SimResult, Timeline

__all__ = [
    "DEFAULT_JOB",
    "SimShell",
    "capacity_for",
    "fastest_finish_h",
    "pause_for",
    "resolve",
    "simulate",
]

log = logging.getLogger(__name__)

_DEFAULT_HORIZON_S = 400 * 86400.0


class SimShell:
    """SimPy's clock around one job loop: sleep until the loop's next time, turn, repeat.

    Every capacity source (a spot trace, a shared cluster's leftovers) is a stream the
    loop reads itself, so only the loop's own next time can wake it: a plain timeout.
    """

    def __init__(self, env: simpy.Environment, loop: JobLoop) -> None:
        self.env = env
        self.loop = loop
        self.done_event = env.event()

    def process(self) -> Iterator[simpy.Event]:
        """The SimPy process: one loop turn per wake-up."""
        env, loop = self.env, self.loop
        while True:
            now = env.now
            deadline = loop.turn(now)
            if loop.finished or not math.isfinite(deadline):
                break
            yield env.timeout(max(deadline - now, 0.0))
        loop.close(env.now)
        self.done_event.succeed()

    @classmethod
    def run(cls, loop: JobLoop) -> float:
        """Run ``loop`` to its end on a fresh SimPy clock; returns the end time (s).

        The one place the simulator touches SimPy: everything else is the job loop.
        """
        env = simpy.Environment()
        shell = cls(env, loop)
        env.process(shell.process())
        env.run(until=shell.done_event)
        return env.now


DEFAULT_JOB = "resnet50_v100"


def _simulator_details(
    trace: CapacityTrace | JobTrace,
    policy: Policy,
    job: TrainingJob,
    config: SimConfig,
    spec: JobSpec,
    checkpoint_cost_s: float,
) -> dict[str, Any]:
    """What only a simulation states beside its spec (``summary.json``'s ``simulator``)."""
    if isinstance(trace, ZoneSet):
        priced = trace.priced or spec.spot_price_per_hour is not None
    elif isinstance(trace, CapacityTrace):
        priced = trace.price_per_hour is not None or spec.spot_price_per_hour is not None
    else:
        priced = config.cluster_price_per_hour > 0
    return {
        "job_model": job.name,
        "target_samples": job.target_samples,
        "policy_config": repr(getattr(policy, "config", None)),
        "checkpoint_cost_s": checkpoint_cost_s,
        "cluster_gpus": config.cluster_gpus,
        "priced": priced,
        "time_scale": config.time_scale,
    }


def resolve(
    spec: JobSpec,
    config: SimConfig | None = None,
    *,
    trace: CapacityTrace | JobTrace | None = None,
    policy: Policy | None = None,
    job: TrainingJob | None = None,
) -> tuple[JobSpec, CapacityTrace | JobTrace, Policy, TrainingJob]:
    """The spec's trace, policy and training job, and the spec resolved against them.

    Objects given are used as they are (a sweep loads a trace once; tests build
    their own); the spec names them.  The resolved spec has a start offset (drawn
    from the seed when it had none), the job's node bounds where it gave none, and
    at ``config.time_scale`` every time compressed as the replay compresses it.
    Shared by :func:`simulate` and the offline optimum, which must see the very
    window and bounds a simulation replays.

    Raises:
        ValueError: a spec without a trace or policy and no object for it, or an
            offset outside the trace (one line).
    """
    from elasim.job import load_job
    from elasim.policies import make_policy
    from elasim.traces.zones import load_zones

    config = config or SimConfig()
    if trace is None:
        if spec.trace is None:
            raise ValueError("a simulation needs a trace (--trace)")
        trace = load_zones(spec.zone_traces or [spec.trace])
    if policy is None:
        if spec.policy is None:
            raise ValueError("a simulation needs a policy (--policy)")
        policy = make_policy(spec.policy, dict(spec.policy_options), seed=spec.seed)
    job = job if job is not None else load_job(spec.job or DEFAULT_JOB)
    if spec.min_nodes is not None or spec.max_nodes is not None:
        job = job.with_nodes(spec.min_nodes, spec.max_nodes)
    spec = spec.replace(
        trace=spec.trace or getattr(trace, "name", ""),
        policy=spec.policy or getattr(policy, "name", type(policy).__name__),
        job=spec.job or job.name,
        min_nodes=job.nodes.min,
        max_nodes=job.nodes.max,
        start_offset_s=start_offset_of(
            trace.shortest() if isinstance(trace, ZoneSet) else trace,
            spec.start_offset_s,
            spec.seed,
        ),
    )
    if isinstance(trace, ZoneSet):
        spec = _resolve_zones(spec, trace, job)
    return spec, trace, policy, job


def _resolve_zones(spec: JobSpec, zones: ZoneSet, job: TrainingJob) -> JobSpec:
    """A spec in several zones: the checkpoint a move transfers (the job's by default)."""
    size_gb = spec.checkpoint_size_gb
    if size_gb is None:
        size_gb = job.checkpoint.size_bytes / 1e9
    if not spec.zone_traces:  # one file with a zone column (or zones given as objects)
        return spec.replace(checkpoint_size_gb=size_gb)
    return spec.replace(trace=spec.zone_traces[0], checkpoint_size_gb=size_gb)


def _compressed(
    spec: JobSpec, trace: CapacityTrace | JobTrace, scale: float
) -> tuple[JobSpec, CapacityTrace | JobTrace]:
    """The spec and trace of a replay at ``scale`` trace seconds per second.

    Zones are compressed zone by zone, each keeping its name (a summary's moves name
    the zones as the measured run's do), and a move's transfer is compressed with
    them: the executor replays it as a pause of trace seconds.
    """
    if scale == 1.0:
        return spec, trace
    if isinstance(trace, ZoneSet):
        zones = tuple(
            dataclasses.replace(scale_trace(zone, scale), name=zone.name) for zone in trace.traces
        )
        compressed = _compressed_spec(spec, scale)
        return compressed.replace(transfer_gbps=spec.transfer_gbps * scale), ZoneSet(zones)
    if not isinstance(trace, CapacityTrace):
        raise ValueError("--time-scale applies to capacity traces only")
    return _compressed_spec(spec, scale), scale_trace(trace, scale)


def _compressed_spec(spec: JobSpec, scale: float) -> JobSpec:
    """The spec's times at ``scale`` trace seconds per second (whatever its trace)."""

    def shrink(value: float | None) -> float | None:
        return None if value is None else value / scale

    return spec.replace(
        notice_s=spec.notice_s / scale,
        deadline_s=shrink(spec.deadline_s),
        start_offset_s=shrink(spec.start_offset_s),
        checkpoint_interval_s=shrink(spec.checkpoint_interval_s),
        checkpoint_cost_s=shrink(spec.checkpoint_cost_s),
    )


def capacity_for(
    trace: CapacityTrace | JobTrace, spec: JobSpec, config: SimConfig, gpus_per_node: int
) -> tuple[ClusterCapacity | None, float]:
    """A shared cluster's capacity (None for a capacity trace), and the on-demand price.

    Public because the offline planner (:mod:`elasim.optimal`) must see the very
    prices that :func:`simulate` will replay.
    """
    od_price = on_demand_price_of(trace, spec.on_demand_price_per_hour)
    if not isinstance(trace, JobTrace):
        return None, od_price
    if config.cluster_gpus is None:
        raise ValueError("a job (shared-cluster) trace needs --cluster-gpus")
    if spec.notice_s:
        raise ValueError(
            "--notice-s applies to spot traces: a shared cluster takes its GPUs back without notice"
        )
    assert spec.start_offset_s is not None and spec.max_nodes is not None
    cluster = ClusterCapacity(
        trace,
        cluster_gpus=config.cluster_gpus,
        gpus_per_node=gpus_per_node,
        price_per_hour=config.cluster_price_per_hour,
        start_offset_s=spec.start_offset_s,
        cap_nodes=spec.max_nodes,
    )
    return cluster, od_price


def simulate(
    spec: JobSpec,
    config: SimConfig | None = None,
    *,
    trace: CapacityTrace | JobTrace | None = None,
    policy: Policy | None = None,
    job: TrainingJob | None = None,
) -> SimResult:
    """Run one elastic job (``spec``) against its trace with its policy.

    Same inputs and seed give the same result, bit for bit: nothing here reads the
    clock (wall time is measured by the caller) and all randomness comes from the
    seed.  The spec names the trace, policy and training job; objects given are
    used instead of loading them (see :func:`resolve`).

    An oracle policy (``optimal``) without a plan gets one first, computed from the
    whole trace window (:mod:`elasim.optimal`); its plan's report goes into the
    summary's ``simulator`` section as ``oracle_plan``.

    Raises:
        ValueError: a job trace without ``cluster_gpus``, or an impossible setting.
        elasim.jobmodel.PolicyError: the policy raised or returned a non-``Decision``.
    """
    config = config or SimConfig()
    start = time.perf_counter()
    spec, trace, policy, job = resolve(spec, config, trace=trace, policy=policy, job=job)
    recorded = spec
    spec, trace = _compressed(spec, trace, config.time_scale)
    oracle_report = None
    if is_oracle(policy) and getattr(policy, "plan", None) is None:
        policy, oracle_report = _planned(policy, trace, job, spec)
    cluster, od_price = capacity_for(trace, spec, config, job.nodes.gpus_per_node)
    made: list[FluidJob] = []

    def fluid_of(rules: JobRules) -> FluidJob:
        made.append(FluidJob(job, rules, checkpoint_cost_s=spec.checkpoint_cost_s))
        return made[0]

    loop = build_job_loop(
        spec,
        trace,
        policy,
        fluid_of,
        on_demand_price_per_hour=od_price,
        horizon_s=config.max_sim_time_s or _DEFAULT_HORIZON_S,
        trace_scale=config.time_scale,
        capacity=cluster,
        record_timeline=config.record_timeline,
    )
    end_s = SimShell.run(loop)
    details = _simulator_details(trace, policy, job, config, recorded, made[0].ckpt_cost_s)
    if cluster is not None:
        details["skipped_background_jobs"] = cluster.skipped_jobs
    if oracle_report is not None:
        details["oracle_plan"] = oracle_report.as_dict()
    if loop.zones is not None:
        details.update(loop.zones.details())
    result = _result_of(loop, end_s, recorded, details)
    log.debug("simulated %s in %.3f s", recorded.trace, time.perf_counter() - start)
    return result


def _planned(policy: Policy, trace: Any, job: TrainingJob, spec: JobSpec) -> tuple[Policy, Any]:
    """An oracle with its plan (the offline planner, imported only for an oracle)."""
    if isinstance(trace, ZoneSet):
        raise ValueError(
            "-p optimal plans one zone; the optimum of several zones is bounded by "
            "elasim.optimal.zones (elasim simulate reports it with --yardstick)"
        )
    from elasim.optimal import prepare_oracle

    return prepare_oracle(policy, trace, job, spec)


def _result_of(loop: JobLoop, end_s: float, spec: JobSpec, details: dict[str, Any]) -> SimResult:
    """The finished loop's books, events, decisions and timeline as a :class:`SimResult`.

    ``spec`` is the run as the caller asked for it (before any time compression), so
    the result records what was asked; ``details`` is the ``simulator`` section.
    """
    return SimResult(
        **summarize(loop, end_s),
        events=tuple(loop.events),
        decisions=tuple(loop.decisions),
        timeline=Timeline(*loop.timeline_columns()[:8]),
        spec=spec,
        simulator=tuple(details.items()),
    )


def fastest_finish_h(job: TrainingJob, spec: JobSpec) -> float:
    """Hours the job needs on its fastest node count from the start, nothing going wrong.

    The bound behind ``deadline_feasible``: a deadline shorter than this cannot be
    met by any policy, so the CLI says so before the run.  It uses the estimates the
    policies see at the start (the fluid model's tables and resume pause).
    """
    rules = JobRules(min_nodes=job.nodes.min, max_nodes=job.nodes.max, rescale=spec.rescale)
    fluid = FluidJob(job, rules, checkpoint_cost_s=spec.checkpoint_cost_s)
    obs = Observation(
        now_s=0.0,
        spot_available=0,
        spot_held=0,
        on_demand_held=0,
        spot_price_per_hour=0.0,
        on_demand_price_per_hour=math.inf,
        progress=0.0,
        remaining_samples=fluid.remaining_samples(),
        throughput_samples_per_s=fluid.throughput_table(),
        statistical_efficiency=fluid.efficiency_table(),
        rescale_cost_s=fluid.rescale_cost_s(),
        resume_cost_s=fluid.resume_cost_s(),
        deadline_s=spec.deadline_s,
        min_nodes=job.nodes.min,
        max_nodes=job.nodes.max,
    )
    return fastest_finish_s(obs, obs.remaining_samples) / 3600.0
