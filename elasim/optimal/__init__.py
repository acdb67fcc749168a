"""The offline optimum: the cheapest schedule for a trace known in advance.

:func:`plan_optimal` computes, for one job on one trace window with a deadline, the
cheapest schedule of spot and on-demand node counts that meets the deadline under
the job model (pauses, boots, checkpoints, preemptions, notice: see
:mod:`.problem`), with the dynamic program of :mod:`.solve`.  The schedule is a
:class:`~elasim.policies.Plan`; the oracle policy ``optimal``
(:class:`~elasim.policies.OptimalPolicy`) replays it through the ordinary simulator,
so the optimum's cost is measured by the same ``simulate()`` as every policy's, and
"no policy beats the optimum" is checked on the simulator's numbers.

The exact problem: choose, for every segment of the decision grid (every ``step_s``,
every change of the trace, one second before every drop), a configuration
``(spot, on-demand)`` with no more spot nodes than the segment offers, so that the
work done by the horizon (the deadline less ``safety_margin_s``), after every loss
the job model charges for changes and preemptions, reaches the target, at the least
cost (paid until the work is done).  The solver's guarantees are in :mod:`.solve`
(the Lagrangian program and its bound) and :mod:`.horizon` (a deadline that lies
far away, even past the trace's end, is planned over a capped horizon, at most one
period of the repeating trace, with the bound that holds for every horizon).

How close to the true optimum: the planner decides only at segment starts (every
``step_s`` and every change of the trace), prices the job model's pauses exactly but
periodic checkpoints as an average overhead and unannounced total losses as a whole
checkpoint interval, and reports a lower bound (weak duality) next to its own cost.
The README quotes both gaps for the bundled traces (``benchmarks/bench_policies.py``).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from elasim.jobmodel import CapacityReplay, JobSpec
from elasim.policies import OptimalPolicy, Plan
from elasim.progress import report
from elasim.traces.model import CapacityTrace, on_demand_price_of, start_offset_of

from .horizon import CAP_TOLERANCE, HorizonCap, far_s, find_cap
from .problem import PlanningProblem, build_problem
from .solve import Solution, solve

log = logging.getLogger(__name__)

__all__ = ["PlanReport", "PlanningProblem", "Solution", "plan_optimal", "prepare_oracle"]


@dataclass(frozen=True)
class PlanReport:
    """What the planner knows about its plan (goes into ``summary.json``'s inputs).

    Attributes:
        step_s: decision grid, seconds.
        segments: segments of the grid within the horizon.
        configurations: (spot, on-demand) configurations considered per segment.
        horizon_s: the planned finish, job seconds.
        feasible: whether any schedule on the grid meets the deadline.
        model_cost_usd: the plan's cost in the planner's model.
        lower_bound_usd: no schedule on the grid costs less (None: infeasible).
        checkpoint_interval_s: periodic checkpoint interval assumed.
    """

    step_s: float
    segments: int
    configurations: int
    horizon_s: float
    feasible: bool
    model_cost_usd: float
    lower_bound_usd: float | None
    checkpoint_interval_s: float

    def as_dict(self) -> dict[str, Any]:
        """Plain, rounded values (deterministic bytes in ``summary.json``)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = None if not math.isfinite(value) else round(value, 9)
        return out


def plan_optimal(
    trace: Any,
    job: Any,
    spec: JobSpec,
    *,
    step_s: float = 300.0,
    safety_margin_s: float = 60.0,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Plan, PlanReport]:
    """The cheapest plan that meets ``spec.deadline_s`` on ``trace`` (see the module).

    ``spec`` is the job as the plan will be replayed (resolved by
    :func:`elasim.sim.resolve`: the same window, node bounds, notice, mechanism,
    checkpoint settings and prices).  When not even the fastest schedule meets the
    deadline, the plan is to run as fast as possible from the start.
    ``progress(done, total)`` is called as the solver's passes go (see
    :func:`.solve.solve`); by default they are logged as progress records
    (:mod:`elasim.progress`).

    Raises:
        ValueError: no deadline, or a shared-cluster job trace (only capacity traces).
    """
    if spec.deadline_s is None:
        raise ValueError("the offline optimum 'optimal' needs a deadline (--deadline-h)")
    if not isinstance(trace, CapacityTrace):
        raise ValueError("the offline optimum 'optimal' needs a capacity (spot) trace")
    od_price = on_demand_price_of(trace, spec.on_demand_price_per_hour)
    horizon = spec.deadline_s - safety_margin_s
    hurry = (job.nodes.max, job.nodes.max if math.isfinite(od_price) else 0)
    if horizon <= step_s:
        plan = Plan((0.0,), (hurry[0],), (hurry[1],))
        report = PlanReport(step_s, 0, 0, max(horizon, 0.0), False, math.nan, None, math.nan)
        return plan, report
    problem, cap = _capped_problem(trace, job, spec, horizon, step_s, od_price)
    solution = solve(problem, progress=progress or _log_progress)
    bound = solution.lower_bound_usd
    if problem.horizon_s < horizon:
        bound = cap.bound_usd  # the bound that holds at the deadline asked for
    report = PlanReport(
        step_s=float(step_s),
        segments=problem.segments,
        configurations=len(problem.configs),
        horizon_s=float(problem.horizon_s),
        feasible=solution.feasible,
        model_cost_usd=solution.cost_usd if solution.feasible else math.nan,
        lower_bound_usd=bound if solution.feasible else None,
        checkpoint_interval_s=problem.checkpoint_interval_s,
    )
    if not solution.feasible:
        return Plan((0.0,), (hurry[0],), (hurry[1],)), report
    return _plan_of(problem, solution, hurry), report


def _capped_problem(
    trace: CapacityTrace, job: Any, spec: JobSpec, horizon_s: float, step_s: float, od: float
) -> tuple[PlanningProblem, HorizonCap]:
    """The problem over the horizon capped where more time cannot lower the cost.

    The trace repeats (as the replay repeats it), so the cap is found within two of
    its periods, or as long as a run at the cheapest price needs (:mod:`.horizon`); a
    deadline past the trace's end is logged once.
    """

    def build(horizon: float, like: PlanningProblem | None = None) -> PlanningProblem:
        return build_problem(
            _replay_of(trace, job, spec),
            job,
            mode=spec.rescale,
            notice_s=spec.notice_s,
            horizon_s=horizon,
            step_s=step_s,
            on_demand_price_per_hour=od,
            checkpoint_interval_s=spec.checkpoint_interval_s,
            checkpoint_cost_s=spec.checkpoint_cost_s,
            like=like,
        )

    replay = _replay_of(trace, job, spec)
    period_s = replay.period_s
    scan = build(min(horizon_s, 2 * period_s))
    far = far_s(scan, period_s)  # a slow, cheap run may outlast two periods
    if min(horizon_s, far) > scan.horizon_s:
        scan = build(min(horizon_s, far), like=scan)
    cap = find_cap(scan, horizon_s, period_s, far)
    end_s = period_s - replay.start_offset_s  # the trace's end, in job time
    if horizon_s > end_s:
        _note_past_end(horizon_s, end_s, cap)
    if cap.horizon_s >= scan.horizon_s:
        return scan, cap
    return build(cap.horizon_s, like=scan), cap


def _log_progress(done: int, total: int) -> None:
    """The solver's passes as progress records (:mod:`elasim.progress`)."""
    report("offline optimum, forward passes", done, total)


@functools.lru_cache(maxsize=64)
def _note_past_end(horizon_s: float, end_s: float, cap: HorizonCap) -> None:
    """One log line (once per process and case) for a deadline past the trace's end."""
    if cap.exact:
        how = (
            f"planning up to {cap.horizon_s / 3600:,.1f} h: a schedule done by "
            f"{cap.finish_s / 3600:,.1f} h is within {CAP_TOLERANCE:.0e} of the least any "
            f"deadline allows ({cap.bound_usd:,.4f} USD)"
        )
    else:
        how = (
            f"planning over {cap.horizon_s / 3600:,.1f} h (as long as a run at the cheapest "
            f"price needs, at least two periods); no deadline can "
            f"cost less than {cap.bound_usd:,.4f} USD (reported as the lower bound)"
        )
    log.warning(
        "the deadline lies %.1f h past the trace's end (%.1f h of job time); the trace "
        "repeats, as the run replays it; %s",
        (horizon_s - end_s) / 3600,
        end_s / 3600,
        how,
    )


def _replay_of(trace: CapacityTrace, job: Any, spec: JobSpec) -> CapacityReplay:
    """The capacity the plan is made for, exactly as the run will replay it.

    The plan is only optimal for the run if it sees the same window (start offset and
    seed), notices, node cap and spot prices as the replay of the run itself.
    """
    return CapacityReplay.from_trace(
        trace,
        start_offset_s=start_offset_of(trace, spec.start_offset_s, spec.seed),
        notice_s=spec.notice_s,
        cap_nodes=spec.max_nodes or job.nodes.max,
        default_price_per_hour=spec.spot_price_per_hour or 0.0,
    )


def _plan_of(problem: PlanningProblem, solution: Solution, hurry: tuple[int, int]) -> Plan:
    """The solution as plan rows: one row per change of configuration, then hurry."""
    starts: list[float] = []
    spot: list[int] = []
    on_demand: list[int] = []
    progress: list[float] = []
    last = None
    for k, config in enumerate(solution.path):
        pair = (int(problem.configs[config, 0]), int(problem.configs[config, 1]))
        if pair == last:
            continue
        starts.append(float(problem.start_s[k]))
        spot.append(pair[0])
        on_demand.append(pair[1])
        progress.append(round(float(solution.progress[k]), 9))
        last = pair
    # past the planned finish, a job that is behind runs as fast as it can
    starts.append(problem.horizon_s)
    spot.append(hurry[0])
    on_demand.append(hurry[1])
    progress.append(1.0)
    return Plan(tuple(starts), tuple(spot), tuple(on_demand), tuple(progress))


def prepare_oracle(policy: Any, trace: Any, job: Any, spec: JobSpec) -> tuple[Any, PlanReport]:
    """``policy`` (an :class:`~elasim.policies.OptimalPolicy`) with its plan for this run."""
    if not isinstance(policy, OptimalPolicy):
        raise ValueError(f"no planner for the oracle {type(policy).__name__}")
    options = policy.config
    plan, report = plan_optimal(
        trace, job, spec, step_s=options.step_s, safety_margin_s=options.safety_margin_s
    )
    return policy.with_plan(plan), report
