"""``benchmarks/bench_vs_pollux.py`` skips in one line and reads a simulator's answer.

Pollux's real simulator takes minutes to hours, so these tests stand a fake artifact
in its place: a folder with a ``simulator.py`` that prints the lines Pollux's prints.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repo_scripts import load_script

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "bench_vs_pollux.py"


def fake_artifact(folder: Path, body: str) -> Path:
    """A folder shaped like Pollux's artifact whose ``simulator.py`` is ``body``."""
    (folder / "workloads").mkdir(parents=True)
    (folder / "simulator.py").write_text(body)
    return folder


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300
    )


def test_without_the_folder_it_skips_in_one_line(tmp_path):
    proc = bench("--pollux-dir", str(tmp_path / "absent"), "--pollux-python", sys.executable)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [
        f"skipped: no Pollux simulator at {tmp_path / 'absent'} (simulator.py and workloads/)"
    ]


def test_without_its_python_it_skips_in_one_line(tmp_path):
    folder = fake_artifact(tmp_path / "sim", "")
    proc = bench("--pollux-dir", str(folder), "--pollux-python", str(tmp_path / "no-python"))
    assert proc.returncode == 0
    (line,) = proc.stdout.splitlines()
    assert line.startswith(f"skipped: no Python at {tmp_path / 'no-python'}")


def test_without_its_dependencies_it_skips_in_one_line(tmp_path):
    folder = fake_artifact(tmp_path / "sim", "import pymoo_that_is_not_installed\n")
    proc = bench("--pollux-dir", str(folder), "--pollux-python", sys.executable)
    assert proc.returncode == 0
    (line,) = proc.stdout.splitlines()
    assert line.startswith("skipped: Pollux's simulator cannot import its dependencies")
    assert "pymoo_that_is_not_installed" in line


@pytest.mark.timeout(300)
def test_a_pair_prints_both_jcts_the_deviation_and_the_ratio(tmp_path):
    """The last ``Average JCT:`` line of the artifact's output is its answer."""
    body = (
        "import sys\n"
        "if __name__ == '__main__':\n"
        "    assert sys.argv[1:] == ['--policy', 'tiresias', 'workloads/workload-1.csv']\n"
        "    for jct in (10.0, 2000.0):\n"
        "        print('Completed jobs:')\n"
        "        print('Average JCT:', jct)\n"
    )
    folder = fake_artifact(tmp_path / "sim", body)
    proc = bench(
        "--pollux-dir", str(folder), "--pollux-python", sys.executable,
        "--workloads", "1", "--policies", "tiresias", "--pollux-logs", str(tmp_path / "logs"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = next(line.split() for line in proc.stdout.splitlines() if line.startswith("   "))
    assert row[:3] == ["1", "tiresias", "0"]
    ours, theirs = float(row[3]), float(row[4])
    assert theirs == 2000.0
    assert abs(float(row[5].rstrip("%")) / 100 - (ours / theirs - 1)) < 0.001  # JCTs rounded
    summary = next(line for line in proc.stdout.splitlines() if line.startswith("tiresias "))
    assert summary.split()[1:4] == [row[3], "2000", row[5]]
    kept = (tmp_path / "logs" / "tiresias-workload-1-0.log").read_text()
    assert kept.count("Average JCT:") == 2


def test_a_run_past_its_budget_says_how_far_it_got(tmp_path, monkeypatch):
    """Stopped at ``--budget-s``: no JCT, and the simulated time its output had reached."""
    module = load_script(BENCH)
    body = (
        "import time\n"
        "for t in (60, 120, 7200):\n"
        "    print('---------------- SIMULATOR TIME: {} ----------------'.format(t))\n"
        "    print('Average JCT:', 5.0, flush=True)\n"
        "time.sleep(60)\n"
    )
    folder = fake_artifact(tmp_path / "sim", body)
    run = module.run_pollux(sys.executable, folder, 1, "pollux", budget_s=2.0)
    assert not run.finished and run.reached_s == 7200.0
    assert 2.0 <= run.wall_s < 30.0
    assert module.fmt_jct(run) == "@2.0 h"
