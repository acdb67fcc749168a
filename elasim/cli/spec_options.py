"""The flags of a :class:`~elasim.jobmodel.JobSpec`, declared once for every command.

``simulate``, ``run``, ``compare`` and ``sweep`` all take a job: the trace, the policy
and its options, what is trained, node bounds, the mechanism, the notice, the
checkpoint interval and cost, the deadline, the start offset, the prices and the
seed.  They used to declare those flags each (``run`` had 41 parameters, passed on
with ``**locals()``), and the copies drifted in names, defaults and checks.  Here
they are declared once: :func:`with_spec` gives a command every flag of the spec
(less those it leaves out), builds the :class:`~elasim.jobmodel.JobSpec` from them,
and passes it as ``spec``; a bad value is one line naming the flag.
"""

from __future__ import annotations

import functools
import inspect
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import typer

from elasim.jobmodel import JobSpec

from .tools import UsageError, alias, parse_interval, parse_offset, parse_sets, run_guarded

__all__ = ["CHECKPOINT_PANEL", "SpecFlags", "parse_job_options", "with_spec"]

#: The help panel of the node bounds, checkpoints and deadline (a command's own
#: checkpoint flags join it: in its main panel, beside ``--no-plot``, their names were
#: cut to fit 80 columns).
CHECKPOINT_PANEL = "Nodes, checkpoints and deadline"


@dataclass(frozen=True)
class SpecFlags:
    """How one command presents the spec's flags.

    Attributes:
        exclude: fields the command does not take (their flags are not declared).
        trace_required: ``--trace`` has no default.
        trace: the default trace otherwise.
        job_help: what ``--job`` names for this command.
        max_nodes_help: what ``--max-nodes`` means for this command.
        start_offset: the default of ``--start-offset-s``.
        rescale: the default mechanism (None: the command decides).
        passthrough: flags whose raw values the command gets too, as ``flags`` (a
            command that must tell a flag given from its default, such as ``run
            --script``, which refuses the flags of elasim's own job).
        zones: ``--trace`` may repeat (a job in several zones) and the move's
            ``--checkpoint-size-gb`` and ``--transfer-gbps`` are declared.
    """

    exclude: tuple[str, ...] = ()
    trace_required: bool = False
    trace: str | None = "spot_us_east.csv"
    job_help: str = "The training job: a preset name or TOML path."
    max_nodes_help: str = "Most nodes the job may hold (default: the job's own)."
    start_offset: str | None = "0"
    rescale: str | None = "inplace"
    passthrough: tuple[str, ...] = ()
    zones: bool = False


def _opt(default: Any, *names: str, text: str = "", hidden: bool = False) -> Any:
    return typer.Option(default, *names, help=text or None, hidden=hidden)


def _what_runs(flags: SpecFlags) -> dict[str, tuple[Any, Any, str]]:
    """The trace, the policy and its options, the training job and its options."""
    trace_default = ... if flags.trace_required else [flags.trace] if flags.trace else None
    trace_help = "Bundled trace name or CSV path."
    if flags.zones:
        trace_help += " Repeat it for a job in several zones, one trace each."
    return {
        "trace": (
            list[str] | None,
            _opt(trace_default, "--trace", "-t", text=trace_help),
            "trace",
        ),
        "policy": (
            str,
            _opt("greedy", "--policy", "-p", text="Name, file.py:Class or module:Class."),
            "policy",
        ),
        "sets": (
            list[str] | None,
            _opt(None, "--set", text="Policy option key=value (repeatable)."),
            "policy_options",
        ),
        "job": (str | None, _opt(None, "--job", "-j", text=flags.job_help), "job"),
        "job_sets": (
            list[str] | None,
            _opt(None, "--job-set", text="Job factory option key=value (repeatable)."),
            "job_options",
        ),
        "seed": (int, _opt(0, "--seed", text="Seed for everything random."), "seed"),
    }


