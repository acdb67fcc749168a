"""``elasim run``: the executor's command (``elasim agent`` is :mod:`.agent`).

``register(app)`` adds it to the ``elasim`` Typer app.  Nothing here imports
torch at import time: the heavy modules are imported inside the command functions,
so ``elasim --help`` and the simulator's commands stay fast and torch-free.

Errors (a malformed trace, an unknown policy or option, a bad flag, workers that
cannot be kept alive) print one line on stderr and exit with code 2.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import typer

from elasim.jobmodel import JobSpec

from .spec_options import CHECKPOINT_PANEL, SpecFlags, with_spec
from .tools import (
    UsageError,
    check_bind,
    command_elapsed_s,
    ensure_writable_dir,
    err_console,
    first_line,
    interrupted,
    one_of,
)
from .tools import fail as _fail
from .worker_options import (
    address_option,
    agent_port_option,
    agents_option,
    bind_option,
    collective_timeout_option,
    launcher_option,
    log_dir_option,
    max_wall_option,
    parse_ray_resources,
    ray_resources_option,
)

__all__ = ["register"]

_one_line = first_line


def _write_profile(result: Any, config: Any, out: Path | None, path: Path) -> None:
    """The run's by-product: a profile measured by this very run."""
    import os
    import tempfile

    from elasim.executor.calibrate import profile_of_runs
    from elasim.executor.run_output import write_run
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
            job=str(config.spec.job),
            checkpoint_bytes=max(sizes, default=0),
            source=f"elasim run --trace {config.spec.trace} --policy {config.spec.policy}",
            # workers on agents or Ray nodes run on other hosts: no shared-host model then
            shared_host_cores=0
            if config.expect_agents or config.launcher == "ray"
            else (os.cpu_count() or 1),
        )
    save_profile(profile, path)


def _script_option() -> Any:
    return typer.Option(
        None,
        "--script",
        help="Run this unmodified torchrun script instead of elasim's own job; its "
        "arguments follow '--'.",
    )


def _resume_option() -> Any:
    return typer.Option(
        None,
        "--resume",
        help="Continue the run whose --out is this folder after its controller died: "
        "from its last checkpoint, with its own settings, appending to its files.",
    )


_SECRET_FILE_OPTION = typer.Option(
    None,
    "--secret-file",
    help="The run's secret (a 0600 file you made, e.g. already on the agents' hosts); "
    "default: a fresh one.",
)
_RUN_DIR_OPTION = typer.Option(
    None,
    "--run-dir",
    help="Write the run's secret and worker settings here (0700; copy both to agent "
    "hosts); default: a temporary folder.",
)


@with_spec(
    SpecFlags(
        exclude=("checkpoint_cost_s",),
        trace=None,
        job_help="The training job: package.module:factory (default: the digits MLP).",
        max_nodes_help="Most worker slots the job may use (default 4).",
        rescale=None,
        passthrough=("rescale", "job", "job_sets", "checkpoint_interval_s"),
        zones=True,
    )
)
def run_command(
    spec: JobSpec,
    flags: dict[str, Any],
    time_scale: float = typer.Option(600.0, "--time-scale", help="Trace seconds per real second."),
    checkpoint_interval_steps: int | None = typer.Option(
        None,
        "--checkpoint-interval-steps",
        help="Also checkpoint every N steps.",
        rich_help_panel=CHECKPOINT_PANEL,
    ),
    checkpoint_dir: Path | None = typer.Option(
        None,
        "--checkpoint-dir",
        help="Checkpoint folder (default: <out>/checkpoints or temp).",
        rich_help_panel=CHECKPOINT_PANEL,
    ),
    max_steps: int = typer.Option(2000, "--max-steps", help="The job's work, in steps."),
    max_wall_s: float = max_wall_option(),
    collective_timeout_s: float = collective_timeout_option(),
    backend: str = typer.Option("auto", "--backend", help="'auto', 'gloo' or 'nccl'."),
    bind: str = bind_option(),
    secret_file: Path | None = _SECRET_FILE_OPTION,
    run_dir: Path | None = _RUN_DIR_OPTION,
    agent_port: int | None = agent_port_option(),
    agents: int = agents_option(),
    local_slots: int | None = typer.Option(
        None, "--local-slots", help="Slots on this host (default: --max-nodes, 0 with agents)."
    ),
    launcher: str = launcher_option(),
    address: str | None = address_option(),
    ray_resources: list[str] | None = ray_resources_option(),
    log_dir: Path | None = log_dir_option("<out>/logs with --out, else discarded"),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the run's files here."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write timeline.png with --out."),
    profile_out: Path | None = typer.Option(
        None, "--profile-out", help="Also write a profile of this run (for simulate --profile)."
    ),
    script: Path | None = _script_option(),
    resume: Path | None = _resume_option(),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace the files of a run already in --out."
    ),
    script_args: list[str] | None = typer.Argument(
        None, help="The script's arguments (after '--', with --script).", show_default=False
    ),
) -> None:
    """Replay a trace on real torch.distributed workers with the simulator's policies.

    With ``--script train.py -- ARGS`` the workers are your own torchrun script,
    restarted on every change (see the README, "Your own torchrun script").

    Exits 0 when the job reached its end; 1, with one line saying why, when it did
    not or the script failed (the run's files are written when it ends); 2 on bad
    input.
    """
    _run(**locals())


