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

import logging
import math
import time
from collections.abc import Iterator
from typing import Any

import simpy

from elasim.job import TrainingJob
from elasim.jobmodel import (
    CapacityReplay,
    FluidJob,
    JobLoop,
    JobRules,
    describe_checkpoint_interval,
    pause_for,
    summarize,
)
from elasim.policies import Observation, Policy, is_oracle
from elasim.policies._ondemand import fastest_finish_s
from elasim.traces.model import CapacityTrace, JobTrace, on_demand_price_of, start_offset_of

from .capacity import ClusterCapacity
from .config import SimConfig, SimResult, Timeline

__all__ = ["SimShell", "capacity_for", "fastest_finish_h", "pause_for", "simulate"]

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
            deadline = loop.turn(env.now)
            if loop.finished or not math.isfinite(deadline):
                break
            yield env.timeout(max(deadline - env.now, 0.0))
        loop.close(env.now)
        self.done_event.succeed()


def _metadata(
    trace: CapacityTrace | JobTrace,
    policy: Policy,
    job: TrainingJob,
    config: SimConfig,
    *,
    offset: float,
    checkpoint_cost_s: float,
    trace_name: str | None,
    policy_spec: str | None,
) -> dict[str, Any]:
    return {
        "trace": trace_name or getattr(trace, "name", ""),
        "policy": policy_spec or getattr(policy, "name", type(policy).__name__),
        "policy_config": repr(getattr(policy, "config", None)),
        "job": job.name,
        "rescale": config.rescale.value,
        "notice_s": config.notice_s,
        "checkpoint_interval_s": describe_checkpoint_interval(config.checkpoint_interval_s),
        "checkpoint_cost_s": checkpoint_cost_s,
        "deadline_s": config.deadline_s,
        "seed": config.seed,
        "start_offset_s": offset,
        "min_nodes": job.nodes.min,
        "max_nodes": job.nodes.max,
        "cluster_gpus": config.cluster_gpus,
        "priced": trace.price_per_hour is not None or config.spot_price_per_hour is not None
        if isinstance(trace, CapacityTrace)
        else config.cluster_price_per_hour > 0,
    }


def capacity_for(
    trace: CapacityTrace | JobTrace, job: TrainingJob, config: SimConfig
) -> tuple[ClusterCapacity | None, CapacityReplay | None, float, float]:
    """Where capacity comes from: (cluster, replay, start offset, on-demand price).

    Public because the offline planner (:mod:`elasim.optimal`) must see the very
    window, cap and prices that :func:`simulate` will replay.
    """
    offset = start_offset_of(trace, config.start_offset_s, config.seed)
    od_price = on_demand_price_of(trace, config.on_demand_price_per_hour)
    if isinstance(trace, JobTrace):
        if config.cluster_gpus is None:
            raise ValueError("a job (shared-cluster) trace needs --cluster-gpus")
        cluster = ClusterCapacity(
            trace,
            cluster_gpus=config.cluster_gpus,
            gpus_per_node=job.nodes.gpus_per_node,
            price_per_hour=config.cluster_price_per_hour,
            start_offset_s=offset,
            cap_nodes=job.nodes.max,
        )
        return cluster, None, offset, od_price
    replay = CapacityReplay.from_trace(
        trace,
        start_offset_s=offset,
        notice_s=config.notice_s,
        cap_nodes=job.nodes.max,
        default_price_per_hour=config.spot_price_per_hour or 0.0,
    )
    return None, replay, offset, od_price


def simulate(
    trace: CapacityTrace | JobTrace,
    policy: Policy,
    job: TrainingJob,
    config: SimConfig | None = None,
    *,
    trace_name: str | None = None,
    policy_spec: str | None = None,
) -> SimResult:
    """Run one elastic job against one trace with one policy.

    Same inputs and seed give the same result, bit for bit: nothing here reads the
    clock (wall time is measured by the caller) and all randomness comes from ``seed``.

    An oracle policy (``optimal``) without a plan gets one first, computed from the
    whole trace window (:mod:`elasim.optimal`); its plan's report goes into the
    metadata as ``oracle_plan``.

    Raises:
        ValueError: a job trace without ``cluster_gpus``, or an impossible setting.
        elasim.jobmodel.PolicyError: the policy raised or returned a non-``Decision``.
    """
    config = config or SimConfig()
    start = time.perf_counter()
    oracle_report = None
    if is_oracle(policy) and getattr(policy, "plan", None) is None:
        from elasim.optimal import prepare_oracle

        policy, oracle_report = prepare_oracle(policy, trace, job, config)
    env = simpy.Environment()
    cluster, replay, offset, od_price = capacity_for(trace, job, config)
    rules = JobRules(
        min_nodes=job.nodes.min,
        max_nodes=job.nodes.max,
        rescale=config.rescale,
        notice_s=config.notice_s,
        checkpoint_interval_s=config.checkpoint_interval_s,
        deadline_s=config.deadline_s,
        on_demand_price_per_hour=od_price,
        horizon_s=config.max_sim_time_s or _DEFAULT_HORIZON_S,
        trace_scale=config.trace_scale,
    )
    fluid = FluidJob(job, rules, checkpoint_cost_s=config.checkpoint_cost_s)
    loop = JobLoop(
        policy,
        fluid,
        rules,
        replay=cluster if cluster is not None else replay,  # type: ignore[arg-type]
        record_timeline=config.record_timeline,
    )
    shell = SimShell(env, loop)
    env.process(shell.process())
    env.run(until=shell.done_event)
    metadata = _metadata(
        trace,
        policy,
        job,
        config,
        offset=offset,
        checkpoint_cost_s=fluid.ckpt_cost_s,
        trace_name=trace_name,
        policy_spec=policy_spec,
    )
    if cluster is not None:
        metadata["skipped_background_jobs"] = cluster.skipped_jobs
    if oracle_report is not None:
        metadata["oracle_plan"] = oracle_report.as_dict()
    result = SimResult(
        **summarize(loop, env.now),
        events=tuple(loop.events),
        decisions=tuple(loop.decisions),
        timeline=Timeline(*loop.timeline_columns()[:8]),
        metadata=tuple(metadata.items()),
    )
    log.debug("simulated %s in %.3f s", metadata["trace"], time.perf_counter() - start)
    return result


def fastest_finish_h(job: TrainingJob, config: SimConfig) -> float:
    """Hours the job needs on its fastest node count from the start, nothing going wrong.

    The bound behind ``deadline_feasible``: a deadline shorter than this cannot be
    met by any policy, so the CLI says so before the run.  It uses the estimates the
    policies see at the start (the fluid model's tables and resume pause).
    """
    rules = JobRules(min_nodes=job.nodes.min, max_nodes=job.nodes.max, rescale=config.rescale)
    fluid = FluidJob(job, rules, checkpoint_cost_s=config.checkpoint_cost_s)
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
        deadline_s=config.deadline_s,
        min_nodes=job.nodes.min,
        max_nodes=job.nodes.max,
    )
    return fastest_finish_s(obs, obs.remaining_samples) / 3600.0
