"""``elasim cluster run``: the cluster policy on real workers, one shared pool of slots.

The executor's shell around the simulator's own :class:`~elasim.cluster.ClusterLoop`:
the same loop, the same policy, the same decision step and validation, the same
decision log.  Two things differ from ``elasim cluster simulate``, as for one job:

* the **clock** is real time times ``time_scale`` (:class:`~.controller.TraceClock`,
  :func:`~.controller.drive`, shared with ``elasim run``);
* each **job** is the model's own :class:`~elasim.cluster.job.ClusterJob` (placement,
  peak allocation, restarts, books and view, kept once), trained by a real elastic
  worker group, :class:`WorkerTraining`: its placement becomes a quota of slots and a
  worker count for a :class:`~.pooled.PooledJob`, and its progress, epochs, pauses
  and completion are what the workers report, not what the model predicts.

A node of the cluster is one launcher: this host's ``--slots`` (node 0) and each
agent's slots, or, with ``--launcher ray``, each Ray node (``elasim run``'s Ray
launcher pinned to it; a node that dies is a capacity drop, :func:`lose_hosts`).
Every node must have the same number of slots (the cluster's ``gpus_per_node``).

A capacity trace (``--capacity``) is replayed by the loop itself on the run's clock,
as the simulator replays it: a drop preempts the jobs on the nodes it takes (their
workers SIGKILLed; with ``--notice-s`` a job warned in time leaves gracefully first)
and the pool offers those slots to nobody until a rise (:meth:`~.slots.SlotPool.follow`).

A policy's batch size is applied at the job's next re-formation: the group's global
batch becomes the model's choice for the new placement (the policy's batch, or the
adaptive best), with AdaScale's gain as the learning rate's factor and as the
progress a step makes (:meth:`~elasim.cluster.job.ClusterJob.batch_plan`), so a
job's progress is counted in the simulator's unit (steps at its application's first
validated batch, statistical efficiency included) and its workers stop at the
model's target.  A share of the batch above the job's ``max_local_batch``
accumulates gradients.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elasim.cluster import ClusterSetup
from elasim.cluster.job import ClusterJob
from elasim.cluster.speed import SpeedFit, StepSample
from elasim.noise_scale import two_batch_estimates
from elasim.policies import EventRecord, JobState
from elasim.policies.cluster import Placement, placement_gpus

from .controller import Clock, ControllerConfig, RealClock, TraceClock, drive
from .pooled import PooledJob
from .protocol import WorkerSettings
from .records import step_durations
from .slots import SlotPool

__all__ = [
    "ClusterRunConfig",
    "ClusterRunResult",
    "WorkerTraining",
    "drive_cluster",
    "job_factory",
    "lose_hosts",
    "pooled_groups",
    "run_cluster",
]

log = logging.getLogger(__name__)

DEFAULT_CLUSTER_JOB = "elasim.executor.synthetic:synthetic_job"


class WorkerTraining:
    """A cluster job trained by a real worker group on the shared slot pool.

    The :class:`~elasim.cluster.job.Training` of ``elasim cluster run``: the job
    itself (its placement, peak allocation, restarts, books, view) is the model's
    :class:`~elasim.cluster.job.ClusterJob`; only how it trains is real.  A
    placement becomes a quota of slots per node and a target worker count for the
    job's group (:class:`~.pooled.PooledJob`, in place by default), and the batch
    the model chose for it (a policy's batch size, or the adaptive best) becomes
    the group's global batch and AdaScale gain at that re-formation.  Progress is
    the model's unit, steps at the application's first validated batch each
    weighted by its gain, as the workers count it (they stop at the target); a
    re-formation's pause is what it measured.  Real jobs *poll*: the loop asks at
    every turn, which also retries a scale-up whose workers were still starting
    (they join when ready, as booting nodes do).

    Args:
        actuator: the job's worker group on the shared pool.
        target_progress: the job's work (the application's ``target_progress``).
    """

    polls = True

    def __init__(self, actuator: PooledJob, target_progress: float) -> None:
        self.actuator = actuator
        self.target_progress = float(target_progress)
        self.steps = 0
        #: (trace s, global batch, gain) of each re-formation that changed them, once
        #: the workers reported training at that batch (the group's measured one)
        self.batches: list[tuple[float, int, float]] = []
        self._planned: tuple[float, int, float] | None = None
        self._fed = (0, 0)  # step records, and timed steps, given to the job's fit

    def state(self) -> JobState:
        """The job's state, followed from its group's events."""
        return self.actuator.state

    def next_due_s(self, job: ClusterJob) -> float:
        """Nothing is scheduled: real workers report through :meth:`poll`."""
        return math.inf

    def advance(self, job: ClusterJob, t: float) -> None:
        """Book the time up to ``t`` and read the workers' progress."""
        if job.done:
            return
        dt = t - job.last_s
        if dt > 0:
            self.actuator.advance(t, job.books)
            job.occupy(dt)
            job.last_s = t
        done = self.actuator.group.progress()
        self.steps = done.step
        job.progress = min(done.progress, self.target_progress)
        job.epoch = job.app.epoch(job.progress)
        job.books.raw_samples = float(done.samples)
        plan = self._planned
        if plan is not None and self.actuator.group.global_batch == plan[1]:
            if not self.batches or self.batches[-1][1:] != plan[1:]:
                self.batches.append(plan)
            self._planned = None
        if job.fit is not None:
            self._measure(job.fit, max(len(job.placement), 1))
        if self.actuator.finished(t):
            job.progress = self.target_progress
            job.finish(t)
            self.actuator.release()

    def _measure(self, fit: SpeedFit, nodes: int) -> None:
        """The new step records into the job's fit: step times, two-batch gradient estimates.

        The real side of ``--speed-model fitted``: each step timed by its predecessor
        (per replica count and per-replica batch, on the job's ``nodes`` now), and each
        step on more than one worker gives an estimate of ``|G|^2`` and the noise
        (:mod:`elasim.noise_scale`).
        """
        records = self.actuator.group.step_records()
        timed = step_durations(records)
        seen, done = self._fed
        fit.steps(
            StepSample(r.world_size, float(math.ceil(r.samples / r.world_size)), step_s, nodes)
            for r, step_s in timed[done:]
        )
        for r in (r for r in records[seen:] if r.world_size > 1):
            fit.gradients(
                *two_batch_estimates(r.grad_sq_local, r.grad_sq_global, r.local_batch, r.samples)
            )
        self._fed = (len(records), len(timed))

    def poll(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Bring the job to ``now_s`` and re-apply its target (workers still starting)."""
        job.advance(now_s)
        if job.done:
            return []
        events = self.actuator.poll(now_s)
        if job.gpus and sum(self.actuator.members()) != job.gpus:
            events += self.actuator.apply(job.gpus, 0, now_s, True)
        elif (
            job.schedule is not None
            and job.checkpoint_due_in_s() <= 0
            and self.state() is (JobState.RUNNING)
        ):  # the cluster's periodic checkpoint (--checkpoint-interval-s), at a step boundary
            events += self.actuator.checkpoint(now_s)
            job.restart_checkpoint_timer()
        return events

    def regroup(self, job: ClusterJob, placement: Placement, now_s: float) -> list[EventRecord]:
        """The batch the model chose for ``placement``, its quotas, then the group's size."""
        batch, gain = job.batch_plan(placement)
        self._planned = (now_s, batch, gain)
        self.actuator.group.set_batch(batch, gain)
        self.actuator.per_launcher = {node: gpus for node, gpus in placement}
        return self.actuator.apply(placement_gpus(placement), 0, now_s, True)

    def release(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Every worker stops (the group checkpoints first) and the slots go back."""
        self.actuator.per_launcher = {}
        return self.actuator.apply(0, 0, now_s, True)

    def leave(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """Warned in time: every worker stops after a final checkpoint (:meth:`release`)."""
        return self.release(job, now_s)

    def preempt(self, job: ClusterJob, now_s: float) -> list[EventRecord]:
        """The job's workers are killed (no notice)."""
        self.actuator.per_launcher = {}
        return self.actuator.preempt(job.gpus, False, now_s)


@dataclass(frozen=True)
class ClusterRunConfig:
    """Everything ``elasim cluster run`` needs (frozen: a run is reproducible from it).

    What runs is ``setup``, the very :class:`~elasim.cluster.ClusterSetup` that
    ``elasim cluster simulate`` takes; the other fields say only how real workers
    run it.  Why: the settings of a run are written once, so that ``--compare``
    simulates exactly what ran and a setting added to the simulator reaches real
    workers without a second list to keep in step.

    Note that ``ClusterSetup``'s default ``rescale`` is ``restart`` (Pollux's
    evaluation), while ``elasim cluster run`` defaults to ``inplace``: say which.

    Attributes:
        setup: the workload, policy, options, rescale mode, pause preset,
            applications (the profiles measured for ``job``), capacity trace (replayed
            by the loop on the run's clock; a drop preempts the jobs on the lost
            nodes and takes their slots from the pool), notices, checkpoint interval
            (each checkpoint written by the job's rank 0) and speed model.  Its
            ``num_nodes`` and ``gpus_per_node`` are not read: the run's shape is what
            it finds (one node per launcher: this host's ``slots``, each agent, each
            Ray node).  Where the applications have measured pauses (``pauses.json``)
            they replace the ``pause_job`` preset's figures, as in any simulation.
        slots: worker slots on this host (node 0); 0 with agents only.
        time_scale: workload seconds per real second.
        job: import spec of the executor job every workload job runs.
        job_options: keyword arguments of the job factory.
        sample_delay_real_s: emulated accelerator time per local sample (0: none).
        seed: seeds every job's model and sampler.
        collective_timeout_real_s: the workers' process-group timeout.
        max_wall_real_s: give up after this long.
        bind_host: address of the stores and of the agent listener.
        agent_port: listen for ``elasim agent`` here (None: no agents).
        expect_agents: wait for this many agents before starting.
        log_dir: worker stderr logs (None: discarded).
        launcher: ``local`` (this host's slots, and agents) or ``ray`` (one node of
            the cluster per Ray node, each worker a Ray actor on it).
        ray_address: the Ray cluster for ``ray`` (None: a private local instance of
            one node).
        ray_resources: the Ray resources each worker's actor holds (empty: CPU=1).
    """

    setup: ClusterSetup
    slots: int = 4
    time_scale: float = 1.0
    job: str = DEFAULT_CLUSTER_JOB
    job_options: Mapping[str, Any] = field(default_factory=dict)
    sample_delay_real_s: float = 0.0
    seed: int = 0
    collective_timeout_real_s: float = 5.0
    max_wall_real_s: float = 600.0
    bind_host: str = "127.0.0.1"
    agent_port: int | None = None
    expect_agents: int = 0
    log_dir: str | None = None
    launcher: str = "local"
    ray_address: str | None = None
    ray_resources: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
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
        if self.launcher not in ("local", "ray"):
            raise ValueError(f"--launcher must be 'local' or 'ray', got {self.launcher!r}")
        if self.launcher == "ray" and (self.agent_port is not None or not self.slots):
            raise ValueError("--launcher ray places workers on Ray's nodes: no --agent-port")
        if self.ray_address is not None:
            from elasim.ray_connect import check_address

            if self.launcher != "ray":
                raise ValueError("--address needs --launcher ray")
            check_address(self.ray_address)


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
        batches: per job, ``(trace s, global batch, gain)`` of each re-formation
            that changed them (the first start included), as its workers reported
            training at that batch.
        setup: what the loop ran: the config's setup on the cluster found (one node
            per launcher, its slots per node), so that
            ``elasim.sim.cluster.simulate_cluster(run.setup)`` is the simulation of
            this very run (``--compare``).
    """

    result: Any
    decisions: tuple[Any, ...]
    events: dict[str, tuple[EventRecord, ...]]
    wall_time_s: float
    gave_up: bool
    steps: dict[str, int]
    setup: ClusterSetup
    batches: dict[str, tuple[tuple[float, int, float], ...]] = field(default_factory=dict)


def _launchers(config: ClusterRunConfig) -> tuple[list[Any], Any]:
    """The launchers (node ``i`` is launcher ``i``) and what the run closes at the end.

    Local: this host's fork launcher (node 0) and the agents (one node each), and
    the agent listener.  Ray: one launcher per Ray node (:func:`_ray_launchers`), and
    the Ray connection.
    """
    if config.launcher == "ray":
        return _ray_launchers(config)
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


def _ray_launchers(config: ClusterRunConfig) -> tuple[list[Any], Any]:
    """One node of the cluster per Ray node: ``elasim run``'s Ray launcher, pinned to it.

    A private instance (no ``--address``) is one node of ``--gpus-per-node`` slots.
    """
    from .ray_launcher import RaySession, node_launchers

    resources = dict(config.ray_resources) or {"CPU": 1.0}
    session = RaySession.for_workers(config.ray_address, resources, config.slots)
    try:
        return node_launchers(config.slots, resources=resources, log_dir=config.log_dir), session
    except BaseException:
        session.close()
        raise


def lose_hosts(loop: Any, pool: SlotPool) -> None:
    """A node whose host is gone (a Ray node died) is a capacity drop the loop hears of.

    The loop preempts the jobs placed there (their workers on the other nodes are
    stopped too, as a simulated preemption takes the job's whole allocation) and its
    policy sees the nodes left.  The loop counts usable nodes ``0 .. n-1``, so a lost
    node takes those numbered after it out too, for good (with two hosts, exactly it).
    """
    lost = pool.first_lost()
    if lost is None or lost >= loop.lost_from:
        return
    log.warning("node %d (%s) is gone: its jobs are preempted", lost, pool.launchers[lost].name)
    loop.lost_from = lost
    now = loop.available_nodes
    loop.set_available(loop.now_s, loop.num_nodes if now is None else now)  # under lost_from


def _check_batch(spec: Any, app: Any) -> None:
    """A job's batch must lie in its application's validated range (its progress unit)."""
    if not app.init_batch <= spec.requested_batch_size <= app.max_batch:
        raise ValueError(
            f"job {spec.name}: batch_size {spec.requested_batch_size} is outside its "
            f"application's validated batches ({app.name}: {app.validated}); progress "
            "is counted in steps at the first of them"
        )


def _check(config: ClusterRunConfig) -> None:
    """Everything that can be checked before any process starts (one-line errors).

    The workload, its applications and the policy are loaded exactly as the run will
    load them (the model's loop, on a one-node cluster of ``slots``), and every job's
    batch is checked against its application.
    """
    from elasim.cluster import build_loop

    one_node = dataclasses.replace(config.setup, num_nodes=1, gpus_per_node=max(config.slots, 1))
    for job in build_loop(one_node, record_timeline=False).jobs:
        _check_batch(job.spec, job.app)


#: ``(job name, its worker settings, its controller settings) -> its worker group``
GroupMaker = Callable[[str, WorkerSettings, ControllerConfig], Any]


def job_factory(
    config: ClusterRunConfig, make_group: GroupMaker, max_nodes: int
) -> Callable[..., ClusterJob]:
    """The loop's ``job_factory`` of a cluster run: the model's job, trained by workers.

    ``max_nodes`` is every slot of the cluster (the most workers a job could get).

    Every job is a :class:`~elasim.cluster.job.ClusterJob` (the one the simulator
    runs) whose :class:`WorkerTraining` is the group ``make_group`` returns: a
    :class:`~.pooled.PooledJob` on the run's slots (:func:`pooled_groups`), or, in
    the parity tests, a fake worker group.
    """
    worker = WorkerSettings(
        job=config.job,
        job_options=dict(config.job_options),
        seed=config.seed,
        backend="gloo",
        collective_timeout_s=config.collective_timeout_real_s,
        sample_delay_s=config.sample_delay_real_s,
    )

    def make(spec: Any, app: Any, pause_job: Any, mode: Any, gpus_per_node: int) -> ClusterJob:
        _check_batch(spec, app)
        target = float(app.target_progress)
        # the workers stop at the target progress; steps only bound a run whose gain
        # is below 1 (a batch under the first validated one) to ten times the target
        steps = max(int(math.ceil(target * 10)), 1)
        cfg = ControllerConfig(
            time_scale=config.time_scale,
            max_steps=steps,
            max_nodes=max_nodes,
            global_batch=spec.requested_batch_size,
        )
        settings = dataclasses.replace(worker, max_steps=steps, max_progress=target)
        group = make_group(spec.name, settings, cfg)
        return ClusterJob(spec, app, WorkerTraining(group, target), gpus_per_node)

    return make


def pooled_groups(
    config: ClusterRunConfig, pool: SlotPool, origin: Callable[[], float]
) -> GroupMaker:
    """Each job's worker group on the run's shared slots (started on first use)."""

    def make(name: str, worker: WorkerSettings, cfg: ControllerConfig) -> PooledJob:
        return PooledJob(
            name, pool, worker, cfg, origin, mode=config.setup.rescale, bind_host=config.bind_host
        )

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
    """Run ``config.setup`` (its workload under its policy) on real workers.

    Raises:
        elasim.traces.TraceError: a bad workload or application profile.
        ValueError: a bad policy, option or setting (one line).
        ExecutorError: workers could not be kept running.
    """
    from elasim.cluster import build_loop
    from elasim.traces import capacity_rows

    clock = clock or RealClock()
    rows, period = capacity_rows(config.setup.capacity)  # a bad trace: before any process
    _check(config)
    launchers, server = _launchers(config)
    pool = SlotPool(launchers)
    shape = {"num_nodes": len(launchers), "gpus_per_node": launchers[0].slots}
    setup = dataclasses.replace(config.setup, **shape)
    loop = None
    origin = [clock.now()]
    try:
        groups = pooled_groups(config, pool, lambda: origin[0])
        loop = build_loop(
            setup,
            job_factory=job_factory(config, groups, pool.total),
            capacity=rows,
            capacity_period_s=period,
        )
        pool.follow(lambda: loop.available_nodes)
        origin[0] = clock.now()
        end, wall = drive_cluster(
            loop,
            clock,
            time_scale=config.time_scale,
            max_wall_real_s=config.max_wall_real_s,
            on_turn=lambda turned: _after_turn(turned, pool, on_turn),
        )
        loop.observe(end)
    finally:
        for job in getattr(loop, "jobs", []):
            job.training.actuator.close()
        pool.close()
        if server is not None:
            server.close()
    return _cluster_result(loop, setup, wall)


def _after_turn(loop: Any, pool: SlotPool, on_turn: Callable[[Any], None] | None) -> None:
    """After every turn: lost hosts reach the loop, then the caller's hook."""
    lose_hosts(loop, pool)
    if on_turn is not None:
        on_turn(loop)


def _cluster_result(loop: Any, setup: ClusterSetup, wall: float) -> ClusterRunResult:
    """What a driven cluster loop leaves: results, decisions, events, steps and batches.

    Why apart from :func:`run_cluster`: that function owns the workers and must
    release them whatever happens; reading the outcome needs none of them.

    Args:
        loop: the cluster loop (``elasim.cluster.build_loop``), driven to ``wall``.
        setup: its ``ClusterSetup`` (the nodes it had).
        wall: real seconds the run took.
    """
    jobs: list[ClusterJob] = loop.jobs
    return ClusterRunResult(
        result=loop.result(wall_time_s=wall),
        decisions=tuple(loop.decisions),
        events={job.name: tuple(job.events) for job in jobs},
        wall_time_s=wall,
        gave_up=not loop.finished,
        steps={job.name: job.training.steps for job in jobs},
        setup=setup,
        batches={job.name: tuple(job.training.batches) for job in jobs},
    )
