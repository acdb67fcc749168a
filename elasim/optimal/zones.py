"""The offline optimum of a job in several zones: a bound below, a replayed plan above.

What holds (the meaning of the duality gap is kept):

* **Lower bound.**  Relax the zones into one: at every moment as many spot nodes as
  the best zone offers, at the lowest price of any zone, and moves free.  Every schedule
  of the job in the zones (one zone at a time, a move a release, a transfer and a
  start) is a schedule of the relaxed trace that costs no more there: it holds no
  more nodes than some zone offers (so it is preempted there no more often) at no
  lower a price, and a move is in the relaxed trace a release and a start that the
  schedule pays for anyway.  So the exact single-zone planner's lower bound on the
  relaxed trace (:func:`~elasim.optimal.plan_optimal`, weak duality) is a lower bound
  of every schedule of the zones on the same grid: no policy that meets the deadline
  costs less, bar the planner's grid caveat (decisions at segment starts).
* **Upper bound.**  A schedule of the zones, replayed by the ordinary simulator: the
  cheapest that met the deadline of (a) each zone's own optimum, the job staying
  there, and (b) the plan of a dynamic program over ``(segment, zone, spot,
  on-demand)`` whose transitions charge a planned rescale, a start from nothing, or
  a move (the transfer with nothing held, then a start).  Its model is coarser than
  the single-zone planner's (a segment holds at most what the zone offers over the
  whole segment, so it is never preempted; periodic checkpoints as an average
  share), which is why its plan is measured by simulation, not by the model.

The gap ``upper - lower`` is reported: the optimum lies within it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from elasim.jobmodel import FluidJob, JobSpec, zone_move_s
from elasim.jobmodel.build import job_rules
from elasim.jobmodel.rules import young_daly_interval_s
from elasim.policies import Decision, Observation, OptimalPolicy, Plan
from elasim.traces.model import CapacityTrace, on_demand_price_of

__all__ = ["ZoneBounds", "ZonePlanPolicy", "plan_zones", "relaxed_trace", "zone_bounds"]


def _change_times(trace: CapacityTrace, offset_s: float, span_s: float) -> np.ndarray:
    """Job times in ``[0, span_s)`` at which ``trace`` (replayed from ``offset_s``) changes."""
    reps = int(math.ceil((offset_s + span_s) / trace.duration_s)) + 1
    times = np.concatenate([trace.time_s + m * trace.duration_s for m in range(reps)]) - offset_s
    return times[(times > 0) & (times < span_s)]


def _values(trace: CapacityTrace, offset_s: float, t_s: np.ndarray, default: float) -> tuple:
    """``(available, price)`` arrays of ``trace`` at job times ``t_s`` (repeating)."""
    index = trace.rows_at(offset_s + t_s)
    price = (
        np.full(t_s.size, default) if trace.price_per_hour is None else trace.price_per_hour[index]
    )
    return trace.available[index], price


def _zone_table(zones: Any, spec: JobSpec, span_s: float) -> tuple[np.ndarray, ...]:
    """Every change time of every zone in ``[0, span_s)`` and each zone's values there."""
    offset = float(spec.start_offset_s or 0.0)
    times = np.unique(
        np.concatenate([[0.0], *(_change_times(t, offset, span_s) for t in zones.traces)])
    )
    default = spec.spot_price_per_hour or 0.0
    values = [_values(t, offset, times, default) for t in zones.traces]
    available = np.array([v[0] for v in values], dtype=np.int64)
    price = np.array([v[1] for v in values], dtype=float)
    return times, available, price


def relaxed_trace(zones: Any, spec: JobSpec, span_s: float) -> CapacityTrace:
    """The zones as one trace from the job's start: the most nodes, the lowest price.

    Replayed from offset 0 over ``span_s`` (then repeating, as every replay does):
    see the module docstring for why its optimum bounds the zones' from below.
    """
    times, available, price = _zone_table(zones, spec, span_s)
    return CapacityTrace(
        name=f"best of {zones.name}",
        time_s=times,
        available=available.max(axis=0),
        price_per_hour=price.min(axis=0),
        metadata=zones.metadata,
        duration_s=span_s,
    )


@dataclass(frozen=True)
class _Grid:
    """The zones on the planning grid: segment lengths, spot offered and its price."""

    length_s: np.ndarray  # (K,)
    available: np.ndarray  # (Z, K): the least a zone offers over the segment
    price: np.ndarray  # (Z, K): the most it asks over the segment


