"""Policy x trace x seed grids, run in parallel processes or on a Ray cluster.

Each grid point is an independent, deterministic simulation, so the grid is
embarrassingly parallel: results are collected in grid order whatever the order of
completion, and the table is the same with 1 or N processes, and with either backend
(:mod:`elasim.tasks` runs them; this module says what a point is and makes its row).
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from elasim.jobmodel import JobSpec, RescaleMode
from elasim.sim.driver import DEFAULT_JOB
from elasim.tasks import BACKENDS, check_backend, ray_connection, ray_in_flight, run_local

__all__ = [
    "BACKENDS",
    "YARDSTICK",
    "YARDSTICK_COLUMNS",
    "SweepPoint",
    "SweepSpec",
    "run_point",
    "run_sweep",
]

logger = logging.getLogger(__name__)

#: The ``policy`` of a grid point that computes the yardstick of its group, not a run.
YARDSTICK = "@yardstick"
#: Columns the yardstick adds to every row (None where it does not apply).
YARDSTICK_COLUMNS = (
    "cost_vs_on_demand",
    "gap_closed",
    "on_demand_plan_usd",
    "greedy_fallback_usd",
    "optimal_usd",
    "cost_vs_greedy",
    "cost_vs_optimal",
    "greedy_usd",
    "greedy_met",
)
#: What a row and its yardstick have in common.
_GROUP = ("trace", "seed", "notice_s", "rescale")


@dataclass(frozen=True)
class SweepPoint:
    """One simulation of the grid (picklable: names, not objects).

    Attributes:
        spec: the job of this point (the grid's base spec with this point's trace,
            policy, its options, seed, notice and mechanism).
        cluster_gpus: the shared cluster's size, for a job trace.
        yardstick: this point computes the yardstick of its group, not a run.
    """

    spec: JobSpec
    cluster_gpus: int | None = None
    yardstick: bool = False

    @property
    def trace(self) -> str:
        """The trace's name."""
        return str(self.spec.trace)

    @property
    def policy(self) -> str:
        """The policy's spec (``@yardstick`` for a yardstick point)."""
        return YARDSTICK if self.yardstick else str(self.spec.policy)

    def group(self) -> tuple[Any, ...]:
        """What a row and its yardstick have in common (:data:`_GROUP`)."""
        spec = self.spec
        return (spec.trace, spec.seed, spec.notice_s, spec.rescale.value)


