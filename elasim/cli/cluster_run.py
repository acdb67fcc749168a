"""``elasim cluster run`` and ``elasim cluster calibrate``: the cluster on real workers.

Added to the ``elasim cluster`` sub-app (:mod:`.cluster`); torch is imported only
when they run.  This module does the I/O; :mod:`elasim.executor.cluster` and
:mod:`elasim.executor.cluster_profile` do the work.
"""

# ruff: noqa: B008 - typer declares options as argument defaults by design
from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from .cluster_options import (
    applications_option,
    capacity_option,
    check_checkpoints,
    checkpoint_interval_option,
    cluster_policy_option,
    job_set_option,
    notice_option,
    pause_job_option,
    rescale_mode,
    rescale_option,
    sample_delay_option,
    slots_per_node_option,
    speed_model_option,
    trained_job_option,
    workload_option,
)
from .spec_options import parse_job_options
from .tools import UsageError, alias, hidden, out_console, parse_sets, run_guarded, sets_option
from .tools import fmt as _fmt
from .tools import json_safe as _json_safe
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


def _check_applications(applications: Path | None, compare: bool) -> None:
    if applications is not None and not applications.is_dir():
        raise UsageError(f"--applications: {applications}: not a folder")
    if compare and applications is None:
        raise UsageError("--compare needs --applications (the profiles measured for the job)")


def _config(flags: dict[str, Any]) -> Any:
    """The run's settings from the checked flags (a bad setting: ValueError, one line)."""
    from elasim.cluster import ClusterSetup
    from elasim.executor.cluster import ClusterRunConfig

    applications = flags["applications"]
    slots = alias(flags["gpus_per_node"], flags["slots"], "--gpus-per-node", "--slots", 4)
    setup = ClusterSetup(
        workload=flags["workload"],
        policy=flags["policy"],
        options=parse_sets(flags["sets"]),
        num_nodes=1,
        gpus_per_node=max(slots, 1),
        rescale=rescale_mode(flags["rescale"]),
        pause_job=flags["pause_job"],
        applications=None if applications is None else str(applications),
        capacity=flags["capacity"],
        notice_s=flags["notice_s"],
        checkpoint_interval_s=check_checkpoints(flags["notice_s"], flags["checkpoint_interval_s"]),
        speed_model=flags["speed_model"],
    )
    return ClusterRunConfig(
        setup=setup,
        slots=slots,
        time_scale=flags["time_scale"],
        job=flags["job"],
        job_options=parse_job_options(flags["job_sets"]),
        sample_delay_real_s=flags["sample_delay_s"],
        seed=flags["seed"],
        collective_timeout_real_s=flags["collective_timeout_s"],
        max_wall_real_s=flags["max_wall_s"],
        bind_host=flags["bind"],
        agent_port=flags["agent_port"],
        expect_agents=flags["agents"],
        log_dir=None if flags["log_dir"] is None else str(flags["log_dir"]),
        launcher=flags["launcher"],
        ray_address=flags["address"],
        ray_resources=parse_ray_resources(flags["ray_resources"]),
    )


def _run(flags: dict[str, Any]) -> None:
    from elasim.executor import require_torch

    require_torch()
    from elasim.executor.cluster import run_cluster

    compare = flags.pop("compare")
    as_json = flags.pop("as_json")
    out: Path | None = flags.pop("out")
    _check_applications(flags["applications"], compare)
    if compare and flags["time_scale"] != 1.0:
        raise UsageError("--compare needs --time-scale 1 (profiles are in real seconds)")
    if out is not None:
        from elasim.atomic import check_writable_dir

        check_writable_dir(out, "--out")
    config = _config(flags)
    with contextlib.redirect_stdout(sys.stderr):  # a Ray driver prints the cluster's errors
        run = run_cluster(config)
    payload = {"workload": config.setup.workload, "policy": config.setup.policy}
    payload.update(run.result.summary.as_dict())
    payload["gave_up"] = run.gave_up
    payload["steps"] = run.steps
    rows = None
    if compare:
        rows, errors, warning = _compare(run)
        payload["compare"] = errors
        payload["compare_warning"] = warning
    if out is not None:
        _write(out, payload, run, rows)
    if as_json:
        typer.echo(json.dumps(_json_safe(payload), sort_keys=True))
    else:
        _print(payload, run, rows)
    if run.gave_up:
        from .tools import fail

        raise fail(
            f"the workload did not finish: gave up at --max-wall-s after {run.wall_time_s:.1f} s",
            code=1,
        )


