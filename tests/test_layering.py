"""The layering of the design notes, checked on the source: who may import what.

Each rule names a folder and the top-level modules its files may import besides the
standard library (``sys.stdlib_module_names``) and relative imports.  Imports are
read with :mod:`ast`, so a module that is never executed in the tests is checked too,
including imports inside functions.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: folder -> third-party (or first-party) top-level modules it may import.
ALLOWED: dict[str, frozenset[str]] = {
    "policies": frozenset(),
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module) of every absolute import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


CASES = [(folder, path) for folder in ALLOWED for path in python_files(folder)]


def test_every_rule_has_files() -> None:
    for folder in ALLOWED:
        assert python_files(folder), f"no Python files under {folder}/"


@pytest.mark.parametrize(
    ("folder", "path"), CASES, ids=[str(p.relative_to(ROOT)) for _, p in CASES]
)
def test_imports_respect_layering(folder: str, path: Path) -> None:
    allowed = sys.stdlib_module_names | ALLOWED[folder]
    bad = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for line, module in imported_modules(path)
        if module not in allowed
    ]
    assert not bad, "; ".join(bad)


def test_the_checker_catches_a_bad_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom . import x\ndef f():\n    import numpy.linalg\n")
    modules = [m for _, m in imported_modules(bad)]
    assert modules == ["os", "numpy"]
    assert "numpy" not in sys.stdlib_module_names
