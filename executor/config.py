"""What ``elasim run`` needs: the job (a :class:`~elasim.jobmodel.JobSpec`) and the executor's own.

:class:`RunConfig` holds the spec, which the simulator runs too, and only what a run
on real workers adds: its clock (``time_scale``), the work in steps, the wall-clock
and collective timeouts, where processes start (local slots, agents, Ray), logs, the
run's private files, a user's script, and test hooks.  Its JSON form
(:meth:`RunConfig.to_json` / :meth:`RunConfig.from_json`) is ``run.json``, what
``--resume`` restarts from.

A module of its own so that both :mod:`.run` (which runs it) and :mod:`.resume`
(which reads it back) import it, and neither imports the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from elasim.jobmodel import JobSpec, RescaleMode

from .protocol import FaultInjection
from .script import ScriptSpec

__all__ = ["DEFAULT_JOB", "DEFAULT_MAX_NODES", "RunConfig"]

#: The executor's own training job (an MLP on scikit-learn's digits, offline).
DEFAULT_JOB = "elasim.executor.digits:digits_job"
#: Worker slots when the spec names no ``max_nodes``.
DEFAULT_MAX_NODES = 4


@dataclass(frozen=True)
class RunConfig:
    """Everything ``elasim run`` needs (frozen: a run is reproducible from it).

    Attributes:
        spec: the job: trace, policy, training job (``package.module:factory``) and
            its options, nodes, mechanism, notice, checkpoints, deadline, window,
            prices, seed (trace seconds).  Its ``max_nodes`` is the worker slots the
            job may use (default :data:`DEFAULT_MAX_NODES`).
        time_scale: trace seconds per real second.
        max_steps: the job's work in optimizer steps.
        checkpoint_interval_steps: rank 0 also checkpoints every this many steps.
        checkpoint_dir: where checkpoints go (None: a temporary directory).
        max_wall_real_s: give up after this long.
        collective_timeout_real_s: process-group timeout of the workers.
        backend: ``auto``, ``gloo`` or ``nccl``.
        bind_host: address of the store and of the agent listener.
        agent_port: listen for ``elasim agent`` on this port (None: no agents).
        expect_agents: wait for this many agents before starting.
        local_slots: worker slots on this host (None: ``max_nodes`` without
            agents, else 0).
        log_dir: worker logs go here (None: discarded).
        sample_log_dir: per-rank sample-id logs (tests of exactly-once sampling).
        step_delay_real_s: synthetic extra time per step (tests; 0 for real runs).
        stop_at_target: stop once the job's accuracy target is reached.
        eval_every_steps: evaluation period for ``stop_at_target``.
        faults: fault injection (tests).
        throughput_samples_per_s: fixed throughput table for the policy (samples per
            trace second, index = nodes) instead of measuring.
        idle_warmup: standbys warm up at idle CPU priority (benchmarks on one host).
        ready_timeout_real_s: how long a worker may take to start (spawn to ready);
            on a busy host, several seconds per ``import torch`` add up.
        change_timeout_real_s: bound on one generation change.
        run_dir: where the run's private files go (the secret, the worker settings;
            made ``0700``, must be new or empty); None: a temporary folder, removed
            at the end.  Agents' hosts need copies of both files.
        secret_file: use this run secret (a ``0600`` file the user made) instead of
            a fresh one.
        script: run this torchrun script instead of elasim's own workers
            (:mod:`.script`).  It restarts on every change (the spec's mechanism
            becomes ``restart``) and checkpoints itself (elasim's checkpoint
            interval becomes ``off``); the training job does not apply.
        launcher: ``local`` (this host's slots, and agents) or ``ray`` (worker slots
            as Ray actors, :mod:`.ray_launcher`).
        ray_address: the Ray cluster (``HOST:PORT``, ``ray://HOST:PORT`` or
            ``auto``); None with ``launcher="ray"`` starts a private local instance.
        ray_resources: Ray resources per worker (empty: ``CPU=1``).
    """

    spec: JobSpec = field(default_factory=lambda: JobSpec(trace="spot_us_east.csv"))
    time_scale: float = 600.0
    max_steps: int = 2000
    checkpoint_interval_steps: int | None = None
    checkpoint_dir: str | None = None
    max_wall_real_s: float = 600.0
    collective_timeout_real_s: float = 5.0
    backend: str = "auto"
    bind_host: str = "127.0.0.1"
    agent_port: int | None = None
    expect_agents: int = 0
    local_slots: int | None = None
    log_dir: str | None = None
    sample_log_dir: str | None = None
    step_delay_real_s: float = 0.0
    stop_at_target: bool = False
    eval_every_steps: int = 0
    faults: FaultInjection = FaultInjection()
    throughput_samples_per_s: tuple[float, ...] | None = None
    idle_warmup: bool = False
    ready_timeout_real_s: float = 120.0
    change_timeout_real_s: float = 60.0
    run_dir: str | None = None
    secret_file: str | None = None
    script: ScriptSpec | None = None
    launcher: str = "local"
    ray_address: str | None = None
    ray_resources: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check_launcher()
        spec = self.spec
        if spec.trace is None:
            spec = spec.replace(trace="spot_us_east.csv")
        if spec.policy is None:
            spec = spec.replace(policy="greedy")
        if self.script is not None:
            if self.agent_port is not None or self.expect_agents:
                raise ValueError("--script runs on this host only: drop --agent-port/--agents")
            # what a script means (see the field): recorded as such in summary.json
            spec = spec.replace(
                rescale=RescaleMode.RESTART, checkpoint_interval_s=math.inf, job=self.script.name
            )
        spec = spec.replace(
            job=spec.job or DEFAULT_JOB,
            min_nodes=spec.min_nodes or 1,
            max_nodes=spec.max_nodes or DEFAULT_MAX_NODES,
        )
        object.__setattr__(self, "spec", spec)
        if not (math.isfinite(self.time_scale) and self.time_scale > 0):
            raise ValueError(f"--time-scale must be > 0, got {self.time_scale}")
        if self.max_steps < 1:
            raise ValueError(f"--max-steps must be >= 1, got {self.max_steps}")
        if self.expect_agents and self.agent_port is None:
            raise ValueError("expect_agents needs agent_port")

    def _check_launcher(self) -> None:
        """``launcher`` and what goes with it, each failure naming the flag."""
        if self.launcher not in ("local", "ray"):
            raise ValueError(f"--launcher must be 'local' or 'ray', got {self.launcher!r}")
        if self.launcher == "local":
            if self.ray_address is not None or self.ray_resources:
                raise ValueError("--address and --ray-resources need --launcher ray")
            return
        if self.script is not None:
            raise ValueError("--script runs on this host only: drop --launcher ray")
        if self.agent_port is not None or self.expect_agents or self.local_slots:
            raise ValueError("--launcher ray places every worker: drop --agent-port/--agents")
        from elasim.ray_connect import check_address

        check_address(self.ray_address)

    # -- run.json ------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The settings as plain JSON (``run.json``); a script run has none to resume."""
        if self.script is not None:
            raise ValueError("--resume does not apply to --script runs (the script checkpoints)")
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "spec":
                value = value.as_inputs()
            elif f.name == "faults":
                value = {g.name: getattr(value, g.name) for g in fields(value)}
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RunConfig:
        """The settings ``run.json`` holds (one written before the spec existed too).

        The dead controller's private folder is not empty: a resumed run makes its
        own (a fresh secret; an agent needs the new files).

        Raises:
            ValueError: a setting that is not one of ours.
        """
        values = dict(raw)
        if "spec" not in values:  # a run.json from before the spec: its keys at the top
            values["spec"] = JobSpec.from_inputs(_old_spec_keys(values))
        else:
            values["spec"] = JobSpec.from_inputs(values["spec"])
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown setting {unknown[0]!r}")
        values["faults"] = FaultInjection(**values.get("faults", {}))
        values["script"] = None
        values["run_dir"] = None
        table = values.get("throughput_samples_per_s")
        values["throughput_samples_per_s"] = None if table is None else tuple(table)
        return cls(**values)

    def resumed(self, offset_trace_s: float) -> RunConfig:
        """The settings of a segment that starts ``offset_trace_s`` later in the trace."""
        spec = self.spec
        deadline = spec.deadline_s
        if deadline is not None:
            deadline = max(deadline - offset_trace_s, 1e-6)
        start = (spec.start_offset_s or 0.0) + offset_trace_s
        return replace(self, spec=spec.replace(start_offset_s=start, deadline_s=deadline))


#: ``run.json`` keys of runs before the spec, and the spec field each one is.
_OLD_RUN_KEYS = {
    "trace": "trace",
    "policy": "policy",
    "policy_options": "policy_options",
    "job": "job",
    "job_options": "job_options",
    "max_nodes": "max_nodes",
    "rescale": "rescale",
    "notice_trace_s": "notice_s",
    "checkpoint_interval_trace_s": "checkpoint_interval_s",
    "deadline_trace_s": "deadline_s",
    "start_offset_trace_s": "start_offset_s",
    "on_demand_price_per_hour": "on_demand_price_per_hour",
    "spot_price_per_hour": "spot_price_per_hour",
    "seed": "seed",
}


def _old_spec_keys(values: dict[str, Any]) -> dict[str, Any]:
    """Pop an old ``run.json``'s spec keys (mutating ``values``) as spec fields."""
    return {new: values.pop(old) for old, new in _OLD_RUN_KEYS.items() if old in values}