def _compare(run: Any) -> tuple[list[Any], dict[str, float], str | None]:
    """``cluster simulate`` of the same workload with the measured profiles; per-job JCTs.

    Also the one line that says the errors exceed the bounds and why (None: within);
    the load average of the last minute is the run's (it ran at least that long).
    """
    import os

    from elasim.cluster.compare import compare_jobs, explain_gap, jct_errors
    from elasim.sim.cluster import simulate_cluster

    sim = simulate_cluster(run.setup, record_timeline=False)  # what the loop ran
    rows = compare_jobs(run.result.jobs, sim.jobs)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    warning = explain_gap(rows, run.result.jobs, sim.jobs, load_avg=load, cores=os.cpu_count())
    return rows, jct_errors(rows), warning


def _write(out: Path, payload: dict[str, Any], run: Any, rows: list[Any] | None) -> None:
    import dataclasses

    import pandas as pd

    from elasim.cluster.output import write_decisions
    from elasim.output import write_json, write_parquet

    write_json(out / "summary.json", _json_safe(payload))
    jobs = pd.DataFrame([dataclasses.asdict(r) for r in run.result.jobs])
    write_parquet(out / "jobs.parquet", jobs)
    events = [
        {"job": name, "time_s": e.time_s, "kind": e.kind.value, "nodes_before": e.nodes_before,
         "nodes_after": e.nodes_after, "pause_s": e.pause.pause_s, "acquire_s": e.pause.acquire_s,
         "batch_size": _batch_at(run.batches.get(name, ()), e.time_s)}
        for name, evs in run.events.items()
        for e in evs
    ]  # fmt: skip
    write_parquet(out / "events.parquet", pd.DataFrame(events))
    write_decisions(out / "decisions.parquet", run.decisions)
    if rows is not None:
        write_parquet(out / "compare.parquet", pd.DataFrame([dataclasses.asdict(r) for r in rows]))


def _batch_at(batches: tuple[tuple[float, int, float], ...], time_s: float) -> int:
    """The global batch the job's workers had after ``time_s`` (0 before its first start)."""
    return next((b for t, b, _ in reversed(batches) if t <= time_s), 0)


def _print(payload: dict[str, Any], run: Any, rows: list[Any] | None) -> None:
    table = Table(title=f"{payload['workload']} under {payload['policy']} on real workers")
    table.add_column("job")
    table.add_column("arrival s", justify="right")
    table.add_column("start s", justify="right")
    table.add_column("JCT s", justify="right")
    table.add_column("steps", justify="right")
    if rows is not None:
        table.add_column("sim JCT s", justify="right")
        table.add_column("error", justify="right")
    by = {r.name: r for r in rows or []}
    for job in run.result.jobs:
        cells = [
            job.name,
            _fmt(job.arrival_s, 1),
            "-" if job.start_s is None else _fmt(job.start_s, 1),
            "-" if job.jct_s is None else _fmt(job.jct_s, 1),
            str(run.steps.get(job.name, 0)),
        ]
        if rows is not None:
            c = by[job.name]
            cells.append("-" if c.sim_jct_s is None else _fmt(c.sim_jct_s, 1))
            cells.append("-" if c.error is None else f"{c.error:+.1%}")
        table.add_row(*cells)
    out_console.print(table)
    keys = ("avg_jct_s", "makespan_s", "jobs_completed", "gpu_utilization", "rescales")
    out_console.print("  ".join(f"{k}={_fmt(payload[k], 3)}" for k in keys))
    if "compare" in payload and payload["compare"].get("jobs_compared"):
        c = payload["compare"]
        out_console.print(
            f"sim vs real: avg JCT {c['sim_avg_jct_s']:.1f} vs {c['real_avg_jct_s']:.1f} s "
            f"({c['avg_jct_error']:+.1%}); per job median |error| "
            f"{c['median_abs_job_error']:.1%}, worst {c['max_abs_job_error']:.1%}"
        )
    if payload.get("compare_warning"):
        out_console.print(f"warning: {payload['compare_warning']}", highlight=False)


