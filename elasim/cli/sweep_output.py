"""What ``sweep`` and ``cluster sweep`` print and write besides their tables of runs.

The tables, the answers and the page are computed by the library
(:mod:`elasim.analysis.sweep_tables`, :mod:`elasim.analysis.answers`,
:mod:`elasim.analysis.report`); this module only draws them on the terminal and
writes ``report.html``, so the two commands look alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .tools import out_console

__all__ = ["print_answers", "print_tables", "rich_table", "shown_policies", "write_report"]


def rich_table(table: Any) -> Any:
    """A :class:`~elasim.analysis.sweep_tables.TextTable` as a rich table.

    Numbers never wrap (a cut figure is a wrong figure); the headers break only at
    their line breaks, and the policy column folds a long name rather than cut it,
    so the table fits an 80-column terminal whole.
    """
    from rich import box
    from rich.table import Table

    out = Table(title=table.title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in table.columns:
        if column.numeric:
            out.add_column(column.header, justify="right", no_wrap=True)
        else:
            out.add_column(column.header, overflow="fold")
    for row in table.rows:
        out.add_row(*row)
    return out


def print_tables(tables: Sequence[Any], notes: Sequence[str] = ()) -> None:
    """Each table, then the notes that say what its columns mean."""
    for table in tables:
        out_console.print(rich_table(table), highlight=False)
    for note in notes:
        out_console.print(note, highlight=False)


def print_answers(groups: Sequence[Any], heading: str) -> None:
    """The answer lines, under a heading, grouped by trace (or workload)."""
    from rich.padding import Padding
    from rich.text import Text

    out_console.print()
    out_console.print(Text(heading, style="bold"))
    for group in groups:
        out_console.print(Padding(Text(group.group, style="bold"), (0, 0, 0, 2), expand=False))
        for line in group.lines():
            out_console.print(Padding(Text(line), (0, 0, 0, 4), expand=False))


def shown_policies(frame: Any, kind: Any = None) -> Any:
    """``frame`` with each policy spec replaced by its label (``my_policy.py:X`` -> ``half``)."""
    from elasim.analysis.answers import policy_labels

    labels = policy_labels(frame["policy"].astype(str), kind)
    return frame.assign(policy=frame["policy"].astype(str).map(labels))


def write_report(
    out: Path,
    *,
    title: str,
    tables: Sequence[Any],
    answers: Sequence[Any],
    images: Sequence[tuple[str, str]],
    notes: Sequence[str] = (),
    tables_heading: str = "Medians",
) -> Path:
    """Write ``out/report.html`` (atomically), embedding the plots named in ``images``.

    ``images`` are ``(caption, file name in out)``; a plot that was not written
    (no run finished) is left out of the page.
    """
    from elasim.analysis.report import report_html
    from elasim.atomic import atomic_write_text

    pngs = [
        (caption, (out / name).read_bytes()) for caption, name in images if (out / name).exists()
    ]
    page = report_html(
        title=title,
        tables=tables,
        answers=answers,
        images=pngs,
        notes=notes,
        tables_heading=tables_heading,
    )
    return atomic_write_text(out / "report.html", page)
