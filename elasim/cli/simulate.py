"""``elasim simulate``, ``elasim policies`` and ``elasim jobs``."""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from elasim import __version__
from elasim.jobmodel import JobSpec
from elasim.sim.driver import DEFAULT_JOB

from .progress import show_progress
from .spec_options import SpecFlags, with_spec
from .tools import (
    UsageError,
    ensure_writable_dir,
    err_console,
    leave_when_done,
    out_console,
    policy_tables,
)
from .tools import fmt as _fmt
from .tools import json_safe as _json_safe
from .tools import run_guarded as _run_guarded

__all__ = ["build_simulation", "register"]


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
    ("deadline_feasible", "deadline feasible"),
    ("cost_vs_on_demand", "cost / on-demand plan"),
    ("gap_closed", "greedy-to-optimal gap closed"),
    ("on_demand_plan_usd", "on-demand plan (USD)"),
    ("greedy_fallback_usd", "greedy with fallback (USD)"),
    ("optimal_usd", "offline optimum (USD)"),
    ("cost_vs_greedy", "cost / plain greedy"),
    ("cost_vs_optimal", "cost / offline optimum"),
    ("zones_lower_bound_usd", "zones' optimum, lower bound (USD)"),
    ("zones_upper_bound_usd", "zones' optimum, upper bound (USD)"),
    ("best_zone", "best single zone"),
    ("best_zone_optimal_usd", "its offline optimum (USD)"),
    ("cost_vs_zones_bound", "cost / zones' lower bound"),
    ("greedy_usd", "plain greedy (USD)"),
    ("greedy_met", "plain greedy met deadline"),
    ("loop_turns", "job-loop turns"),
    ("wall_time_s", "wall time (s)"),
)


def build_simulation(
    spec: JobSpec,
    *,
    cluster_gpus: int | None = None,
    profile: Path | None = None,
    target_samples: float | None = None,
    batch: str | None = None,
) -> tuple[JobSpec, Any, Any, Any, Any]:
    """Load and check every input of a simulation: ``(spec, config, trace, policy, job)``.

    ``spec`` comes back resolved (its start offset, node bounds and names); a bad
    input raises a user error in one line naming the flag.
    """
    from elasim.sim import SimConfig, resolve

    if cluster_gpus is not None and cluster_gpus < 1:
        raise UsageError(f"--cluster-gpus must be >= 1, got {cluster_gpus}")
    job = _training_job(spec.job or DEFAULT_JOB, profile, target_samples, batch)
    low, high = spec.min_nodes or job.nodes.min, spec.max_nodes or job.nodes.max
    if low > high:
        which = "--min-nodes" if spec.min_nodes is not None else "--max-nodes"
        raise UsageError(
            f"{which}: need min nodes <= max nodes, got {low} > {high} "
            f"(the job {job.name!r} has {job.nodes.min}-{job.nodes.max})"
        )
    config = SimConfig(
        cluster_gpus=cluster_gpus,
        # a shared cluster's leftover nodes are priced like a price-less spot trace's
        cluster_price_per_hour=spec.spot_price_per_hour or 0.0,
    )
    if profile is not None:
        spec = spec.replace(job=None)  # the profile is the job: it names itself
    spec, trace, policy, job = resolve(spec, config, job=job)
    return spec, config, trace, policy, job


def _training_job(
    job: str, profile: Path | None, target_samples: float | None, batch: str | None = None
) -> Any:
    """The job preset or TOML, or a measured profile, with ``--target-samples`` applied.

    ``batch`` (``--batch``) picks the profiled job's batch semantics; a preset states
    its own, so the flag is refused without ``--profile``.
    """
    from elasim.job import load_job

    if target_samples is not None and not (target_samples > 0 and math.isfinite(target_samples)):
        raise UsageError(f"--target-samples must be > 0, got {target_samples!r}")
    if batch is not None and batch not in ("fixed", "scaled"):
        raise UsageError(f"--batch must be 'fixed' or 'scaled', got {batch!r}")
    if batch is not None and profile is None:
        raise UsageError("--batch applies to a --profile (a job preset states its own batch)")
    if profile is not None:
        from elasim.profile import apply_profile, load_profile

        measured = load_profile(profile)
        default_target = dict(measured.model).get("target_samples")
        return apply_profile(
            measured, target_samples=target_samples or default_target, batch=batch or "fixed"
        )
    training = load_job(job)
    if target_samples is not None:
        training = dataclasses.replace(training, target_samples=float(target_samples))
    return training


