"""The tables of ``elasim sweep`` and ``elasim cluster sweep``, as text cells.

Both the terminal (a rich table) and ``report.html`` show these, so the cells are
made once, here: the two cannot disagree on a figure or its rounding.  A table is
one trace (or workload) wide, so that it fits an 80-column terminal, and its
headers are short words with the unit on their own line (``cost`` / ``(USD)``),
so that a narrow column breaks them between words, never inside one.

Library code: nothing here prints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .answers import group_label

__all__ = [
    "Column",
    "TextTable",
    "cell",
    "cluster_sweep_tables",
    "job_sweep_tables",
    "sweep_groups",
]


@dataclass(frozen=True)
class Column:
    """A column: its header (one line per line break) and whether it holds numbers."""

    header: str
    numeric: bool = True


@dataclass(frozen=True)
class TextTable:
    """A titled table of text cells.

    Attributes:
        title: e.g. the trace.
        columns: the columns, in order.
        rows: one tuple of cells per row (as many as ``columns``).
    """

    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]


def cell(value: Any, digits: int = 2, count: bool = False) -> str:
    """A figure as a cell: ``-`` for a missing one, a count without decimals when whole.

    Why ``count``: the median of whole numbers (rescales) is whole or ends in
    ``.5``; ``9.000`` read as a measured figure.
    """
    if value is None:
        return "-"
    number = float(value)
    if math.isnan(number):
        return "-"
    if count:
        return f"{number:,.0f}" if number.is_integer() else f"{number:,.1f}"
    return f"{number:,.{digits}f}"


def sweep_groups(frame: pd.DataFrame) -> tuple[str, ...]:
    """The columns one job-sweep table (and its answers) is per.

    The trace, plus the notice and the mechanism when the sweep varies them: pooling
    runs with and without notice into one median would answer no question.
    """
    extra = tuple(c for c in ("notice_s", "rescale") if c in frame and frame[c].nunique() > 1)
    return ("trace", *extra)


#: (column of the frame, header, decimals, is a count)
_JOB_FIGURES = (
    ("completion_time_h", "time\n(h)", 2, False),
    ("cost_usd", "cost\n(USD)", 2, False),
    ("lost_work_h", "lost\nwork (h)", 3, False),
    ("rescales", "rescales", 0, True),
)
_YARDSTICK_FIGURES = (
    ("cost_usd", "cost\n(USD)", 2, False),
    ("cost_vs_on_demand", "vs on-\ndemand", 2, False),
    ("gap_closed", "gap\nclosed", 2, False),
    ("cost_vs_greedy", "vs\ngreedy", 2, False),
    ("cost_vs_optimal", "vs\noptimal", 2, False),
)


def _runs_cell(rows: pd.DataFrame, deadline: bool) -> str:
    """``3/3``: runs that finished, or that met the deadline when there is one."""
    column = "deadline_met" if deadline else "completed"
    ok = int(rows[column].fillna(False).astype(bool).sum())
    return f"{ok}/{len(rows)}"


def _medians_table(
    title: str, rows: pd.DataFrame, figures: Sequence[tuple[str, str, int, bool]], deadline: bool
) -> TextTable:
    """A row per policy: the median of each figure over its runs, then the runs cell."""
    columns = (
        Column("policy", numeric=False),
        *(Column(header) for _, header, _, _ in figures),
        Column("on\ntime" if deadline else "done"),
    )
    body = []
    for policy, runs in rows.groupby("policy", sort=True):
        medians = [
            cell(runs[name].astype(float).median(), digits, count)
            for name, _, digits, count in figures
        ]
        body.append((str(policy), *medians, _runs_cell(runs, deadline)))
    return TextTable(title, columns, tuple(body))


def job_sweep_tables(frame: pd.DataFrame, by: Sequence[str] | None = None) -> tuple[TextTable, ...]:
    """One table per trace (per :func:`sweep_groups`): a row per policy, medians over runs.

    The last column counts the runs that finished (``done``), or, with a deadline,
    those that met it (``on time``).  With the yardstick's columns (a deadline), each
    trace's table is followed by a second one, ``TRACE: against the yardstick``: cost
    against the on-demand plan, the gap closed, against plain greedy and against the
    optimum.  Why a second table: with its four ratios in the first, it no longer
    fits an 80-column terminal.
    """
    by = tuple(by or sweep_groups(frame))
    deadline = "deadline_met" in frame and bool(frame["deadline_met"].notna().any())
    # a parquet from before issue 24 lacks cost_vs_greedy and cost_vs_optimal
    yardstick = [f for f in _YARDSTICK_FIGURES if f[0] in frame]
    tables = []
    for key, rows in frame.groupby(list(by) if len(by) > 1 else by[0], sort=True):
        title = group_label(by, key)
        tables.append(_medians_table(title, rows, _JOB_FIGURES, deadline))
        if "cost_vs_on_demand" in frame:
            title = f"{title}: against the yardstick"
            tables.append(_medians_table(title, rows, yardstick, deadline))
    return tuple(tables)


_CLUSTER_COLUMNS = (
    Column("policy", numeric=False),
    Column("avg JCT\n(s)"),
    Column("vs\nbest"),
    Column("p99 JCT\n(s)"),
    Column("GPU-h"),
    Column("GPU\nutil"),
    Column("rescales"),
    Column("done"),
)


def _cluster_rows(rows: pd.DataFrame) -> tuple[tuple[str, ...], ...]:
    best = float(rows["avg_jct_s"].min())
    return tuple(
        (
            str(row["policy"]),
            cell(row["avg_jct_s"], 0),
            cell(row["avg_jct_s"] / best, 2) if best > 0 else "-",
            cell(row["p99_jct_s"], 0),
            cell(row["gpu_hours"], 1),
            cell(row["gpu_utilization"], 3),
            cell(row["rescales"], count=True),
            f"{int(row['jobs_completed'])}/{int(row['jobs'])}",
        )
        for _, row in rows.iterrows()
    )


def cluster_sweep_tables(frame: pd.DataFrame) -> tuple[TextTable, ...]:
    """One table per workload (a row per policy), and the means over workloads.

    The means table comes only with several workloads; ``vs best`` is each policy's
    mean JCT over the lowest in that table.  Policies keep the grid's order.
    """
    order = list(dict.fromkeys(frame["policy"]))
    tables = [
        TextTable(str(workload), _CLUSTER_COLUMNS, _cluster_rows(rows))
        for workload, rows in frame.groupby("workload", sort=False)
    ]
    workloads = frame["workload"].nunique()
    if workloads > 1:
        figures = ["avg_jct_s", "p99_jct_s", "gpu_hours", "gpu_utilization", "rescales"]
        means = frame.groupby("policy", sort=False)[figures].mean()
        sums = frame.groupby("policy", sort=False)[["jobs_completed", "jobs"]].sum()
        table = means.join(sums).loc[order].reset_index()
        title = f"mean over the {workloads} workloads"
        tables.append(TextTable(title, _CLUSTER_COLUMNS, _cluster_rows(table)))
    return tuple(tables)
