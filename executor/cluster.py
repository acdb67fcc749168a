"""``elasim cluster run``: the cluster policy on real workers, one shared pool of slots.

The executor's shell around the simulator's own :class:`~elasim.cluster.ClusterLoop`:
the same loop, the same policy, the same decision step and validation, the same
decision log.  Two things differ from ``elasim cluster simulate``, as for one job:

* the **clock** is real time times ``time_scale`` (:class:`~.controller.TraceClock`,
  :func:`~.controller.drive`, shared with ``elasim run``);
* each **job** is a real elastic worker group, :class:`PooledClusterJob`: a
  :class:`~elasim.cluster.job.ClusterJob` whose placement becomes a quota of slots
  and a target worker count for an executor group (:class:`~.pooled.PooledJob`, in
  place by default) and whose progress, epochs, pauses and completion are what
  the workers report, not what the model predicts.

A node of the cluster is one launcher: this host's ``--slots`` (node 0) and each
agent's slots.  Every node must have the same number of slots (the cluster's
``gpus_per_node``).

What the real side does not do: a policy's batch size is not applied (an executor
job trains with its own fixed global batch; a decision that sets another is logged
once and ignored), and a job's progress is its optimizer steps, so its application
profile must validate exactly the job's batch (:mod:`.cluster_profile` measures one).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elasim.cluster_compare import FixedBatchJob
from elasim.jobmodel import RescaleMode
from elasim.policies import EventRecord
from elasim.policies.cluster import Placement, placement_gpus

from .controller import Clock, ControllerConfig, RealClock, TraceClock, drive
from .pooled import PooledJob
from .protocol import WorkerSettings
from .slots import SlotPool

__all__ = [
    "ClusterRunConfig",
    "ClusterRunResult",
    "PooledClusterJob",
    "drive_cluster",
    "run_cluster",
]

log = logging.getLogger(__name__)

DEFAULT_CLUSTER_JOB = "elasim.executor.synthetic:synthetic_job"


class PooledClusterJob(FixedBatchJob):
    """A job of the cluster loop backed by real workers (see the module docstring).

    The loop calls the same methods as on the model: :meth:`reallocate` when the
    policy moves it, :meth:`advance` to bring its books to a time, and, because it
    ``polls``, :meth:`poll` at every turn, which retries a scale-up whose workers
    were still starting (they join when ready, as booting nodes do) and notices
    completion and crashes.

    Args:
        spec, app, pause_job, mode, gpus_per_node: as for the model's ``ClusterJob``.
        actuator: the job's worker group on the shared pool.
    """

    polls = True

    def __init__(
        self,
        spec: Any,
        app: Any,
        pause_job: Any,
        mode: RescaleMode,
        gpus_per_node: int,
        *,
        actuator: PooledJob,
    ) -> None:
        super().__init__(spec, app, pause_job, mode, gpus_per_node)
        self.actuator = actuator
        # one state machine: the actuator follows it from the workers' events
        self.sm = actuator._sm  # noqa: SLF001 - shared on purpose
        self.target_steps = int(round(app.target_progress))
        self.steps = 0
        self._warned_batch = False

    # -- the model's methods, on real workers ---------------------------------------------

    def next_due_s(self) -> float:
        """Nothing is scheduled: real workers report through :meth:`poll`."""
        return math.inf

    def advance(self, t: float) -> None:
        """Book the time up to ``t`` and read the workers' progress."""
        if self.done:
            return
        dt = t - self.last_s
        if dt > 0:
            self.actuator.advance(t, self.books)
            self.attained_gpu_s += dt * self.gpus
            if self.gpus:
                self.held_s += dt
            self.last_s = t
        self.steps = self.actuator.step_count()
        steps = min(self.steps, self.target_steps)
        self.progress = float(steps)
        self.epoch = self.app.epoch(self.progress)
        self.books.raw_samples = float(steps * (self.actuator.group.global_batch or 0))
        if self.actuator.finished(t):
            self.progress = float(self.target_steps)
            self._finish(t)
            self.actuator.release()

    def poll(self, now_s: float) -> bool:
        """Bring the job to ``now_s``; re-apply its target; True when it finished."""
        self.advance(now_s)
        if self.done:
            return True
        self._record(self.actuator.poll(now_s))
        if self.gpus and sum(self.actuator.members()) != self.gpus:
            self._record(self.actuator.apply(self.gpus, 0, now_s, True))
        return self.done

    def set_batch(self, batch_size: int | None) -> None:
        """The job keeps its batch (:class:`FixedBatchJob`); said once in the log."""
        super().set_batch(batch_size)
        if self.batch_ignored is not None and not self._warned_batch:
            self._warned_batch = True
            log.warning(
                "job %s: batch size %s not applied (a real job keeps its batch)",
                self.name,
                self.batch_ignored,
            )

    def reallocate(self, placement: Placement, now_s: float) -> EventRecord | None:
        """Give the job's group ``placement``: quotas per node, then a target size."""
        if placement == self.placement or self.done:
            return None
        after = placement_gpus(placement)
        if after and self.start_s is None:
            self.start_s = now_s
        if after:
            self.restarts += 1
        self.placement, self.gpus = placement, after
        self._configure()
        self.actuator.per_launcher = {node: gpus for node, gpus in placement}
        events = self.actuator.apply(after, 0, now_s, True)
        self._record(events)
        return events[-1] if events else None

    def _record(self, events: list[EventRecord]) -> None:
        for event in events:
            self._event(event)