@with_spec(SpecFlags(exclude=("job_options",), trace_required=True, zones=True))
def simulate(
    spec: JobSpec,
    cluster_gpus: int | None = typer.Option(
        None, "--cluster-gpus", help="Cluster size, for a shared-cluster job trace."
    ),
    profile: Path | None = typer.Option(
        None, "--profile", help="Measured profile (elasim calibrate) replacing the job's figures."
    ),
    target_samples: float | None = typer.Option(
        None, "--target-samples", help="Override the job's work target (effective samples)."
    ),
    batch: str | None = typer.Option(
        None,
        "--batch",
        help="With --profile: 'fixed' (default, as the executor trains) or 'scaled' (each "
        "worker keeps the profiled batch; the measured noise scale prices the larger one).",
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write summary, events, timeline here."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write timeline.png with --out."),
    yardstick: bool = typer.Option(
        True,
        "--yardstick/--no-yardstick",
        help="With a deadline and an on-demand price, also run the on-demand plan, "
        "greedy with fallback, plain greedy and the offline optimum, and report "
        "cost_vs_on_demand, gap_closed, cost_vs_greedy and cost_vs_optimal.",
    ),
) -> None:
    """Replay a trace through the SimPy model with one policy and report the cost."""
    leave_when_done()  # every file is written before it returns: no teardown after
    with show_progress(err_console, out_console):  # anything over 2 s shows progress
        if out is not None:
            _run_guarded(ensure_writable_dir, out, "--out")
        with _step("reading the inputs"):
            spec, config, trace, policy, job = _run_guarded(
                build_simulation,
                spec,
                cluster_gpus=cluster_gpus,
                profile=profile,
                target_samples=target_samples,
                batch=batch,
            )
        _warn_if_infeasible(job, spec, policy)
        _warn_if_zone_blind(trace, policy)
        config = dataclasses.replace(config, record_timeline=out is not None)
        result, summary, extra = _simulated(spec, config, trace, policy, job, yardstick)
        if out is not None:
            with _step("writing the results"):
                _write_simulation(result, out, plot, summary["wall_time_s"], extra)
    if as_json:
        sys.stdout.write(json.dumps(_json_safe(summary)) + "\n")
    else:
        _report_simulation(summary, spec, job.name, out, plot, _unpriced(trace, spec))
    _exit_if_unfinished(summary)