def _check_flags(
    same: dict[str, Any],
    agents: int,
    agent_port: int | None,
    max_wall_s: float,
    collective_timeout_s: float,
) -> None:
    """The flags of ``run`` that are checked on their own, each failure naming its flag."""
    one_of(same["backend"], ("auto", "gloo", "nccl"), "--backend")
    one_of(same["launcher"], ("local", "ray"), "--launcher")
    if agents and agent_port is None:
        raise UsageError("--agents needs --agent-port")
    if agent_port is not None and not 0 <= agent_port < 65536:
        raise UsageError(f"--agent-port must be 0-65535, got {agent_port}")
    for flag, value in (
        ("--time-scale", same["time_scale"]),
        ("--max-wall-s", max_wall_s),
        ("--collective-timeout-s", collective_timeout_s),
    ):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be > 0, got {value:g}")
    for flag, count in (
        ("--max-steps", same["max_steps"]),
        ("--checkpoint-interval-steps", same["checkpoint_interval_steps"]),
        ("--local-slots", same["local_slots"]),
    ):
        if count is not None and count < 1:
            raise UsageError(f"{flag} must be >= 1, got {count}")


def _check_security_flags(bind: str, secret_file: Path | None, run_dir: Path | None) -> None:
    """``--bind``, ``--secret-file`` and ``--run-dir``, each failure naming its flag."""
    from elasim.executor.auth import AuthError, read_secret

    check_bind(bind, "--bind")
    if secret_file is not None:
        try:
            read_secret(secret_file)
        except AuthError as exc:
            raise UsageError(f"--secret-file: {exc}") from None
    if run_dir is not None and run_dir.exists():
        if not run_dir.is_dir():
            raise UsageError(f"--run-dir: {run_dir} is not a folder")
        if any(run_dir.iterdir()):
            raise UsageError(f"--run-dir: {run_dir} is not empty (a run's files go in a new one)")


def _logs_dir(log_dir: Path | None, out: Path | None) -> Path | None:
    """Every process's log: ``--log-dir``, else beside the run's files, where errors name it."""
    return log_dir if log_dir is not None or out is None else out / "logs"


def _config(
    *,
    spec: JobSpec,
    flags: dict[str, Any],
    agents: int,
    agent_port: int | None,
    checkpoint_dir: Path | None,
    max_wall_s: float,
    collective_timeout_s: float,
    bind: str,
    log_dir: Path | None,
    out: Path | None,
    script: Path | None,
    script_args: list[str] | None,
    secret_file: Path | None,
    run_dir: Path | None,
    address: str | None,
    ray_resources: list[str] | None,
    overwrite: bool = False,
    **same: Any,
) -> Any:
    """Every flag of ``run`` checked (naming the flag) and turned into a ``RunConfig``."""
    from elasim.executor.config import RunConfig

    _check_security_flags(bind, secret_file, run_dir)
    logs = _logs_dir(log_dir, out)
    script_spec = _script_spec(
        script, script_args, logs, checkpoint_dir=checkpoint_dir, **same, **flags
    )
    _check_flags(same, agents, agent_port, max_wall_s, collective_timeout_s)
    if out is not None:
        _check_out_free(out, overwrite)
        ensure_writable_dir(out, "--out")
    ckpt = checkpoint_dir if checkpoint_dir is not None or out is None else out / "checkpoints"
    ckpt = None if script_spec is not None else ckpt  # a script checkpoints itself
    return RunConfig(
        spec=spec,
        checkpoint_dir=None if ckpt is None else str(ckpt),
        max_wall_real_s=max_wall_s,
        collective_timeout_real_s=collective_timeout_s,
        bind_host=bind,
        secret_file=None if secret_file is None else str(secret_file),
        run_dir=None if run_dir is None else str(run_dir),
        expect_agents=agents,
        agent_port=agent_port,
        log_dir=None if logs is None else str(logs),
        script=script_spec,
        ray_address=address,
        ray_resources=parse_ray_resources(ray_resources),
        **same,
    )


