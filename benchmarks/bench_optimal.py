"""The offline optimum's speed and answers, old against new in one run.

    python benchmarks/bench_optimal.py [--against REF] [--repeats 3]
        [--case spot_us_east.csv:48 ...]

For each case (trace and deadline in hours; the default job at its 16 nodes) it
times :func:`elasim.optimal.plan_optimal` in a fresh interpreter and prints the
median wall time, the plan's model cost and lower bound.  ``--against REF`` also
runs commit ``REF`` (exported with ``git archive`` as in ``bench_simulator.py``),
interleaved round by round so that the machine's drift hits both alike, and prints
the new / old ratio and whether the figures agree.  Whole ``elasim simulate``
processes, the yardstick included, are timed by ``bench_simulate_e2e.py`` (goal:
2 s).  Timings are noisy: the load is printed next to them; read medians and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_simulator import export_tree  # noqa: E402

DEFAULT_CASES = ("spot_us_east.csv:12", "spot_us_east.csv:48", "spot_us_east.csv:150")


def measure(case: str) -> dict[str, float]:
    """Plan one case with whatever elasim imports: wall time and the report's figures."""
    from elasim.job import load_job
    from elasim.jobmodel import JobSpec
    from elasim.optimal import plan_optimal
    from elasim.sim import SimConfig, resolve

    trace_name, hours = case.rsplit(":", 1)
    spec = JobSpec(trace=trace_name, policy="optimal", deadline_s=float(hours) * 3600)
    spec, trace, _, job = resolve(spec, SimConfig(), job=load_job("resnet50_v100"))
    start = time.perf_counter()
    _, report = plan_optimal(trace, job, spec)
    wall = time.perf_counter() - start
    return {
        "wall_s": wall,
        "model_cost_usd": report.model_cost_usd,
        "lower_bound_usd": report.lower_bound_usd or float("nan"),
    }


def measure_in(pythonpath: Path | None, case: str) -> dict[str, float]:
    """:func:`measure` in a fresh interpreter, importing elasim from ``pythonpath``."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    command = [sys.executable, __file__, "--worker", case]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd="/")
    return json.loads(done.stdout.strip().splitlines()[-1])


def load() -> str:
    """The machine's 1-minute load average, for the record."""
    return f"{os.getloadavg()[0]:.2f}"


def compare(args: argparse.Namespace) -> None:
    """Old and new, interleaved per case and round; medians, ratios, figures."""
    print(f"load {load()} at start; {args.repeats} rounds; median wall time of plan_optimal")
    head = f"{'case':26} {'new s':>7} {'old s':>8} {'new/old':>8}"
    print(f"{head}  {'new cost / bound (USD)':>24}  same")
    with tempfile.TemporaryDirectory(prefix="elasim-bench-") as tmp:
        old_path = export_tree(args.against, Path(tmp)) if args.against else None
        for case in args.case or DEFAULT_CASES:
            new, old = [], []
            for _ in range(args.repeats):
                new.append(measure_in(None, case))
                if old_path is not None:
                    old.append(measure_in(old_path, case))
            wall = statistics.median(r["wall_s"] for r in new)
            line = f"{case:26} {wall:7.2f}"
            if old:
                old_wall = statistics.median(r["wall_s"] for r in old)
                ratio = statistics.median(
                    n["wall_s"] / o["wall_s"] for n, o in zip(new, old, strict=True)
                )
                line += f" {old_wall:8.2f} {ratio:8.3f}"
            else:
                line += f" {'':8} {'':8}"
            line += f"  {new[0]['model_cost_usd']:11.6f} / {new[0]['lower_bound_usd']:10.6f}"
            if old:
                same = new[0]["model_cost_usd"] == old[0]["model_cost_usd"]
                line += "  yes" if same else f"  no (old {old[0]['model_cost_usd']:.6f})"
                line += f", old bound {old[0]['lower_bound_usd']:.6f}"
            print(line, flush=True)
    print(f"load {load()} at end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="git commit to compare with, in the same run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--case", action="append", help="TRACE:DEADLINE_H (repeatable)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker)))
    else:
        compare(args)


if __name__ == "__main__":
    main()