@dataclass(frozen=True)
class SweepSpec:
    """The grid: every combination of traces, policies, seeds, notices and mechanisms.

    Attributes:
        traces: the traces (names or paths).
        policies: the policies (names, ``file.py:Class`` or ``module:Class``).
        seeds: the seeds (each draws its start offset when ``base`` has none).
        notice_s: the preemption notices (a job trace is swept at notice 0 only).
        rescale: the mechanisms.
        base: everything else about the job, the same at every point (the training
            job, node bounds, deadline, checkpoints, start offset, prices, and the
            ``--set`` options, each policy getting those its ``Config`` has).
        cluster_gpus: the shared cluster's size, for job traces.
        with_yardstick: add the yardstick's columns when there is a deadline.
    """

    traces: tuple[str, ...]
    policies: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    notice_s: tuple[float, ...] = (0.0,)
    rescale: tuple[str, ...] = ("inplace",)
    base: JobSpec = field(default_factory=lambda: JobSpec(job="resnet50_v100", start_offset_s=None))
    cluster_gpus: int | None = None
    with_yardstick: bool = True

    @property
    def total_points(self) -> int:
        """Grid points including the yardstick's (what progress counts)."""
        return self.size + (len(self._groups()) if self.yardstick else 0)

    @property
    def size(self) -> int:
        """Number of simulations."""
        return len(self.policies) * len(self._groups())

    @property
    def yardstick(self) -> bool:
        """Whether the grid gets ``cost_vs_on_demand`` and ``gap_closed`` (it has a deadline)."""
        return self.with_yardstick and self.base.deadline_s is not None

    def _groups(self) -> list[tuple[str, int, float, str]]:
        """Every trace x seed x notice x mechanism, in order.

        A job (shared-cluster) trace is swept at notice 0 only: the cluster takes its
        GPUs back without notice, so a notice there would be a point that differs
        from another only in its label (``elasim simulate`` refuses it).
        """
        groups = []
        for trace, seed, notice, mode in itertools.product(
            self.traces, self.seeds, self.notice_s, self.rescale
        ):
            if _load_trace(trace).kind == "jobs":
                if notice != self.notice_s[0]:
                    continue
                notice = 0.0
            groups.append((trace, seed, notice, mode))
        return groups

    def reference_points(self) -> Iterator[SweepPoint]:
        """One yardstick point per trace, seed, notice and mechanism (none without a deadline).

        Each computes the on-demand plan, greedy with fallback and the offline optimum
        for its group (:mod:`elasim.yardstick`); the table's two yardstick columns come
        from them.  Traces without an on-demand price get empty columns.
        """
        if not self.yardstick:
            return
        for trace, seed, notice, mode in self._groups():
            yield self._point(trace, None, seed, notice, mode)

    def points(self) -> Iterator[SweepPoint]:
        """Grid points in a fixed order (the order of the output table)."""
        groups = self._groups()
        for trace in self.traces:
            for policy in self.policies:
                for group_trace, seed, notice, mode in groups:
                    if group_trace == trace:
                        yield self._point(trace, policy, seed, notice, mode)

    def _point(
        self, trace: str, policy: str | None, seed: int, notice: float, mode: str
    ) -> SweepPoint:
        options = () if policy is None else _options_for(policy, self.base.policy_options)
        spec = self.base.replace(
            trace=trace,
            policy=policy,
            policy_options=options,
            seed=seed,
            notice_s=notice,
            rescale=RescaleMode(mode),
        )
        return SweepPoint(spec, self.cluster_gpus, yardstick=policy is None)

    def validate(self) -> None:
        """Load every trace, policy and the job once, so bad input fails before the pool starts."""
        from elasim.policies import make_policy

        for trace in self.traces:
            _load_trace(trace)
        used: set[str] = set()
        for policy in self.policies:
            options = _options_for(policy, self.base.policy_options)
            used.update(key for key, _ in options)
            make_policy(policy, dict(options))
        unused = sorted({key for key, _ in self.base.policy_options} - used)
        if unused:
            raise ValueError(f"--set {unused[0]}: none of the policies has that option")
        for mode in self.rescale:
            RescaleMode(mode)
        _load_job(self.base.job or DEFAULT_JOB, self.base.min_nodes, self.base.max_nodes)


def _options_for(
    policy: str, options: tuple[tuple[str, str], ...], kind: Any = None
) -> tuple[tuple[str, str], ...]:
    """The ``--set`` options that ``policy``'s ``Config`` has (a sweep mixes policies).

    ``kind`` is the registry kind (None: job policies; the cluster sweep passes
    ``CLUSTER_KIND``).
    """
    if not options:
        return ()
    import dataclasses

    from elasim.policies import get_policy_class

    config = getattr(get_policy_class(policy, kind), "Config", None)
    names = (
        {f.name for f in dataclasses.fields(config)} if dataclasses.is_dataclass(config) else set()
    )
    return tuple((key, value) for key, value in options if key in names)


@functools.lru_cache(maxsize=32)
def _load_trace(name: str) -> Any:
    from elasim.traces.zones import load_zones

    return load_zones([name])


@functools.lru_cache(maxsize=8)
def _load_job(name: str, min_nodes: int | None, max_nodes: int | None) -> Any:
    from elasim.job import load_job

    job = load_job(name)
    if min_nodes is None and max_nodes is None:
        return job
    return job.with_nodes(min_nodes=min_nodes, max_nodes=max_nodes)


def _job_of(spec: JobSpec) -> Any:
    return _load_job(spec.job or DEFAULT_JOB, spec.min_nodes, spec.max_nodes)


