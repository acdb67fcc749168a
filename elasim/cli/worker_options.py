"""The flags of the commands that start real workers, defined once.

``elasim run``, ``elasim cluster run`` (and, for logs, ``elasim agent``) start
worker processes, listen for agents and give up after a wall-time budget.  Each
such flag means the same thing in every command, so it is declared here once:
copies of a flag drift (a help text learns something in one command and not in the
other, as ``--bind`` had).  typer reads defaults from the function signature, so
each command still lists its flags, through these factories.
"""

from __future__ import annotations

from typing import Any

import typer

__all__ = [
    "agent_port_option",
    "agents_option",
    "bind_option",
    "collective_timeout_option",
    "log_dir_option",
    "max_wall_option",
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
