"""The one error a training job file raises, and where in the file it points.

Both the TOML loader (:mod:`.load`) and the range checks of a parsed job
(:func:`.model.validate`) report a problem as one line naming the file, line and
column; this module holds that error and the best-effort search for a key's position,
so neither of them depends on the other for it.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["TrainingJobError", "locate_key"]


class TrainingJobError(ValueError):
    """A training job file that cannot be used; ``str()`` is one line naming file, line, column."""

    def __init__(
        self, path: str | Path, message: str, line: int | None = None, column: int | None = None
    ):
        self.path = str(path)
        self.line = line
        self.column = column
        self.message = message
        where = self.path
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {message}")


def locate_key(text: str, section: str | None, key: str) -> tuple[int | None, int | None]:
    """Best-effort 1-based (line, column) of ``key`` inside ``[section]`` for messages."""
    current: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            current = stripped.strip("[]").strip()
            if section is not None and key == "" and current == section:
                return number, raw.index("[") + 1
            continue
        if current == section and re.match(rf"{re.escape(key)}\s*=", stripped):
            return number, raw.index(key) + 1
    return None, None
