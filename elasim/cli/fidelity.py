"""``elasim calibrate`` and ``elasim compare``: the simulator measured against real runs."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from elasim.jobmodel import JobSpec

from .spec_options import SpecFlags, with_spec
from .tools import (
    StageProgress,
    UsageError,
    alias,
    check_nodes,
    ensure_writable_dir,
    err_console,
    hidden,
    max_nodes_option,
    out_console,
    split_list,
)
from .tools import fail as _fail
from .tools import fmt as _fmt
from .tools import json_safe as _json_safe
from .tools import run_guarded as _run_guarded

__all__ = ["register"]


def _require_torch() -> None:
    from elasim.executor import require_torch

    try:
        require_torch()
    except ImportError as exc:
        raise _fail(str(exc)) from None


def calibrate(
    out: Path = typer.Option(Path("profile.json"), "--out", "-o", help="Profile to write."),
    segment_s: float = typer.Option(6.0, "--segment-s", help="Real seconds per schedule step."),
    max_nodes: int | None = max_nodes_option("Most workers to measure (default 4)."),
    workers_max: int | None = hidden("--workers-max"),
    mechanisms: str = typer.Option("inplace,restart", "--rescale", help="Mechanisms to measure."),
    job: str | None = typer.Option(None, "--job", help="Executor job (module:attribute)."),
    keep: Path | None = typer.Option(None, "--keep", help="Keep the calibration runs here."),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="Under a minute: 1-2 workers, in place only (segment, node and mechanism "
        "flags then refused).",
    ),
) -> None:
    """Measure this machine with short executor runs and write a versioned profile.

    The full calibration (in place and restart, up to 4 workers) takes about five
    minutes on an idle 2-core machine; ``--quick`` measures one or two workers in
    place in under a minute, enough for ``simulate --profile`` at up to two nodes.
    """
    _require_torch()
    from elasim.executor.calibrate import CalibrationError
    from elasim.executor.calibrate import calibrate as run_calibration
    from elasim.profile import describe_profile, save_profile

    config = _run_guarded(
        _calibration_config, out, segment_s, max_nodes, workers_max, mechanisms, job, quick
    )
    with StageProgress("calibrate") as progress:

        def on_stage(stage: Any) -> None:
            progress.stage(
                stage.index, stage.total, stage.description, stage.expected_s, stage.expected_left_s
            )

        try:
            profile = _run_guarded(run_calibration, config, work_dir=keep, on_stage=on_stage)
        except CalibrationError as exc:  # the measurement failed, not the input: 1
            raise _fail(str(exc).splitlines()[0], code=1) from None
    _run_guarded(save_profile, profile, out)
    table = Table(title=f"profile {out} ({profile.backend}, torch {profile.torch_version})")
    table.add_column("measurement")
    table.add_column("value", justify="right")
    for name, value in describe_profile(profile):
        table.add_row(name, value)
    out_console.print(table)


def _calibration_config(
    out: Path,
    segment_s: float,
    max_nodes: int | None,
    workers_max: int | None,
    mechanisms: str,
    job: str | None,
    quick: bool,
) -> Any:
    """``elasim calibrate``'s flags as a ``CalibrationConfig``, checked before anything runs.

    Why apart from :func:`calibrate`: every flag is checked here, each bad one a
    :class:`UsageError` (one line, exit 2), and ``--quick`` refuses the flags it sets
    itself; the command then only runs the calibration and prints the profile.
    """
    from elasim.executor.calibrate import CalibrationConfig

    explicit = {
        "--segment-s": segment_s != 6.0,
        "--max-nodes": max_nodes is not None or workers_max is not None,
        "--rescale": mechanisms != "inplace,restart",
    }
    kinds = tuple(split_list(mechanisms, "--rescale"))
    for kind in kinds:
        if kind not in ("inplace", "restart"):
            raise UsageError(f"--rescale takes inplace and/or restart, got {kind!r}")
    if not (segment_s > 0 and math.isfinite(segment_s)):
        raise UsageError(f"--segment-s must be > 0, got {segment_s!r}")
    nodes = alias(max_nodes, workers_max, "--max-nodes", "--workers-max", 4)
    check_nodes(nodes)
    ensure_writable_dir(out.parent if str(out.parent) else Path("."), "--out")
    extra = {} if job is None else {"job": job}
    if quick:
        given = [flag for flag, value in explicit.items() if value]
        if given:
            raise UsageError(f"--quick sets its own {', '.join(given)}; leave them out")
        return CalibrationConfig.quick(**extra)
    return CalibrationConfig(segment_s=segment_s, max_nodes=nodes, mechanisms=kinds, **extra)


@with_spec(
    SpecFlags(
        exclude=("job", "job_options", "checkpoint_cost_s", "min_nodes"),
        trace=None,
        max_nodes_help="Most worker slots of the real run (default 4).",
        zones=True,
    )
)
def compare(
    spec: JobSpec,
    real_dir: Path | None = typer.Argument(None, help="Directory of an `elasim run --out`."),
    sim_dir: Path | None = typer.Argument(None, help="Directory of an `elasim simulate --out`."),
    profile: Path | None = typer.Option(
        None, "--profile", help="Profile for the simulation (needed with --trace)."
    ),
    time_scale: float = typer.Option(600.0, "--time-scale", help="Trace seconds per real second."),
    max_steps: int = typer.Option(3000, "--max-steps", help="Work of the real run (steps)."),
    force: bool = typer.Option(
        False, "--force", help="Compare even when the two runs are not the same job."
    ),
    out: Path = typer.Option(
        Path("compare-out"), "--out", "-o", help="Folder for compare.json and compare.png."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print compare.json to stdout."),
) -> None:
    """Compare a measured run with a simulation, event by event (or run both first).

    With --trace (and --profile, from elasim calibrate) it runs the job and simulates
    it first.  Two runs that are not runs of the same job (spec, time scale, work) are
    refused in one line, unless --force.  A job in several zones (--trace repeated, or
    a file with a zone column; --checkpoint-size-gb, by default the job's own
    checkpoint) is run and simulated moving between them; each move is matched with
    the simulated one between the same zones (move a->b, its pause the checkpoint's
    transfer).
    """
    from elasim.compare import compare_runs

    _run_guarded(ensure_writable_dir, out, "--out")
    if spec.trace is not None:
        real_dir, sim_dir = _run_both(spec, profile, out, time_scale, max_steps)
    elif real_dir is None or sim_dir is None:
        raise _fail("give REAL_DIR and SIM_DIR, or --trace and --profile to run both")
    result = _run_guarded(compare_runs, real_dir, sim_dir, force=force)
    _report(result, real_dir, sim_dir, out, as_json)


def _run_both(
    spec: JobSpec, profile: Path | None, out: Path, time_scale: float, max_steps: int
) -> tuple[Path, Path]:
    from elasim.compare import run_and_simulate
    from elasim.profile import load_profile

    if profile is None:
        raise _fail("--trace needs --profile (from `elasim calibrate`)")
    measured = _run_guarded(load_profile, profile)
    _require_torch()
    from elasim.executor.config import DEFAULT_MAX_NODES

    slots = spec.max_nodes or DEFAULT_MAX_NODES
    if slots > measured.max_world:  # refused now, not after the real run
        raise _fail(
            f"--max-nodes {slots} is above the {measured.max_world} workers {profile} "
            f"measured (the simulation could not be of the same run); give --max-nodes "
            f"{measured.max_world} or less"
        )
    if spec.start_offset_s is None:
        raise _fail("--start-offset-s random is not supported by compare; give seconds")
    shown = " + ".join(spec.zone_traces) or spec.trace  # a job in several zones: every one
    with err_console.status(f"running {spec.policy} on {shown} (x{time_scale:g})"):
        return _run_guarded(
            run_and_simulate, spec, measured, out, time_scale=time_scale, max_steps=max_steps
        )


def _report(result: Any, real_dir: Path, sim_dir: Path, out: Path, as_json: bool) -> None:
    from elasim.compare import load_timeline, plot_compare
    from elasim.output import write_json

    report = result.to_json()
    _run_guarded(write_json, out / "compare.json", report)
    scale = float(result.real_summary.get("time_scale", 1.0) or 1.0)
    plot_compare(
        result, load_timeline(real_dir, scale), load_timeline(sim_dir), out / "compare.png"
    )
    if as_json:
        sys.stdout.write(json.dumps(_json_safe(report)) + "\n")
        return
    table = Table(title=f"measured {real_dir} vs simulated {sim_dir}")
    for column in ("event", "real t (s)", "sim t (s)", "real pause (s)", "sim pause (s)", "error"):
        table.add_column(column, justify="left" if column == "event" else "right")
    for pair in result.pairs:
        table.add_row(
            pair.label,
            _fmt(pair.real_time_s, 2),
            _fmt(pair.sim_time_s, 2),
            _fmt(pair.real_pause_s, 3),
            _fmt(pair.sim_pause_s, 3),
            "-" if pair.rel_error is None else f"{100 * pair.rel_error:.0f}%",
        )
    out_console.print(table)
    totals = Table(title="whole run (durations in real seconds)")
    for column in ("", "measured", "simulated"):
        totals.add_column(column, justify="left" if not column else "right")
    for name, (real, simulated) in result.totals().items():
        digits = 3 if name.endswith("_s") else 0  # durations; the rest are counts
        totals.add_row(name, _fmt(real, digits), _fmt(simulated, digits))
    out_console.print(totals)
    err = report["completion_time_rel_error"]
    pause_err = report["median_pause_rel_error"]
    out_console.print(
        f"completion: real {_fmt(report['real_completion_s'], 2)} s, "
        f"sim {_fmt(report['sim_completion_s'], 2)} s, error "
        + ("-" if err is None else f"{100 * err:.1f}%")
        + "; median pause error "
        + ("-" if pause_err is None else f"{100 * pause_err:.0f}%")
        + f"; {report['events_matched']} events matched"
        + (f" ({report['moves_matched']} zone moves)" if report["moves_matched"] else "")
    )
    out_console.print(f"wrote {out}/compare.json and {out}/compare.png")


def register(app: typer.Typer) -> None:
    """Add ``calibrate`` and ``compare`` to the ``elasim`` app."""
    app.command("calibrate")(calibrate)
    app.command("compare")(compare)
