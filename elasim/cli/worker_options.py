"""The flags of the commands that start real workers, defined once.

``elasim run``, ``elasim cluster run`` (and, for logs, ``elasim agent``) start
worker processes (here, on agents, or as Ray actors), listen for agents and give up
after a wall-time budget.  Each
such flag means the same thing in every command, so it is declared here once:
copies of a flag drift (a help text learns something in one command and not in the
other, as ``--bind`` had).  typer reads defaults from the function signature, so
each command still lists its flags, through these factories.
"""

from __future__ import annotations

import math
from typing import Any

import typer

from .tools import UsageError, parse_sets

__all__ = [
    "address_option",
    "agent_port_option",
    "agents_option",
    "bind_option",
    "collective_timeout_option",
    "launcher_option",
    "log_dir_option",
    "max_wall_option",
    "parse_ray_resources",
    "ray_resources_option",
]


def max_wall_option() -> Any:
    """``--max-wall-s``: the run's budget of real seconds (then it exits 1)."""
    return typer.Option(600.0, "--max-wall-s", help="Give up after this many real seconds.")


def collective_timeout_option() -> Any:
    """``--collective-timeout-s``: how long a collective waits for a dead peer."""
    return typer.Option(
        5.0, "--collective-timeout-s", help="Workers' process-group timeout (real s)."
    )


def bind_option() -> Any:
    """``--bind``: loopback unless told otherwise (agents on other hosts need more)."""
    return typer.Option(
        "127.0.0.1", "--bind", help="Address of the store and the agent port (default: loopback)."
    )


def agent_port_option() -> Any:
    """``--agent-port``: where agents on other hosts connect (0: any free port)."""
    return typer.Option(None, "--agent-port", help="Listen for agents on this port.")


def agents_option() -> Any:
    """``--agents``: how many agents to wait for before training starts."""
    return typer.Option(0, "--agents", help="Wait for this many agents (one node each).")


def log_dir_option(default: str = "discarded") -> Any:
    """``--log-dir``: worker logs; ``default`` says where they go without it."""
    return typer.Option(None, "--log-dir", help=f"Worker logs go here (default: {default}).")


def launcher_option() -> Any:
    """``--launcher``: where the workers run."""
    return typer.Option(
        "local",
        "--launcher",
        help="'local' (this host's processes, and agents) or 'ray' (Ray actors on a cluster).",
    )


def address_option() -> Any:
    """``--address``: the Ray cluster of ``--launcher ray``."""
    return typer.Option(
        None,
        "--address",
        help="Ray cluster for --launcher ray: HOST:PORT, ray://HOST:PORT or auto "
        "(default: a private local Ray instance).",
    )


def ray_resources_option() -> Any:
    """``--ray-resources``: what each worker's Ray actor holds."""
    return typer.Option(
        None,
        "--ray-resources",
        help="Ray resource each worker holds, NAME=AMOUNT, repeatable (default CPU=1).",
    )


def parse_ray_resources(raw: list[str] | None) -> dict[str, float]:
    """``--ray-resources NAME=AMOUNT`` values, each a number >= 0."""
    out: dict[str, float] = {}
    for key, value in parse_sets(raw, "--ray-resources").items():
        try:
            amount = float(value)
        except (TypeError, ValueError):
            amount = math.nan
        if not (math.isfinite(amount) and amount >= 0):
            raise UsageError(f"--ray-resources {key} must be a number >= 0, got {value!r}")
        out[key] = amount
    return out
