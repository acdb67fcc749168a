"""``run_trace``: replay a trace on real workers, for the simulator's schema.

The run's result (:class:`RunResult`) is written to a folder by
:func:`elasim.executor.run_output.write_run`, whose module docstring lists the files
and how their columns differ from a simulation's.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from elasim.atomic import check_writable_dir
from elasim.jobmodel import RunSummary
from elasim.jobmodel.accounting import RESCALE_KINDS
from elasim.policies import DecisionRecord, EventRecord

from .config import DEFAULT_JOB, RunConfig
from .controller import Controller, ControllerConfig, ControllerResult, RealClock, TimelineRow
from .group import (
    GroupSettings,
    Launcher,
    LocalLauncher,
    ProcessWorkerGroup,
    RescaleMode,
    StepRecord,
    WorkerStart,
)
from .journal import RunJournal
from .protocol import WorkerSettings
from .resume import ResumePoint, merge_books, merge_segments, save_run_config, segment_of
from .runfiles import RunFiles
from .script import ScriptWorkerGroup

__all__ = ["DEFAULT_JOB", "RunConfig", "RunResult", "run_trace"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecutorSummary(RunSummary):
    """``summary.json`` of a real run: the shared fields, then what only a run has.

    Attributes:
        wall_time_s: real seconds the run took.
        steps: the last committed step.
        samples: samples consumed by committed steps.
        lost_steps: committed steps thrown away by rollbacks, and steps in flight.
        final_loss: loss of the last step.
        final_accuracy: the job's final evaluation (None without one).
        target_accuracy: the job's stated target.
        reached_target: whether the final accuracy met the target.
        median_pause_s: median measured pause of the rescales (real seconds).
        max_pause_s: longest measured pause of the rescales (real seconds).
        time_scale: trace seconds per real second.
        gave_up: the run stopped at its wall-clock budget before the job finished.
    """

    wall_time_s: float
    steps: int
    samples: int
    lost_steps: int
    final_loss: float | None
    final_accuracy: float | None
    target_accuracy: float | None
    reached_target: bool | None
    median_pause_s: float | None
    max_pause_s: float | None
    time_scale: float
    gave_up: bool

    def as_dict(self) -> dict[str, Any]:
        """Shared fields (rounded as the simulator's), then the executor's own."""
        out = self.summary_fields()
        for name in (f.name for f in fields(ExecutorSummary)):
            if name not in out:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class RunResult:
    """A finished run.

    Attributes:
        summary: ``summary.json`` content (see the module docstring).
        events: event records (trace ``time_s``, real pauses).
        event_real_s: real seconds since the start of each event.
        event_interval_s: raw pause interval of each event (None: not measured).
        event_due_s: the trace time each event answered (its ``time_s`` unless it was
            carried out late; empty: all on time).
        steps: every committed step.
        decisions: the decision log.
        timeline: world over trace time.
        time_scale: trace seconds per real second.
        worker_starts: every worker process's spawn and READY time (real seconds
            since the start).
    """

    summary: Mapping[str, Any]
    events: tuple[EventRecord, ...]
    event_real_s: tuple[float, ...]
    event_interval_s: tuple[float | None, ...]
    steps: tuple[StepRecord, ...]
    decisions: tuple[DecisionRecord, ...]
    timeline: tuple[TimelineRow, ...]
    time_scale: float
    worker_starts: tuple[WorkerStart, ...] = ()
    event_due_s: tuple[float, ...] = ()

    @property
    def completed(self) -> bool:
        """Whether the job reached its end."""
        return bool(self.summary["completed"])


def _executor_details(config: RunConfig, trace_name: str, job_name: str | None) -> dict[str, Any]:
    """What only a real run states beside its spec (``summary.json``'s ``executor``)."""
    return {
        "job_name": job_name,
        "trace_name": trace_name,
        "max_steps": config.max_steps,
        "checkpoint_interval_steps": config.checkpoint_interval_steps,
    }


def _summary(
    config: RunConfig,
    ctl: ControllerResult,
    steps: tuple[StepRecord, ...],
    trace_name: str,
    job_name: str | None,
    target: float | None,
) -> dict[str, Any]:
    shared = dict(ctl.summary)
    zones = shared.pop("zones", None)  # a job in several zones: beside the executor's own
    shared["raw_samples"] = float(sum(r.samples for r in steps))  # including redone steps
    pauses = [e.pause_s for e in ctl.events if e.kind in RESCALE_KINDS][1:]
    accuracy = dict(ctl.progress.metrics).get("accuracy")
    summary = ExecutorSummary(
        **shared,
        wall_time_s=ctl.wall_time_s,
        steps=ctl.progress.step,
        samples=ctl.progress.samples,
        lost_steps=sum(e.lost_steps for e in ctl.events),
        final_loss=steps[-1].loss if steps else None,
        final_accuracy=accuracy,
        target_accuracy=target,
        reached_target=None if target is None or accuracy is None else accuracy >= target,
        median_pause_s=statistics.median(pauses) if pauses else None,
        max_pause_s=max(pauses) if pauses else None,
        time_scale=config.time_scale,
        gave_up=ctl.gave_up,
    )
    out = summary.as_dict()
    out["executor"] = _executor_details(config, trace_name, job_name)
    if zones is not None:
        out["executor"].update(zones)
    out["inputs"] = config.spec.as_inputs()
    return out


def _launchers(config: RunConfig, files: RunFiles) -> tuple[list[Launcher], Any]:
    """Local slots and an agent listener (authenticated), or Ray's actors.

    The second item is what the run closes at the end: the agent listener, or the
    Ray connection.
    """
    if config.launcher == "ray":
        from .ray_launcher import RayLauncher, RaySession

        resources = dict(config.ray_resources) or {"CPU": 1.0}
        if config.backend == "nccl":
            resources.setdefault("GPU", 1.0)
        nodes = _max_nodes(config)
        session = RaySession.for_workers(config.ray_address, resources, nodes)
        try:
            launcher = RayLauncher(nodes, resources=resources, log_dir=config.log_dir)
        except BaseException:
            session.close()
            raise
        return [launcher], session
    launchers: list[Launcher] = []
    local = config.local_slots
    if local is None:
        local = _max_nodes(config) if config.agent_port is None else 0
    if local > 0:
        launchers.append(LocalLauncher(local, log_dir=config.log_dir, bind_host=config.bind_host))
    server = None
    if config.agent_port is not None:
        from .agent import AgentServer

        server = AgentServer(config.bind_host, config.agent_port, secret=files.secret())
        server.start()
        log.warning(
            "agents: listening on %s:%s; each agent host needs copies of %s and %s (mode 0600)",
            config.bind_host,
            server.port,
            files.secret_path,
            files.settings_path,
        )
    return launchers, server


def _max_nodes(config: RunConfig) -> int:
    """The worker slots the job may use (the spec's ``max_nodes``, resolved)."""
    assert config.spec.max_nodes is not None  # RunConfig resolves it
    return config.spec.max_nodes


def _worker_settings(config: RunConfig, checkpoint_dir: str) -> WorkerSettings:
    spec = config.spec
    return WorkerSettings(
        job=str(spec.job),
        job_options=dict(spec.job_options),
        seed=spec.seed,
        max_steps=config.max_steps,
        backend=config.backend,
        collective_timeout_s=config.collective_timeout_real_s,
        checkpoint_dir=checkpoint_dir,
        checkpoint_interval_steps=config.checkpoint_interval_steps,
        sample_log_dir=config.sample_log_dir,
        step_delay_s=config.step_delay_real_s,
        stop_at_target=config.stop_at_target,
        eval_every_steps=config.eval_every_steps,
        faults=config.faults,
    )


def _controller_config(config: RunConfig, slots: int) -> ControllerConfig:
    return ControllerConfig(
        time_scale=config.time_scale,
        max_steps=config.max_steps,
        max_nodes=min(_max_nodes(config), slots),
        throughput_samples_per_s=config.throughput_samples_per_s,
        max_wall_real_s=config.max_wall_real_s,
    )


def _check_run(config: RunConfig, trace: Any) -> None:
    """What can be checked before any process starts, each failure one line."""
    if config.script is not None:
        config.script.check()
        return
    from .api import check_job_spec

    check_job_spec(str(config.spec.job))
    if config.backend == "nccl":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("--backend nccl needs CUDA, and this machine has none; use gloo")


def _load_trace(spec: Any) -> Any:
    """The spec's capacity trace, or its zones (a zone set, replayed zone by zone).

    The zones come from ``--trace`` repeated or from one file with a zone column, as
    the simulator loads them (:func:`~elasim.traces.zones.load_zones`).
    """
    from elasim.traces import load_capacity_trace
    from elasim.traces.model import CapacityTrace
    from elasim.traces.zones import ZoneSet, load_zones

    trace = load_zones(spec.zone_traces or [str(spec.trace)])
    if isinstance(trace, (ZoneSet, CapacityTrace)):
        return trace
    return load_capacity_trace(str(spec.trace))  # a job trace: a capacity trace's error


def _resolved(config: RunConfig, trace: Any) -> RunConfig:
    """The start offset checked, or drawn from the seed, as the simulator does it.

    In several zones the offset lies within the shortest zone's trace, and a move
    transfers the job's checkpoint (``--checkpoint-size-gb``, by default the size of
    the job's own, :func:`~.api.checkpoint_size_bytes`, recorded with the spec so its
    simulation moves the same size): the transfer is replayed as a pause of that size
    over ``--transfer-gbps`` (trace seconds, like every pause of the replay), between
    the stop of every worker and their restart from the checkpoint in the new zone.
    """
    from elasim.traces.model import start_offset_of

    spec = config.spec
    zones = getattr(trace, "kind", None) == "zones"
    offset = start_offset_of(trace.shortest() if zones else trace, spec.start_offset_s, spec.seed)
    spec = spec.replace(start_offset_s=offset)
    if zones and spec.checkpoint_size_gb is None:
        if config.script is not None:
            raise ValueError(
                "--checkpoint-size-gb: a script's checkpoint is its own; give the size a "
                "move between zones transfers"
            )
        from .api import checkpoint_size_bytes, load_elastic_job

        job = load_elastic_job(str(spec.job), dict(spec.job_options))
        spec = spec.replace(checkpoint_size_gb=checkpoint_size_bytes(job) / 1e9)
    return replace(config, spec=spec)


def run_trace(
    config: RunConfig,
    *,
    on_turn: Callable[[Controller], None] | None = None,
    on_group: Callable[[ProcessWorkerGroup], None] | None = None,
    journal_dir: str | Path | None = None,
    resume: ResumePoint | None = None,
    on_start: Callable[[], None] | None = None,
) -> RunResult:
    """Replay the spec's trace with its policy on real workers.

    Args:
        config: the run.
        on_turn: called after each loop turn with the controller (progress display).
        on_group: called with the started worker group (tests inject faults).
        on_start: called once every setting is checked, before the workers start
            (the slow part), so a refused run prints its one error line alone.
        journal_dir: append events and steps here as the run goes
            (:class:`~.journal.RunJournal`), so a killed controller leaves them, and
            write the settings there (``run.json``) for ``--resume``.
        resume: continue the dead run this describes (:mod:`.resume`): ``config``
            is then ignored for the run's own, the first group restores its last
            checkpoint, and the result holds every segment.

    Raises:
        elasim.traces.TraceError: the trace cannot be read.
        ValueError: a bad policy, option or setting, or a checkpoint folder that
            cannot be written (one-line message).
        ExecutorError: workers could not be kept running.
        ScriptFailed: with ``config.script``, a process of the script exited non-zero
            on its own (an :class:`ExecutorError`).
    """
    if resume is not None:
        config = resume.segment_config()
    trace = _load_trace(config.spec)
    _check_run(config, trace)
    config = _resolved(config, trace)
    if journal_dir is not None and resume is None and config.script is None:
        save_run_config(journal_dir, config)
    policy = _live_policy(config)
    group, server, tmp = _start_group(config, None if resume is None else resume.checkpoint_step)
    if on_start is not None:
        on_start()
    journal = _journal(journal_dir, config, resume)
    try:
        result, steps, starts, t0 = _drive(
            group, config, trace, policy, on_group, _hooks(on_turn, journal), journal
        )
    finally:
        group.close()
        if server is not None:
            server.close()
        if tmp is not None:
            tmp.cleanup()
    out = _run_result(config, trace.name, result, group, steps, starts, t0)
    if resume is None:
        return replace(out, summary={**out.summary, "segments": [segment_of(out.summary, 0.0, 0)]})
    return merge_segments(out, resume, resume.config.spec.as_inputs())


def _live_policy(config: RunConfig) -> Any:
    """The spec's policy, built with its options and seed; an oracle is refused.

    Why: an oracle needs the whole trace in advance, which a live run does not
    have; saying so before any worker starts beats a policy that cannot decide.

    Raises:
        ValueError: a bad policy or option, or an oracle (one line).
    """
    from elasim.policies import is_oracle, make_policy

    spec = config.spec
    policy = make_policy(str(spec.policy), dict(spec.policy_options), seed=spec.seed)
    if is_oracle(policy):
        raise ValueError(
            f"policy {spec.policy!r} is an oracle (it needs the whole trace in advance): "
            "simulate it (elasim simulate, elasim sweep), it cannot run live"
        )
    return policy


def _drive(
    group: Any,
    config: RunConfig,
    trace: Any,
    policy: Any,
    on_group: Callable[[ProcessWorkerGroup], None] | None,
    hook: Callable[[Controller], None] | None,
    journal: RunJournal | None,
) -> tuple[ControllerResult, tuple[StepRecord, ...], tuple[WorkerStart, ...], float]:
    """Start ``group`` and let a controller replay ``trace`` with ``policy`` on it.

    Why apart from :func:`run_trace`: that function owns the group, its listener and
    its folder and releases them whatever happens here.  Returns the controller's
    result, the steps and worker starts the group recorded, and the run's origin on
    the clock (``t0``, real s), read before the group closes.
    """
    group.start()
    if on_group is not None:
        on_group(group)
    control = _controller_config(config, group.slots)
    controller = Controller(
        config.spec.replace(max_nodes=control.max_nodes),
        trace,
        policy,
        RealClock(),
        control,
        group=group,
        on_turn=hook,
    )
    result = controller.run()
    if journal is not None:
        journal(controller, force=True)
    t0 = controller._t0  # noqa: SLF001 - the run's origin on the clock
    return result, group.step_records(), group.worker_starts(), t0


def _start_group(
    config: RunConfig, resume_step: int | None = None
) -> tuple[Any, Any, tempfile.TemporaryDirectory[str] | None]:
    """The worker group (not started yet), the agent listener, the temporary folder.

    A script (``config.script``) gets a :class:`~.script.ScriptWorkerGroup` on this
    host's slots; elasim's own workers a :class:`ProcessWorkerGroup`, whose
    checkpoint folder is checked before any worker starts.  ``resume_step``: the
    checkpoint there is at this step, and the first group restores it.
    """
    if config.script is not None:
        slots = config.local_slots or _max_nodes(config)
        launcher = LocalLauncher(slots, bind_host=config.bind_host)
        settings = GroupSettings(mode=RescaleMode.RESTART, bind_host=config.bind_host)
        return ScriptWorkerGroup(config.script, settings, launcher), None, None
    tmp: tempfile.TemporaryDirectory[str] | None = None
    checkpoint_dir = config.checkpoint_dir
    if checkpoint_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="elasim-ckpt-")
        checkpoint_dir = tmp.name
    # checked before any worker starts: otherwise rank 0 dies at every checkpoint
    check_writable_dir(checkpoint_dir, "--checkpoint-dir")
    worker = _worker_settings(config, checkpoint_dir)
    files = RunFiles.create(worker, run_dir=config.run_dir, secret_file=config.secret_file)
    server = None
    try:
        launchers, server = _launchers(config, files)
        if config.agent_port is not None and server is not None:
            launchers.extend(server.wait_for_agents(config.expect_agents, timeout_s=120.0))
        if not launchers:
            raise ValueError("no worker slots: give local_slots or expect_agents")
    except BaseException:
        if server is not None:
            server.close()
        files.cleanup()
        if tmp is not None:
            tmp.cleanup()
        raise
    settings = GroupSettings(
        mode=config.spec.rescale,
        worker=worker,
        bind_host=config.bind_host,
        idle_warmup=config.idle_warmup,
        resume_step=resume_step,
        ready_timeout_s=config.ready_timeout_real_s,
        change_timeout_s=config.change_timeout_real_s,
        run_files=files,
    )
    return ProcessWorkerGroup(settings, launchers), server, tmp


