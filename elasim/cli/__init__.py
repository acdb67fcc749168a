"""The ``elasim`` command line: the only place that prints, reads flags or exits.

Library errors (malformed traces, training job files, policy options, a policy that
raises) arrive here as exceptions and leave as one line on stderr with exit code 2,
never a traceback.  One package, one module per group of commands, all sharing
:mod:`.tools` (errors, parsing and the flag vocabulary):

* :mod:`.simulate`: ``simulate``, ``policies``, ``jobs``;
* :mod:`.sweep`: ``sweep``;
* :mod:`.traces`: ``traces list|show|validate|import``;
* :mod:`.fidelity`: ``calibrate``, ``compare``;
* :mod:`.run`: ``run`` and :mod:`.agent`: ``agent`` (the executor; torch is imported
  only when they run);
* :mod:`.cluster`, :mod:`.cluster_sweep`, :mod:`.cluster_run`: ``cluster ...``.
"""

from __future__ import annotations

import logging
import sys

import typer

from elasim import __version__

from . import agent, cluster, cluster_run, cluster_sweep, fidelity, run, simulate, sweep
from .tools import leaving_when_done, mark_command_start, out_console, remove_empty_outputs
from .traces import traces_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="elasim",
    invoke_without_command=True,
    help="Simulate (and execute) elastic deep-learning training policies on real traces.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _main(
    ctx: typer.Context,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """Simulate (and execute) elastic deep-learning training policies on real traces."""
    if version:
        out_console.print(f"elasim {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        out_console.print(ctx.get_help())
        raise typer.Exit()
    mark_command_start()
    ctx.call_on_close(remove_empty_outputs)
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


simulate.register(app)
sweep.register(app)
app.add_typer(traces_app, name="traces")
fidelity.register(app)
run.register(app)
agent.register(app)
cluster_sweep.register(cluster.cluster_app)
cluster_run.register(cluster.cluster_app)
cluster.register(app)


def main() -> None:
    """Console-script entry point.

    A command that imported torch (``run``, ``calibrate``, ``compare``) leaves the
    interpreter at once when it is done: its output is flushed, then ``os._exit``.
    Why: tearing down torch, gloo's store and pyarrow module by module took 1-2.5 s
    after the summary on a loaded 2-core machine (measured by
    ``benchmarks/bench_chaos.py``), and a script waiting for the process saw a run
    that had printed its summary but had not exited.  Every file is written (and
    every worker gone) before the summary is printed, so nothing is lost.  So does a
    command that asked to (``simulate``, :func:`~.tools.leave_when_done`).  Ray
    needs its own shutdown, so a command that imported it exits normally.
    """
    try:
        app()
    except SystemExit as exc:
        if "ray" in sys.modules or not ("torch" in sys.modules or leaving_when_done()):
            raise
        _leave_now(exc.code)


def _leave_now(code: object) -> None:
    """Flush what was written and end the process with ``code`` (SystemExit's rules)."""
    import os

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    os._exit(status)
