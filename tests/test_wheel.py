"""The wheel holds the source tree: every package and every data file, nothing left out.

Why: users install with ``pip install .`` (not editable).  A hand-written package
list once dropped ``elasim.optimal``, and the editable install the other tests use
could not see it.  This builds the wheel exactly as pip does and holds its contents
against the folders: every folder with an ``__init__.py`` under ``elasim/``,
``policies/``, ``traces/`` and ``executor/`` (mapped to ``elasim.*``), and every
file git tracks there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"elasim": "elasim", "policies": "elasim/policies", "traces": "elasim/traces"}
ROOTS["executor"] = "elasim/executor"


def tree_packages(repo: Path) -> set[str]:
    """Dotted names of every package folder of the source tree, as installed."""
    found = set()
    for folder, installed in ROOTS.items():
        base = repo / folder
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            parts = init.parent.relative_to(base).parts
            found.add(".".join([*installed.split("/"), *parts]))
    return found


def tree_files(repo: Path) -> set[str]:
    """Every file git tracks under the roots, as its path inside the wheel."""
    listed = subprocess.run(
        ["git", "ls-files", *ROOTS], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.split()
    files = set()
    for path in listed:
        folder, _, rest = path.partition("/")
        if (repo / path).is_file():
            files.add(f"{ROOTS[folder]}/{rest}")
    return files


def build_wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    (wheel,) = out.glob("elasim-*.whl")
    return wheel


def wheel_contents(wheel: Path) -> tuple[set[str], set[str]]:
    """(packages, files) in a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        names = {n for n in archive.namelist() if not n.split("/")[0].endswith(".dist-info")}
    inits = [n for n in names if n.endswith("/__init__.py")]
    packages = {n[: -len("/__init__.py")].replace("/", ".") for n in inits}
    return packages, names


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracked tree in a scratch folder (a build never writes into the checkout)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout (the tracked files are the reference)")
    target = tmp_path_factory.mktemp("src")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        path = raw.decode()
        if (REPO / path).is_file():
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / path, target / path)
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    subprocess.run(["git", "add", "-A"], cwd=target, check=True)
    return target


@pytest.mark.timeout(600)
def test_the_wheel_holds_every_package_and_file_of_the_tree(source_copy: Path, tmp_path: Path):
    packages, files = wheel_contents(build_wheel(source_copy, tmp_path / "dist"))
    expected = tree_packages(source_copy)
    assert "elasim.optimal" in expected and "elasim.policies.cluster" in expected
    assert packages == expected, f"missing {expected - packages}, extra {packages - expected}"
    expected_files = tree_files(source_copy)
    assert expected_files - files == set(), "tracked files missing from the wheel"
    assert {f for f in files if "__pycache__" in f or f.endswith(".pyc")} == set()


@pytest.mark.timeout(600)
def test_the_check_fails_when_a_package_is_dropped(source_copy: Path, tmp_path: Path):
    # a build that leaves one package out (as the old hand-written list did) is caught
    broken = tmp_path / "broken"  # no build/ folder: setuptools would reuse what it holds
    shutil.copytree(source_copy, broken, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    setup = broken / "setup.py"
    setup.write_text(
        setup.read_text().replace(
            "PACKAGES, PACKAGE_DATA = find_packages_and_data()",
            "PACKAGES, PACKAGE_DATA = find_packages_and_data()\nPACKAGES.remove('elasim.optimal')",
        )
    )
    packages, _ = wheel_contents(build_wheel(broken, tmp_path / "dist"))
    assert "elasim.optimal" not in packages
    assert packages != tree_packages(broken)


@pytest.mark.timeout(600)
def test_an_earlier_builds_leftovers_do_not_ship(source_copy: Path, tmp_path: Path):
    # setuptools packs whatever build/lib holds: a module removed from the tree since
    # the last `pip install .` in the checkout would ship again
    tree = tmp_path / "tree"
    shutil.copytree(source_copy, tree, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    stale = tree / "build" / "lib" / "elasim" / "removed_since.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("GONE = True\n")
    _, files = wheel_contents(build_wheel(tree, tmp_path / "dist"))
    assert "elasim/removed_since.py" not in files
