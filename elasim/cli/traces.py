"""``elasim traces list|show|validate|import``: the traces commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from .tools import fmt as _fmt
from .tools import json_safe as _json_safe
from .tools import out_console, parse_sets
from .tools import run_guarded as _run_guarded

__all__ = ["traces_app"]

traces_app = typer.Typer(help="List, inspect, validate and import traces.", no_args_is_help=True)


@traces_app.command("list")
def traces_list() -> None:
    """List the bundled traces."""
    from elasim.traces import bundled_traces

    out_console.print(traces_table(_run_guarded(bundled_traces)))


#: Characters of a trace's source shown by ``traces list`` (two lines at 80 columns).
_SOURCE_CHARS = 120


def traces_table(infos: Any) -> Any:
    """The ``traces list`` output: a table of numbers, then each source, abridged.

    Why the sources below the table: at 80 columns a source column is 20 characters
    wide, so sources were cut mid-word ("availabil…") or took eight lines a trace.
    Below, each wraps at word boundaries over the full width; commits are shortened
    to 7 digits as git shows them, and the text ends after a whole word.
    """
    import re

    from rich.console import Group
    from rich.text import Text

    table = Table(title="bundled traces")
    table.add_column("name", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    for column in ("rows", "hours", "max"):
        table.add_column(column, justify="right", no_wrap=True)
    sources = Table.grid(padding=(0, 1))
    sources.add_column(no_wrap=True)
    sources.add_column(ratio=1)
    for info in infos:
        table.add_row(
            info.name, info.kind, _fmt(info.rows), _fmt(info.duration_h, 1), _fmt(info.max_value)
        )
        source = re.sub(r"@([0-9a-f]{7})[0-9a-f]{33}", r"@\1", info.source)
        if len(source) > _SOURCE_CHARS:
            source = source[: _SOURCE_CHARS + 1].rsplit(" ", 1)[0] + " …"
        sources.add_row(f"{info.name}:", source)
    return Group(table, Text("sources (abridged; provenance in traces/README.md):"), sources)


@traces_app.command("show")
def traces_show(
    name: str = typer.Argument(..., help="Bundled trace name or CSV path."),
    out: Path | None = typer.Option(None, "--out", "-o", help="PNG path for the plot."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Summarise a trace and plot it (a file with a ``zone`` column: each zone)."""
    from elasim.traces import plot_trace, summarize
    from elasim.traces.zones import ZoneSet, load_zones

    loaded = _run_guarded(load_zones, [name])
    png = out or Path(f"{Path(name).stem}.png")
    if not isinstance(loaded, ZoneSet):
        summaries, plots = {"": summarize(loaded)}, {"": png}
        _run_guarded(plot_trace, loaded, png)
    else:  # one summary column and one plot per zone
        summaries = {zone.name: summarize(zone) for zone in loaded.traces}
        plots = {
            z.name: png.with_name(f"{png.stem}-{_file_safe(z.name)}{png.suffix}")
            for z in loaded.traces
        }
        for zone in loaded.traces:
            _run_guarded(plot_trace, zone, plots[zone.name])
    if as_json:
        if "" in summaries:
            payload = {**summaries[""], "plot": str(png)}
        else:
            payload = {"zones": summaries, "plots": {k: str(v) for k, v in plots.items()}}
        sys.stdout.write(json.dumps(_json_safe(payload)) + "\n")
        return
    table = Table(title=f"{name}")
    table.add_column("field")
    for zone in summaries:
        table.add_column(zone or "value", justify="right")
    for key in next(iter(summaries.values())):
        cells = [summary.get(key) for summary in summaries.values()]
        table.add_row(
            key, *(_fmt(v) if not isinstance(v, dict | list) else json.dumps(v) for v in cells)
        )
    out_console.print(table)
    out_console.print("plot: " + ", ".join(str(p) for p in plots.values()))


