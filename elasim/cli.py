"""The ``elasim`` command line: the only place that prints, reads flags or exits.

Library errors (malformed traces, job specs, policy options) arrive here as
exceptions and leave as one line on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from elasim import __version__

app = typer.Typer(
    name="elasim",
    invoke_without_command=True,
    help="Simulate (and execute) elastic deep-learning training policies on real traces.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
traces_app = typer.Typer(help="List, inspect, validate and import traces.", no_args_is_help=True)
app.add_typer(traces_app, name="traces")

out_console = Console()
err_console = Console(stderr=True)

DEFAULT_JOB = "resnet50_v100"


class UsageError(ValueError):
    """A bad command-line value: one line, exit code 2."""


def _fail(message: str) -> typer.Exit:
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that are the user's input being wrong (exit 2, one line)."""
    from elasim.job import JobSpecError
    from elasim.policies import PolicyConfigError, PolicyLoadError
    from elasim.profile import ProfileError
    from elasim.traces import TraceError

    return (
        TraceError,
        JobSpecError,
        PolicyLoadError,
        PolicyConfigError,
        ProfileError,
        UsageError,
        ValueError,
    )


def _run_guarded(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except typer.Exit:
        raise
    except _user_errors() as exc:
        logging.getLogger("elasim").debug("user error", exc_info=True)
        raise _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    except OSError as exc:
        raise _fail(f"{getattr(exc, 'filename', '') or ''}: {exc.strerror or exc}") from None


@app.callback()
def _main(
    ctx: typer.Context,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """Simulate (and execute) elastic deep-learning training policies on real traces."""
    if version:
        out_console.print(f"elasim {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        out_console.print(ctx.get_help())
        raise typer.Exit()
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


# -- parsing helpers ----------------------------------------------------------------------


def parse_sets(values: list[str] | None) -> dict[str, str]:
    """``--set key=value`` pairs into a dict (later ones win)."""
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_interval(text: str) -> float | None:
    """``auto`` -> None (Young/Daly), ``off`` -> inf, else seconds > 0."""
    value = text.strip().lower()
    if value == "auto":
        return None
    if value in {"off", "never", "none"}:
        return math.inf
    try:
        seconds = float(value)
    except ValueError:
        raise UsageError(
            f"--checkpoint-interval-s must be 'auto', 'off' or seconds, got {text!r}"
        ) from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise UsageError(f"--checkpoint-interval-s must be > 0, got {text!r}")
    return seconds


def parse_offset(text: str) -> float | None:
    """``random`` -> None (drawn from the seed), else seconds >= 0."""
    if text.strip().lower() == "random":
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--start-offset-s must be seconds or 'random', got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise UsageError(f"--start-offset-s must be >= 0, got {text!r}")
    return value


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


# -- simulate -----------------------------------------------------------------------------

_SUMMARY_ROWS: tuple[tuple[str, str], ...] = (
    ("completion_time_h", "completion time (h)"),
    ("cost_usd", "cost (USD)"),
    ("spot_node_hours", "spot node-hours"),
    ("on_demand_node_hours", "on-demand node-hours"),
    ("mean_nodes", "mean nodes held"),
    ("rescales", "rescales"),
    ("preemptions", "preemptions"),
    ("checkpoints", "checkpoints"),
    ("lost_work_h", "lost work (h)"),
    ("rescale_overhead_h", "rescale overhead (h)"),
    ("checkpoint_overhead_h", "checkpoint overhead (h)"),
    ("idle_h", "idle, no nodes (h)"),
    ("convergence_cost_h", "convergence cost (h)"),
    ("deadline_met", "deadline met"),
    ("loop_turns", "job-loop turns"),
    ("wall_time_s", "wall time (s)"),
)


def build_simulation(
    *,
    trace: str,
    policy: str,
    job: str,
    max_nodes: int | None,
    min_nodes: int | None,
    deadline_h: float | None,
    checkpoint_interval_s: str,
    checkpoint_cost_s: float | None,
    notice_s: float,
    rescale: str,
    seed: int,
    start_offset_s: str,
    cluster_gpus: int | None,
    on_demand_price_per_hour: float | None,
    sets: list[str] | None,
    spot_price_per_hour: float | None = None,
    profile: Path | None = None,
    target_samples: float | None = None,
) -> tuple[Any, Any, Any, Any]:
    """Load and validate every input of a simulation; raise a user error on bad input."""
    from elasim.job import load_job
    from elasim.policies import make_policy
    from elasim.sim import RescaleMode, SimConfig
    from elasim.traces import load_trace

    try:
        mode = RescaleMode(rescale)
    except ValueError:
        raise UsageError(f"--rescale must be 'inplace' or 'restart', got {rescale!r}") from None
    loaded_trace = load_trace(trace)
    if profile is not None:
        from elasim.profile import apply_profile, load_profile

        measured = load_profile(profile)
        default_target = dict(measured.model).get("target_samples")
        spec = apply_profile(
            measured,
            target_samples=target_samples or default_target,
        )
    else:
        spec = load_job(job)
        if target_samples is not None:
            if not (target_samples > 0 and math.isfinite(target_samples)):
                raise UsageError(f"--target-samples must be > 0, got {target_samples!r}")
            spec = dataclasses.replace(spec, target_samples=float(target_samples))
    if max_nodes is not None or min_nodes is not None:
        spec = spec.with_nodes(min_nodes=min_nodes, max_nodes=max_nodes)
    config = SimConfig(
        checkpoint_interval_s=parse_interval(checkpoint_interval_s),
        checkpoint_cost_s=checkpoint_cost_s,
        notice_s=notice_s,
        rescale=mode,
        deadline_s=None if deadline_h is None else deadline_h * 3600.0,
        seed=seed,
        start_offset_s=parse_offset(start_offset_s),
        on_demand_price_per_hour=on_demand_price_per_hour,
        spot_price_per_hour=spot_price_per_hour,
        cluster_gpus=cluster_gpus,
    )
    pol = make_policy(policy, parse_sets(sets), seed=seed)
    return loaded_trace, pol, spec, config


@app.command()
def simulate(
    trace: str = typer.Option(..., "--trace", "-t", help="Bundled trace name or CSV path."),
    policy: str = typer.Option(
        "greedy", "--policy", "-p", help="Name, file.py:Class or module:Class."
    ),
    job: str = typer.Option(DEFAULT_JOB, "--job", "-j", help="Job preset name or TOML path."),
    max_nodes: int | None = typer.Option(None, "--max-nodes", help="Override the job's max nodes."),
    min_nodes: int | None = typer.Option(None, "--min-nodes", help="Override the job's min nodes."),
    deadline_h: float | None = typer.Option(None, "--deadline-h", help="Deadline from the start."),
    checkpoint_interval_s: str = typer.Option(
        "auto",
        "--checkpoint-interval-s",
        help="Seconds of running time, 'auto' (Young/Daly) or 'off'.",
    ),
    checkpoint_cost_s: float | None = typer.Option(
        None, "--checkpoint-cost-s", help="Seconds per checkpoint (default: size / bandwidth)."
    ),
    notice_s: float = typer.Option(0.0, "--notice-s", help="Preemption notice (AWS 120, GCP 30)."),
    rescale: str = typer.Option("inplace", "--rescale", help="'inplace' or 'restart'."),
    seed: int = typer.Option(0, "--seed", help="Seed for everything random."),
    start_offset_s: str = typer.Option(
        "0", "--start-offset-s", help="Where in the trace to start, or 'random' (from --seed)."
    ),
    cluster_gpus: int | None = typer.Option(
        None, "--cluster-gpus", help="Cluster size, for a shared-cluster job trace."
    ),
    on_demand_price: float | None = typer.Option(
        None, "--on-demand-price-per-hour", help="Override the trace's on-demand price."
    ),
    spot_price: float | None = typer.Option(
        None, "--spot-price-per-hour", help="Spot price for a trace without a price column."
    ),
    profile: Path | None = typer.Option(
        None, "--profile", help="Measured profile (elasim calibrate) replacing the job's figures."
    ),
    target_samples: float | None = typer.Option(
        None, "--target-samples", help="Override the job's work target (effective samples)."
    ),
    sets: list[str] | None = typer.Option(
        None, "--set", help="Policy option key=value (repeatable)."
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write summary, events, timeline here."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write timeline.png with --out."),
) -> None:
    """Replay a trace through the SimPy model with one policy and report the cost."""
    from elasim.sim import simulate as run_simulation
    from elasim.sim import write_result

    loaded = _run_guarded(
        build_simulation,
        trace=trace,
        policy=policy,
        job=job,
        max_nodes=max_nodes,
        min_nodes=min_nodes,
        deadline_h=deadline_h,
        checkpoint_interval_s=checkpoint_interval_s,
        checkpoint_cost_s=checkpoint_cost_s,
        notice_s=notice_s,
        rescale=rescale,
        seed=seed,
        start_offset_s=start_offset_s,
        cluster_gpus=cluster_gpus,
        on_demand_price_per_hour=on_demand_price,
        spot_price_per_hour=spot_price,
        sets=sets,
        profile=profile,
        target_samples=target_samples,
    )
    loaded_trace, pol, spec, config = loaded
    started = time.perf_counter()
    result = _run_guarded(
        run_simulation, loaded_trace, pol, spec, config, trace_name=trace, policy_spec=policy
    )
    wall_time_s = time.perf_counter() - started
    summary = result.summary()
    summary["wall_time_s"] = round(wall_time_s, 6)
    if out is not None:
        _run_guarded(write_result, result, out, plot=plot)
        from elasim.output import write_json

        write_json(
            out / "run_info.json",
            {"wall_time_s": wall_time_s, "elasim_version": __version__, "argv": sys.argv[1:]},
        )
    if as_json:
        sys.stdout.write(json.dumps(_json_safe(summary)) + "\n")
        return
    table = Table(title=f"{policy} on {trace} ({spec.name}, {config.rescale.value})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, label in _SUMMARY_ROWS:
        table.add_row(label, _fmt(summary.get(key)))
    out_console.print(table)
    if not summary["inputs"].get("priced", True):
        err_console.print(
            "[yellow]this trace has no prices, so spot nodes cost nothing; "
            "pass --spot-price-per-hour to price them[/]"
        )
    if not result.completed:
        err_console.print(
            f"[yellow]the job did not finish within {result.sim_time_h:,.1f} simulated hours[/]"
        )
    if out is not None:
        out_console.print(
            f"wrote {out}/summary.json, events.parquet, timeline.parquet"
            + (", timeline.png" if plot else "")
        )


def _json_safe(data: Any) -> Any:
    from elasim.output import json_ready

    return json_ready(data)


# -- sweep -------------------------------------------------------------------------------


@app.command()
def sweep(
    traces: str = typer.Option(..., "--traces", help="Comma-separated trace names or paths."),
    policies: str = typer.Option("all", "--policies", help="Comma-separated policies, or 'all'."),
    seeds: str = typer.Option("0", "--seeds", help="Seeds: '0,1,2' or a range '0-9'."),
    job: str = typer.Option(DEFAULT_JOB, "--job", "-j", help="Job preset name or TOML path."),
    max_nodes: int | None = typer.Option(None, "--max-nodes"),
    deadline_h: float | None = typer.Option(None, "--deadline-h"),
    checkpoint_interval_s: str = typer.Option("auto", "--checkpoint-interval-s"),
    checkpoint_cost_s: float | None = typer.Option(None, "--checkpoint-cost-s"),
    notice_s: str = typer.Option("0", "--notice-s", help="One or more, comma-separated."),
    rescale: str = typer.Option("inplace", "--rescale", help="One or more, comma-separated."),
    start_offset_s: str = typer.Option(
        "random", "--start-offset-s", help="'random' (per seed, default) or seconds."
    ),
    cluster_gpus: int | None = typer.Option(None, "--cluster-gpus"),
    workers: int = typer.Option(0, "--workers", "-w", help="Processes (0: one per core)."),
    backend: str = typer.Option("local", "--backend", help="'local' processes or 'ray'."),
    address: str | None = typer.Option(
        None, "--address", help="Ray cluster address (with --backend ray; default: start one)."
    ),
    out: Path = typer.Option(Path("sweep-out"), "--out", "-o", help="Output folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON lines."),
) -> None:
    """Run the policies x traces x seeds grid in parallel; write a tidy table and a Pareto plot."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from elasim.sweep import SweepSpec, plot_pareto, run_sweep

    def build() -> SweepSpec:
        from elasim.policies import policy_names

        names = policy_names() if policies.strip() == "all" else _split(policies)
        return SweepSpec(
            traces=tuple(_split(traces)),
            policies=tuple(names),
            seeds=tuple(_parse_seeds(seeds)),
            job=job,
            max_nodes=max_nodes,
            deadline_h=deadline_h,
            checkpoint_interval_s=parse_interval(checkpoint_interval_s),
            checkpoint_cost_s=checkpoint_cost_s,
            notice_s=tuple(float(x) for x in _split(notice_s)),
            rescale=tuple(_split(rescale)),
            start_offset_s=parse_offset(start_offset_s),
            cluster_gpus=cluster_gpus,
        )

    spec = _run_guarded(build)
    _run_guarded(spec.validate)
    from elasim.sweep import BACKENDS

    if backend not in BACKENDS:
        raise _fail(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    total = spec.size
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=as_json,
    ) as progress:
        task = progress.add_task("simulating", total=total)
        frame = _run_guarded(
            run_sweep,
            spec,
            workers=workers or None,
            on_done=lambda: progress.advance(task),
            backend=backend,
            address=address,
        )
    from elasim.output import write_parquet

    write_parquet(out / "sweep.parquet", frame)
    plot_pareto(frame, out / "pareto.png")
    if as_json:
        for row in frame.to_dict(orient="records"):
            sys.stdout.write(json.dumps(_json_safe(row)) + "\n")
        return
    table = Table(title=f"sweep: {total} simulations (medians over seeds)")
    for column in ("trace", "policy", "completion_time_h", "cost_usd", "lost_work_h", "rescales"):
        table.add_column(column, justify="left" if column in {"trace", "policy"} else "right")
    grouped = frame.groupby(["trace", "policy"], sort=True)[
        ["completion_time_h", "cost_usd", "lost_work_h", "rescales"]
    ].median()
    for (trace_name, policy_name), row in grouped.iterrows():
        table.add_row(str(trace_name), str(policy_name), *(_fmt(float(v)) for v in row.to_numpy()))
    out_console.print(table)
    out_console.print(f"wrote {out}/sweep.parquet and {out}/pareto.png")


def _split(text: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise UsageError(f"expected a comma-separated list, got {text!r}")
    return items


def _parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in _split(text):
        low, sep, high = part.partition("-")
        try:
            if sep:
                seeds.extend(range(int(low), int(high) + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise UsageError(f"--seeds expects '0,1,2' or '0-9', got {text!r}") from None
    return seeds


# -- policies and jobs --------------------------------------------------------------------


@app.command("policies")
def list_policies() -> None:
    """List the registered policies (built-in and entry points) with their options."""
    from elasim.policies import describe_policies

    infos = _run_guarded(describe_policies)
    for info in infos:
        table = Table(title=f"{info.name}: {info.summary}", title_justify="left", show_edge=False)
        table.add_column("option (--set key=value)")
        table.add_column("type")
        table.add_column("default")
        table.add_column("meaning")
        for option in info.options:
            table.add_row(option.name, option.type_name, repr(option.default), option.doc)
        out_console.print(table)
        out_console.print()


@app.command("jobs")
def list_jobs() -> None:
    """List the bundled job presets (use with --job NAME)."""
    from elasim.job import job_presets, load_job

    table = Table(title="job presets")
    table.add_column("name", no_wrap=True)
    table.add_column("description", ratio=1)
    for column in ("nodes", "batch", "1-node samples/s", "max-node samples/s"):
        table.add_column(column, justify="right")
    for name, description in job_presets().items():
        spec = load_job(name)
        table.add_row(
            name,
            description,
            f"{spec.nodes.min}-{spec.nodes.max}",
            spec.batch.semantics.value,
            _fmt(spec.throughput_samples_per_s(spec.nodes.min), 1),
            _fmt(spec.throughput_samples_per_s(spec.nodes.max), 1),
        )
    out_console.print(table)


# -- traces ------------------------------------------------------------------------------


@traces_app.command("list")
def traces_list() -> None:
    """List the bundled traces."""
    from elasim.traces import bundled_traces

    infos = _run_guarded(bundled_traces)
    table = Table(title="bundled traces (see traces/README.md for provenance)")
    table.add_column("name", no_wrap=True)
    for column in ("kind", "rows", "duration (h)", "max"):
        table.add_column(column, justify="right")
    table.add_column("source (abridged)")
    for info in infos:
        table.add_row(
            info.name,
            info.kind,
            _fmt(info.rows),
            _fmt(info.duration_h, 1),
            _fmt(info.max_value),
            info.source if len(info.source) <= 60 else info.source[:59] + "…",
        )
    out_console.print(table)


@traces_app.command("show")
def traces_show(
    name: str = typer.Argument(..., help="Bundled trace name or CSV path."),
    out: Path | None = typer.Option(None, "--out", "-o", help="PNG path for the plot."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Summarise a trace and plot it."""
    from elasim.traces import load_trace, plot_trace, summarize

    trace = _run_guarded(load_trace, name)
    summary = summarize(trace)
    png = out or Path(f"{Path(name).stem}.png")
    _run_guarded(plot_trace, trace, png)
    if as_json:
        sys.stdout.write(json.dumps(_json_safe({**summary, "plot": str(png)})) + "\n")
        return
    table = Table(title=f"{name}")
    table.add_column("field")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key, _fmt(value) if not isinstance(value, dict | list) else json.dumps(value))
    out_console.print(table)
    out_console.print(f"plot: {png}")


@traces_app.command("validate")
def traces_validate(path: str = typer.Argument(..., help="Trace CSV to check.")) -> None:
    """Check a trace file; print one line and exit 2 if it is malformed."""
    from elasim.traces import load_trace

    trace = _run_guarded(load_trace, path)
    rows = len(trace.time_s) if hasattr(trace, "available") else len(trace.submit_time_s)
    out_console.print(f"{path}: ok ({trace.kind} trace, {rows:,} rows)")


@traces_app.command("import")
def traces_import(
    input_path: str = typer.Argument(
        ..., metavar="IN", help="Source file (or several, comma-separated)."
    ),
    output_path: Path = typer.Argument(..., metavar="OUT", help="Canonical CSV to write."),
    fmt: str = typer.Option(..., "--format", "-f", help="skypilot | bamboo | aws-price | philly"),
    options: list[str] | None = typer.Option(
        None,
        "--opt",
        help="Importer option key=value (repeatable); see `elasim traces import --help`.",
    ),
    base: str | None = typer.Option(
        None, "--base", help="aws-price: capacity trace to add prices to."
    ),
    zone: str | None = typer.Option(None, "--zone", help="aws-price: availability zone."),
    instance_type: str | None = typer.Option(
        None, "--instance-type", help="Instance type metadata/filter."
    ),
    region: str | None = typer.Option(None, "--region", help="Region metadata."),
    start: str | None = typer.Option(
        None, "--start", help="aws-price/philly: start timestamp (UTC)."
    ),
) -> None:
    """Convert a real trace format into elasim's canonical CSV."""
    from elasim.traces import import_trace

    def run() -> Any:
        opts: dict[str, Any] = parse_sets(options)
        for key, value in (
            ("base", base),
            ("zone", zone),
            ("instance_type", instance_type),
            ("region", region),
            ("start", start),
        ):
            if value is not None:
                opts[key] = value
        inputs = input_path.split(",") if "," in input_path else input_path
        return import_trace(fmt, inputs, output_path, **opts)

    trace = _run_guarded(run)
    rows = len(trace.time_s) if hasattr(trace, "available") else len(trace.submit_time_s)
    out_console.print(f"wrote {output_path} ({trace.kind} trace, {rows:,} rows)")


# -- calibration and comparison -------------------------------------------------------------


@app.command()
def calibrate(
    out: Path = typer.Option(Path("profile.json"), "--out", "-o", help="Profile to write."),
    segment_s: float = typer.Option(6.0, "--segment-s", help="Real seconds per schedule step."),
    workers_max: int = typer.Option(4, "--workers-max", help="Most workers."),
    mechanisms: str = typer.Option("inplace,restart", "--rescale", help="Mechanisms to measure."),
    job: str | None = typer.Option(None, "--job", help="Executor job (module:attribute)."),
    keep: Path | None = typer.Option(None, "--keep", help="Keep the calibration runs here."),
) -> None:
    """Measure this machine with short executor runs and write a versioned profile."""
    from elasim.executor import require_torch

    try:
        require_torch()
    except ImportError as exc:
        raise _fail(str(exc)) from None
    from elasim.executor.calibrate import CalibrationConfig
    from elasim.executor.calibrate import calibrate as run_calibration
    from elasim.profile import describe_profile, save_profile

    def build() -> Any:
        kinds = tuple(_split(mechanisms))
        for kind in kinds:
            if kind not in ("inplace", "restart"):
                raise UsageError(f"--rescale takes inplace and/or restart, got {kind!r}")
        if not (segment_s > 0 and math.isfinite(segment_s)):
            raise UsageError(f"--segment-s must be > 0, got {segment_s!r}")
        extra = {} if job is None else {"job": job}
        return CalibrationConfig(
            segment_s=segment_s, workers_max=workers_max, mechanisms=kinds, **extra
        )

    config = _run_guarded(build)
    with err_console.status("calibrating") as status:
        profile = _run_guarded(
            run_calibration,
            config,
            work_dir=keep,
            on_stage=lambda text: status.update(f"calibrating: {text}"),
        )
    save_profile(profile, out)
    table = Table(title=f"profile {out} ({profile.backend}, torch {profile.torch_version})")
    table.add_column("measurement")
    table.add_column("value", justify="right")
    for name, value in describe_profile(profile):
        table.add_row(name, value)
    out_console.print(table)


@app.command()
def compare(
    real_dir: Path | None = typer.Argument(None, help="Directory of an `elasim run --out`."),
    sim_dir: Path | None = typer.Argument(None, help="Directory of an `elasim simulate --out`."),
    trace: str | None = typer.Option(None, "--trace", "-t", help="Run both on this trace."),
    policy: str = typer.Option("greedy", "--policy", "-p"),
    profile: Path | None = typer.Option(None, "--profile", help="Profile for the simulation."),
    time_scale: float = typer.Option(600.0, "--time-scale", help="Trace seconds per real second."),
    max_steps: int = typer.Option(3000, "--max-steps", help="Work of the real run (steps)."),
    workers_max: int = typer.Option(4, "--workers-max"),
    rescale: str = typer.Option("inplace", "--rescale"),
    notice_s: float = typer.Option(0.0, "--notice-s", help="Notice in trace seconds."),
    trace_start_s: float = typer.Option(0.0, "--trace-start-s", help="Start offset (trace s)."),
    out: Path = typer.Option(Path("compare-out"), "--out", "-o"),
    as_json: bool = typer.Option(False, "--json", help="Print compare.json to stdout."),
) -> None:
    """Compare a measured run with a simulation, event by event (or run both first)."""
    from elasim.compare import compare_runs, load_timeline, plot_compare, run_and_simulate

    if trace is not None:
        if profile is None:
            raise _fail("--trace needs --profile (from `elasim calibrate`)")
        from elasim.profile import load_profile

        measured = _run_guarded(load_profile, profile)
        from elasim.executor import require_torch

        try:
            require_torch()
        except ImportError as exc:
            raise _fail(str(exc)) from None
        with err_console.status(f"running {policy} on {trace} (x{time_scale:g})"):
            real_dir, sim_dir = _run_guarded(
                run_and_simulate,
                trace,
                policy,
                measured,
                out,
                time_scale=time_scale,
                max_steps=max_steps,
                workers_max=workers_max,
                rescale=rescale,
                notice_s=notice_s,
                trace_start_s=trace_start_s,
            )
    elif real_dir is None or sim_dir is None:
        raise _fail("give REAL_DIR and SIM_DIR, or --trace and --profile to run both")
    result = _run_guarded(compare_runs, real_dir, sim_dir)
    from elasim.output import write_json

    report = result.to_json()
    write_json(out / "compare.json", report)
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
            f"{pair.kind} {pair.nodes_before}->{pair.nodes_after}",
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
    )
    out_console.print(f"wrote {out}/compare.json and {out}/compare.png")


def _register_executor() -> None:
    """Add ``run`` / ``agent`` (and later ``calibrate``) without importing torch now."""
    try:
        from elasim.executor.cli import register
    except ImportError:  # the executor package is not built yet
        return
    register(app)


_register_executor()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
