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
    "DEFAULT_CLUSTER_POLICY",
    "DEFAULT_CLUSTER_RESCALE",
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
    "slots_per_node_option",
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


#: The cluster commands' default policy.  Why fifo, for the simulator too: it needs
#: no fitted speed model or measured profiles, so it runs the same in ``cluster
#: simulate``, ``cluster sweep`` and on real workers (``cluster run``), and it is the
#: baseline the other policies are compared with.
DEFAULT_CLUSTER_POLICY = "fifo"

#: The cluster commands' default ``--rescale``, as for one job (``simulate``, ``run``).
#: Why inplace: it is what real workers do best (workers stay, state moves), and
#: ``restart`` (AdaptDL's checkpoint-restart, as Pollux's evaluation assumed) has not
#: been run on real workers; ask for it with ``--rescale restart``.
DEFAULT_CLUSTER_RESCALE = "inplace"


def cluster_policy_option() -> Any:
    """``--policy``: one default for every cluster command (:data:`DEFAULT_CLUSTER_POLICY`)."""
    return typer.Option(
        DEFAULT_CLUSTER_POLICY,
        "--policy",
        "-p",
        help="Cluster policy: a name (elasim cluster policies), file.py:Class or "
        "module:Class. Default fifo in every cluster command: it needs no fitted speed "
        "model, so it runs the same simulated and on real workers.",
    )


def trained_job_option() -> Any:
    """``--job`` of the real commands: what the workers train."""
    return typer.Option(  # the default named in words: in full it was cut at 80 columns
        "elasim.executor.synthetic:synthetic_job",
        "--job",
        help="ElasticJob import spec, module:factory (default: synthetic_job in "
        "elasim.executor.synthetic).",
        show_default=False,
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


def slots_per_node_option() -> Any:
    """``--gpus-per-node`` of ``cluster run``: a node's worker slots, each one GPU.

    Why the same name as the simulator's: a real run's node is a launcher (this host,
    each agent), and the cluster model places GPUs per node; a slot plays one GPU, so
    the flag that shapes the cluster is the same.  ``--slots`` remains a hidden alias.
    """
    return typer.Option(
        None,
        "--gpus-per-node",
        help="Worker slots per node, each playing one GPU (default 4): this host is node 0 "
        "(0: agents only), each agent one more node with as many.",
    )


def rescale_option() -> Any:
    """``--rescale``: one default for every command (:data:`DEFAULT_CLUSTER_RESCALE`)."""
    return typer.Option(
        DEFAULT_CLUSTER_RESCALE,
        "--rescale",
        help="How a job re-forms its group: inplace (the default everywhere, as for one "
        "job: workers stay, state moves) or restart (AdaptDL's checkpoint-restart, as "
        "Pollux's evaluation assumed).",
    )


def pause_job_option() -> Any:
    """``--pause-job``."""
    return typer.Option(
        "resnet50_v100", "--pause-job", help="Job preset or TOML whose pause figures apply."
    )


def applications_option(
    help_text: str = "Folder of application profiles (default: bundled); a profile's "
    "pauses.json (cluster calibrate writes one) replaces --pause-job's figures.",
) -> Any:
    """``--applications``."""
    return typer.Option(None, "--applications", help=help_text)


def capacity_option() -> Any:
    """``--capacity``."""
    return typer.Option(
        None, "--capacity", help="Capacity trace: nodes usable over time (spot capacity)."
    )


def notice_option() -> Any:
    """``--notice-s``: as for one job."""
    return typer.Option(
        0.0,
        "--notice-s",
        help="Preemption notice before each capacity drop, s (0: none); a job warned in "
        "time leaves gracefully (the single-job rule).",
    )


def checkpoint_interval_option() -> Any:
    """``--checkpoint-interval-s``: as for one job, but off by default in cluster mode."""
    return typer.Option(
        "off",
        "--checkpoint-interval-s",
        help="Every job's periodic checkpoints: 'auto' (Young/Daly), seconds of training, "
        "or 'off' (the default: a job checkpoints only when it restarts or releases).",
    )


def check_checkpoints(notice_s: float, checkpoint_interval_s: str) -> float | None:
    """``--notice-s`` and ``--checkpoint-interval-s`` checked; the interval as the model's.

    Raises:
        UsageError: either is not a valid value (one line).
    """
    from elasim.jobmodel import parse_checkpoint_interval

    try:
        interval_s = parse_checkpoint_interval(checkpoint_interval_s)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not 0 <= notice_s < float("inf"):
        raise UsageError(f"--notice-s must be >= 0, got {notice_s}")
    return interval_s


def speed_model_option() -> Any:
    """``--speed-model``: what a policy knows of a job's speed (both shells)."""
    return typer.Option(
        "oracle",
        "--speed-model",
        help="oracle: the application profile; fitted: fitted online to what each job "
        "measured (its step times and gradient noise), as Pollux's agent does.",
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