def _file_safe(name: str) -> str:
    """A zone's name as part of a file name (a zone may be called ``us/a``)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "zone"


@traces_app.command("validate")
def traces_validate(path: str = typer.Argument(..., help="Trace CSV to check.")) -> None:
    """Check a trace file; print one line and exit 2 if it is malformed.

    A file with a ``zone`` column is checked as ``simulate`` reads it: every zone.
    """
    from elasim.traces.zones import ZoneSet, load_zones

    trace = _run_guarded(load_zones, [path])
    if isinstance(trace, ZoneSet):
        zones = ", ".join(f"{z.name} ({len(z.time_s):,} rows)" for z in trace.traces)
        out_console.print(f"{path}: ok (capacity trace in {len(trace.traces)} zones: {zones})")
        return
    rows = len(trace.time_s) if hasattr(trace, "available") else len(trace.submit_time_s)
    out_console.print(f"{path}: ok ({trace.kind} trace, {rows:,} rows)")


_WHERE_OPTION = typer.Option(
    None,
    "--where",
    help="csv: keep only rows where COLUMN OP VALUE holds, OP one of == != >= <= > < "
    "(repeatable, all must hold), e.g. --where 'gpu>0' --where status==Terminated. "
    "Parsed, never evaluated.",
)
_SKIP_INVALID_OPTION = typer.Option(
    False,
    "--skip-invalid",
    help="csv: leave out rows that fail validation (say, a 0 s duration or an empty GPU "
    "cell) instead of stopping at the first; prints how many, per reason.",
)
_MAP_OPTION = typer.Option(
    None,
    "--map",
    help="csv: field=column (repeatable): time, available | fail, price; "
    "or submit, duration | end, gpus, priority. Columns: header names or 1-based indexes.",
)
_OPT_OPTION = typer.Option(
    None,
    "--opt",
    help="Importer option key=value (repeatable); `elasim traces formats` lists each "
    "format's options and what they mean.",
)


@traces_app.command("import")
def traces_import(
    input_path: str = typer.Argument(
        ..., metavar="IN", help="Source file (or several, comma-separated)."
    ),
    output_path: Path = typer.Argument(..., metavar="OUT", help="Canonical CSV to write."),
    fmt: str = typer.Option(
        ...,
        "--format",
        "-f",
        help="skypilot | bamboo | aws-price | philly | csv | skypilot-raw",
    ),
    maps: list[str] | None = _MAP_OPTION,
    options: list[str] | None = _OPT_OPTION,
    where: list[str] | None = _WHERE_OPTION,
    skip_invalid: bool = _SKIP_INVALID_OPTION,
    base: str | None = typer.Option(
        None, "--base", help="aws-price: capacity trace to add prices to."
    ),
    zone: str | None = typer.Option(None, "--zone", help="aws-price: availability zone."),
    instance_type: str | None = typer.Option(
        None, "--instance-type", help="Instance type metadata/filter."
    ),
    region: str | None = typer.Option(None, "--region", help="Region metadata."),
    start: str | None = typer.Option(
        None, "--start", help="aws-price/philly: start timestamp (UTC)."
    ),
) -> None:
    """Convert a real trace format into elasim's canonical CSV."""
    from elasim.traces import import_trace

    opts: dict[str, Any] = {
        "map": ",".join(maps) if maps else None,
        "where": list(where) if where else None,
        "skip_invalid": True if skip_invalid else None,
        "base": base,
        "zone": zone,
        "instance_type": instance_type,
        "region": region,
        "start": start,
    }

    def run() -> Any:
        given = {k: v for k, v in opts.items() if v is not None}
        inputs = input_path.split(",") if "," in input_path else input_path
        return import_trace(fmt, inputs, output_path, **{**parse_sets(options, "--opt"), **given})

    _print_imported(_run_guarded(run), output_path)


def _print_imported(trace: Any, output_path: Path) -> None:
    """What ``import`` wrote: rows, the rows it left out per reason, GPUs rounded up."""
    from elasim.traces import rows_left_out

    rows = len(trace.time_s) if hasattr(trace, "available") else len(trace.submit_time_s)
    noun = "row" if rows == 1 else "rows"
    out_console.print(f"wrote {output_path} ({trace.kind} trace, {rows:,} {noun})", soft_wrap=True)
    for reason, count in rows_left_out(trace.metadata):
        plural = "s" if count != 1 else ""
        out_console.print(f"left out {count:,} row{plural}: {reason}", soft_wrap=True)
    rounded = dict(trace.metadata.extra).get("gpus_rounded_up")
    if rounded:
        out_console.print(f"rounded {rounded} fractional GPU counts up to whole GPUs")


@traces_app.command("formats")
def traces_formats() -> None:
    """List the import formats and each one's --opt options, with what they mean."""
    from elasim.traces import IMPORT_FORMATS, importer_options

    for fmt in IMPORT_FORMATS:
        table = Table(title=f"--format {fmt}", title_justify="left", show_edge=False)
        table.add_column("--opt", no_wrap=True)
        table.add_column("type")
        table.add_column("default")
        table.add_column("meaning")
        for option in importer_options(fmt):
            default = "-" if option.default is None else str(option.default)
            table.add_row(option.name, option.type_name, default, option.doc)
        out_console.print(table)
        out_console.print()