@dataclass(frozen=True)
class ClusterRunConfig:
    """Everything ``elasim cluster run`` needs (frozen: a run is reproducible from it).

    Attributes:
        workload: bundled workload name or CSV path.
        policy: cluster policy name or ``file.py:Class``.
        options: the policy's ``--set`` options.
        applications: folder of application profiles (measured for ``job``).
        slots: worker slots on this host (node 0); 0 with agents only.
        time_scale: workload seconds per real second.
        rescale: ``inplace`` (default) or ``restart``.
        job: import spec of the executor job every workload job runs.
        job_options: keyword arguments of the job factory.
        sample_delay_real_s: emulated accelerator time per local sample (0: none).
        seed: seeds every job's model and sampler.
        collective_timeout_real_s: the workers' process-group timeout.
        max_wall_real_s: give up after this long.
        bind_host: address of the stores and of the agent listener.
        agent_port: listen for ``elasim agent`` here (None: no agents).
        expect_agents: wait for this many agents before starting.
        pause_job: job preset of the pause model the loop's estimate uses; the
            measured ``pauses.json`` of the applications replace its figures where
            they have the transition (:func:`elasim.cluster_compare.measured_pause_job`).
        log_dir: worker stderr logs (None: discarded).
    """

    workload: str
    policy: str = "fifo"
    options: Mapping[str, str] = field(default_factory=dict)
    applications: str | None = None
    slots: int = 4
    time_scale: float = 1.0
    rescale: RescaleMode = RescaleMode.INPLACE
    job: str = DEFAULT_CLUSTER_JOB
    job_options: Mapping[str, Any] = field(default_factory=dict)
    sample_delay_real_s: float = 0.0
    seed: int = 0
    collective_timeout_real_s: float = 5.0
    max_wall_real_s: float = 600.0
    bind_host: str = "127.0.0.1"
    agent_port: int | None = None
    expect_agents: int = 0
    pause_job: str = "resnet50_v100"
    log_dir: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rescale, RescaleMode):
            object.__setattr__(self, "rescale", RescaleMode(self.rescale))
        if self.slots < 0 or (self.slots == 0 and self.agent_port is None):
            raise ValueError(f"--slots must be >= 1 (or 0 with agents), got {self.slots}")
        if not (math.isfinite(self.time_scale) and self.time_scale > 0):
            raise ValueError(f"--time-scale must be > 0, got {self.time_scale}")
        if not (math.isfinite(self.sample_delay_real_s) and self.sample_delay_real_s >= 0):
            raise ValueError(f"--sample-delay-s must be >= 0, got {self.sample_delay_real_s}")
        if not self.max_wall_real_s > 0:
            raise ValueError(f"--max-wall-s must be > 0, got {self.max_wall_real_s}")
        if self.expect_agents and self.agent_port is None:
            raise ValueError("--agents needs --agent-port")


