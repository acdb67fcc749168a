"""Importers: published trace formats -> the canonical capacity/job traces.

``import_trace(fmt, in_path, out_path=None, **opts)`` is what
``elasim traces import --format F IN OUT`` calls.  The formats, their options and
every choice they make are documented per function below and in
``traces/README.md``:

* ``skypilot``: Can't Be Late / SkyPilot spot JSON (``metadata.gap_seconds``,
  ``data``, optional ``prices``) -> capacity trace (:func:`import_skypilot`).
* ``bamboo``: Bamboo / Parcae headerless node-event CSV ``ms,add|remove,node`` ->
  capacity trace (:func:`import_bamboo`).
* ``aws-price``: AWS ``describe-spot-price-history`` JSON, spliced as the price
  column of an existing capacity trace (:func:`import_aws_price`).
* ``philly``: Pollux-condensed Philly CSV
  (``timestamp,duration,num_gpus,gpu_time,cluster``) -> job trace
  (:func:`import_philly`).
* ``csv``: any CSV, its columns named by ``map`` (``time=2,fail=3``,
  ``submit=start,end=finish,gpus=gpu``) -> capacity or job trace
  (:func:`~.from_csv.import_csv`), without writing code.
* ``skypilot-raw``: the raw Can't Be Late probe logs (``idx,ISO-time,fail``), a
  preset of ``csv``.

Each format has its own module (``from_skypilot``, ``from_bamboo``,
``from_aws_price``, ``from_philly``, sharing ``import_common``); their functions are
re-exported here.

Every problem, including a file of the wrong format, becomes a
:class:`~.errors.TraceError` (never a traceback).  JSON inputs report the parser's
line and column for syntax errors and a JSON path such as ``data[17]`` as the
column for bad values (the ``json`` module keeps no per-value line numbers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cells import CellError, parse_float, parse_int
from .errors import TraceError
from .from_aws_price import import_aws_price
from .from_bamboo import import_bamboo
from .from_csv import PRESETS, import_csv
from .from_philly import POLLUX_MAX_GPU_TIME_S, POLLUX_MIN_DURATION_S, import_philly
from .from_skypilot import import_skypilot
from .import_common import PathLike, _show
from .model import CapacityTrace, JobTrace
from .writer import write_trace

__all__ = [
    "IMPORT_FORMATS",
    "POLLUX_MAX_GPU_TIME_S",
    "POLLUX_MIN_DURATION_S",
    "ImporterOption",
    "import_aws_price",
    "import_bamboo",
    "import_csv",
    "import_philly",
    "import_skypilot",
    "import_trace",
    "importer_options",
]

#: Formats understood by :func:`import_trace`.
IMPORT_FORMATS: tuple[str, ...] = (
    "skypilot",
    "bamboo",
    "aws-price",
    "philly",
    "csv",
    "skypilot-raw",
)


# --------------------------------------------------------------------------- options
@dataclass(frozen=True)
class ImporterOption:
    """One ``key=value`` option of an importer (for ``--help`` and validation).

    Attributes:
        name: Keyword name.
        type_name: ``str``, ``int``, ``float``, ``bool``, ``list`` (comma separated),
            ``timestamp`` (ISO 8601) or ``trace`` (bundled name, path or object).
        default: Default value (``None``: unset / derived, see ``doc``).
        doc: One-line description.
    """

    name: str
    type_name: str
    default: Any
    doc: str


_COMMON = (
    ImporterOption("name", "str", None, "trace name (default: output or input file stem)"),
    ImporterOption("source", "str", None, "provenance one-liner for '# source:'"),
)
_NODE_META = (
    ImporterOption("instance_type", "str", None, "instance type of one node, e.g. p3.2xlarge"),
    ImporterOption("region", "str", None, "cloud region, e.g. us-east-2"),
    ImporterOption("gpus_per_node", "int", 1, "GPUs per node"),
    ImporterOption(
        "on_demand_price_per_hour", "float", None, "USD per node-hour of an on-demand node"
    ),
)

_CSV_READ = (
    ImporterOption("time_unit", "str", "s", "unit of plain-number times: s, ms, min or h"),
    ImporterOption(
        "where",
        "list",
        None,
        "keep rows where COLUMN OP VALUE holds (== != >= <= > <), e.g. gpu>0; all must hold",
    ),
    ImporterOption(
        "skip_invalid", "bool", False, "leave out rows that fail validation, counted per reason"
    ),
    ImporterOption(
        "start", "str", None, "trace time 0: a timestamp or number like the time column's"
    ),
    ImporterOption("nodes", "int", 1, "nodes obtainable when a fail flag is not 1"),
    ImporterOption(
        "duration_s", "float", None, "trace length (default: last row + median gap between rows)"
    ),
)
_CSV = (
    ImporterOption("map", "list", None, "field=column pairs, e.g. time=2,fail=3 (required)"),
    ImporterOption("header", "bool", None, "first line is a header (default: if map uses names)"),
)

_OPTIONS: dict[str, tuple[ImporterOption, ...]] = {
    "csv": _COMMON + _NODE_META + _CSV + _CSV_READ,
    "skypilot-raw": _COMMON + _NODE_META + _CSV_READ,
    "skypilot": _COMMON + _NODE_META,
    "bamboo": _COMMON
    + _NODE_META
    + (
        ImporterOption(
            "duration_s",
            "float",
            None,
            "trace length (default: last event + median gap between event times)",
        ),
    ),
    "aws-price": _COMMON
    + (
        ImporterOption("base", "trace", None, "capacity trace that receives the price (required)"),
        ImporterOption("zone", "str", None, "availability zone, e.g. us-east-2b"),
        ImporterOption("instance_type", "str", None, "default: the base trace's instance_type"),
        ImporterOption(
            "start", "timestamp", None, "UTC time of trace t=0 (default: first price record)"
        ),
        ImporterOption("product", "str", "Linux/UNIX", "ProductDescription to keep"),
        ImporterOption(
            "on_demand_price_per_hour", "float", None, "override the base trace's value"
        ),
    ),
    "philly": _COMMON
    + (
        ImporterOption("cluster", "list", None, "keep only these virtual clusters"),
        ImporterOption("start", "timestamp", None, "keep jobs submitted at or after (local)"),
        ImporterOption("end", "timestamp", None, "keep jobs submitted before (local)"),
        ImporterOption(
            "pollux_filter", "bool", False, "Pollux's filter: duration>=60 s, gpu_time<1000 GPU-h"
        ),
    ),
}


def importer_options(fmt: str) -> tuple[ImporterOption, ...]:
    """The options :func:`import_trace` accepts for ``fmt``."""
    _check_format(fmt)
    return _OPTIONS[fmt]


def _check_format(fmt: str) -> None:
    if fmt not in _OPTIONS:
        raise TraceError(f"unknown import format {fmt!r}; known: {', '.join(IMPORT_FORMATS)}")


def _convert_option(fmt: str, opt: ImporterOption, value: Any) -> Any:
    """Accept typed values (Python callers) and strings (the CLI's ``key=value``)."""
    if value is None:
        return None

    def bad(msg: str) -> TraceError:
        return TraceError(f"{fmt} option {opt.name}={_show(value)}: {msg}")

    if not isinstance(value, str):
        if opt.type_name == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise bad("expected an integer")
        if opt.type_name == "float" and (
            isinstance(value, bool) or not isinstance(value, (int, float))
        ):
            raise bad("expected a number")
        if opt.type_name == "bool" and not isinstance(value, bool):
            raise bad("expected true or false")
        if opt.type_name == "list" and isinstance(value, Sequence):
            return tuple(str(v) for v in value)
        return value
    text = value.strip()
    try:
        if opt.type_name == "int":
            return parse_int(text)
        if opt.type_name == "float":
            return parse_float(text)
        if opt.type_name == "bool":
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise CellError("expected true or false")
        if opt.type_name == "list":
            items = tuple(v.strip() for v in text.split(",") if v.strip())
            if not items:
                raise CellError("empty list")
            return items
    except CellError as exc:
        raise bad(str(exc)) from None
    if not text:
        raise bad("empty value")
    return text


def import_trace(
    fmt: str,
    in_path: PathLike | Sequence[PathLike],
    out_path: PathLike | None = None,
    **opts: Any,
) -> CapacityTrace | JobTrace:
    """Convert a published trace into elasim's canonical format.

    Args:
        fmt: One of :data:`IMPORT_FORMATS`.
        in_path: Input file.  ``aws-price`` also takes a directory (every ``*.json``
            in it) or a list of files, because AWS price history comes in windows.
        out_path: If given, the result is also written there (atomically).
        **opts: Format options (:func:`importer_options`); values may be strings, as
            the CLI passes them, or typed Python values.

    Returns:
        The imported trace (also written to ``out_path`` when given).

    Raises:
        TraceError: unknown format or option, unreadable or malformed input.
    """
    _check_format(fmt)
    known = {o.name: o for o in _OPTIONS[fmt]}
    kwargs: dict[str, Any] = {}
    for key, value in opts.items():
        if key not in known:
            raise TraceError(
                f"unknown option {key!r} for format {fmt}; known: {', '.join(sorted(known))}"
            )
        kwargs[key] = _convert_option(fmt, known[key], value)
    if kwargs.get("name") is None:
        kwargs["name"] = Path(out_path).stem if out_path is not None else None
    if fmt in PRESETS:
        for key, value in PRESETS[fmt].items():
            kwargs[key] = _convert_option(fmt, {o.name: o for o in _CSV}[key], value)
    func: Callable[..., CapacityTrace | JobTrace] = {
        "skypilot": import_skypilot,
        "bamboo": import_bamboo,
        "aws-price": import_aws_price,
        "philly": import_philly,
        "csv": import_csv,
        "skypilot-raw": import_csv,
    }[fmt]
    trace = func(in_path, **kwargs)
    if out_path is not None:
        try:
            write_trace(trace, out_path)
        except OSError as exc:
            raise TraceError(f"cannot write: {exc.strerror or exc}", out_path) from None
    return trace
