"""Layering rules beyond policies/: who may import what (see README, Design).

* ``elasim.traces`` uses numpy (and pandas), never simpy, torch, the simulator or
  the executor.
* ``elasim.sim`` never imports torch or the executor.
* ``elasim.executor`` never imports simpy or the simulator.
* the ``elasim/`` folder (the simulator, the CLI, analysis) never imports torch.

Checked twice: statically (every import statement, also inside functions, as full
dotted names with relative imports resolved: ``tests/layering_imports.py``) and at
run time (importing the modules in a fresh interpreter must not load the forbidden
ones).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from layering_imports import (
    PACKAGE_DIRS,
    REPO,
    imports_in,
    imports_of,
    module_name,
    python_files,
    within,
)

ALL_FILES = [path for folder in PACKAGE_DIRS for path in python_files(folder)]

#: package -> module prefixes no module in it may import.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "elasim.traces": ("simpy", "torch", "elasim.sim", "elasim.executor"),
    "elasim.sim": ("torch", "elasim.executor"),
    "elasim.executor": ("simpy", "elasim.sim"),
}
#: folder -> module prefixes no file in it may import (elasim/ holds elasim.sim too).
FORBIDDEN_IN_FOLDER: dict[str, tuple[str, ...]] = {"elasim": ("torch",)}


def offences(imports: list[tuple[int, str]], forbidden: tuple[str, ...], where: str) -> list[str]:
    return [
        f"{where}:{line}: imports {name}"
        for line, name in imports
        if any(within(name, prefix) for prefix in forbidden)
    ]


def files_in_package(package: str) -> list[Path]:
    return [p for p in ALL_FILES if within(module_name(p)[0], package)]


@pytest.mark.parametrize(("package", "forbidden"), sorted(FORBIDDEN.items()))
def test_static_imports(package: str, forbidden: tuple[str, ...]):
    files = files_in_package(package)
    assert files, f"no source files for {package}"
    bad = [o for p in files for o in offences(imports_of(p), forbidden, str(p.relative_to(REPO)))]
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize(("folder", "forbidden"), sorted(FORBIDDEN_IN_FOLDER.items()))
def test_static_imports_of_a_folder(folder: str, forbidden: tuple[str, ...]):
    bad = [
        o
        for p in python_files(folder)
        for o in offences(imports_of(p), forbidden, str(p.relative_to(REPO)))
    ]
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize(
    ("module", "source", "caught"),
    [
        ("elasim.executor.fake", "from ..sim import driver\n", "elasim.sim"),
        ("elasim.executor.fake", "def f():\n    from .. import sim\n", "elasim.sim"),
        ("elasim.executor.fake", "import elasim.sim.config\n", "elasim.sim.config"),
        ("elasim.sim.fake", "from ..executor.run import run_trace\n", "elasim.executor.run"),
        ("elasim.sim.fake", "import torch.nn\n", "torch.nn"),
        ("elasim.traces.fake", "from ..sim import simulate\n", "elasim.sim"),
        ("elasim.traces.fake", "from .. import executor\n", "elasim.executor"),
    ],
)
def test_the_checker_catches_a_forbidden_relative_import(module: str, source: str, caught: str):
    package = next(p for p in FORBIDDEN if within(module, p))
    bad = offences(imports_in(source, module), FORBIDDEN[package], module)
    assert bad and bad[0].endswith(f"imports {caught}"), bad


def test_the_checker_allows_what_the_rules_allow():
    source = "from ..simulation_notes import x\nfrom .model import CapacityTrace\nimport numpy\n"
    assert not offences(imports_in(source, "elasim.traces.fake"), FORBIDDEN["elasim.traces"], "")
    with pytest.raises(ValueError, match="beyond the top-level package"):
        imports_in("from ... import x\n", "elasim.traces.fake")


def test_module_names_follow_the_package_dirs():
    assert module_name(REPO / "executor" / "run.py") == ("elasim.executor.run", False)
    assert module_name(REPO / "traces" / "__init__.py") == ("elasim.traces", True)
    assert module_name(REPO / "elasim" / "sim" / "driver.py") == ("elasim.sim.driver", False)


def _modules_loaded_by(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(out.stdout.split())


def _loaded_within(loaded: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(within(m, p) for p in prefixes))


def test_simulator_and_cli_never_load_torch():
    loaded = _modules_loaded_by(
        "import elasim.cli, elasim.sim, elasim.sweep, elasim.traces, elasim.policies, elasim.job"
    )
    assert "torch" not in loaded
    assert "simpy" in loaded  # sanity: the simulator really was imported


def test_traces_load_neither_simulator_nor_executor():
    loaded = _modules_loaded_by("import elasim.traces")
    assert not _loaded_within(loaded, FORBIDDEN["elasim.traces"])


def test_executor_never_loads_simpy_nor_the_simulator():
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
    assert not _loaded_within(loaded, FORBIDDEN["elasim.executor"])
    assert "elasim.executor.run" in loaded  # sanity