@dataclass(frozen=True)
class ClusterRunResult:
    """A finished cluster run.

    Attributes:
        result: the loop's per-job rows and summary (:class:`elasim.cluster.ClusterResult`),
            times in workload seconds.
        decisions: the decision log.
        events: per job, its events (workload seconds; pauses as measured, real s).
        wall_time_s: real seconds the run took.
        gave_up: the wall budget ran out before every job finished.
        steps: per job, the optimizer steps it committed.
        num_nodes: nodes of the cluster (one per launcher).
        gpus_per_node: slots per node.
    """

    result: Any
    decisions: tuple[Any, ...]
    events: dict[str, tuple[EventRecord, ...]]
    wall_time_s: float
    gave_up: bool
    steps: dict[str, int]
    num_nodes: int = 1
    gpus_per_node: int = 1


def _launchers(config: ClusterRunConfig) -> tuple[list[Any], Any]:
    """The launchers: this host's fork launcher (node 0) and the agents (one node each)."""
    from .forkserver import ForkLauncher

    launchers: list[Any] = []
    if config.slots:
        local = ForkLauncher(config.slots, log_dir=config.log_dir, bind_host=config.bind_host)
        local.warm()  # torch is imported once, before the clock starts
        launchers.append(local)
    server = None
    if config.agent_port is not None:
        from .agent import AgentServer

        server = AgentServer(config.bind_host, config.agent_port)
        server.start()
        launchers.extend(server.wait_for_agents(config.expect_agents, timeout_s=120.0))
    sizes = {launcher.slots for launcher in launchers}
    if len(sizes) != 1:
        raise ValueError(f"every node needs the same number of slots, got {sorted(sizes)}")
    return launchers, server


def _check_batch(spec: Any, app: Any) -> None:
    """A real job keeps its batch: its application must validate exactly that one."""
    if spec.requested_batch_size != app.init_batch or len(app.validated) != 1:
        raise ValueError(
            f"job {spec.name}: batch_size {spec.requested_batch_size} is not its "
            f"application's one validated batch ({app.name}: {app.validated}); a real "
            "job keeps its batch, so its profile must be measured at it"
        )


def _check(config: ClusterRunConfig, pause_job: Any) -> None:
    """Everything that can be checked before any process starts (one-line errors).

    The workload, its applications and the policy are loaded exactly as the run will
    load them (the model's loop, on a one-node cluster of ``slots``), and every job's
    batch is checked against its application.
    """
    from elasim.cluster import ClusterSetup, build_loop

    setup = ClusterSetup(
        workload=config.workload,
        policy=config.policy,
        options=dict(config.options),
        num_nodes=1,
        gpus_per_node=max(config.slots, 1),
        rescale=config.rescale,
        pause_job=pause_job,
        applications=config.applications,
    )
    for job in build_loop(setup, record_timeline=False).jobs:
        _check_batch(job.spec, job.app)


