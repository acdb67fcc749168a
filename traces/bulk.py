r"""The strict trace parser's bulk path: a clean file's data rows read in one pass.

Why: the strict parser (:mod:`.reader`) checks every cell by hand so that every
complaint names its line and column; on the full Philly trace (82,247 rows) that was
about a fifth of a whole simulation.  Most files are clean, and a clean file needs
no words.  This path reads the data rows in bulk and vouches only for what it can
prove the cell-by-cell path reads the same way:

* the rows are ASCII digits, ``+ - . e E``, commas and newlines (``\r\n`` allowed),
  nothing else: no spaces, quotes, blank lines, comments, ``nan``, ``inf`` or
  ``1_000``;
* every row has exactly the header's number of fields;
* ``float()`` takes every cell of a number column: over that alphabet it accepts
  exactly the plain decimal literals that :func:`~.cells.parse_float` accepts, and
  it is the very function that gives the value there;
* ``int()`` takes every cell of a count column, of at most 18 characters (so within
  int64 and :func:`~.cells.parse_int`'s limits; ``16.0``, which the strict path
  accepts as 16, is left to it);
* every value is finite and every column's rule holds over the whole column.

Anything else returns ``None``, and the caller reads the file cell by cell: that
path raises the one-line error at the first bad cell, or, for a layout this path
does not read (blank lines, spaces, quotes), returns the same columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["bulk_columns"]

#: The only bytes a data block read in bulk may hold.
_ALPHABET = b"0123456789+-.eE,\n"
#: Longest count cell read in bulk: 18 digits fit int64 with room to spare.
_MAX_INT_CHARS = 18
_COMMA, _NEWLINE = ord(","), ord("\n")


def _data_block(text: str, header_line: int) -> str | None:
    """The text after the header (line ``header_line``), without its last line end."""
    pos = -1
    for _ in range(header_line):
        pos = text.find("\n", pos + 1)
        if pos < 0:
            return None
    block = text[pos + 1 :]
    if "\r" in block:  # each line's own \r is dropped, as the cell-by-cell path does
        block = block.replace("\r\n", "\n")
    return block[:-1] if block.endswith("\n") else block


def _rows_of(block: str, width: int) -> int | None:
    """How many rows of ``width`` fields the block holds; None: not a clean block."""
    try:
        data = block.encode("ascii")
    except UnicodeEncodeError:
        return None
    if not data or data.translate(None, _ALPHABET):
        return None
    codes = np.frombuffer(data + b"\n", dtype=np.uint8)
    separators = codes[(codes == _COMMA) | (codes == _NEWLINE)]
    if separators.size % width:
        return None
    separators = separators.reshape(-1, width)
    if not ((separators[:, -1] == _NEWLINE).all() and (separators[:, :-1] == _COMMA).all()):
        return None
    return int(separators.shape[0])


def bulk_columns(
    text: str,
    header_line: int,
    width: int,
    columns: Sequence[tuple[int, bool, Callable[[np.ndarray], bool]]],
) -> tuple[list[np.ndarray], int] | None:
    """The data columns of a clean trace, or None where the strict path must look.

    Args:
        text: the whole file (as :func:`~.cells.read_text` returns it).
        header_line: the header's 1-based line; the data rows follow it.
        width: the header's number of columns.
        columns: for each column wanted, ``(0-based index, whether it holds counts,
            its rule over the whole column)``.

    Returns:
        The columns (float64, or int64 for counts) in the order asked and the number
        of rows, or None (see the module docstring).
    """
    block = _data_block(text, header_line)
    rows = _rows_of(block, width) if block else None
    if rows is None:
        return None
    cells = block.replace("\n", ",").split(",")
    out: list[np.ndarray] = []
    for index, integer, holds in columns:
        tokens = cells[index::width]
        try:
            if integer:
                if max(map(len, tokens)) > _MAX_INT_CHARS:
                    return None
                values = np.fromiter(map(int, tokens), dtype=np.int64, count=rows)
            else:
                values = np.fromiter(map(float, tokens), dtype=np.float64, count=rows)
        except ValueError:  # a cell float() or int() refuses: the strict path words it
            return None
        if not (integer or np.isfinite(values).all()) or not holds(values):
            return None
        out.append(values)
    return out, rows