def _check_out_free(out: Path, overwrite: bool) -> None:
    """``--out`` holds no run, or ``--overwrite`` clears the old run's journal.

    Why: a second ``elasim run --out run`` overwrote the first run's files without a
    word, and a new run appends to a journal it finds there, mixing two runs.

    Raises:
        UsageError: ``out`` holds a run and ``--overwrite`` was not given (one line).
    """
    from elasim.executor.journal import PARTIAL_FILES
    from elasim.executor.resume import RUN_FILE

    journal = [out / name for name in PARTIAL_FILES if (out / name).exists()]
    if overwrite:
        for path in journal:
            path.unlink()
        return
    if (out / "summary.json").exists() and not journal:
        raise UsageError(
            f"--out {out} already holds a finished run (summary.json): pass --overwrite to "
            "replace it, or choose another folder (--resume continues only a run that did "
            "not finish)"
        )
    if journal or (out / RUN_FILE).exists():
        raise UsageError(
            f"--out {out} holds a run that did not finish: `elasim run --resume {out}` "
            "continues it, --overwrite replaces it"
        )


#: ``run`` flags that configure elasim's own workers, with their defaults: given with
#: ``--script`` they would be silently ignored, so they are refused.
_NOT_WITH_SCRIPT = (
    ("job", "--job", None),
    ("job_sets", "--job-set", None),
    ("checkpoint_interval_s", "--checkpoint-interval-s", "auto"),
    ("checkpoint_interval_steps", "--checkpoint-interval-steps", None),
    ("checkpoint_dir", "--checkpoint-dir", None),
    ("backend", "--backend", "auto"),
)


def _script_spec(
    script: Path | None, script_args: list[str] | None, log_dir: Path | None, **flags: Any
) -> Any:
    """``--script`` and its arguments as a ``ScriptSpec`` (None without ``--script``)."""
    if script is None:
        if script_args:
            raise UsageError(
                f"unexpected argument {script_args[0]!r} (script arguments need --script)"
            )
        return None
    from elasim.executor.script import ScriptSpec

    if flags["rescale"] not in (None, "restart"):
        raise UsageError("--script restarts the script on every change: drop --rescale inplace")
    for key, flag, default in _NOT_WITH_SCRIPT:
        if flags.get(key) not in (default, [], None) or (key == "job" and flags.get(key)):
            raise UsageError(f"{flag} does not apply with --script (the script does its own)")
    spec = ScriptSpec(
        path=str(script),
        args=tuple(script_args or ()),
        log_dir=None if log_dir is None else str(log_dir),
    )
    spec.check()
    return spec


class _Terminated(BaseException):
    """SIGTERM arrived.

    It unwinds like Ctrl-C, so the run's cleanup (the workers, the temporary checkpoint
    folder) happens, then the command exits 143.
    """


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise _Terminated


def _run(*, as_json: bool, plot: bool, profile_out: Path | None, **flags: Any) -> None:
    """The body of ``run``: check, run, write, print; exit 1 if the job did not finish."""
    import signal

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run_inner(as_json=as_json, plot=plot, profile_out=profile_out, **flags)
    except _Terminated:
        raise typer.Exit(code=143) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _config_or_resume(resume: Path | None, out: Path | None, flags: dict[str, Any]) -> Any:
    """``(config, out, resume point)``: from the flags, or from a dead run's folder.

    Why apart from :func:`_run_inner`: ``--resume DIR`` takes the run's settings and
    output folder from ``DIR`` and so refuses ``--trace`` and ``--out``; a new run
    needs ``--trace``.  The point is None for a new run.

    Raises:
        UsageError: a flag that contradicts ``--resume``, or no ``--trace``.
    """
    if resume is not None:
        from elasim.executor.resume import load_resume_point

        if flags["spec"].trace is not None or out is not None:
            raise UsageError(
                "--resume takes the run's settings from its folder: drop --trace/--out"
            )
        point = load_resume_point(resume)
        return point.config, point.out_dir, point
    if flags["spec"].trace is None:
        raise UsageError("--trace is required (or --resume DIR)")
    return _config(**flags), out, None


