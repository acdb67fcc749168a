"""``benchmarks/bench_coadapt.py``: its simulated side, its summary, its skip without torch.

The real runs are the benchmark's own (minutes on real workers); here only what needs
no worker: the simulation of every configuration and the arithmetic of the report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from repo_scripts import load_script

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_coadapt.py"


def _module():
    return load_script(BENCH)


def test_simulated_side_and_summary():
    bench = _module()
    sim = {name: bench.simulate(name) for name in bench.CONFIGS}
    # co-adaptation pays in the simulation, a little (2 ms per sample: a larger batch
    # saves only the per-step overhead)
    assert sim["pollux"] < sim["pollux-fixed"] and sim["pollux-r0"] < sim["pollux-fixed-r0"]
    # with the move priced at the measured pause, the published ordering
    assert sim["pollux-r0"] < sim["pollux-fixed-r0"] < sim["tiresias"]
    runs = [{"config": "pollux", "avg_jct_s": v} for v in (10.0, 12.0, 30.0)] + [
        {"config": "tiresias", "avg_jct_s": v} for v in (15.0, 18.0, 9.0)
    ]
    summary = bench.summarise(runs, sim)
    assert summary["median_avg_jct_s"] == {"pollux": 12.0, "tiresias": 15.0}
    assert summary["ratio_to_pollux"] == {"pollux": 1.0, "tiresias": 1.25}
    assert summary["real_order"] == ["pollux", "tiresias"]
    assert summary["sim_ratio_to_pollux"]["pollux"] == 1.0


def test_skips_in_one_line_without_torch():
    code = (
        "import sys, runpy; sys.modules['torch'] = None; sys.argv = ['b']; "
        f"runpy.run_path({str(BENCH)!r}, run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines() == [
        "bench_coadapt: skipped, no torch (pip install 'elasim[executor]')"
    ]
