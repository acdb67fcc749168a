"""``elasim cluster ...``: many elastic jobs on one shared cluster under a cluster policy.

A typer sub-app of its own so that output and sweep commands can join it without
touching the rest of the CLI.  Library code does no I/O; this module prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from .cluster_options import (
    applications_option,
    capacity_option,
    check_checkpoints,
    check_shape,
    checkpoint_interval_option,
    cluster_policy_option,
    gpus_per_node_option,
    nodes_option,
    notice_option,
    pause_job_option,
    rescale_mode,
    rescale_option,
    speed_model_option,
    workload_option,
)
from .cluster_sweep import write_simulate_outputs
from .progress import show_progress
from .tools import (
    ensure_writable_dir,
    err_console,
    out_console,
    parse_sets,
    policy_tables,
    sets_option,
)
from .tools import fmt as _fmt
from .tools import json_safe as _json_safe
from .tools import run_guarded as _run_guarded

__all__ = ["cluster_app", "register"]

#: the summary's keys as the table shows them, units in the label (the JSON keeps keys)
SUMMARY_LABELS = {
    "avg_jct_s": "mean job completion time (s)",
    "p50_jct_s": "median job completion time (s)",
    "p99_jct_s": "p99 job completion time (s)",
    "makespan_s": "makespan (s)",
    "jobs": "jobs",
    "jobs_completed": "jobs completed",
    "gpu_utilization": "GPU utilization (0-1)",
    "rescales": "rescales, all jobs",
    "decisions": "policy decisions",
    "wall_time_s": "wall time (s)",
    "preemptions": "preemptions, all jobs",
    "lost_work_h": "lost work (h)",
}

cluster_app = typer.Typer(
    help="Cluster scheduling: many elastic jobs sharing one cluster (Pollux's workloads).",
    no_args_is_help=True,
)


def _simulate(
    workload: str,
    policy: str,
    nodes: int,
    gpus_per_node: int,
    sets: list[str] | None,
    rescale: str,
    pause_job: str,
    applications: str | None,
    capacity: str | None,
    as_json: bool,
    out: Path | None = None,
    notice_s: float = 0.0,
    checkpoint_interval_s: str = "off",
    speed_model: str = "oracle",
) -> None:
    from elasim.cluster import ClusterSetup

    check_shape(nodes, gpus_per_node)
    interval_s = check_checkpoints(notice_s, checkpoint_interval_s)
    if out is not None:
        ensure_writable_dir(out, "--out")
    setup = ClusterSetup(
        workload=workload,
        policy=policy,
        options=parse_sets(sets),
        num_nodes=nodes,
        gpus_per_node=gpus_per_node,
        rescale=rescale_mode(rescale),
        pause_job=pause_job,
        applications=applications,
        capacity=capacity,
        notice_s=notice_s,
        checkpoint_interval_s=interval_s,
        speed_model=speed_model,
    )
    result, written = _run_simulation(setup, out)
    summary = result.summary.as_dict()
    if as_json:
        payload = {"workload": workload, "policy": policy, **summary}
        typer.echo(json.dumps(_json_safe(payload), sort_keys=True))
        return
    table = Table(title=f"{workload} under {policy} on {nodes} x {gpus_per_node} GPUs")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        label = SUMMARY_LABELS.get(key, key)
        table.add_row(label, _fmt(value) if isinstance(value, float) else f"{value:,}")
    out_console.print(table)
    if written:
        names = ", ".join(path.name for path in written.values())
        out_console.print(f"wrote {out}/: {names}", highlight=False, soft_wrap=True)


def _run_simulation(setup: Any, out: Path | None) -> tuple[Any, dict[str, Path] | None]:
    """The simulation's result, and with ``--out`` the files written (decisions streamed)."""
    from elasim.sim.cluster import simulate_cluster

    if out is None:
        return simulate_cluster(setup, record_timeline=False), None
    from elasim.cluster.output import stream_decisions

    # the decision log goes to disk while the run goes (never held in memory)
    decisions = out / "decisions.parquet"
    result = stream_decisions(decisions, lambda sink: simulate_cluster(setup, on_decision=sink))
    return result, {"decisions": decisions, **write_simulate_outputs(out, setup, result)}


@cluster_app.command("simulate")
def simulate(
    workload: str = workload_option(),
    policy: str = cluster_policy_option(),
    nodes: int = nodes_option(),
    gpus_per_node: int = gpus_per_node_option(),
    sets: list[str] | None = sets_option(),
    rescale: str = rescale_option(),
    pause_job: str = pause_job_option(),
    applications: str | None = applications_option(),
    capacity: str | None = capacity_option(),
    notice_s: float = notice_option(),
    checkpoint_interval_s: str = checkpoint_interval_option(),
    speed_model: str = speed_model_option(),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="Write jobs/allocations/decisions parquet, summary.json and plots here.",
    ),
) -> None:
    """Simulate one workload on a shared cluster under one cluster policy."""
    with show_progress(err_console, out_console):  # a large trace takes minutes
        _run_guarded(
            _simulate,
            workload,
            policy,
            nodes,
            gpus_per_node,
            sets,
            rescale,
            pause_job,
            applications,
            capacity,
            as_json,
            out,
            notice_s,
            checkpoint_interval_s,
            speed_model,
        )


@cluster_app.command("policies")
def policies() -> None:
    """List the cluster policies and their options, with what each option means."""
    import elasim.policies.cluster  # noqa: F401 - registers the built-ins
    from elasim.policies.registry import CLUSTER_KIND, describe_policies

    for table in policy_tables(describe_policies(CLUSTER_KIND)):
        out_console.print(table)
        out_console.print()


def register(app: typer.Typer) -> None:
    """Add ``elasim cluster`` to the main app."""
    app.add_typer(cluster_app, name="cluster")