def _run_inner(*, as_json: bool, plot: bool, profile_out: Path | None, **flags: Any) -> None:
    out = flags["out"]
    resume = flags.pop("resume")
    try:
        from elasim.executor import require_torch

        require_torch()
        from elasim.executor.run_output import write_run

        config, out, point = _config_or_resume(resume, out, flags)
        result = _replay(config, out, point, as_json)
        if out is not None:
            _say(f"writing the run's files to {out}")
            write_run(result, out, plot=plot)
        if profile_out is not None:
            _write_profile(result, config, out, profile_out)
        result = _with_command_time(result, out)
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        raise interrupted(_resume_hint(out)) from None
    except (ValueError, RuntimeError, OSError, ImportError) as exc:
        from elasim.executor.script import ScriptFailed

        if isinstance(exc, ScriptFailed):  # the user's script failed, not the input: 1
            raise _fail(_one_line(exc), code=1) from None
        raise _fail(_one_line(exc)) from None
    summary = dict(result.summary)
    if as_json:
        from elasim.output import json_ready

        typer.echo(json.dumps(json_ready(summary), sort_keys=False))
    else:
        from rich.console import Console

        from .run_display import summary_table, written

        console = Console()
        console.print(summary_table(summary))
        if out is not None:
            console.print(written(out), soft_wrap=True, highlight=False)
    if not summary["completed"]:
        why = "gave up at --max-wall-s" if summary.get("gave_up") else "stopped early"
        err_console.print(
            f"[bold red]error:[/] the job did not finish: {why} after "
            f"{summary['steps']} of {config.max_steps} steps ({summary['wall_time_s']:.1f} real s)",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(code=1)


def _resume_hint(out: Path | None) -> str | None:
    """What Ctrl-C leaves to do: resume, when the run got as far as its settings file."""
    from elasim.executor.resume import RUN_FILE

    if out is None or not (Path(out) / RUN_FILE).exists():
        return None
    return f"`elasim run --resume {out}` continues it"


def _err_line(line: str) -> None:
    """One line on stderr, flushed (plain text: it may be a file)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _say(text: str) -> None:
    """One ``elasim run:`` progress line on stderr."""
    _err_line(f"elasim run: {text}")


def _replay(config: Any, out: Path | None, point: Any, as_json: bool) -> Any:
    """Run the trace with progress: a live line on a terminal, log lines otherwise.

    Why log lines: a run whose output goes to a file or a pipe showed nothing for the
    minute its workers took to start and train.  With ``--json`` or without a
    terminal, whatever prints on stdout during the run goes to stderr, so stdout
    carries the summary alone (a Ray driver prints the cluster's errors there).
    """
    from elasim.executor.run import run_trace

    from .run_display import LiveProgress, LogProgress

    spec = config.spec
    workers = "" if spec.max_nodes is None else f" on up to {spec.max_nodes} workers"

    def starting() -> None:  # once the settings are checked: bad input is one line
        _say(
            f"replaying {spec.trace} with {spec.policy}{workers} at x{config.time_scale:g} "
            "(starting the workers: loading torch takes a while)"
        )

    kwargs = {"journal_dir": out, "resume": point, "on_start": starting}
    if as_json or not sys.stderr.isatty():
        progress = LogProgress(config.max_steps, _err_line)
        with contextlib.redirect_stdout(sys.stderr):
            return run_trace(config, on_turn=progress, **kwargs)
    with LiveProgress(config.max_steps) as live:
        return run_trace(config, on_turn=live, **kwargs)


def _with_command_time(result: Any, out: Path | None) -> Any:
    """The result with ``command_wall_time_s``, and its ``summary.json`` saying so too.

    Why: ``wall_time_s`` is the training loop's real time; the user also waited for
    torch to load, the workers to start and the files to be written (4.6 s of a
    76 s command).  This is the command's time, from its start to now.
    """
    import dataclasses

    summary = {**result.summary, "command_wall_time_s": round(command_elapsed_s(), 3)}
    if out is not None:
        from elasim.executor.run_output import update_summary

        update_summary(out, {"command_wall_time_s": summary["command_wall_time_s"]})
    return dataclasses.replace(result, summary=summary)


def register(app: typer.Typer) -> None:
    """Add ``run`` to the ``elasim`` app."""
    app.command("run")(run_command)