def _factory(
    config: ClusterRunConfig, pool: SlotPool, origin: Callable[[], float]
) -> Callable[..., PooledClusterJob]:
    """Builds each workload job's real worker group (on first use of its slots)."""
    worker = WorkerSettings(
        job=config.job,
        job_options=dict(config.job_options),
        seed=config.seed,
        backend="gloo",
        collective_timeout_s=config.collective_timeout_real_s,
        sample_delay_s=config.sample_delay_real_s,
    )

    def make(spec: Any, app: Any, pause_job: Any, mode: Any, gpus_per_node: int) -> Any:
        _check_batch(spec, app)
        steps = int(round(app.target_progress))
        cfg = ControllerConfig(
            time_scale=config.time_scale,
            max_steps=steps,
            max_nodes=pool.total,
            rescale=config.rescale,
            global_batch=spec.requested_batch_size,
        )
        from dataclasses import replace

        actuator = PooledJob(
            spec.name,
            pool,
            replace(worker, max_steps=steps),
            cfg,
            origin,
            mode=config.rescale,
            bind_host=config.bind_host,
        )
        return PooledClusterJob(spec, app, pause_job, mode, gpus_per_node, actuator=actuator)

    return make


def drive_cluster(
    loop: Any,
    clock: Clock,
    *,
    time_scale: float,
    max_wall_real_s: float,
    idle_poll_real_s: float = 0.05,
    on_turn: Callable[[Any], None] | None = None,
) -> tuple[float, float]:
    """Turn ``loop`` on ``clock`` until every job is done or the budget is spent.

    The executor's whole shell: the one-job controller's :func:`~.controller.drive`
    on a :class:`~.controller.TraceClock`.  Returns ``(end, real seconds)``; the
    end is in workload seconds.
    """
    trace = TraceClock(clock, time_scale)
    end = drive(
        loop,
        trace,
        clock.sleep,
        max_wall_real_s=max_wall_real_s,
        idle_poll_real_s=idle_poll_real_s,
        on_turn=None if on_turn is None else lambda: on_turn(loop),
    )
    return end, trace.real_s()


def run_cluster(
    config: ClusterRunConfig,
    *,
    clock: Clock | None = None,
    on_turn: Callable[[Any], None] | None = None,
) -> ClusterRunResult:
    """Run ``config.workload`` under ``config.policy`` on real workers.

    Raises:
        elasim.traces.TraceError: a bad workload or application profile.
        ValueError: a bad policy, option or setting (one line).
        ExecutorError: workers could not be kept running.
    """
    from elasim.cluster import ClusterSetup, build_loop
    from elasim.cluster_compare import measured_pause_job
    from elasim.traces.cluster import load_workload

    clock = clock or RealClock()
    names = sorted({job.application for job in load_workload(config.workload)})
    pause_job = measured_pause_job(config.pause_job, config.applications, names)
    _check(config, pause_job)
    launchers, server = _launchers(config)
    pool = SlotPool(launchers)
    setup = ClusterSetup(
        workload=config.workload,
        policy=config.policy,
        options=dict(config.options),
        num_nodes=len(launchers),
        gpus_per_node=launchers[0].slots,
        rescale=config.rescale,
        pause_job=pause_job,
        applications=config.applications,
    )
    loop = None
    origin = [clock.now()]
    try:
        loop = build_loop(setup, job_factory=_factory(config, pool, lambda: origin[0]))
        origin[0] = clock.now()
        end, wall = drive_cluster(
            loop,
            clock,
            time_scale=config.time_scale,
            max_wall_real_s=config.max_wall_real_s,
            on_turn=on_turn,
        )
        loop.observe(end)
    finally:
        for job in getattr(loop, "jobs", []):
            job.actuator.close()
        pool.close()
        if server is not None:
            server.close()
    jobs: list[PooledClusterJob] = loop.jobs  # type: ignore[assignment]
    return ClusterRunResult(
        result=loop.result(wall_time_s=wall),
        decisions=tuple(loop.decisions),
        events={job.name: tuple(job.events) for job in jobs},
        wall_time_s=wall,
        gave_up=not loop.finished,
        steps={job.name: job.steps for job in jobs},
        num_nodes=setup.num_nodes,
        gpus_per_node=setup.gpus_per_node,
    )
