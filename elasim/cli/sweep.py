"""``elasim sweep``: policies x traces x seeds in parallel, a tidy table and a Pareto plot."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from elasim.jobmodel import JobSpec

from .progress import counted_progress
from .spec_options import SpecFlags, with_spec
from .sweep_output import print_answers, print_tables, shown_policies, write_report
from .tools import (
    UsageError,
    ensure_writable_dir,
    err_console,
    nonnegative,
    one_of,
    out_console,
    split_list,
)
from .tools import fail as _fail
from .tools import json_safe as _json_safe
from .tools import run_guarded as _run_guarded

__all__ = ["parse_seeds", "register"]

DEFAULT_JOB = "resnet50_v100"


def parse_seeds(text: str) -> list[int]:
    """``0,1,2`` or ``0-9`` (ranges ascend, seeds are >= 0; else a one-line error)."""
    seeds: list[int] = []
    for part in split_list(text, "--seeds"):
        low, sep, high = part.partition("-")
        try:
            if sep:
                first, last = int(low), int(high)
                if last < first:
                    raise UsageError(f"--seeds range {part!r} runs backwards; write {last}-{first}")
                seeds.extend(range(first, last + 1))
            else:
                seeds.append(int(part))
        except ValueError as exc:
            if isinstance(exc, UsageError):
                raise
            raise UsageError(f"--seeds expects '0,1,2' or '0-9', got {text!r}") from None
    if any(seed < 0 for seed in seeds):
        raise UsageError(f"--seeds must be >= 0, got {text!r}")
    return seeds


@with_spec(
    SpecFlags(
        exclude=("trace", "policy", "seed", "notice_s", "rescale", "job_options"),
        start_offset="random",
    )
)
def sweep(
    spec: JobSpec,
    traces: str = typer.Option(..., "--traces", help="Comma-separated trace names or paths."),
    policies: str = typer.Option("all", "--policies", help="Comma-separated policies, or 'all'."),
    seeds: str = typer.Option("0", "--seeds", help="Seeds: '0,1,2' or a range '0-9'."),
    notice_s: str = typer.Option(
        "0", "--notice-s", help="Preemption notice(s), trace s, comma-separated."
    ),
    rescale: str = typer.Option("inplace", "--rescale", help="One or more, comma-separated."),
    cluster_gpus: int | None = typer.Option(
        None, "--cluster-gpus", help="Cluster size, for a shared-cluster job trace."
    ),
    workers: int = typer.Option(0, "--workers", help="Processes (0: one per core)."),
    backend: str = typer.Option("local", "--backend", help="'local' processes or 'ray'."),
    address: str | None = typer.Option(
        None, "--address", help="Ray cluster address (with --backend ray; default: start one)."
    ),
    out: Path = typer.Option(Path("sweep-out"), "--out", "-o", help="Output folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON lines."),
) -> None:
    """Run policies x traces x seeds in parallel; print the answers; write a report.

    Each seed draws its own random start offset in the trace (the Can't
    Be Late methodology) unless --start-offset-s gives one.  --set options
    go to every policy that has them.

    Prints a table of medians per trace, then the answers: the cheapest,
    the fastest and (with --deadline-h) the cheapest that meets the
    deadline, and which policies ran identically.  --out gets
    sweep.parquet, pareto.png and report.html.
    """
    _sweep(**locals())


def _spec(
    *,
    spec: JobSpec,
    traces: str,
    policies: str,
    seeds: str,
    notice_s: str,
    rescale: str,
    cluster_gpus: int | None,
) -> Any:
    """The grid's flags checked and turned into a :class:`~elasim.sweep.SweepSpec`."""
    from elasim.policies import oracle_names, policy_names
    from elasim.sweep import SweepSpec

    if policies.strip() == "all":  # the oracles need a deadline
        names = policy_names() + (oracle_names() if spec.deadline_s is not None else [])
    else:
        names = split_list(policies, "--policies")
    try:
        notices = tuple(float(x) for x in split_list(notice_s, "--notice-s"))
    except ValueError:
        raise UsageError(f"--notice-s must be seconds, comma-separated, got {notice_s!r}") from None
    for notice in notices:
        nonnegative(notice, "--notice-s")
    for mode in split_list(rescale, "--rescale"):
        one_of(mode, ("inplace", "restart"), "--rescale")
    if cluster_gpus is not None and cluster_gpus < 1:
        raise UsageError(f"--cluster-gpus must be >= 1, got {cluster_gpus}")
    return SweepSpec(
        traces=tuple(split_list(traces, "--traces")),
        policies=tuple(names),
        seeds=tuple(parse_seeds(seeds)),
        notice_s=notices,
        rescale=tuple(split_list(rescale, "--rescale")),
        base=spec.replace(job=spec.job or DEFAULT_JOB),
        cluster_gpus=cluster_gpus,
    )


