"""``elasim cluster ...``: many elastic jobs on one shared cluster under a cluster policy.

A typer sub-app of its own so that output and sweep commands can join it without
touching the rest of the CLI.  Library code does no I/O; this module prints.
"""

from __future__ import annotations

import json

import typer
from rich.table import Table

from .clitools import UsageError, out_console, parse_sets, sets_option
from .clitools import fmt as _fmt
from .clitools import json_safe as _json_safe
from .clitools import run_guarded as _run_guarded

__all__ = ["cluster_app", "register"]

cluster_app = typer.Typer(
    help="Cluster scheduling: many elastic jobs sharing one cluster (Pollux's workloads).",
    no_args_is_help=True,
)


def _rescale_mode(text: str):
    from elasim.jobmodel import RescaleMode

    try:
        return RescaleMode(text)
    except ValueError:
        raise UsageError(f"--rescale must be inplace or restart, got {text!r}") from None


def _check_shape(nodes: int, gpus_per_node: int) -> None:
    if nodes < 1:
        raise UsageError(f"--nodes must be >= 1, got {nodes}")
    if gpus_per_node < 1:
        raise UsageError(f"--gpus-per-node must be >= 1, got {gpus_per_node}")


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
) -> None:
    from elasim.cluster import ClusterSetup
    from elasim.sim.cluster import simulate_cluster

    _check_shape(nodes, gpus_per_node)
    setup = ClusterSetup(
        workload=workload,
        policy=policy,
        options=parse_sets(sets),
        num_nodes=nodes,
        gpus_per_node=gpus_per_node,
        rescale=_rescale_mode(rescale),
        pause_job=pause_job,
        applications=applications,
        capacity=capacity,
    )
    result = simulate_cluster(setup)
    summary = result.summary.as_dict()
    if as_json:
        payload = {"workload": workload, "policy": policy, **summary}
        typer.echo(json.dumps(_json_safe(payload), sort_keys=True))
        return
    table = Table(title=f"{workload} under {policy} on {nodes} x {gpus_per_node} GPUs")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key, _fmt(value) if isinstance(value, float) else str(value))
    out_console.print(table)


@cluster_app.command("simulate")
def simulate(
    workload: str = typer.Option(
        ..., "--workload", "-w", help="Bundled workload (pollux-workload-1..8) or a CSV path."
    ),
    policy: str = typer.Option(
        "pollux", "--policy", "-p", help="Cluster policy name, file.py:Class or module:Class."
    ),
    nodes: int = typer.Option(16, "--nodes", help="Nodes in the cluster."),
    gpus_per_node: int = typer.Option(4, "--gpus-per-node", help="GPUs per node."),
    sets: list[str] | None = sets_option(),
    rescale: str = typer.Option(
        "restart", "--rescale", help="How a job re-forms its group: restart or inplace."
    ),
    pause_job: str = typer.Option(
        "resnet50_v100", "--pause-job", help="Job preset or TOML whose pause figures apply."
    ),
    applications: str | None = typer.Option(
        None, "--applications", help="Folder of application profiles (default: bundled)."
    ),
    capacity: str | None = typer.Option(
        None, "--capacity", help="Capacity trace: nodes usable over time (spot capacity)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Simulate one workload on a shared cluster under one cluster policy."""
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
    )


@cluster_app.command("policies")
def policies() -> None:
    """List the cluster policies and their options."""
    import elasim.policies.cluster  # noqa: F401 - registers the built-ins
    from elasim.policies.registry import CLUSTER_KIND, describe_policies

    table = Table(title="cluster policies")
    table.add_column("name")
    table.add_column("summary")
    table.add_column("options (--set)")
    for info in describe_policies(CLUSTER_KIND):
        opts = ", ".join(f"{o.name}={o.default!r}" for o in info.options)
        table.add_row(info.name, info.summary, opts)
    out_console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``elasim cluster`` to the main app."""
    app.add_typer(cluster_app, name="cluster")