def run_point(point: SweepPoint) -> dict[str, Any]:
    """Simulate one grid point and return one tidy row.

    The trace and job are loaded here (cached per process), so a pool worker only
    receives the small, picklable :class:`SweepPoint`.
    """
    return _simulate_point(point, _load_trace(point.trace), _job_of(point.spec))


def _config(point: SweepPoint) -> Any:
    """The simulator's settings of ``point``."""
    from elasim.sim import SimConfig

    return SimConfig(cluster_gpus=point.cluster_gpus, record_timeline=False)


def simulate_point(point: SweepPoint, trace: Any = None, job: Any = None) -> Any:
    """The full :class:`~elasim.sim.SimResult` of one (non-yardstick) grid point.

    Why public: an analysis that needs more than a row keeps (the events, say) reruns
    the grid's own points through this, so its runs are the grid's runs by
    construction, not a copy of how the grid builds them.  ``trace`` and ``job``:
    already loaded ones (None: loaded here, cached per process).
    """
    from elasim.sim import simulate

    trace = _load_trace(point.trace) if trace is None else trace
    job = _job_of(point.spec) if job is None else job
    return simulate(point.spec, _config(point), trace=trace, job=job)


def _simulate_point(point: SweepPoint, trace: Any, job: Any) -> dict[str, Any]:
    """Simulate ``point`` on an already loaded trace and job (shared by both backends)."""
    if point.yardstick:
        return _yardstick_row(point, trace, job)
    result = simulate_point(point, trace, job)
    spec = point.spec
    row: dict[str, Any] = {
        "trace": spec.trace,
        "policy": spec.policy,
        "seed": spec.seed,
        "notice_s": spec.notice_s,
        "rescale": spec.rescale.value,
        "job": spec.job or DEFAULT_JOB,
    }
    summary = result.summary()
    summary.pop("inputs")
    summary.pop("simulator")
    row.update(summary)
    row["start_offset_s"] = result.spec.start_offset_s
    return row


def _yardstick_row(point: SweepPoint, trace: Any, job: Any) -> dict[str, Any]:
    """The reference costs of ``point``'s group (the yardstick point's row)."""
    import dataclasses

    from elasim.yardstick import compute_yardstick

    row: dict[str, Any] = dict(zip(_GROUP, point.group(), strict=True))
    reference = compute_yardstick(trace, job, point.spec, _config(point))
    row["yardstick"] = None if reference is None else dataclasses.asdict(reference)
    return row


def _with_yardstick(frame: pd.DataFrame, references: list[dict[str, Any]]) -> pd.DataFrame:
    """Add :data:`YARDSTICK_COLUMNS` to every row from its group's reference costs."""
    from elasim.yardstick import Yardstick

    by_group = {
        tuple(ref[key] for key in _GROUP): None
        if ref["yardstick"] is None
        else Yardstick(**ref["yardstick"])
        for ref in references
    }
    columns: dict[str, list[Any]] = {name: [] for name in YARDSTICK_COLUMNS}
    for row in frame.to_dict(orient="records"):
        reference = by_group.get(tuple(row[key] for key in _GROUP))
        values = (
            reference.columns(row["cost_usd"], row["deadline_met"])
            if reference is not None and row["completed"]
            else dict.fromkeys(YARDSTICK_COLUMNS)
        )
        for name in YARDSTICK_COLUMNS:
            columns[name].append(values[name])
    for name, values in columns.items():
        dtype = "boolean" if name.endswith("_met") else "float64"  # greedy_met: yes/no/none
        frame[name] = pd.Series(values, index=frame.index, dtype=dtype)
    return frame


