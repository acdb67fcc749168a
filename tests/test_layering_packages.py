"""Layering rules beyond policies/: who may import what (see README, Design).

* ``traces/`` uses numpy (and pandas), never simpy or torch.
* ``elasim/`` (the simulator and the CLI) never imports torch.
* ``executor/`` never imports simpy.

Checked twice: statically (every import statement, also inside functions) and at run
time (importing the modules in a fresh interpreter must not load the forbidden ones).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [("traces", {"simpy", "torch"}), ("elasim", {"torch"}), ("executor", {"simpy"})],
)
def test_static_imports(folder: str, forbidden: set[str]):
    offenders = {
        str(path.relative_to(REPO)): sorted(imported_roots(path) & forbidden)
        for path in sorted((REPO / folder).rglob("*.py"))
        if imported_roots(path) & forbidden
    }
    assert not offenders, offenders


def _modules_loaded_by(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(out.stdout.split())


def test_simulator_and_cli_never_load_torch():
    loaded = _modules_loaded_by(
        "import elasim.cli, elasim.sim, elasim.sweep, elasim.traces, elasim.policies, elasim.job"
    )
    assert "torch" not in loaded
    assert "simpy" in loaded  # sanity: the simulator really was imported


def test_executor_never_loads_simpy():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the executor extra (torch) is not installed")
    modules = sorted(
        "elasim.executor." + p.stem
        for p in (REPO / "executor").glob("*.py")
        if p.stem != "__init__"
    )
    loaded = _modules_loaded_by(
        "import elasim.executor\n" + "\n".join(f"import {m}" for m in modules)
    )
    assert "simpy" not in loaded
