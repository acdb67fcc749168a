"""The layering of the design notes, checked on the source: who may import what.

Each rule names a folder and the module prefixes its files may import besides the
standard library (``sys.stdlib_module_names``).  Names are full dotted paths with
relative imports resolved (``tests/layering_imports.py``), so ``from .. import sim``
in ``policies/`` is ``elasim.sim`` and is caught.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from layering_imports import (
    PACKAGE_DIRS,
    REPO,
    imports_in,
    imports_of,
    is_stdlib,
    module_name,
    python_files,
    within,
)

#: folder -> module prefixes (besides the standard library) its files may import.
ALLOWED: dict[str, tuple[str, ...]] = {
    "policies": ("elasim.policies",),
    # the one job model: both shells run it, so it needs neither SimPy nor torch, nor
    # NumPy or pandas
    "elasim/jobmodel": ("elasim.jobmodel", "elasim.policies"),
    # cluster mode's loop runs under both shells too: no SimPy, torch, NumPy or pandas
    "elasim/cluster": (
        "elasim.cluster",
        "elasim.jobmodel",
        "elasim.policies",
        "elasim.job",
        "elasim.traces.cluster",
        # the workload entry point: NumPy only behind a philly[...] spec
        "elasim.traces.workloads",
    ),
}


#: The cluster feature's modules above both shells: what is done with runs (a sweep
#: on the simulator, tables and figures, a real run against its simulation).  They
#: may use pandas, NumPy and the simulator; the loop's modules must not import them.
ABOVE_THE_SHELLS = ("elasim.cluster.sweep", "elasim.cluster.output", "elasim.cluster.compare")


def offences(folder: str, imports: list[tuple[int, str]], where: str) -> list[str]:
    allowed = ALLOWED[folder]
    return [
        f"{where}:{line}: imports {name}"
        for line, name in imports
        if (not is_stdlib(name) and not any(within(name, prefix) for prefix in allowed))
        or any(within(name, above) for above in ABOVE_THE_SHELLS)
    ]


CASES = [
    (folder, path)
    for folder in ALLOWED
    for path in python_files(folder)
    if module_name(path)[0] not in ABOVE_THE_SHELLS
]


def test_every_rule_has_files() -> None:
    for folder in ALLOWED:
        assert python_files(folder), f"no Python files under {folder}/"


@pytest.mark.parametrize(
    ("folder", "path"), CASES, ids=[str(p.relative_to(REPO)) for _, p in CASES]
)
def test_imports_respect_layering(folder: str, path: Path) -> None:
    bad = offences(folder, imports_of(path), str(path.relative_to(REPO)))
    assert not bad, "; ".join(bad)


def test_the_checker_reads_full_paths_and_resolves_relative_imports() -> None:
    source = "import os\nfrom . import x\ndef f():\n    import numpy.linalg\n"
    names = [m for _, m in imports_in(source, "elasim.policies.fake")]
    assert names == ["os", "elasim.policies", "elasim.policies.x", "numpy.linalg"]
    package = [m for _, m in imports_in("from .base import A\n", "elasim.policies", True)]
    assert package == ["elasim.policies.base", "elasim.policies.base.A"]


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("def f():\n    from ..sim import driver\n", "elasim.sim"),
        ("from .. import job\n", "elasim"),
        ("from ..policies_extra import x\n", "elasim.policies_extra"),
        ("import numpy\n", "numpy"),
    ],
)
def test_the_checker_catches_a_forbidden_import(source: str, caught: str) -> None:
    bad = offences("policies", imports_in(source, "elasim.policies.fake"), "policies/fake.py")
    assert bad and bad[0].endswith(f"imports {caught}"), bad
    assert not offences("policies", imports_in("from ._common import y\n", "elasim.policies.f"), "")


def test_only_the_command_line_imports_it() -> None:
    """``elasim.cli`` imports the library, never the reverse (no library module prints)."""
    bad = []
    for folder in PACKAGE_DIRS:
        for path in python_files(folder):
            if module_name(path)[0].startswith("elasim.cli"):
                continue
            bad += [
                f"{path.relative_to(REPO)}:{line}: imports {name}"
                for line, name in imports_of(path)
                if within(name, "elasim.cli")
            ]
    assert not bad, "; ".join(bad)


def module_graph() -> dict[str, set[str]]:
    """Every module of the four folders -> the project modules it imports.

    Every import statement counts, inside functions too: a function-level import
    delays a cycle to the first call, it does not remove it.  ``from a import b``
    is an edge to ``a.b`` when that is a module, else to ``a``.
    """
    files = {module_name(p)[0]: p for folder in PACKAGE_DIRS for p in python_files(folder)}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for _, imported in imports_of(path):
            target = imported if imported in files else imported.rpartition(".")[0]
            if target in files and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_function_level_imports_included() -> None:
    found = cycles(module_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_can_fail() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
