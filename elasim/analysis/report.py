"""``report.html``: a sweep's tables, answers and plots in one self-contained page.

Why one file with everything inline (CSS in a ``<style>``, plots as base64 PNG
``data:`` URLs, no script, no font, no link): it is mailed, attached to a ticket
or opened from an archive years later, where nothing beside it can be counted on.
The page is a pure function of its inputs, with no timestamp, so the same sweep
gives the same bytes.

Library code: this builds the text; the command line writes it (atomically).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

from .answers import GroupAnswers
from .sweep_tables import Column, TextTable

__all__ = ["report_html"]

_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  margin: 2em auto; max-width: 70em; padding: 0 1em; color: #1b1b1b; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.4em 0 1em; }
caption { text-align: left; font-weight: 600; padding: 0.3em 0; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #ddd; }
th { background: #f3f3f3; vertical-align: bottom; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
ul.answers { list-style: none; padding-left: 0; }
ul.answers li { margin: 0.15em 0; }
.group { font-weight: 600; margin: 0.8em 0 0.2em; }
.note { color: #555; font-size: 0.92em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.92em; }
""".strip()


def _num(column: Column) -> str:
    return ' class="num"' if column.numeric else ""


def _table(table: TextTable) -> str:
    heads = "".join(
        f"<th{_num(c)}>" + "<br>".join(html.escape(part) for part in c.header.split("\n")) + "</th>"
        for c in table.columns
    )
    body = "\n".join(
        "<tr>"
        + "".join(
            f"<td{_num(c)}>{html.escape(value)}</td>"
            for c, value in zip(table.columns, row, strict=True)
        )
        + "</tr>"
        for row in table.rows
    )
    caption = html.escape(table.title)
    return f"<table>\n<caption>{caption}</caption>\n<tr>{heads}</tr>\n{body}\n</table>"


def _answers(groups: Sequence[GroupAnswers]) -> str:
    parts = []
    for group in groups:
        items = "\n".join(f"<li>{html.escape(line)}</li>" for line in group.lines())
        parts.append(
            f'<p class="group">{html.escape(group.group)}</p>\n<ul class="answers">\n{items}\n</ul>'
        )
    return "\n".join(parts)


def _figure(caption: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    text = html.escape(caption)
    return (
        f'<figure><img alt="{text}" src="data:image/png;base64,{data}">'
        f"<figcaption>{text}</figcaption></figure>"
    )


def report_html(
    *,
    title: str,
    tables: Sequence[TextTable],
    answers: Sequence[GroupAnswers],
    images: Sequence[tuple[str, bytes]] = (),
    notes: Sequence[str] = (),
    tables_heading: str = "Medians",
) -> str:
    """The page: title, a link to the plots, answers, tables, notes, then the plots.

    Why the link: the plots come after every table, below the fold of a sweep's
    page, where a reader did not know to look.

    Args:
        title: the page's heading (and ``<title>``).
        tables: as printed on the terminal.
        answers: the answer lines, per group.
        images: ``(caption, PNG bytes)`` per plot, embedded as ``data:`` URLs.
        notes: lines shown under the tables (what a column means).
        tables_heading: the tables' heading (a cluster sweep has one run per
            cell, not medians).

    Returns:
        The HTML text (UTF-8, LF line ends, no external resource).
    """
    sections = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head>\n<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>\n{_STYLE}\n</style>\n</head>",
        "<body>",
        f"<h1>{html.escape(title)}</h1>",
        *(['<p class="jump"><a href="#plots">Plots below the tables</a></p>'] if images else []),
        "<h2>Answers</h2>",
        _answers(answers),
        f"<h2>{html.escape(tables_heading)}</h2>",
        *(_table(t) for t in tables),
        *(f'<p class="note">{html.escape(n)}</p>' for n in notes),
    ]
    if images:
        sections.append('<h2 id="plots">Plots</h2>')
        sections += [_figure(caption, png) for caption, png in images]
    sections += ["</body>", "</html>", ""]
    return "\n".join(sections)
