"""House rules a newcomer can live with: no file over 600 lines, no function over 60.

Read with :mod:`ast`, so every file is checked whether or not a test imports it.  A
function's length is ``end_lineno - lineno + 1`` of its ``def`` (decorators are not
counted; a nested function counts both on its own and inside its parent).  There is
no allowlist: a file or function over the limit is split, not excused.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("elasim", "policies", "traces", "executor", "scripts", "benchmarks")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60


def python_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def file_lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, length)`` of every def in ``path`` over ``limit``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > limit:
                    found.append((name, child.lineno, length))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def violations() -> list[str]:
    out: list[str] = []
    for path in python_files():
        rel = path.relative_to(ROOT)
        lines = file_lines(path)
        if lines > MAX_FILE_LINES:
            out.append(f"{rel}: {lines} lines (max {MAX_FILE_LINES})")
        for name, lineno, length in long_functions(path):
            out.append(f"{rel}:{lineno}: {name} is {length} lines (max {MAX_FUNCTION_LINES})")
    return out


def test_every_folder_has_python_files() -> None:
    for folder in FOLDERS:
        assert list((ROOT / folder).rglob("*.py")), f"no Python files under {folder}/"


def test_no_file_or_function_is_too_long() -> None:
    bad = violations()
    if bad:
        pytest.fail("too long:\n" + "\n".join(bad), pytrace=False)


def test_the_checker_measures_defs_without_decorators(tmp_path: Path) -> None:
    limit = MAX_FUNCTION_LINES
    fits = ["@functools.cache", "def fits():"] + ["    x = 1"] * (limit - 1)  # at the limit
    too_long = ["class C:", "    def method(self):"] + ["        x = 1"] * limit
    too_long += ["        def inner():", "            return 1"]  # limit + 3 lines, inner 2
    path = tmp_path / "sample.py"
    path.write_text("\n".join(["import functools", *fits, *too_long]) + "\n")
    found = {name: length for name, _, length in long_functions(path)}
    assert found == {"C.method": limit + 3}
