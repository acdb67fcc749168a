"""``elasim cluster sweep`` and the files of ``elasim cluster simulate --out``.

Kept apart from :mod:`.cluster` (the simulate command and the sub-app) so
that the two can grow without stepping on each other; :func:`register` adds the
sweep command to the ``cluster`` sub-app.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from .cluster_options import (
    applications_option,
    capacity_option,
    check_shape,
    gpus_per_node_option,
    nodes_option,
    pause_job_option,
    rescale_mode,
    rescale_option,
)
from .progress import counted_progress
from .sweep_output import print_answers, print_tables, shown_policies, write_report
from .tools import (
    ensure_writable_dir,
    err_console,
    out_console,
    parse_sets,
    sets_option,
    split_list,
)
from .tools import fail as _fail
from .tools import json_safe as _json_safe
from .tools import run_guarded as _run_guarded

__all__ = ["register", "write_simulate_outputs"]


def write_simulate_outputs(out: Path, setup: Any, result: Any) -> dict[str, Path]:
    """``simulate --out``: jobs, allocations, summary and both plots of one run.

    Returns:
        The paths written, by file kind, so that the command lists what it wrote.
    """
    from elasim.cluster.output import write_cluster_outputs

    summary = {
        "inputs": {
            "workload": setup.workload,
            "policy": setup.policy,
            "options": dict(setup.options),
            "nodes": setup.num_nodes,
            "gpus_per_node": setup.gpus_per_node,
            "rescale": setup.rescale.value,
            "pause_job": setup.pause_job,
            "applications": setup.applications,
        },
        **result.summary.as_dict(),
    }
    return _run_guarded(
        write_cluster_outputs,
        out,
        [(setup.workload, setup.policy, result)],
        total_gpus=setup.num_nodes * setup.gpus_per_node,
        summary=summary,
    )


def sweep(
    workloads: str = typer.Option(
        ..., "--workloads", help="Comma-separated workloads (bundled names, paths, philly[...])."
    ),
    policies: str = typer.Option(
        "all", "--policies", help="Comma-separated cluster policies, or 'all'."
    ),
    nodes: int = nodes_option(),
    gpus_per_node: int = gpus_per_node_option(),
    sets: list[str] | None = sets_option(),
    rescale: str = rescale_option(),
    pause_job: str = pause_job_option(),
    applications: str | None = applications_option(),
    capacity: str | None = capacity_option(),
    workers: int = typer.Option(0, "--workers", help="Processes (0: one per core)."),
    backend: str = typer.Option("local", "--backend", help="'local' processes or 'ray'."),
    address: str | None = typer.Option(
        None, "--address", help="Ray cluster address (with --backend ray; default: start one)."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Folder for tables and plots."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per run."),
) -> None:
    """Compare cluster policies over workloads: tables, answers, optional files.

    Each (workload, policy) is one simulation; they run in parallel on the
    sweep backends.  Prints a table per workload, then the answers: the
    cheapest (fewest GPU-hours held) and the fastest (lowest mean JCT),
    and which policies ran identically.

    With --out: sweep.parquet (one row per run), jobs.parquet (every job
    of every run), allocations.parquet, jct_cdf.png, gpus_per_job.png and
    report.html (the tables, answers and plots in one page).
    """
    _run_guarded(_sweep, **locals())


def _spec(
    workloads: str,
    policies: str,
    nodes: int,
    gpus_per_node: int,
    sets: list[str] | None,
    rescale: str,
    pause_job: str,
    applications: str | None,
    capacity: str | None,
) -> Any:
    import elasim.policies.cluster  # noqa: F401 - registers the built-ins
    from elasim.cluster.sweep import ClusterSweepSpec
    from elasim.policies.registry import CLUSTER_KIND, policy_names

    check_shape(nodes, gpus_per_node)
    rescale_mode(rescale)
    names = (
        policy_names(kind=CLUSTER_KIND)
        if policies.strip() == "all"
        else split_list(policies, "--policies")
    )
    return ClusterSweepSpec(
        workloads=tuple(split_list(workloads, "--workloads")),
        policies=tuple(names),
        options=tuple(sorted(parse_sets(sets).items())),
        num_nodes=nodes,
        gpus_per_node=gpus_per_node,
        rescale=rescale,
        pause_job=pause_job,
        applications=applications,
        capacity=capacity,
    )


def _sweep(
    *,
    workers: int,
    backend: str,
    address: str | None,
    out: Path | None,
    as_json: bool,
    **flags: Any,
) -> None:

    from elasim.cluster.sweep import run_cluster_sweep
    from elasim.tasks import BACKENDS

    if workers < 0:
        raise _fail(f"--workers must be >= 0, got {workers}")
    if backend not in BACKENDS:
        raise _fail(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    spec = _spec(**flags)
    spec.validate()
    if out is not None:
        ensure_writable_dir(out, "--out")
    # on stderr, with --json too: a bar on a terminal, else a line every few seconds
    with counted_progress(err_console, "simulating", spec.size) as tick:
        runs = run_cluster_sweep(
            spec, workers=workers or None, on_done=tick, backend=backend, address=address
        )
    _report(runs, spec, out, as_json)


def _report(runs: list[Any], spec: Any, out: Path | None, as_json: bool) -> None:
    """Write the files (all computed first), then print the tables or JSON lines."""
    from elasim.analysis.answers import cluster_answers
    from elasim.analysis.sweep_tables import cluster_sweep_tables
    from elasim.cluster.output import write_cluster_outputs
    from elasim.cluster.sweep import sweep_frame
    from elasim.output import write_parquet
    from elasim.policies.registry import CLUSTER_KIND

    frame = sweep_frame(runs)
    shown = shown_policies(frame, CLUSTER_KIND)
    tables = cluster_sweep_tables(shown)
    answers = cluster_answers(shown)
    title = (
        f"{len(spec.policies)} cluster policies x {len(spec.workloads)} workload(s) "
        f"on {spec.num_nodes} x {spec.gpus_per_node} GPUs"
    )
    notes = [
        "JCT: job completion time, arrival to finish; vs best: avg JCT / the lowest; "
        "GPU-h: GPU-hours the jobs held; done: jobs finished"
    ]
    if out is not None:
        triples = [(setup.workload, setup.policy, result) for setup, result in runs]
        summary = {"grid": {"workloads": spec.workloads, "policies": spec.policies}}
        summary["runs"] = frame.to_dict(orient="records")
        write_cluster_outputs(
            out, triples, total_gpus=spec.num_nodes * spec.gpus_per_node, summary=summary
        )
        write_parquet(out / "sweep.parquet", frame)
        images = [
            ("job completion times, one curve per policy", "jct_cdf.png"),
            ("GPUs held over time", "gpus_per_job.png"),
        ]
        heading = "Results (one simulation each)"
        write_report(
            out,
            title=title,
            tables=tables,
            answers=answers,
            images=images,
            notes=notes,
            tables_heading=heading,
        )
    if as_json:
        for row in frame.to_dict(orient="records"):
            sys.stdout.write(json.dumps(_json_safe(row), sort_keys=True) + "\n")
        return
    out_console.print(title, style="bold", highlight=False)
    print_tables(tables, notes)
    if out is not None:
        out_console.print(
            f"wrote {out}/sweep.parquet, report.html, jobs.parquet, ...", highlight=False
        )
    print_answers(
        answers, "answers (per workload; a policy that left a job unfinished does not count)"
    )


def register(cluster_app: typer.Typer) -> None:
    """Add ``sweep`` to the ``elasim cluster`` sub-app."""
    cluster_app.command("sweep")(sweep)
