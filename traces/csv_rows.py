"""Which rows of a generic CSV the importer keeps: ``where`` filters and ``skip_invalid``.

Why a module apart from :mod:`.from_csv`: real tables hold rows that are not part of
the trace one wants (Alibaba's GPU pods without a GPU, a pending pod that ran 0 s).
Users used to cut them with ``awk`` before importing; here they say so with the
import instead, and the trace records what was left out and why (``# rows_left_out:``),
so the provenance of the imported file stays honest.

* A ``where`` clause is ``COLUMN OP VALUE`` with ``OP`` one of ``== != >= <= > <``
  (``=`` means ``==``).  It is parsed, never evaluated: the column is a header name
  or a 1-based index, as in ``map``.  Ordering operators compare numbers (a cell that
  is not a number does not match); ``==`` and ``!=`` compare numbers when both sides
  are numbers, else text.  Every clause must hold for a row to be kept.
* ``skip_invalid`` leaves out the rows whose mapped cells fail the checks the
  importer would otherwise stop at (too few columns, not a number or time, a count
  that is not whole, a duration or GPU count that is not > 0), counted per reason.
  Rows out of time order are still an error: which one is wrong is not knowable.
"""

from __future__ import annotations

import math
import operator
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from .cells import CellError, parse_float
from .errors import TraceError
from .model import TraceMetadata

__all__ = ["LEFT_OUT_KEY", "WhereClause", "left_out_text", "parse_where", "rows_left_out"]

#: The ``extra`` metadata key that records the rows an import left out.
LEFT_OUT_KEY = "rows_left_out"

Rows = list[tuple[int, list[str]]]

_CLAUSE = re.compile(r"^\s*(?P<column>[^<>=!]+?)\s*(?P<op>==|!=|>=|<=|>|<|=)\s*(?P<value>.*?)\s*$")
_ORDERING = {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le}


@dataclass(frozen=True)
class WhereClause:
    """One parsed ``--where`` clause.

    Attributes:
        column: the column as given: a header name or a 1-based index.
        op: ``==``, ``!=``, ``>=``, ``<=``, ``>`` or ``<``.
        value: the text on the right.
        number: ``value`` as a number, or None when it is not one.
    """

    column: str
    op: str
    value: str
    number: float | None

    @property
    def text(self) -> str:
        """The clause as the user would write it (used in counts and provenance)."""
        return f"{self.column}{self.op}{self.value}"

    def matches(self, cell: str) -> bool:
        """Whether a cell satisfies the clause."""
        cell_number = _number(cell)
        if self.op in _ORDERING:
            if cell_number is None or self.number is None:
                return False
            return _ORDERING[self.op](cell_number, self.number)
        if cell_number is not None and self.number is not None:
            same = cell_number == self.number
        else:
            same = cell.strip() == self.value
        return same if self.op == "==" else not same


def parse_where(text: str) -> WhereClause:
    """A clause ``COLUMN OP VALUE``, or a :class:`TraceError` saying what is expected."""
    match = _CLAUSE.match(str(text))
    if match is not None and match["value"][:1] in ("<", ">", "=", "!"):
        hint = ""
        if match["op"] == "=":  # 'gpu=>0': the two characters of '>=' the other way round
            meant = f"{match['column']}{match['value'][0]}={match['value'][1:]}"
            hint = f"; did you mean {meant!r}?"
        raise TraceError(
            f"csv option where {text!r}: {match['op'] + match['value'][0]!r} is not an "
            f"operator (OP is one of == != >= <= > <){hint}"
        )
    if match is None or not match["value"]:
        raise TraceError(
            f"csv option where: expected COLUMN OP VALUE (OP one of == != >= <= > <), got {text!r}"
        )
    op = "==" if match["op"] == "=" else match["op"]
    number = _number(match["value"])
    if op in _ORDERING and number is None:
        raise TraceError(f"csv option where {text!r}: {match['value']!r} is not a number")
    return WhereClause(match["column"], op, match["value"], number)


def _number(text: str) -> float | None:
    try:
        return parse_float(text)
    except CellError:
        return None


def timestamp(text: str) -> float | None:
    """POSIX seconds of an ISO 8601 timestamp (naive ones are UTC), or None."""
    candidate = text.strip()
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(candidate)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def select(
    rows: Rows, clauses: tuple[WhereClause, ...], index_of: Callable[[str], int]
) -> tuple[Rows, Counter[str]]:
    """The rows every clause holds for, and per clause how many it left out.

    A row is counted under the first clause it fails; a row too short to have the
    clause's column does not match it.
    """
    columns = [index_of(clause.column) for clause in clauses]
    kept: Rows = []
    dropped: Counter[str] = Counter()
    for number, cells in rows:
        for clause, index in zip(clauses, columns, strict=True):
            if index >= len(cells) or not clause.matches(cells[index]):
                dropped[f"where {clause.text}"] += 1
                break
        else:
            kept.append((number, cells))
    return kept, dropped


def valid(rows: Rows, mapping: dict[str, str], index: dict[str, int]) -> tuple[Rows, Counter[str]]:
    """The rows whose mapped cells pass the importer's checks, and why the others fail."""
    kept: Rows = []
    dropped: Counter[str] = Counter()
    for number, cells in rows:
        problem = _row_problem(cells, mapping, index)
        if problem is None:
            kept.append((number, cells))
        else:
            dropped[f"invalid: {problem}"] += 1
    return kept, dropped


_TIMES = ("time", "submit", "end")
_COUNTS = ("available", "priority")
_POSITIVE = ("duration", "gpus")


def _row_problem(cells: list[str], mapping: dict[str, str], index: dict[str, int]) -> str | None:
    """Why a row fails the importer's per-row checks (a reason without its values), or None."""
    values: dict[str, float] = {}
    for field, column in index.items():
        name = f"{field} (column {mapping[field]})"
        if column >= len(cells):
            return f"{name}: too few columns"
        try:
            value = parse_float(cells[column])
        except CellError as exc:
            stamp = timestamp(cells[column]) if field in _TIMES else None
            if stamp is None:
                kind = "neither a number nor a timestamp" if field in _TIMES else _kind_of(exc)
                return f"{name}: {kind}"
            value = stamp
        if field in _COUNTS and (value < 0 or value != math.floor(value)):
            return f"{name}: not a whole count >= 0"
        if field in _POSITIVE and not value > 0:
            return f"{name} must be > 0"
        values[field] = value
    if "end" in values and not values["end"] > values["submit"]:
        return f"duration (column {mapping['end']} less {mapping['submit']}) must be > 0"
    return None


def _kind_of(exc: CellError) -> str:
    """A cell error without the cell's text, so rows with different values count together."""
    message = str(exc)
    if message == "empty value":
        return message
    return "not a finite number" if "finite" in message else "not a number"


def left_out_text(dropped: Counter[str]) -> str | None:
    """The ``# rows_left_out:`` value: ``reason: count`` pairs joined by ``; ``."""
    if not dropped:
        return None
    return "; ".join(f"{reason}: {count}" for reason, count in dropped.items())


def rows_left_out(metadata: TraceMetadata) -> list[tuple[str, int]]:
    """``(reason, rows)`` for each reason an import left rows out, in order (none: ``[]``)."""
    text = metadata.get(LEFT_OUT_KEY)
    if not text:
        return []
    out = []
    for item in text.split("; "):
        reason, _, count = item.rpartition(": ")
        out.append((reason, int(count)))
    return out
