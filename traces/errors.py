"""The one exception every trace problem becomes.

A malformed trace must never surface as a traceback: the CLI turns a
:class:`TraceError` into one line on stderr and exit code 2.  That only works if
every loader and importer raises exactly this type, always with enough location
to find the problem in an editor (``path:line:column``), so this module is the
only place that formats locations.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TraceError"]


class TraceError(ValueError):
    """A trace file (or an importer input) is malformed or cannot be read.

    Attributes:
        path: The file the problem is in, as given by the caller; ``None`` when the
            problem is not tied to a file (e.g. an unknown importer option).
        line: 1-based physical line number, or ``None`` when the problem is not tied
            to one line (an empty file, a JSON document without line information).
        column: 1-based field index in a CSV row, a column or JSON field name
            (``"data[17]"``), or ``None``.
        message: What is wrong, one line, without the location prefix.

    ``str(err)`` is ``"{path}:{line}:{column}: {message}"`` with missing parts
    omitted, the convention compilers use, so editors can jump to the spot.
    """

    def __init__(
        self,
        message: str,
        path: str | Path | None = None,
        line: int | None = None,
        column: int | str | None = None,
    ) -> None:
        # One line, always: the CLI prints str(err) verbatim.
        self.message = " ".join(str(message).split("\n")).replace("\r", " ")
        self.path = None if path is None else str(path)
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [str(p) for p in (self.path, self.line, self.column) if p is not None]
        if not parts:
            return self.message
        return ":".join(parts) + ": " + self.message

    def __reduce__(self):  # keep it picklable for multiprocessing sweeps
        return (type(self), (self.message, self.path, self.line, self.column))