def run_command(
    workload: str = workload_option(),
    policy: str = cluster_policy_option(),
    sets: list[str] | None = sets_option(),
    gpus_per_node: int | None = slots_per_node_option(),
    slots: int | None = hidden("--slots"),
    applications: Path | None = applications_option(
        "Folder of application profiles measured for --job (cluster calibrate)."
    ),
    time_scale: float = typer.Option(1.0, "--time-scale", help="Workload s per real s."),
    rescale: str = rescale_option(),
    job: str = trained_job_option(),
    job_sets: list[str] | None = job_set_option(),
    sample_delay_s: float = sample_delay_option(),
    seed: int = typer.Option(0, "--seed", help="Seed of every job's model and sampler."),
    collective_timeout_s: float = collective_timeout_option(),
    max_wall_s: float = max_wall_option(),
    bind: str = bind_option(),
    agent_port: int | None = agent_port_option(),
    agents: int = agents_option(),
    pause_job: str = pause_job_option(),
    speed_model: str = speed_model_option(),
    log_dir: Path | None = log_dir_option(),
    capacity: str | None = capacity_option(),
    launcher: str = launcher_option(),
    address: str | None = address_option(),
    ray_resources: list[str] | None = ray_resources_option(),
    checkpoint_interval_s: str = checkpoint_interval_option(),
    notice_s: float = notice_option(),
    compare: bool = typer.Option(
        False, "--compare", help="Also simulate it with the measured profiles; per-job JCTs."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write summary and jobs here."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object."),
) -> None:
    """Run a workload's jobs on real workers, the cluster policy deciding each one's slots.

    Exits 0 when every job finished, 1 when the wall budget ran out, 2 on bad input.
    """
    flags = dict(locals())
    run_guarded(_run, flags)


def calibrate_command(
    out: Path = typer.Option(..., "--out", "-o", help="Folder of application profiles."),
    slots: int = typer.Option(4, "--slots", help="Measure 1..slots workers."),
    steps: str = typer.Option(
        "160", "--steps", help="Job lengths in steps, comma-separated: one application each."
    ),
    epochs: int = typer.Option(4, "--epochs", help="Validation rows of the measuring run."),
    job: str = trained_job_option(),
    job_sets: list[str] | None = job_set_option(),
    sample_delay_s: float = sample_delay_option(),
    name: str = typer.Option("synth", "--name", help="Applications are NAME-STEPS."),
    batches: str = typer.Option(
        "", "--batches", help="Further global batches to time, comma-separated (above the job's)."
    ),
) -> None:
    """Measure --job on 1..--slots workers as application profiles (Pollux's format)."""
    args = (out, slots, steps, epochs, job, job_sets, sample_delay_s, name, batches)
    run_guarded(_calibrate, *args)


def _calibrate(
    out: Path,
    slots: int,
    steps: str,
    epochs: int,
    job: str,
    job_sets: list[str] | None,
    sample_delay_s: float,
    name: str,
    batches: str = "",
) -> None:
    from elasim.executor import require_torch

    from .tools import split_list

    require_torch()
    from elasim.atomic import check_writable_dir
    from elasim.executor.api import check_job_spec
    from elasim.executor.cluster_profile import measure_application, write_application
    from elasim.executor.protocol import WorkerSettings

    try:
        lengths = [int(s) for s in split_list(steps)]
        extra = tuple(sorted({int(b) for b in split_list(batches)})) if batches else ()
    except ValueError:
        raise UsageError(f"--steps and --batches must be integers, got {steps!r}") from None
    if not lengths or min(lengths) < epochs or slots < 1:
        raise UsageError(f"--steps must be >= --epochs ({epochs}) and --slots >= 1")
    if not (math.isfinite(sample_delay_s) and sample_delay_s >= 0):
        raise UsageError(f"--sample-delay-s must be >= 0, got {sample_delay_s}")
    check_writable_dir(out, "--out")
    check_job_spec(job)
    worker = WorkerSettings(
        job=job,
        job_options=parse_job_options(job_sets),
        max_steps=max(lengths),
        backend="gloo",
        sample_delay_s=sample_delay_s,
    )
    measured = measure_application(worker, slots=slots, epochs=epochs, batches=extra)
    if any(b <= measured.global_batch for b in extra):
        raise UsageError(f"--batches must be above the job's ({measured.global_batch})")
    for length in lengths:
        path = write_application(measured, out / f"{name}-{length}", steps=length)
        out_console.print(f"wrote {path}")
    sizes = ", ".join(f"{n}: {s * 1000:.1f} ms" for n, s in measured.step_s.items())
    out_console.print(f"step time by workers: {sizes} ({measured.wall_s:.0f} s to measure)")


def register(cluster_app: typer.Typer) -> None:
    """Add ``run`` and ``calibrate`` to ``elasim cluster``."""
    cluster_app.command("run")(run_command)
    cluster_app.command("calibrate")(calibrate_command)
