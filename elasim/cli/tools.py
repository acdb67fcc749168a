"""What every ``elasim`` command shares: one-line errors, parsing, and one flag vocabulary.

Every command module of :mod:`elasim.cli` imports this one, and it imports none of
them, so there is no import cycle.  The vocabulary is defined once here, so ``simulate``, ``run``,
``compare``, ``calibrate`` and ``sweep`` spell the same thing the same way:

* ``--max-nodes``: the most nodes (worker slots) the job may hold;
* ``--start-offset-s``: where in the trace to start (trace seconds, or ``random``);
* ``--on-demand-price-per-hour``: overrides the trace's on-demand price;
* ``--checkpoint-interval-s``: ``auto`` (Young/Daly, the default), ``off`` or seconds;
* ``--notice-s``: preemption notice, trace seconds;
* ``--set key=value``: a policy option (repeatable).

Older spellings (``--workers-max``, ``--trace-start-s``, ``--on-demand-price``) remain
as hidden aliases.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from .progress import duration as _duration

__all__ = [
    "UsageError",
    "alias",
    "check_bind",
    "err_console",
    "fail",
    "fmt",
    "json_safe",
    "one_of",
    "out_console",
    "parse_interval",
    "parse_offset",
    "parse_sets",
    "run_guarded",
    "split_list",
    "user_errors",
]

out_console = Console()
err_console = Console(stderr=True)


class UsageError(ValueError):
    """A bad command-line value: one line, exit code 2."""


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` (markup escaped) on stderr; the exit to raise (code 2).

    ``code`` 1 is for a run that failed rather than bad input (a user's script died).
    """
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=code)


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that are the user's input being wrong (exit 2, one line)."""
    from elasim.job import TrainingJobError
    from elasim.policies import PolicyConfigError, PolicyLoadError
    from elasim.profile import ProfileError
    from elasim.traces import TraceError

    return (
        TraceError,
        TrainingJobError,
        PolicyLoadError,
        PolicyConfigError,
        ProfileError,
        UsageError,
        ValueError,
    )


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def run_guarded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``; a user error or an OS error leaves as one line and exit code 2.

    Ctrl-C leaves as one ``interrupted`` line and exit code 130 (:func:`interrupted`).
    """
    try:
        return fn(*args, **kwargs)
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        raise interrupted() from None
    except user_errors() as exc:
        logging.getLogger("elasim").debug("user error", exc_info=True)
        raise fail(first_line(exc)) from None
    except OSError as exc:
        where = getattr(exc, "filename", None)
        raise fail(f"{where}: {exc.strerror or exc}" if where else first_line(exc)) from None


# -- parsing --------------------------------------------------------------------------


def parse_sets(values: list[str] | None, flag: str = "--set") -> dict[str, str]:
    """``--set key=value`` pairs into a dict (later ones win)."""
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_interval(text: str | None) -> float | None:
    """``auto`` -> None (Young/Daly), ``off`` -> inf, else seconds > 0."""
    from elasim.jobmodel import parse_checkpoint_interval

    try:
        return parse_checkpoint_interval(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def parse_offset(text: str | None) -> float | None:
    """``random`` -> None (drawn from the seed), else trace seconds >= 0."""
    if text is None:
        return 0.0
    if text.strip().lower() == "random":
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--start-offset-s must be seconds or 'random', got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise UsageError(f"--start-offset-s must be >= 0, got {text!r}")
    return value


def split_list(text: str, flag: str = "") -> list[str]:
    """A comma-separated list; an empty one is an error."""
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        where = f"{flag} " if flag else ""
        raise UsageError(f"{where}expected a comma-separated list, got {text!r}")
    return items


def one_of(value: str, choices: tuple[str, ...], flag: str) -> str:
    """``value`` if it is one of ``choices``, else a one-line error naming ``flag``."""
    if value not in choices:
        listed = " or ".join(repr(c) for c in choices)
        raise UsageError(f"{flag} must be {listed}, got {value!r}")
    return value


def alias(value: Any, old: Any, flag: str, old_flag: str, default: Any = None) -> Any:
    """Merge a flag with its hidden old spelling; the two may not disagree."""
    if old is not None:
        if value is not None and value != old:
            raise UsageError(f"{flag} and {old_flag} (its old name) disagree: {value} vs {old}")
        return old
    return default if value is None else value


def check_nodes(max_nodes: int | None, min_nodes: int | None = None) -> None:
    """``--max-nodes`` / ``--min-nodes`` errors that name the flag, not the job preset."""
    if max_nodes is not None and max_nodes < 1:
        raise UsageError(f"--max-nodes must be >= 1, got {max_nodes}")
    if min_nodes is not None and min_nodes < 1:
        raise UsageError(f"--min-nodes must be >= 1, got {min_nodes}")
    if max_nodes is not None and min_nodes is not None and min_nodes > max_nodes:
        raise UsageError(f"--min-nodes ({min_nodes}) must be <= --max-nodes ({max_nodes})")


def deadline_s_of(deadline_h: float | None) -> float | None:
    """``--deadline-h`` in seconds; a one-line error naming the flag when it is not > 0."""
    if deadline_h is None:
        return None
    if not (math.isfinite(deadline_h) and deadline_h > 0):
        raise UsageError(f"--deadline-h must be > 0 hours, got {deadline_h:g}")
    return deadline_h * 3600.0


#: The output folders this process made (:func:`ensure_writable_dir`), so that a
#: command that fails or is interrupted leaves none of them behind empty.
_MADE: list[Path] = []


def ensure_writable_dir(path: Any, flag: str = "--out") -> None:
    """Fail before any work when ``path`` cannot be made or written (nothing is lost).

    The folders it makes are remembered: :func:`remove_empty_outputs` takes back
    those still empty when the command ends.
    """
    from elasim.atomic import check_writable_dir

    folder = Path(path).absolute()
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        check_writable_dir(path, flag)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    finally:
        _MADE.extend(p for p in missing if p.is_dir())


def remove_empty_outputs() -> None:
    """Remove the folders :func:`ensure_writable_dir` made that are still empty.

    Called when the command's context closes, whether it succeeded, failed or was
    interrupted: a failed sweep, a refused compare or a Ctrl-C leaves no empty
    ``--out`` behind, while a folder with anything in it is never touched.
    """
    for folder in sorted(set(_MADE), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty, or gone: leave it
            folder.rmdir()
    _MADE.clear()


_STARTED_S = [time.perf_counter()]


def mark_command_start() -> None:
    """Note when the command began (the app's callback calls it before any command)."""
    _STARTED_S[0] = time.perf_counter()


def command_elapsed_s() -> float:
    """Real seconds since the command began: what the user has waited for so far."""
    return time.perf_counter() - _STARTED_S[0]


#: whether the running command lets the process end at once (:func:`leave_when_done`)
_LEAVE_WHEN_DONE = [False]


def leave_when_done() -> None:
    """Let the process end as soon as the command returns (see :func:`elasim.cli.main`).

    For a command that has written everything by the time it returns and holds much
    in memory then: the interpreter's teardown frees it object by object (about
    0.1 s after ``simulate`` of 103 days of the Philly trace as background).
    """
    _LEAVE_WHEN_DONE[0] = True


def leaving_when_done() -> bool:
    """Whether the command called :func:`leave_when_done`."""
    return _LEAVE_WHEN_DONE[0]


def interrupted(next_step: str | None = None) -> typer.Exit:
    """One ``interrupted`` line; the exit (code 130, as a shell gives for Ctrl-C) to raise.

    Args:
        next_step: what the user can do now (``elasim run --resume OUT continues
            it``), added to the line; None says only ``interrupted``.
    """
    line = "[bold red]interrupted[/]"
    if next_step:
        line += ": " + escape(next_step)
    err_console.print(line, highlight=False, soft_wrap=True)
    return typer.Exit(code=130)


def check_bind(bind: str, flag: str) -> None:
    """``bind`` is an address of this host's, or a name that resolves (else UsageError)."""
    import socket

    if not bind or any(c.isspace() for c in bind):
        raise UsageError(f"{flag}: not an address: {bind!r}")
    try:
        socket.getaddrinfo(bind, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise UsageError(f"{flag}: cannot resolve {bind!r}: {exc}") from None


def nonnegative(value: float | None, flag: str) -> float | None:
    """``value`` if it is a finite number >= 0 (or None), else an error naming ``flag``."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise UsageError(f"{flag} must be >= 0, got {value:g}")
    return value


# -- output ---------------------------------------------------------------------------


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: floats with ``digits`` decimals, None as ``-``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def json_safe(data: Any) -> Any:
    """``data`` with NaN/inf and numpy scalars made JSON-ready."""
    from elasim.output import json_ready

    return json_ready(data)


# -- the vocabulary (typer options, defined once) ----------------------------------------


def max_nodes_option(help_text: str = "Most nodes (worker slots) the job may hold.") -> Any:
    """``--max-nodes``."""
    return typer.Option(None, "--max-nodes", help=help_text)


def start_offset_option(default: str | None = None) -> Any:
    """``--start-offset-s``: trace seconds, or ``random`` (drawn from ``--seed``)."""
    return typer.Option(
        default,
        "--start-offset-s",
        help="Where in the trace to start (trace seconds), or 'random' (from --seed).",
    )


def on_demand_price_option() -> Any:
    """``--on-demand-price-per-hour``."""
    return typer.Option(
        None,
        "--on-demand-price-per-hour",
        help="USD per on-demand node-hour (overrides the trace).",
    )


def checkpoint_interval_option() -> Any:
    """``--checkpoint-interval-s auto|off|SECONDS``."""
    return typer.Option(
        "auto",
        "--checkpoint-interval-s",
        help="Running time between checkpoints (trace s), 'auto' (Young/Daly) or 'off'.",
    )


def notice_option(default: Any = 0.0, help_text: str = "") -> Any:
    """``--notice-s``."""
    return typer.Option(
        default, "--notice-s", help=help_text or "Preemption notice, trace seconds (AWS 120)."
    )


def sets_option() -> Any:
    """``--set key=value``."""
    return typer.Option(None, "--set", help="Policy option key=value (repeatable).")


def policy_tables(infos: Any) -> list[Any]:
    """One table per policy: each ``--set`` option's type, default and meaning.

    Shared by ``elasim policies`` and ``elasim cluster policies`` so that both show
    what an option means (the ``Attributes:`` text of the policy's ``Config``), not
    only its name and default.
    """
    from rich.table import Table

    tables = []
    for info in infos:
        table = Table(title=f"{info.name}: {info.summary}", title_justify="left", show_edge=False)
        table.add_column("option (--set key=value)")
        table.add_column("type")
        table.add_column("default")
        table.add_column("meaning")
        for option in info.options:
            table.add_row(option.name, option.type_name, repr(option.default), option.doc)
        tables.append(table)
    return tables


def hidden(flag: str) -> Any:
    """An old spelling kept as a hidden alias."""
    return typer.Option(None, flag, hidden=True)


class StageProgress:
    """The stages of a long command, each with the time left: a bar on a terminal, else lines.

    Why an estimate and not only elapsed time: a calibration on a busy machine runs
    for minutes, and "minutes between its log lines" reads as a hang.  Each stage
    comes with what it should take on an idle machine; the estimate scales what is
    left by how much slower than that the finished stages ran, so a busy machine's
    estimate grows to match it.  When stderr is not a terminal (CI, ``| tee``), every
    stage is one plain line instead of a bar.
    """

    def __init__(self, command: str) -> None:
        self.command = command
        self._began = 0.0
        self._stage_began = 0.0
        self._done_expected_s = 0.0
        self._current_expected_s = 0.0
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> StageProgress:
        import time

        self._began = self._stage_began = time.monotonic()
        if err_console.is_terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[left]}"),
                console=err_console,
                transient=True,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self.command, total=None, left="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def stage(
        self, index: int, total: int, description: str, expected_s: float, left_s: float
    ) -> None:
        """A stage starts; ``left_s`` is this one and the later ones, on an idle machine."""
        import time

        now = time.monotonic()
        self._done_expected_s += self._current_expected_s
        self._current_expected_s = expected_s
        elapsed = now - self._began
        slowdown = elapsed / self._done_expected_s if self._done_expected_s > 0 else 1.0
        estimate = left_s * min(max(slowdown, 0.5), 20.0)
        head = f"{self.command} {index}/{total}"
        left = f"about {_duration(estimate)} left"
        if self._progress is None:
            err_console.print(
                f"{head}: {description} (elapsed {_duration(elapsed)}, {left})",
                soft_wrap=True,
                highlight=False,
            )
            return
        err_console.log(f"{head}: {description}", highlight=False)
        done = self._done_expected_s
        self._progress.update(
            self._task,
            description=head,
            total=done + left_s,
            completed=done,
            left=left,
        )