def _simulated(
    spec: JobSpec, config: Any, trace: Any, policy: Any, job: Any, yardstick: bool
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The run, its summary (its wall time included) and the yardstick's columns.

    The timeline is kept only for ``--out`` (as ``elasim cluster`` does): nothing in
    the summary reads it.  The process runs one simulation, so what is loaded by now
    (modules, the trace) stays: ``gc.freeze`` takes it out of the run's collections,
    which otherwise walked it again and again (about a sixth of a 103-day Philly
    run).  The run itself makes next to no reference cycles (30 objects in that
    run), so the cycle collector rests until it ends.
    """
    from elasim.sim import simulate as run_simulation

    gc.freeze()
    gc.disable()
    started = time.perf_counter()
    try:
        with _step("simulating"):
            result = _run_guarded(run_simulation, spec, config, trace=trace, policy=policy, job=job)
    finally:
        gc.enable()
    summary = result.summary()
    summary["wall_time_s"] = round(time.perf_counter() - started, 6)
    extra = _yardstick_columns(trace, job, spec, config, (policy, result)) if yardstick else {}
    summary.update(extra)
    return result, summary, extra


@contextmanager
def _step(what: str) -> Iterator[None]:
    """One step of the command as a progress record at its start and at its end.

    Why: a step that reports nothing itself (a long run, a plot that imports
    matplotlib) still shows, once it has lasted :data:`.progress.QUIET_S`.
    """
    from elasim.progress import report

    report(what, 0, 1)
    try:
        yield
    finally:
        report(what, 1, 1)


def _exit_if_unfinished(summary: dict[str, Any]) -> None:
    """Exit 1, as ``elasim run`` does, when the job never reached its target.

    Why: a script or CI job that simulates must not read an unfinished run as a
    result.  The simulator stops at its horizon; a run that never held a node (say
    ``on_demand`` on a trace without an on-demand price) is said to be such.
    """
    if summary["completed"]:
        return
    held = summary.get("mean_nodes") or 0.0
    why = "the policy never held a node" if held == 0 else "it ran out of simulated time"
    err_console.print(
        f"[bold red]error:[/] the job did not finish within {summary['sim_time_h']:,.0f} "
        f"simulated hours: {why}",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(code=1)


def _report_simulation(
    summary: dict[str, Any],
    spec: JobSpec,
    job_name: str,
    out: Path | None,
    plot: bool,
    unpriced: list[str],
) -> None:
    """``simulate``'s output for a person: the summary table, then what to know about it.

    Why apart from :func:`simulate`: ``--json`` prints the summary alone, while a
    person also gets a title and the names of the files written to ``--out``.
    """
    where = " + ".join(spec.zone_traces) if spec.zone_traces else spec.trace
    title = f"{spec.policy} on {where} ({job_name}, {spec.rescale.value})"
    _print_simulation(summary, title, unpriced)
    if out is not None:
        out_console.print(
            f"wrote {out}/summary.json, events.parquet, timeline.parquet"
            + (", timeline.png" if plot else "")
        )


def _warn_if_zone_blind(trace: Any, policy: Any) -> None:
    """One line when a policy that never moves is given several zones.

    It runs in the first zone all along, which a user who gave two traces would
    otherwise take for a comparison of the zones.
    """
    from elasim.policies import policy_names
    from elasim.policies.registry import get_policy_class

    zones = getattr(trace, "traces", None)
    if getattr(trace, "kind", None) != "zones" or not zones:
        return
    if getattr(policy, "moves_between_zones", False):
        return
    movers = [
        n for n in policy_names() if getattr(get_policy_class(n), "moves_between_zones", False)
    ]
    err_console.print(
        f"[yellow]warning: {getattr(policy, 'name', 'this policy')} does not move between "
        f"zones: it runs in the first, {zones[0].name}, all along ({', '.join(movers)} move)[/]",
        highlight=False,
        soft_wrap=True,
    )


def _warn_if_infeasible(job: Any, spec: JobSpec, policy: Any) -> None:
    """One line before the run when no policy can meet the deadline, or there is none.

    A deadline policy without a deadline runs as ``greedy`` would, which a user
    comparing the two would otherwise take for the policy's own result.
    """
    from elasim.sim import fastest_finish_h

    if spec.deadline_s is None:
        if getattr(policy, "plans_for_deadline", False):
            err_console.print(
                f"[yellow]warning: {policy.name} plans for a deadline; without --deadline-h "
                "it holds every usable spot node, as greedy does[/]",
                soft_wrap=True,
            )
        return
    fastest_h = _run_guarded(fastest_finish_h, job, spec)
    deadline_h = spec.deadline_s / 3600.0
    if fastest_h > deadline_h:
        err_console.print(
            f"[yellow]warning: the deadline ({deadline_h:g} h) cannot be met: even "
            f"{job.nodes.max} nodes from the start, never preempted, take {fastest_h:.1f} h[/]",
            soft_wrap=True,
        )


def _yardstick_columns(
    trace: Any, job: Any, spec: JobSpec, config: Any, own: tuple[Any, Any]
) -> dict[str, Any]:
    """The yardstick's ratios and reference costs (:meth:`Yardstick.columns`; empty if none).

    ``own`` is this run, ``(policy, result)``: the yardstick takes its optimum from it
    when the run is that optimum (``-p optimal``), instead of planning it again.
    """
    from elasim.yardstick import compute_yardstick

    result = own[1]
    if getattr(trace, "kind", None) == "zones":
        return _zone_columns(trace, job, spec, result)
    reference = _run_guarded(compute_yardstick, trace, job, spec, config, own=own)
    if reference is None:
        return {}
    return reference.columns(result.cost_usd, result.deadline_met)


def _zone_columns(zones: Any, job: Any, spec: JobSpec, result: Any) -> dict[str, Any]:
    """With a deadline, where the zones' optimum lies (:mod:`elasim.optimal.zones`)."""
    from elasim.traces.model import on_demand_price_of

    price = on_demand_price_of(zones, spec.on_demand_price_per_hour)
    if spec.deadline_s is None or not math.isfinite(price):
        return {}
    from elasim.optimal.zones import zone_bounds

    bounds = _run_guarded(zone_bounds, zones, job, spec)
    lower = bounds.lower_bound_usd
    return {
        "zones_lower_bound_usd": lower,
        "zones_upper_bound_usd": bounds.upper_bound_usd,
        "best_zone": bounds.best_zone,
        "best_zone_optimal_usd": bounds.zone_usd.get(bounds.best_zone or "", None),
        "cost_vs_zones_bound": result.cost_usd / lower if lower else None,
    }


def _write_simulation(
    result: Any, out: Path, plot: bool, wall_time_s: float, extra: dict[str, Any]
) -> None:
    from elasim.output import write_json
    from elasim.sim import write_result

    _run_guarded(write_result, result, out, plot=plot, extra=extra)
    info = {"wall_time_s": wall_time_s, "elasim_version": __version__, "argv": sys.argv[1:]}
    _run_guarded(write_json, out / "run_info.json", info)


def _print_simulation(summary: dict[str, Any], title: str, unpriced: list[str]) -> None:
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, label in _SUMMARY_ROWS:
        if key in summary:
            table.add_row(label, _fmt(summary.get(key)))
    zones = summary["simulator"]
    if zones.get("zones"):  # several zones: where it moved, and where it ended
        table.add_row("zone moves", _fmt(zones.get("zone_moves")))
        table.add_row("final zone", str(zones.get("final_zone")))
    out_console.print(table)
    if not summary["simulator"].get("priced", True):
        for line in unpriced:
            err_console.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)