def _how_it_runs(flags: SpecFlags) -> dict[str, tuple[Any, Any, str]]:
    """Node bounds, the mechanism, the notice, checkpoints and the deadline."""
    interval_help = "Running time between checkpoints (trace s), 'auto' (Young/Daly) or 'off'."
    return {
        "min_nodes": (
            int | None,
            _opt(None, "--min-nodes", text="Fewest nodes the job runs on (default: its own)."),
            "min_nodes",
        ),
        "max_nodes": (
            int | None,
            _opt(None, "--max-nodes", text=flags.max_nodes_help),
            "max_nodes",
        ),
        "workers_max": (int | None, _opt(None, "--workers-max", hidden=True), "max_nodes"),
        "rescale": (
            str | None,
            _opt(flags.rescale, "--rescale", text="'inplace' or 'restart'."),
            "rescale",
        ),
        "notice_s": (
            float,
            _opt(0.0, "--notice-s", text="Preemption notice, trace seconds (AWS gives 120)."),
            "notice_s",
        ),
        "checkpoint_interval_s": (
            str,
            _opt("auto", "--checkpoint-interval-s", text=interval_help),
            "checkpoint_interval_s",
        ),
        "checkpoint_cost_s": (
            float | None,
            _opt(None, "--checkpoint-cost-s", text="Seconds per checkpoint (default: the job's)."),
            "checkpoint_cost_s",
        ),
        "deadline_h": (
            float | None,
            _opt(None, "--deadline-h", text="Deadline from the start, hours."),
            "deadline_s",
        ),
    }


def _where_and_price(flags: SpecFlags) -> dict[str, tuple[Any, Any, str]]:
    """The window in the trace and the prices."""
    offset_help = (
        "Where in the trace to start (trace seconds), or 'random' (from --seed); "
        f"default {flags.start_offset}."
    )
    return {
        "start_offset_s": (
            str | None,
            _opt(None, "--start-offset-s", text=offset_help),
            "start_offset_s",
        ),
        "trace_start_s": (
            float | None,
            _opt(None, "--trace-start-s", hidden=True),
            "start_offset_s",
        ),
        "on_demand_price": (
            float | None,
            _opt(None, "--on-demand-price-per-hour", text="USD per on-demand node-hour."),
            "on_demand_price_per_hour",
        ),
        "on_demand_price_old": (
            float | None,
            _opt(None, "--on-demand-price", hidden=True),
            "on_demand_price_per_hour",
        ),
        "spot_price": (
            float | None,
            _opt(None, "--spot-price-per-hour", text="Price of a trace without a price column."),
            "spot_price_per_hour",
        ),
    }


def _moves(flags: SpecFlags) -> dict[str, tuple[Any, Any, str]]:
    """What a move between zones transfers, and how fast (commands with zones only)."""
    if not flags.zones:
        return {}
    return {
        "checkpoint_size_gb": (
            float | None,
            _opt(
                None,
                "--checkpoint-size-gb",
                text="Checkpoint a zone move transfers, GB (default: the job's).",
            ),
            "checkpoint_size_gb",
        ),
        "transfer_gbps": (
            float,
            _opt(10.0, "--transfer-gbps", text="Bandwidth of a zone move, Gbit/s."),
            "transfer_gbps",
        ),
    }


#: The help panel of each group of flags.  A panel is a table of its own, sized to its
#: own flags: in one table with a command's (``--yardstick/--no-yardstick``), the long
#: names (``--on-demand-price-per-hour``) were cut to fit 80 columns.
_PANELS: tuple[tuple[str, Callable[[SpecFlags], dict[str, tuple[Any, Any, str]]]], ...] = (
    ("Trace, policy and job", _what_runs),
    (CHECKPOINT_PANEL, _how_it_runs),
    ("Start and prices", _where_and_price),
    ("Zone moves", _moves),
)


def _options(flags: SpecFlags) -> dict[str, tuple[Any, Any, str]]:
    """``name -> (type, typer option, spec field)`` of every flag (hidden aliases too)."""
    options = {}
    for panel, group in _PANELS:
        for name, (kind, option, field) in group(flags).items():
            option.rich_help_panel = panel
            options[name] = (kind, option, field)
    return options


