"""A dead run's private folder (its secret) does not outlive the next run.

A controller killed with SIGKILL cannot remove its temporary folder; the next run
removes every folder of this user whose owner process is gone, and never one whose
owner still runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from elasim.executor import runfiles
from elasim.executor.protocol import WorkerSettings
from elasim.executor.runfiles import (
    OWNER_NAME,
    RunFiles,
    private_temp_dir,
    remove_stale_folders,
)

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _folder(root: Path, name: str, owner: str | None) -> Path:
    folder = root / name
    folder.mkdir(mode=0o700)
    (folder / "secret").write_text("00\n")
    if owner is not None:
        (folder / OWNER_NAME).write_text(owner)
    return folder


@linux_only
def test_only_folders_of_dead_owners_are_removed(tmp_path: Path):
    me = f"{os.getpid()} {runfiles._start_ticks(os.getpid())}\n"
    dead = _folder(tmp_path, "elasim-run-dead", f"{_dead_pid()} 12345\n")
    alive = _folder(tmp_path, "elasim-run-alive", me)
    # the pid is alive but started at another time: a reused pid, so a dead run
    reused = _folder(tmp_path, "elasim-run-reused", f"{os.getpid()} 1\n")
    legacy = _folder(tmp_path, "elasim-run-legacy", None)  # no marker: left alone
    other = _folder(tmp_path, "elasim-calibrate-x", f"{_dead_pid()} 1\n")  # another prefix
    removed = remove_stale_folders(root=tmp_path)
    assert sorted(removed) == sorted([dead, reused])
    assert not dead.exists() and not reused.exists()
    assert alive.exists() and legacy.exists() and other.exists()


@linux_only
def test_a_new_run_removes_a_killed_controllers_folder(tmp_path: Path):
    # a controller that made its run folder and was then SIGKILLed
    code = (
        "import os, signal; from elasim.executor.runfiles import RunFiles;"
        "from elasim.executor.protocol import WorkerSettings;"
        "f = RunFiles.create(WorkerSettings()); print(f.run_dir, flush=True);"
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    left = Path(proc.stdout.strip())
    assert proc.returncode == -9 and left.name.startswith("elasim-run-")
    assert (left / "secret").exists(), "the killed controller left its secret behind"
    files = RunFiles.create(WorkerSettings())  # the next run
    try:
        assert not left.exists(), "the dead run's secret outlived the next run"
        assert files.run_dir.exists()
        assert (files.run_dir / OWNER_NAME).read_text().split()[0] == str(os.getpid())
    finally:
        files.cleanup()
    assert not files.run_dir.exists()


def test_a_private_temp_dir_is_private_and_marked():
    folder = private_temp_dir("elasim-test-")
    try:
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        assert oct((folder / OWNER_NAME).stat().st_mode & 0o777) == "0o600"
    finally:
        import shutil

        shutil.rmtree(folder)