def _unpriced(trace: Any, spec: JobSpec) -> list[str]:
    """What to know of a run whose nodes cost nothing: one line per zone without prices.

    Each names its zone and the file it came from: in several zones only those
    without a price column cost nothing (the others' prices count), so "this trace
    has no prices" was untrue of them and did not say which file to fix.
    """
    from elasim.traces.zones import ZoneSet

    fix = "so its nodes cost nothing; pass --spot-price-per-hour to price them"
    if not isinstance(trace, ZoneSet):
        return [f"this trace has no prices, {fix}"]
    files = spec.zone_traces or (spec.trace,) * len(trace.traces)  # or one zone column
    return [
        f"zone {zone.name!r} ({file}) has no prices, {fix}"
        for zone, file in zip(trace.traces, files, strict=True)
        if zone.price_per_hour is None
    ]


# -- policies and jobs --------------------------------------------------------------------


def list_policies(
    template: bool = typer.Option(
        False, "--template", help="Print a policy file to start your own from, and stop."
    ),
) -> None:
    """List the registered policies (built-in and entry points) with their options."""
    from elasim.policies import describe_policies

    if template:
        from elasim.examples import policy_template

        sys.stdout.write(policy_template())
        return

    for table in policy_tables(_run_guarded(describe_policies)):
        out_console.print(table)
        out_console.print()


def list_jobs() -> None:
    """List the bundled job presets (use with --job NAME).

    The figures are one table and the descriptions a list below it, each beside its
    name: in one table, an 80-column terminal left the descriptions 9 characters.
    """
    from elasim.job import job_presets, load_job

    presets = job_presets()
    table = Table(title="job presets")
    table.add_column("name", no_wrap=True)
    for column in ("nodes", "batch", "1-node samples/s", "max-node samples/s"):
        table.add_column(column, justify="right")
    for name in presets:
        spec = load_job(name)
        table.add_row(
            name,
            f"{spec.nodes.min}-{spec.nodes.max}",
            spec.batch.semantics.value,
            _fmt(spec.throughput_samples_per_s(spec.nodes.min), 1),
            _fmt(spec.throughput_samples_per_s(spec.nodes.max), 1),
        )
    out_console.print(table)
    described = Table.grid(padding=(0, 2))
    described.add_column(no_wrap=True, style="bold")
    described.add_column(ratio=1, overflow="fold")
    for name, description in presets.items():
        described.add_row(name, description)
    out_console.print(described)


def register(app: typer.Typer) -> None:
    """Add ``simulate``, ``policies`` and ``jobs`` to the ``elasim`` app."""
    app.command("simulate")(simulate)
    app.command("policies")(list_policies)
    app.command("jobs")(list_jobs)
