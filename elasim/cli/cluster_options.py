"""The flags that ``elasim cluster simulate``, ``sweep`` and ``run`` share, defined once.

Why a module of option factories: the three commands describe the same cluster
(nodes, GPUs per node, how a job re-forms, whose pause figures apply, which
application profiles, which capacity trace), and copies of those flags drift (a help
text changes in one, a check is missed in another).  typer reads defaults from the
function signature, so each command still lists its flags, but through these.
"""

from __future__ import annotations

from typing import Any

import typer

from .tools import UsageError

__all__ = [
    "applications_option",
    "capacity_option",
    "check_shape",
    "cluster_policy_option",
    "gpus_per_node_option",
    "job_set_option",
    "nodes_option",
    "pause_job_option",
    "rescale_mode",
    "rescale_option",
    "sample_delay_option",
    "trained_job_option",
    "workload_option",
]


def workload_option() -> Any:
    """``--workload`` (simulate and run take the same workloads)."""
    return typer.Option(
        ...,
        "--workload",
        "-w",
        help="Bundled workload (pollux-workload-1..8), a CSV path or philly[:TRACE][:k=v...].",
    )


def cluster_policy_option(default: str = "pollux") -> Any:
    """``--policy`` (a real run defaults to fifo: it needs no fitted speed model)."""
    return typer.Option(
        default, "--policy", "-p", help="Cluster policy name, file.py:Class or module:Class."
    )


def trained_job_option() -> Any:
    """``--job`` of the real commands: what the workers train."""
    return typer.Option(
        "elasim.executor.synthetic:synthetic_job", "--job", help="ElasticJob import spec."
    )


def job_set_option() -> Any:
    """``--job-set`` (repeatable): options of ``--job``'s factory."""
    return typer.Option(None, "--job-set", help="Job factory option key=value (repeatable).")


def sample_delay_option() -> Any:
    """``--sample-delay-s``: the emulated accelerator of the synthetic job."""
    return typer.Option(
        0.0, "--sample-delay-s", help="Emulated accelerator: sleep per local sample (real s)."
    )


def nodes_option() -> Any:
    """``--nodes``."""
    return typer.Option(16, "--nodes", help="Nodes in the cluster.")


def gpus_per_node_option() -> Any:
    """``--gpus-per-node``."""
    return typer.Option(4, "--gpus-per-node", help="GPUs per node.")


def rescale_option(default: str = "restart") -> Any:
    """``--rescale`` (the simulator defaults to restart, AdaptDL's mechanism)."""
    return typer.Option(
        default, "--rescale", help="How a job re-forms its group: restart or inplace."
    )


def pause_job_option() -> Any:
    """``--pause-job``."""
    return typer.Option(
        "resnet50_v100", "--pause-job", help="Job preset or TOML whose pause figures apply."
    )


def applications_option(
    help_text: str = "Folder of application profiles (default: bundled).",
) -> Any:
    """``--applications``."""
    return typer.Option(None, "--applications", help=help_text)


def capacity_option() -> Any:
    """``--capacity``."""
    return typer.Option(
        None, "--capacity", help="Capacity trace: nodes usable over time (spot capacity)."
    )


def check_shape(nodes: int, gpus_per_node: int) -> None:
    """One line for a cluster shape that cannot exist."""
    if nodes < 1:
        raise UsageError(f"--nodes must be >= 1, got {nodes}")
    if gpus_per_node < 1:
        raise UsageError(f"--gpus-per-node must be >= 1, got {gpus_per_node}")


def rescale_mode(text: str) -> Any:
    """The :class:`~elasim.jobmodel.RescaleMode` of ``--rescale``, or one line."""
    from elasim.jobmodel import RescaleMode

    try:
        return RescaleMode(text)
    except ValueError:
        raise UsageError(f"--rescale must be inplace or restart, got {text!r}") from None