def _grid(zones: Any, spec: JobSpec, horizon_s: float, step_s: float, cap: int) -> _Grid:
    starts = np.arange(0.0, horizon_s, step_s)
    times, available, price = _zone_table(zones, spec, horizon_s)
    seg = np.searchsorted(starts, times, side="right") - 1
    z = available.shape[0]
    least = np.full((z, starts.size), np.iinfo(np.int64).max)
    most = np.zeros((z, starts.size))
    for i in range(z):
        np.minimum.at(least[i], seg, np.minimum(available[i], cap))
        np.maximum.at(most[i], seg, price[i])
    # a segment without a change of its own holds what held at its start
    for k in range(1, starts.size):
        empty = least[:, k] == np.iinfo(np.int64).max
        least[empty, k], most[empty, k] = least[empty, k - 1], most[empty, k - 1]
    lengths = np.diff(np.append(starts, horizon_s))
    return _Grid(lengths, least, most)


@dataclass(frozen=True)
class _Model:
    """What the zone program knows of the job (the fluid model's estimates)."""

    configs: np.ndarray  # (C, 2): spot, on-demand; row 0 is (0, 0)
    work_per_s: np.ndarray  # (C,): effective samples per second, checkpoints averaged
    od_usd_per_s: np.ndarray  # (C,)
    rescale_s: float
    start_s: float
    move_s: float
    target: float


def _model(job: Any, spec: JobSpec, od_price: float, mtbf_s: float) -> _Model:
    rules = job_rules(spec, on_demand_price_per_hour=od_price)
    fluid = FluidJob(job, rules, checkpoint_cost_s=spec.checkpoint_cost_s)
    write_s = fluid.checkpoint_write_s()
    interval = spec.checkpoint_interval_s or young_daly_interval_s(write_s, mtbf_s)
    share = 1.0 if math.isinf(interval) else interval / (interval + write_s)
    low, high = rules.min_nodes, rules.max_nodes
    od_ok = math.isfinite(od_price)
    pairs = [(0, 0)] + [
        (s, n - s) for n in range(low, high + 1) for s in range(n + 1) if od_ok or s == n
    ]
    configs = np.array(pairs, dtype=np.int64)
    thr, eff = fluid.throughput_table(), fluid.efficiency_table()
    goodput = np.array([thr[n] * eff[n] if n else 0.0 for n in configs.sum(axis=1)])
    resume = fluid.resume_cost_s()
    return _Model(
        configs=configs,
        work_per_s=goodput * share,
        od_usd_per_s=configs[:, 1] * (od_price if od_ok else 0.0) / 3600.0,
        rescale_s=fluid.rescale_cost_s(),
        start_s=fluid.rescale_cost_s() if resume is None else resume,
        move_s=zone_move_s(spec.checkpoint_size_gb or 0.0, spec.transfer_gbps),
        target=fluid.remaining_samples(),
    )


