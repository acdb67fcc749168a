"""Which packages and data files the wheel holds: found in the source tree, never listed.

Why a ``setup.py`` beside ``pyproject.toml``: the folders stay at the top level (the
design card: ``elasim/ policies/ traces/ executor/``) while every installed name lives
under ``elasim.*``.  ``[tool.setuptools.packages.find]`` cannot map several folders
into one namespace, and a hand-written list dropped ``elasim.optimal`` from the wheel
once.  Here every folder with an ``__init__.py`` under a root is a package, and every
other file in it (not Python, not a cache) is its data, by construction;
``tests/test_wheel.py`` builds the wheel and holds it against the tree.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent

#: installed name -> folder, as ``[tool.setuptools] package-dir`` in pyproject.toml
ROOTS = {
    "elasim": "elasim",
    "elasim.policies": "policies",
    "elasim.traces": "traces",
    "elasim.executor": "executor",
}

#: never shipped: byte code, caches, editor and notebook leftovers
_SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis"}
_SKIP_SUFFIXES = {".pyc", ".pyo", ".py"}


def _is_package(folder: Path) -> bool:
    return (folder / "__init__.py").is_file()


def find_packages_and_data() -> tuple[list[str], dict[str, list[str]]]:
    """Every package under the roots, and each package's data files (relative paths).

    A data file belongs to the nearest folder above it that is a package, so
    ``traces/data/cluster/workloads/x.csv`` is data of ``elasim.traces``.
    """
    packages: list[str] = []
    data: dict[str, list[str]] = {}
    for root_name, root_folder in ROOTS.items():
        base = HERE / root_folder
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
            here = Path(folder)
            relative = here.relative_to(base)
            if _is_package(here) and all(
                _is_package(base.joinpath(*relative.parts[: i + 1]))
                for i in range(len(relative.parts))
            ):
                packages.append(".".join([root_name, *relative.parts]))
            owner = here
            while not _is_package(owner):
                owner = owner.parent
            owner_name = ".".join([root_name, *owner.relative_to(base).parts])
            for name in sorted(files):
                if name.startswith(".") or Path(name).suffix in _SKIP_SUFFIXES:
                    continue
                data.setdefault(owner_name, []).append((here / name).relative_to(owner).as_posix())
    return packages, data


PACKAGES, PACKAGE_DATA = find_packages_and_data()
# a build starts from the tree, never from an earlier build's copy: setuptools packs
# whatever build/lib holds, so a module since removed from the tree would ship again
shutil.rmtree(HERE / "build" / "lib", ignore_errors=True)

setup(packages=PACKAGES, package_data=PACKAGE_DATA)
