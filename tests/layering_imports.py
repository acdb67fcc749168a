"""The imports of a source file as full dotted module names (for the layering tests).

Imports are read with :mod:`ast`, so a module that is never executed in the tests is
checked too, including imports inside functions.  Relative imports are resolved
against the module's own name (the folders are installed under ``elasim`` by
pyproject's ``package-dir``), so ``from ..sim import driver`` in
``executor/run.py`` is ``elasim.sim.driver``, and ``from a.b import c`` gives both
``a.b`` and ``a.b.c`` because ``c`` may be a submodule.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Source folder -> the package it is installed as (pyproject.toml, package-dir).
PACKAGE_DIRS: dict[str, str] = {
    "elasim": "elasim",
    "policies": "elasim.policies",
    "traces": "elasim.traces",
    "executor": "elasim.executor",
}


def python_files(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def module_name(path: Path) -> tuple[str, bool]:
    """``(dotted name, is a package)`` of a source file under one of PACKAGE_DIRS."""
    folder, *rest = path.resolve().relative_to(REPO).with_suffix("").parts
    parts = [*PACKAGE_DIRS[folder].split("."), *rest]
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _absolute(node: ast.ImportFrom, package: list[str], where: str) -> str:
    """The module a ``from ... import`` reads from, relative levels resolved."""
    if node.level == 0:
        assert node.module is not None
        return node.module
    if node.level - 1 >= len(package):
        raise ValueError(f"{where}:{node.lineno}: relative import beyond the top-level package")
    parts = package[: len(package) - (node.level - 1)]
    return ".".join([*parts, *(node.module.split(".") if node.module else [])])


def imports_in(
    source: str, module: str, is_package: bool = False, where: str = "<source>"
) -> list[tuple[int, str]]:
    """``(line, full dotted name)`` of every import in ``source``, module ``module``."""
    tree = ast.parse(source, filename=where)
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package, where)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names if a.name != "*"]
    return found


def imports_of(path: Path) -> list[tuple[int, str]]:
    """:func:`imports_in` of a file of the repository."""
    module, is_package = module_name(path)
    return imports_in(path.read_text(encoding="utf-8"), module, is_package, str(path))


def within(name: str, prefix: str) -> bool:
    """``name`` is ``prefix`` or a submodule of it (``elasim.simx`` is not in ``elasim.sim``)."""
    return name == prefix or name.startswith(prefix + ".")


def is_stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names
