"""Strict cells and lines: the parsing shared by the trace loaders and the importers.

Every complaint must name the physical line and column of the value it is about, so
the helpers here raise :class:`CellError` (the caller adds the path, line and column)
or, for whole files, :class:`~.errors.TraceError`.  The rules for numbers are those
of ``traces/reader.py``'s docstring: plain decimal literals only; ``nan``, ``inf``,
``1_000``, hex and empty cells are errors, and counts must be integral.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from .errors import TraceError

__all__ = [
    "CellError",
    "format_float",
    "iter_lines",
    "join_csv_line",
    "parse_float",
    "parse_int",
    "read_text",
    "split_csv_line",
]

_NUM_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_INT_RE = re.compile(r"[+-]?\d+\Z")
_NONFINITE_RE = re.compile(r"[+-]?(?:nan|inf|infinity)\Z", re.IGNORECASE)
_MAX_EXACT_INT = 2**53


# --------------------------------------------------------------------------- cells
class CellError(Exception):
    """A single value is malformed; the caller adds path, line and column."""


def parse_float(token: str) -> float:
    """Parse a finite decimal number strictly (see the module docstring)."""
    tok = token.strip()
    if not tok:
        raise CellError("empty value")
    if _NONFINITE_RE.match(tok):
        raise CellError(f"{tok!r} is not a finite number")
    if not _NUM_RE.match(tok):
        raise CellError(f"{_short(tok)!r} is not a number")
    value = float(tok)
    if not math.isfinite(value):
        raise CellError(f"{_short(tok)!r} is out of range")
    return value


def format_float(value: float) -> str:
    """Shortest text that parses back to exactly ``value``; integral values as ints.

    The inverse of :func:`parse_float`: the trace writer stores numbers with it, so a
    written trace loads back bit for bit, and the reader quotes earlier values with it
    in its errors, as the file would show them.
    """
    v = float(value)
    if v == math.floor(v) and abs(v) < 1e16:
        return str(int(v))
    return repr(v)


def parse_int(token: str) -> int:
    """Parse an integer; an integral decimal such as ``16.0`` or ``1e3`` is accepted."""
    tok = token.strip()
    if _INT_RE.match(tok):
        if len(tok) > 20:  # beyond int64; also avoids int()'s digit limit on huge input
            raise CellError(f"{_short(tok)!r} is out of range")
        value = int(tok)
        if abs(value) > 2**63 - 1:
            raise CellError(f"{_short(tok)!r} is out of range")
        return value
    try:
        value_f = parse_float(tok)
    except CellError as exc:
        if not tok or _NONFINITE_RE.match(tok):
            raise
        raise CellError(f"{_short(tok)!r} is not an integer") from exc
    if value_f != math.floor(value_f):
        raise CellError(f"{_short(tok)!r} is not an integer")
    if abs(value_f) > _MAX_EXACT_INT:
        raise CellError(f"{_short(tok)!r} is out of range")
    return int(value_f)


def _short(text: str, limit: int = 40) -> str:
    """Truncate echoed input so an error message stays one readable line."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def split_csv_line(line: str) -> list[str]:
    """Split one physical line into fields (quotes handled by the ``csv`` module)."""
    if '"' not in line:
        return line.split(",")
    try:
        return next(csv.reader([line], strict=True))
    except (csv.Error, StopIteration) as exc:
        raise CellError(f"malformed quoting: {exc}") from None


def join_csv_line(cells: Sequence[str]) -> str:
    """The line :func:`split_csv_line` splits into ``cells``: quoted as CSV quotes.

    A cell holding a comma, a quote or a line break is quoted (its quotes doubled),
    the others are written as they are (``csv.QUOTE_MINIMAL``), so a line rebuilt from
    a quoted one splits into the same cells, where joining them with commas did not.
    """
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(cells)
    return out.getvalue()


# --------------------------------------------------------------------------- reading
def read_text(path: str | Path, display: str | Path | None = None) -> str:
    """Read a whole text file as UTF-8, turning every failure into a TraceError."""
    shown = display if display is not None else path
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise TraceError("is a directory, not a trace file", shown) from None
    except FileNotFoundError:
        raise TraceError("no such file", shown) from None
    except OSError as exc:
        raise TraceError(f"cannot read: {exc.strerror or exc}", shown) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TraceError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at character {col}); "
            "is this a binary file?",
            shown,
            line,
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        pos = text.index("\x00")
        raise TraceError("NUL byte in a text file", shown, text.count("\n", 0, pos) + 1)
    return text


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield ``(1-based line number, line without its line ending)``."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        yield number, line[:-1] if line.endswith("\r") else line