def _journal(
    journal_dir: str | Path | None, config: RunConfig, resume: ResumePoint | None
) -> RunJournal | None:
    """The run's journal; a resumed segment's appends after the earlier ones."""
    if journal_dir is None:
        return None
    offset = 0.0 if resume is None else resume.offset_trace_s
    first = 0 if resume is None else resume.checkpoint_step or 0
    base = {} if resume is None else resume.base_books()

    def books(controller: Controller) -> dict[str, Any]:
        from elasim.jobmodel import summarize

        now = controller.now_s()
        seg = summarize(controller.loop, now)
        seg["wall_time_s"] = controller.clock.now() - controller._t0  # noqa: SLF001
        seg["steps"] = controller.group.progress().step
        seg["lost_steps"] = sum(e.lost_steps for e in controller.loop.events)
        seg["inputs"] = config.spec.as_inputs()
        seg["segments"] = [segment_of(seg, offset, first, ended="running")]
        merged = merge_books(base, seg, offset)
        merged["segments"] = list(base.get("segments", [])) + seg["segments"]
        return merged

    journal = RunJournal(journal_dir, offset_trace_s=offset, books=books)
    if resume is not None:
        journal.append_events(resume.death_events(), offset / config.time_scale)
    return journal


def _hooks(
    on_turn: Callable[[Controller], None] | None, journal: RunJournal | None
) -> Callable[[Controller], None] | None:
    """The turn hook: the caller's, then the journal's."""
    hooks = [h for h in (on_turn, journal) if h is not None]
    if not hooks:
        return None

    def hook(controller: Controller) -> None:
        for each in hooks:
            each(controller)

    return hook


def _run_result(
    config: RunConfig,
    trace_name: str,
    result: ControllerResult,
    group: ProcessWorkerGroup,
    steps: tuple[StepRecord, ...],
    starts: tuple[WorkerStart, ...],
    t0: float,
) -> RunResult:
    steps = tuple(replace(r, real_s=r.real_s - t0) for r in steps)
    summary = _summary(config, result, steps, trace_name, group.job_name, group.target_accuracy)
    # in order of occurrence (a checkpoint is stamped when its write began); stable,
    # so a PREEMPT and the SCALE_DOWN it caused stay in that order
    order = sorted(range(len(result.events)), key=lambda i: result.events[i].time_s)
    return RunResult(
        summary=summary,
        events=tuple(result.events[i] for i in order),
        event_real_s=tuple(result.event_real_s[i] for i in order),
        event_interval_s=tuple(result.event_interval_s[i] for i in order),
        event_due_s=tuple(result.event_due_s[i] for i in order),
        steps=steps,
        decisions=result.decisions,
        timeline=result.timeline,
        time_scale=config.time_scale,
        worker_starts=tuple(
            WorkerStart(w.wid, w.spawn_s - t0, None if w.ready_s is None else w.ready_s - t0)
            for w in starts
        ),
    )