def run_sweep(
    spec: SweepSpec,
    *,
    workers: int | None = None,
    on_done: Callable[[], None] | None = None,
    backend: str = "local",
    address: str | None = None,
) -> pd.DataFrame:
    """Run the grid and return one row per grid point, in grid order.

    Both backends return the same table, value for value: every point is a
    deterministic simulation and the rows are placed by grid index, not by the order
    in which they finish.

    ``backend="local"`` runs a process pool on this machine; ``workers=1`` runs in
    this process (no pool), which is also the easiest to debug.  Both backends send
    small batches of consecutive points as one task (see :func:`elasim.tasks.batches`): a
    simulation is often as short as the cost of dispatching it.

    ``backend="ray"`` runs Ray tasks of 1 CPU each.  Traces and the job are
    loaded once here and shipped through Ray's object store, so a trace file that
    exists only on this machine still works on a cluster; policies are built on the
    workers from their spec strings.  Which Ray instance is used, and what a
    cluster's nodes need installed, is :mod:`elasim.tasks`'s to say.

    Args:
        spec: The grid.
        workers: Processes (local) or CPUs / tasks in flight (ray); default: all cores.
        on_done: Called once per finished point, in the calling thread (progress bars).
        backend: ``"local"`` or ``"ray"``.
        address: Ray cluster address; only with ``backend="ray"``.

    Returns:
        One row per grid point, in grid order, with the summary keys as columns
        (and :data:`YARDSTICK_COLUMNS` with a deadline).

    Raises:
        ValueError: an unknown backend, ``address`` without the ray backend, a
            missing ``ray`` package, or bad input in a grid point (the simulation's
            own exception, re-raised as it is).
    """
    check_backend(workers, backend, address)
    points = [*spec.points(), *spec.reference_points()]
    if backend == "ray":
        rows = _run_ray(spec, points, workers=workers or None, on_done=on_done, address=address)
    else:
        rows = run_local(
            points, workers=workers or os.cpu_count() or 1, on_done=on_done, task=run_point
        )
    return _table(spec, rows)


def _table(spec: SweepSpec, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The grid's rows as a table, with the yardstick's columns when it has a deadline."""
    grid = spec.size
    frame = _frame(rows[:grid])
    return _with_yardstick(frame, rows[grid:]) if spec.yardstick else frame


def _simulate_batch(points: list[SweepPoint], trace: Any, job: Any) -> list[dict[str, Any]]:
    """One Ray task: several points on one already loaded trace, in order."""
    return [_simulate_point(point, trace, job) for point in points]


def _run_ray(
    spec: SweepSpec,
    points: list[SweepPoint],
    *,
    workers: int | None,
    on_done: Callable[[], None] | None,
    address: str | None,
) -> list[dict[str, Any]]:
    """Run the points as Ray tasks; see :func:`run_sweep` for the instance rules."""
    with ray_connection(workers, address) as (ray, slots, cap):
        return _gather_ray(ray, spec, points, slots=slots, max_in_flight=cap, on_done=on_done)


def _gather_ray(
    ray: Any,
    spec: SweepSpec,
    points: list[SweepPoint],
    *,
    slots: int,
    max_in_flight: int | None,
    on_done: Callable[[], None] | None,
) -> list[dict[str, Any]]:
    """Submit the batches as tasks, store rows by grid index as tasks finish."""
    remote = _ray_task(ray)
    traces = {name: ray.put(_load_trace(name)) for name in spec.traces}
    job = ray.put(_job_of(spec.base))

    def launch(batch: tuple[int, ...]) -> Any:
        trace = traces[points[batch[0]].trace]
        return remote.remote([points[i] for i in batch], trace, job)

    return ray_in_flight(ray, points, launch, slots, max_in_flight, on_done)


@functools.lru_cache(maxsize=1)
def _ray_task(ray: Any) -> Any:
    """The Ray remote version of :func:`_simulate_batch`, made once per process.

    Made on first use, not at import, so importing elasim.sweep never imports ray;
    made once, so that many sweeps on one connection export it once.  The wrapped
    function is module-level, so workers import it by name.
    """
    return ray.remote(num_cpus=1)(_simulate_batch)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The tidy table; fixed dtypes so tables from any backend compare equal."""
    frame = pd.DataFrame(rows)
    for column in ("completion_time_h", "deadline_met"):
        if column in frame:
            frame[column] = frame[column].astype(
                "float64" if column == "completion_time_h" else "object"
            )
    return frame