def parse_job_options(raw: list[str] | None) -> dict[str, Any]:
    """``--job-set key=value``: booleans, integers and floats where they parse as such."""
    out: dict[str, Any] = {}
    for key, value in parse_sets(raw, "--job-set").items():
        lowered = value.lower()
        if lowered in ("true", "false"):
            out[key] = lowered == "true"
            continue
        for kind in (int, float):
            try:
                out[key] = kind(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


def _start_offset(values: Mapping[str, Any], default: str | None) -> float | None:
    """``--start-offset-s`` (or its old name, or the command's default); None: random."""
    text, old = values.get("start_offset_s"), values.get("trace_start_s")
    if text is None and old is None:
        return parse_offset(default)
    if text is not None and old is not None and parse_offset(text) != old:
        raise UsageError(
            f"--start-offset-s and --trace-start-s (its old name) disagree: {text} vs {old}"
        )
    return old if text is None else parse_offset(text)


def _spec(values: Mapping[str, Any], flags: SpecFlags) -> JobSpec:
    """The spec of the flags' values, each checked, errors naming the flag."""
    get = values.get
    deadline_h = get("deadline_h")
    if deadline_h is not None and not (math.isfinite(deadline_h) and deadline_h > 0):
        raise UsageError(f"--deadline-h must be > 0 hours, got {deadline_h:g}")
    offset = _start_offset(values, flags.start_offset)
    traces = list(get("trace") or [])
    if len(traces) > 1 and not flags.zones:
        raise UsageError("--trace is given once here (a job in several zones: elasim simulate)")
    return JobSpec(
        trace=traces[0] if traces else None,
        zone_traces=tuple(traces) if len(traces) > 1 else (),
        checkpoint_size_gb=get("checkpoint_size_gb"),
        transfer_gbps=get("transfer_gbps") or 10.0,
        policy=get("policy"),
        policy_options=parse_sets(get("sets")),
        job=get("job"),
        job_options=parse_job_options(get("job_sets")),
        min_nodes=get("min_nodes"),
        max_nodes=alias(get("max_nodes"), get("workers_max"), "--max-nodes", "--workers-max"),
        rescale=get("rescale") or "inplace",
        notice_s=get("notice_s") or 0.0,
        checkpoint_interval_s=parse_interval(get("checkpoint_interval_s", "auto")),
        checkpoint_cost_s=get("checkpoint_cost_s"),
        deadline_s=None if deadline_h is None else deadline_h * 3600.0,
        start_offset_s=offset,
        on_demand_price_per_hour=alias(
            get("on_demand_price"),
            get("on_demand_price_old"),
            "--on-demand-price-per-hour",
            "--on-demand-price",
        ),
        spot_price_per_hour=get("spot_price"),
        seed=get("seed") or 0,
    )


def with_spec(flags: SpecFlags = SpecFlags()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the spec's flags and call it with ``spec=JobSpec(...)``.

    The command is declared with its own options and a ``spec`` parameter; the
    returned command has its own options and the spec's (less ``flags.exclude``),
    and passes the raw ``rescale`` flag too when the command sets no default (so a
    command can choose by context, as ``run --script`` does).
    """
    options = {n: o for n, o in _options(flags).items() if o[2] not in flags.exclude}

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(fn)
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(fn).parameters.values()
            if p.name not in ("spec", "flags")
        ]
        declared = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=kind)
            for name, (kind, opt, _) in options.items()
        ]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in options}
            if flags.passthrough:
                kwargs["flags"] = {name: values.get(name) for name in flags.passthrough}
            spec = run_guarded(_spec, values, flags)
            return fn(spec=spec, **kwargs)

        command.__signature__ = inspect.Signature([*own, *declared])  # type: ignore[attr-defined]
        command.__annotations__ = {
            **{p.name: p.annotation for p in own},
            **{name: kind for name, (kind, _, _) in options.items()},
        }
        return command

    return decorate
