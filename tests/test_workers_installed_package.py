"""Every process the executor starts imports the elasim the controller runs.

A user who runs elasim from a checkout of it (the README's examples do) stands in a
folder whose ``elasim/`` is not the installed package.  Workers started with
``python -m`` (or a fork server started with ``python -c``, or Ray workers, which
get the driver's folder on their path) imported that folder instead and died.
Here the current folder holds an ``elasim/`` package without the executor, as a
checkout's does: a worker (or a fork server) that looks there dies with
``No module named 'elasim.executor'``, and the run with it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import error_lines

pytestmark = [pytest.mark.executor, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def elasim_installed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The ``elasim`` console script of a non-editable install of this tree.

    Why not the test environment's own: it is editable, and an editable install's
    import hook finds ``elasim.executor`` even when a shadowing ``elasim/`` came first,
    which hides the very failure this file tests.  So: a fresh environment with the
    wheel built from this tree, which borrows the test environment's dependencies
    (torch, ray) through a ``.pth`` line rather than installing them again.
    """
    root = tmp_path_factory.mktemp("installed")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    dist = root / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = dist.glob("elasim-*.whl")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
         str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    deps = sysconfig_purelib()
    (site / "zz-test-dependencies.pth").write_text(f"{deps}\n")
    script = root / "venv" / "bin" / "elasim"  # what pip writes for [project.scripts]
    script.write_text(
        f"#!{python}\nimport sys\nfrom elasim.cli import main\n"
        "if __name__ == '__main__':\n    sys.exit(main())\n"
    )
    script.chmod(0o755)
    check = subprocess.run(
        [str(python), "-P", "-c", "import elasim; print(elasim.__file__)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert check.stdout.startswith(str(site)), check.stdout
    return str(script)


def sysconfig_purelib() -> str:
    import sysconfig

    return sysconfig.get_path("purelib")


@pytest.fixture
def shadowed(tmp_path: Path) -> Path:
    """A folder whose ``elasim/`` shadows the installed package for whoever looks there."""
    folder = tmp_path / "checkout"
    (folder / "elasim").mkdir(parents=True)
    (folder / "elasim" / "__init__.py").write_text("# a checkout's elasim/: no executor here\n")
    return folder


def _run(elasim: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([elasim, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.mark.timeout(660)
def test_run_workers_import_the_installed_package(
    elasim_installed: str, shadowed: Path, tmp_path: Path
):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    args = ["run", "-t", "spot_us_east.csv", "--max-steps", "60", "--max-nodes", "1",
            "--no-plot", "--json", "--out", str(out)]  # fmt: skip
    done = _run(elasim_installed, args, shadowed)
    assert done.returncode == 0, done.stderr[-2000:]
    logs = "".join(p.read_text() for p in (out / "logs").glob("*"))
    assert "No module named" not in logs


@pytest.mark.timeout(660)
def test_forked_workers_import_the_installed_package(
    elasim_installed: str, shadowed: Path, tmp_path: Path
):
    pytest.importorskip("torch")
    args = ["cluster", "calibrate", "--out", str(tmp_path / "apps"), "--steps", "20",
            "--job-set", "train_size=1024"]  # fmt: skip
    done = _run(elasim_installed, args, shadowed)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "apps" / "synth-20").is_dir()


@pytest.mark.timeout(660)
def test_ray_workers_import_the_installed_package(
    elasim_installed: str, shadowed: Path, tmp_path: Path
):
    pytest.importorskip("ray")
    args = ["sweep", "--traces", "spot_us_east.csv", "--policies", "greedy", "--seeds", "0-1",
            "--backend", "ray", "--workers", "1", "--out", str(tmp_path / "sw")]  # fmt: skip
    done = _run(elasim_installed, args, shadowed)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "sw" / "sweep.parquet").is_file()


@pytest.mark.timeout(300)
def test_a_worker_that_cannot_start_is_one_line_with_its_reason_and_log(
    elasim_installed: str, tmp_path: Path
):
    pytest.importorskip("torch")
    (tmp_path / "broken_job.py").write_text(
        "def factory(**options):\n    raise RuntimeError('the job cannot be built here')\n"
    )
    out = tmp_path / "run"
    env_path = f"PYTHONPATH={tmp_path}"
    done = subprocess.run(
        ["env", env_path, elasim_installed, "run", "-t", "spot_us_east.csv", "--max-steps", "20",
         "--max-nodes", "1", "--job", "broken_job:factory", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    # the run's settings passed, so it said so as its workers started ('elasim run: ...');
    # the worker's failure is then the one error line
    lines = error_lines(done.stderr)
    log = out / "logs" / "worker-0.log"
    assert lines == [
        "error: no worker became ready: worker 0 exited with code 1 before it was ready: "
        f"RuntimeError: the job cannot be built here (log: {log})"
    ], done.stderr