def _sweep(
    *, workers: int, backend: str, address: str | None, out: Path, as_json: bool, **flags: Any
) -> None:
    """The body of ``sweep``: check everything, run the grid, write and print."""
    from elasim.output import write_parquet
    from elasim.sweep import BACKENDS, run_sweep

    if workers < 0:
        raise _fail(f"--workers must be >= 0, got {workers}")
    spec = _run_guarded(_spec, **flags)
    _run_guarded(spec.validate)
    if backend not in BACKENDS:
        raise _fail(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    _run_guarded(ensure_writable_dir, out, "--out")

    def grid() -> Any:
        # on stderr, with --json too: a bar on a terminal, else a line every few seconds
        with counted_progress(err_console, "simulating", spec.total_points) as tick:
            return run_sweep(
                spec, workers=workers or None, on_done=tick, backend=backend, address=address
            )

    frame = _run_guarded(grid)
    _run_guarded(write_parquet, out / "sweep.parquet", frame)
    # every file first, the same with or without --json: a JSON run's --out is the same
    report = _run_guarded(_write_report, frame, spec, out)
    if as_json:
        for row in frame.to_dict(orient="records"):
            sys.stdout.write(json.dumps(_json_safe(row)) + "\n")
        return
    _print_report(report, out)


def _notes(frame: Any, spec: Any) -> list[str]:
    """What the table's columns mean, under it."""
    start = spec.base.start_offset_s
    offsets = "random per seed" if start is None else f"{start:g} s"
    notes = [f"start offsets in the traces: {offsets}; medians over {len(spec.seeds)} seed(s)"]
    if spec.base.deadline_s is not None:
        notes.append(f"on time: runs that met the {spec.base.deadline_s / 3600:g} h deadline")
    if "cost_vs_on_demand" in frame:
        notes.append(
            "vs on-demand (cost_vs_on_demand): cost / cheapest pure on-demand plan that "
            "meets the deadline; gap closed (gap_closed): share of the gap between greedy "
            "with fallback "
            "(greedy --set deadline_fallback=true) and the offline optimum closed "
            "(1: optimal; '-': deadline missed or no gap); vs greedy (cost_vs_greedy): "
            "cost / plain greedy's, which may miss the deadline (greedy_met); vs optimal "
            "(cost_vs_optimal): cost / the offline optimum's"
        )
    return notes


@dataclass(frozen=True)
class _Report:
    """What ``report.html`` holds, kept for the terminal (which prints it the same)."""

    title: str
    tables: tuple[Any, ...]
    answers: tuple[Any, ...]
    notes: tuple[str, ...]


def _write_report(frame: Any, spec: Any, out: Path) -> _Report:
    """Write pareto.png and report.html (with or without ``--json``); return the report."""
    from elasim.analysis.answers import sweep_answers
    from elasim.analysis.plots import plot_pareto
    from elasim.analysis.sweep_tables import job_sweep_tables, sweep_groups
    from elasim.policies import oracle_names

    shown = shown_policies(frame)
    by = sweep_groups(shown)
    deadline_h = None if spec.base.deadline_s is None else spec.base.deadline_s / 3600
    report = _Report(
        title=f"sweep: {spec.size} simulations (medians over seeds)",
        tables=tuple(job_sweep_tables(shown, by)),
        answers=tuple(sweep_answers(shown, by=by, deadline_h=deadline_h, leave_out=oracle_names())),
        notes=tuple(_notes(frame, spec)),
    )
    plot_pareto(shown, out / "pareto.png", by=by)
    write_report(
        out,
        title=report.title,
        tables=report.tables,
        answers=report.answers,
        images=[("cost vs completion time, per trace", "pareto.png")],
        notes=report.notes,
    )
    return report


def _print_report(report: _Report, out: Path) -> None:
    """The tables, what was written, and the answers, on stdout."""
    out_console.print(report.title, style="bold", highlight=False)
    print_tables(report.tables, report.notes)
    out_console.print(f"wrote {out}/sweep.parquet, pareto.png and report.html", highlight=False)
    heading = "answers (medians over seeds; unfinished runs and oracles do not count)"
    print_answers(report.answers, heading)


def register(app: typer.Typer) -> None:
    """Add ``sweep`` to the ``elasim`` app."""
    app.command("sweep")(sweep)
