"""``elasim agent``: worker slots on this host for a run controller elsewhere.

Why a module apart from :mod:`.run`: the agent is the other side of a run, started
on each extra host with that host's copies of the run's secret and settings; it
shares no flag with ``elasim run`` but the address check (:func:`.tools.check_bind`).
Nothing here imports torch at import time.

Errors (a bad flag, a missing or unsafe file, a refused connection) print one line on
stderr and exit with code 2.
"""

from __future__ import annotations

import math
from pathlib import Path

import typer

from .tools import UsageError, check_bind, first_line, interrupted
from .tools import fail as _fail
from .worker_options import (
    log_dir_option,
)

__all__ = ["register"]

_one_line = first_line


def agent_command(
    controller: str = typer.Option(..., "--controller", help="HOST:PORT of the controller."),
    slots: int = typer.Option(1, "--slots", help="Worker slots this host offers."),
    secret_file: Path | None = typer.Option(
        None, "--secret-file", help="This host's copy of the run's secret (0600; required)."
    ),
    settings: Path | None = typer.Option(
        None,
        "--settings",
        help="This host's copy of the run's worker-settings.json (0600; required).",
    ),
    log_dir: Path | None = log_dir_option(),
    connect_timeout_s: float = typer.Option(
        30.0, "--connect-timeout-s", help="Keep retrying the controller this long (real s)."
    ),
) -> None:
    """Contribute worker slots on this host to an elasim run controller.

    The connection is authenticated both ways with the run's secret; workers run the
    job named in the settings file, never anything the connection says.
    """
    try:
        from elasim.executor.agent import Agent

        _check_agent_flags(controller, slots, connect_timeout_s, secret_file, settings)
        assert secret_file is not None and settings is not None
        agent = Agent(
            controller,
            slots,
            secret_file,
            settings,
            log_dir=log_dir,
            connect_timeout_s=connect_timeout_s,
        )
        code = agent.run()
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        raise interrupted() from None
    except (ValueError, RuntimeError, OSError) as exc:
        raise _fail(_one_line(exc)) from None
    raise typer.Exit(code=code)


def _check_agent_flags(
    controller: str,
    slots: int,
    connect_timeout_s: float,
    secret_file: Path | None,
    settings: Path | None,
) -> None:
    """Check ``elasim agent``'s flags before it connects, each bad one in one line.

    Why apart from :func:`agent_command`: the secret and the settings file are read
    here (mode 0600, well formed) so that a wrong copy fails on this host, at once,
    rather than as a refused connection at the controller.

    Raises:
        UsageError: a malformed or refused flag, or a missing or unsafe file.
    """
    from elasim.executor.auth import AuthError, read_secret
    from elasim.executor.runfiles import read_worker_settings

    host, sep, port = controller.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"--controller must be HOST:PORT, got {controller!r}")
    if not 0 < int(port) < 65536:
        raise UsageError(f"--controller port must be 1-65535, got {port}")
    check_bind(host.strip("[]"), "--controller")
    if slots < 1:
        raise UsageError(f"--slots must be >= 1, got {slots}")
    if not (math.isfinite(connect_timeout_s) and connect_timeout_s > 0):
        raise UsageError(f"--connect-timeout-s must be > 0, got {connect_timeout_s:g}")
    checks = (
        ("--secret-file", secret_file, read_secret),
        ("--settings", settings, read_worker_settings),
    )
    for flag, path, check in checks:
        if path is None:
            raise UsageError(f"{flag} is required (a copy of the run's file, mode 0600)")
        try:
            check(path)
        except AuthError as exc:
            raise UsageError(f"{flag}: {exc}") from None


def register(app: typer.Typer) -> None:
    """Add ``agent`` to the ``elasim`` app."""
    app.command("agent")(agent_command)
