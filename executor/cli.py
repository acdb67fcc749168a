"""``elasim run`` and ``elasim agent``: the executor's commands (the only I/O of the executor).

``register(app)`` adds both commands to the ``elasim`` Typer app.  Nothing here imports
torch at import time: the heavy modules are imported inside the command functions,
so ``elasim --help`` and the simulator's commands stay fast and torch-free.

Errors (a malformed trace, an unknown policy or option, a bad flag, workers that
cannot be kept alive) print one line on stderr and exit with code 2.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import typer

__all__ = ["register"]


class _UsageError(ValueError):
    """A bad command-line value."""


def _fail(message: str) -> typer.Exit:
    """The ``elasim`` CLI's one-line error (markup escaped), exit code 2."""
    from elasim.cli import _fail as fail

    return fail(message)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _parse_sets(values: list[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _UsageError(f"{flag} expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _parse_interval(text: str | None) -> float | None:
    if text is None or text.strip().lower() in ("off", "none", "never", ""):
        return None
    try:
        value = float(text)
    except ValueError:
        raise _UsageError(
            f"--checkpoint-interval-s must be seconds or 'off', got {text!r}"
        ) from None
    if not (math.isfinite(value) and value > 0):
        raise _UsageError(f"--checkpoint-interval-s must be > 0, got {text!r}")
    return value


def _job_options(raw: dict[str, str]) -> dict[str, Any]:
    """``--job-set`` values: ints, floats and booleans where they parse as such."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        lowered = value.lower()
        if lowered in ("true", "false"):
            out[key] = lowered == "true"
            continue
        for kind in (int, float):
            try:
                out[key] = kind(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


class _Progress:
    """A one-line live status on the terminal (world size, step, loss, last pause)."""

    def __init__(self, max_steps: int, time_scale: float) -> None:
        from rich.console import Console
        from rich.live import Live

        self.max_steps = max_steps
        self.time_scale = time_scale
        self.console = Console(stderr=True)
        self.live = Live(console=self.console, refresh_per_second=8, transient=False)
        self._last = 0.0

    def __enter__(self) -> _Progress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def __call__(self, controller: Any) -> None:
        now = time.monotonic()
        if now - self._last < 0.125:
            return
        self._last = now
        from rich.text import Text

        progress = controller.group.progress()
        spot, od = controller.group.held()
        pause = controller.last_pause_s
        loss = "-" if math.isnan(progress.loss) else f"{progress.loss:.4f}"
        pause_text = "-" if pause is None else f"{pause * 1000:.0f} ms"
        hours = controller.now_s() / 3600.0
        self.live.update(
            Text(
                f"trace {hours:7.2f} h | available {controller.available:2d} | "
                f"world {spot + od} ({spot} spot, {od} on-demand) | "
                f"step {progress.step}/{self.max_steps} | loss {loss} | last pause {pause_text}"
            )
        )


def _print_summary(summary: dict[str, Any], out: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="elasim run (hours are trace hours)", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    keys = (
        "completed",
        "completion_time_h",
        "cost_usd",
        "spot_node_hours",
        "on_demand_node_hours",
        "mean_nodes",
        "rescales",
        "preemptions",
        "checkpoints",
        "lost_steps",
        "lost_work_h",
        "rescale_overhead_h",
        "median_pause_s",
        "max_pause_s",
        "steps",
        "final_loss",
        "final_accuracy",
        "target_accuracy",
        "wall_time_s",
    )
    for key in keys:
        value = summary.get(key)
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        table.add_row(key, text)
    console = Console()
    console.print(table)
    if out is not None:
        console.print(
            f"wrote {out}/summary.json, events.parquet, steps.parquet, workers.parquet, "
            "timeline.png"
        )


def _write_profile(result: Any, config: Any, out: Path | None, path: Path) -> None:
    """The run's by-product: a profile measured by this very run."""
    import os
    import tempfile

    from elasim.executor.calibrate import profile_of_runs
    from elasim.executor.run import write_run
    from elasim.profile import save_profile

    with tempfile.TemporaryDirectory(prefix="elasim-run-") as tmp:
        run_dir = out
        if run_dir is None:
            run_dir = Path(tmp) / "run"
            write_run(result, run_dir, plot=False)
        checkpoints = Path(config.checkpoint_dir) if config.checkpoint_dir else None
        sizes = [p.stat().st_size for p in checkpoints.glob("*.pt")] if checkpoints else []
        profile = profile_of_runs(
            [run_dir],
            job=config.job,
            checkpoint_bytes=max(sizes, default=0),
            source=f"elasim run --trace {config.trace} --policy {config.policy}",
            # workers on agents run on other hosts: no shared-host model then
            shared_host_cores=0 if config.expect_agents else (os.cpu_count() or 1),
        )
    save_profile(profile, path)


def run_command(
    trace: str = typer.Option(..., "--trace", "-t", help="Bundled trace name or CSV path."),
    policy: str = typer.Option("greedy", "--policy", "-p", help="Policy name or file.py:Class."),
    sets: list[str] | None = typer.Option(None, "--set", help="Policy option key=value."),
    time_scale: float = typer.Option(600.0, "--time-scale", help="Trace seconds per real second."),
    workers_max: int = typer.Option(4, "--workers-max", help="Worker slots (= max nodes)."),
    rescale: str = typer.Option("inplace", "--rescale", help="'inplace' or 'restart'."),
    notice_s: float = typer.Option(0.0, "--notice-s", help="Preemption notice, trace seconds."),
    checkpoint_interval_s: str | None = typer.Option(
        None, "--checkpoint-interval-s", help="Trace seconds of running time, or 'off'."
    ),
    checkpoint_interval_steps: int | None = typer.Option(
        None, "--checkpoint-interval-steps", help="Also checkpoint every N steps."
    ),
    checkpoint_dir: Path | None = typer.Option(
        None, "--checkpoint-dir", help="Checkpoint folder (default: <out>/checkpoints or temp)."
    ),
    max_steps: int = typer.Option(2000, "--max-steps", help="The job's work, in steps."),
    trace_start_s: float = typer.Option(0.0, "--trace-start-s", help="Start offset, trace s."),
    deadline_h: float | None = typer.Option(None, "--deadline-h", help="Deadline, trace hours."),
    on_demand_price: float | None = typer.Option(
        None, "--on-demand-price", help="USD per node-hour (overrides the trace)."
    ),
    job: str = typer.Option(
        "elasim.executor.digits:digits_job", "--job", help="ElasticJob import spec."
    ),
    job_sets: list[str] | None = typer.Option(None, "--job-set", help="Job option key=value."),
    seed: int = typer.Option(0, "--seed", help="Seed for the model, sampler and policy."),
    max_wall_s: float = typer.Option(600.0, "--max-wall-s", help="Give up after (real s)."),
    collective_timeout_s: float = typer.Option(
        5.0, "--collective-timeout-s", help="Workers' process-group timeout (real s)."
    ),
    backend: str = typer.Option("auto", "--backend", help="'auto', 'gloo' or 'nccl'."),
    bind: str = typer.Option("127.0.0.1", "--bind", help="Address for the store and agents."),
    agent_port: int | None = typer.Option(None, "--agent-port", help="Listen for agents here."),
    agents: int = typer.Option(0, "--agents", help="Wait for this many agents to connect."),
    local_slots: int | None = typer.Option(
        None, "--local-slots", help="Slots on this host (default: workers-max, 0 with agents)."
    ),
    log_dir: Path | None = typer.Option(None, "--log-dir", help="Worker logs go here."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the run's files here."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write timeline.png with --out."),
    profile_out: Path | None = typer.Option(
        None, "--profile-out", help="Also write a profile of this run (for simulate --profile)."
    ),
) -> None:
    """Replay a trace on real torch.distributed workers with the simulator's policies."""
    try:
        from elasim.executor import require_torch

        require_torch()
        from elasim.executor.run import RunConfig, run_trace, write_run

        if rescale not in ("inplace", "restart"):
            raise _UsageError(f"--rescale must be 'inplace' or 'restart', got {rescale!r}")
        if agents and agent_port is None:
            raise _UsageError("--agents needs --agent-port")
        ckpt = checkpoint_dir
        if ckpt is None and out is not None:
            ckpt = out / "checkpoints"
        config = RunConfig(
            trace=trace,
            policy=policy,
            policy_options=_parse_sets(sets, "--set"),
            time_scale=time_scale,
            trace_start_s=trace_start_s,
            workers_max=workers_max,
            rescale=rescale,  # type: ignore[arg-type]
            notice_s=notice_s,
            checkpoint_interval_s=_parse_interval(checkpoint_interval_s),
            checkpoint_interval_steps=checkpoint_interval_steps,
            checkpoint_dir=None if ckpt is None else str(ckpt),
            max_steps=max_steps,
            seed=seed,
            job=job,
            job_options=_job_options(_parse_sets(job_sets, "--job-set")),
            deadline_s=None if deadline_h is None else deadline_h * 3600.0,
            on_demand_price_per_hour=on_demand_price,
            max_wall_s=max_wall_s,
            collective_timeout_s=collective_timeout_s,
            backend=backend,
            bind_host=bind,
            agent_port=agent_port,
            expect_agents=agents,
            local_slots=local_slots,
            log_dir=None if log_dir is None else str(log_dir),
        )
        if as_json or not sys.stderr.isatty():
            result = run_trace(config)
        else:
            with _Progress(max_steps, time_scale) as progress:
                result = run_trace(config, on_turn=progress)
        if out is not None:
            write_run(result, out, plot=plot)
        if profile_out is not None:
            _write_profile(result, config, out, profile_out)
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        raise typer.Exit(code=130) from None
    except (ValueError, RuntimeError, OSError, ImportError) as exc:
        raise _fail(_one_line(exc)) from None
    summary = dict(result.summary)
    if as_json:
        from elasim.output import json_ready

        typer.echo(json.dumps(json_ready(summary), sort_keys=False))
    else:
        _print_summary(summary, out)


def agent_command(
    controller: str = typer.Option(..., "--controller", help="HOST:PORT of the controller."),
    slots: int = typer.Option(1, "--slots", help="Worker slots this host offers."),
    log_dir: Path | None = typer.Option(None, "--log-dir", help="Worker logs go here."),
    connect_timeout_s: float = typer.Option(30.0, "--connect-timeout-s"),
) -> None:
    """Contribute worker slots on this host to an elasim run controller."""
    try:
        from elasim.executor.agent import Agent

        host, sep, port = controller.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise _UsageError(f"--controller must be HOST:PORT, got {controller!r}")
        if slots < 1:
            raise _UsageError(f"--slots must be >= 1, got {slots}")
        code = Agent(controller, slots, log_dir=log_dir, connect_timeout_s=connect_timeout_s).run()
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        raise typer.Exit(code=130) from None
    except (ValueError, RuntimeError, OSError) as exc:
        raise _fail(_one_line(exc)) from None
    raise typer.Exit(code=code)


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``agent`` to the ``elasim`` app."""
    app.command("run")(run_command)
    app.command("agent")(agent_command)