def _segment(
    value: np.ndarray, grid: _Grid, model: _Model, k: int, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """One step of the program: the best value of each ``(zone, config)`` after ``k``.

    Returns the values and, per state, where it came from as a flat index into the
    previous ``(zone, config)`` states.
    """
    length = grid.length_s[k]
    spot_usd = np.outer(grid.price[:, k], model.configs[:, 0]) / 3600.0  # (Z, C)
    usd_per_s = spot_usd + model.od_usd_per_s
    gain = lam * model.work_per_s  # (C,)
    ok = model.configs[None, :, 0] <= grid.available[:, k, None]
    n_zones, n_configs = value.shape
    flat = np.arange(n_zones * n_configs).reshape(n_zones, n_configs)
    candidates = [(value + (gain - usd_per_s) * length, flat)]  # stay
    running = value.copy()
    running[:, 0] = -np.inf
    best_running = running.argmax(axis=1)
    for source, pause in ((best_running, model.rescale_s), (np.zeros(n_zones, int), model.start_s)):
        before = value[np.arange(n_zones), source][:, None]
        after = before + gain * max(length - pause, 0.0) - usd_per_s * length
        candidates.append(
            (after, np.broadcast_to(flat[np.arange(n_zones), source][:, None], after.shape))
        )
    top = value.argmax(axis=1)  # a move: from the best state of another zone
    top_value = value[np.arange(n_zones), top]
    held = max(length - model.move_s, 0.0)
    for z in range(n_zones):
        others = [o for o in range(n_zones) if o != z]
        if not others:
            continue
        src = max(others, key=lambda o: top_value[o])
        after = top_value[src] + gain * max(held - model.start_s, 0.0) - usd_per_s[z] * held
        row = np.full((n_zones, n_configs), -np.inf)
        row[z] = after
        candidates.append((row, np.full((n_zones, n_configs), flat[src, top[src]])))
    values = np.stack([c[0] for c in candidates])
    sources = np.stack([np.broadcast_to(c[1], values.shape[1:]) for c in candidates])
    pick = values.argmax(axis=0)
    best = np.take_along_axis(values, pick[None], 0)[0]
    best[~ok] = -np.inf
    return best, np.take_along_axis(sources, pick[None], 0)[0]


def _path(grid: _Grid, model: _Model, lam: float) -> np.ndarray:
    """The best ``(zone, config)`` per segment at the price ``lam`` (USD per sample)."""
    n_zones, n_configs = grid.available.shape[0], len(model.configs)
    value = np.full((n_zones, n_configs), -np.inf)
    value[0, 0] = 0.0  # the job starts in the first zone, holding nothing
    sources = []
    for k in range(grid.length_s.size):
        value, source = _segment(value, grid, model, k, lam)
        sources.append(source)
    state = int(np.argmax(value))
    path = np.empty(grid.length_s.size, dtype=np.int64)
    for k in range(grid.length_s.size - 1, -1, -1):
        path[k] = state
        state = int(sources[k].flat[state])
    return path


def _work_and_cost(grid: _Grid, model: _Model, path: np.ndarray) -> tuple[np.ndarray, float]:
    """Work done by the end of each segment along ``path``, and the path's cost (USD)."""
    n_configs = len(model.configs)
    work = np.empty(path.size)
    done, cost, before = 0.0, 0.0, 0  # (zone 0, nothing held)
    for k, state in enumerate(path):
        zone, config = divmod(int(state), n_configs)
        was_zone, was = divmod(before, n_configs)
        length, held = grid.length_s[k], grid.length_s[k]
        if zone != was_zone:
            held = max(length - model.move_s, 0.0)
            pause = model.start_s
        elif config == was:
            pause = 0.0
        else:
            pause = model.rescale_s if was else model.start_s
        rate = grid.price[zone, k] * model.configs[config, 0] / 3600.0 + model.od_usd_per_s[config]
        cost += rate * held
        done += model.work_per_s[config] * max(held - pause, 0.0)
        work[k] = done
        before = int(state)
    return work, cost


def plan_zones(
    zones: Any, job: Any, spec: JobSpec, *, step_s: float = 300.0, safety_margin_s: float = 600.0
) -> tuple[Plan, tuple[int, ...]] | None:
    """The zone program's cheapest plan that meets the deadline (None: none found).

    Returns the plan rows (as :class:`~elasim.policies.Plan`) and each row's zone.
    Lagrangian search as :mod:`.solve` does it: the smallest price of work whose
    schedule does the job's work by the deadline less ``safety_margin_s``.
    """
    if spec.deadline_s is None:
        raise ValueError("the offline optimum needs a deadline (--deadline-h)")
    horizon = spec.deadline_s - safety_margin_s
    if horizon <= step_s:
        return None
    od = on_demand_price_of(zones, spec.on_demand_price_per_hour)
    grid = _grid(zones, spec, horizon, step_s, spec.max_nodes or job.nodes.max)
    model = _model(job, spec, od, mtbf_s=max(horizon, 1.0))
    low, high = 0.0, 1.0
    while _work_and_cost(grid, model, _path(grid, model, high))[0][-1] < model.target:
        high *= 4.0
        if high > 1e12:
            return None
    for _ in range(30):
        mid = 0.5 * (low + high)
        if _work_and_cost(grid, model, _path(grid, model, mid))[0][-1] >= model.target:
            high = mid
        else:
            low = mid
    path = _path(grid, model, high)
    work, _ = _work_and_cost(grid, model, path)
    return _rows(grid, model, path, work, horizon)


def _rows(
    grid: _Grid, model: _Model, path: np.ndarray, work: np.ndarray, horizon_s: float
) -> tuple[Plan, tuple[int, ...]]:
    """Plan rows at every change of zone or configuration, then "hurry" at the horizon."""
    n_configs = len(model.configs)
    starts, spot, od, progress, zone_of = [], [], [], [], []
    start_s, last = 0.0, None
    for k, state in enumerate(path):
        if int(state) != last:
            zone, config = divmod(int(state), n_configs)
            starts.append(start_s)
            spot.append(int(model.configs[config, 0]))
            od.append(int(model.configs[config, 1]))
            done = work[k - 1] if k else 0.0
            progress.append(round(min(done / model.target, 1.0), 9))
            zone_of.append(zone)
            last = int(state)
        start_s += float(grid.length_s[k])
    top = int(model.configs.sum(axis=1).max())
    starts.append(horizon_s)
    spot.append(top)
    od.append(top if model.od_usd_per_s.any() or top == 0 else 0)
    progress.append(1.0)
    zone_of.append(zone_of[-1])
    return Plan(tuple(starts), tuple(spot), tuple(od), tuple(progress)), tuple(zone_of)


class ZonePlanPolicy(OptimalPolicy):
    """The zone program's plan, replayed: each row's nodes in the row's zone.

    An oracle like ``optimal`` (whose replay and safety net it keeps: when only
    running flat out still makes the deadline, it does so where it is).  Not
    registered: :func:`zone_bounds` makes it for one run.
    """

    name = "optimal_zones"

    def __init__(self, plan: Plan, zones: tuple[int, ...], config: Any = None) -> None:
        super().__init__(config, plan)
        self.zones = zones

    def decide(self, obs: Observation) -> Decision:
        """The plan's row for now, in its zone."""
        decision = super().decide(obs)
        assert self.plan is not None
        row = self.plan.row_at(obs.now_s)
        planned = (self.plan.spot_nodes[row], self.plan.on_demand_nodes[row])
        if (decision.spot_nodes, decision.on_demand_nodes) != planned:
            return decision  # the safety net: flat out, here
        return Decision(*planned, decision.wake_after_s, self.zones[row])


@dataclass(frozen=True)
class ZoneBounds:
    """Where the optimum of a job in several zones lies, and what each schedule cost.

    Attributes:
        lower_bound_usd: no schedule of the zones that meets the deadline costs less
            (None: the relaxed planner found none feasible).
        upper_bound_usd: the cheapest simulated schedule below that met it (None:
            none did).
        zone_usd: each zone's own optimum, the job staying there, simulated (None:
            it missed the deadline), by zone name.
        zone_plan_usd: the zone program's plan, simulated (None: missed or none).
        zone_plan_moves: the moves that replay made.
        zone_plan_move_log: each of them, ``(time_s, from_zone, to_zone)`` from the
            job's start (the simulator's ``moves``), so a caller can tell why it moved.
    """

    lower_bound_usd: float | None
    upper_bound_usd: float | None
    zone_usd: dict[str, float | None]
    zone_plan_usd: float | None
    zone_plan_moves: int
    zone_plan_move_log: tuple[tuple[float, str, str], ...] = ()

    @property
    def best_zone(self) -> str | None:
        """The zone whose own optimum is cheapest (None: none met the deadline)."""
        met = {k: v for k, v in self.zone_usd.items() if v is not None}
        return min(met, key=met.__getitem__) if met else None

    @property
    def gap(self) -> float | None:
        """``upper / lower - 1``: how far the optimum may lie from either bound."""
        if self.lower_bound_usd is None or self.upper_bound_usd is None:
            return None
        return self.upper_bound_usd / max(self.lower_bound_usd, 1e-12) - 1.0


def zone_bounds(zones: Any, job: Any, spec: JobSpec, *, step_s: float = 300.0) -> ZoneBounds:
    """The lower and upper bounds of the zones' optimum (see the module docstring).

    ``spec`` is resolved (:func:`elasim.sim.resolve`: start offset, node bounds,
    checkpoint size) and has a deadline.
    """
    from elasim.policies import make_policy
    from elasim.sim import SimConfig, simulate

    from . import plan_optimal

    if spec.deadline_s is None:
        raise ValueError("the offline optimum needs a deadline (--deadline-h)")
    config = SimConfig(max_sim_time_s=max(4 * spec.deadline_s, 86400.0))
    one = spec.replace(zone_traces=())
    relaxed = relaxed_trace(zones, spec, spec.deadline_s + step_s)
    _, report = plan_optimal(relaxed, job, one.replace(start_offset_s=0.0), step_s=step_s)
    zone_usd: dict[str, float | None] = {}
    for trace in zones.traces:
        result = simulate(
            one.replace(trace=trace.name),
            config,
            trace=trace,
            policy=make_policy("optimal"),
            job=job,
        )
        zone_usd[trace.name] = result.cost_usd if result.deadline_met else None
    planned = plan_zones(zones, job, spec, step_s=step_s)
    plan_usd, moves, log = None, 0, ()
    if planned is not None:
        result = simulate(spec, config, trace=zones, policy=ZonePlanPolicy(*planned), job=job)
        moves = int(dict(result.simulator)["zone_moves"])
        log = tuple((float(t), str(a), str(b)) for t, a, b in dict(result.simulator)["moves"])
        plan_usd = result.cost_usd if result.deadline_met else None
    met = [v for v in (*zone_usd.values(), plan_usd) if v is not None]
    return ZoneBounds(
        lower_bound_usd=report.lower_bound_usd,
        upper_bound_usd=min(met) if met else None,
        zone_usd=zone_usd,
        zone_plan_usd=plan_usd,
        zone_plan_moves=moves,
        zone_plan_move_log=log,
    )
