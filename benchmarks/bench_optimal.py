"""The offline optimum's speed and answers, old against new in one run.

    python benchmarks/bench_optimal.py [--against REF] [--repeats 3]
        [--case spot_us_east.csv:48 ...] [--cli]

For each case (trace and deadline in hours; the default job at its 16 nodes) it
times :func:`elasim.optimal.plan_optimal` in a fresh interpreter and prints the
median wall time, the plan's model cost and lower bound.  ``--against REF`` also
runs commit ``REF`` (exported with ``git archive`` as in ``bench_simulator.py``),
interleaved round by round so that the machine's drift hits both alike, and prints
the new / old ratio and whether the figures agree.  ``--cli`` times the whole
``elasim simulate`` process with the default deadline yardstick for every registered
policy on every bundled spot trace (goal: 2 s).  Timings are noisy: the load is
printed next to them; read medians and ratios.
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


def cli_times(repeats: int) -> None:
    """Whole ``elasim simulate`` processes with the yardstick: every policy and trace."""
    from elasim.policies import policy_names
    from elasim.traces import bundled_trace_names, load_trace

    elasim = Path(sys.executable).with_name("elasim")
    traces = [n for n in bundled_trace_names() if load_trace(n).kind == "capacity"]
    print(f"load {load()}; whole process, median of {repeats}, 16 nodes, deadline at the trace")
    worst = 0.0
    for name in traces:
        hours = max(float(load_trace(name).duration_s) / 3600 - 1, 10.0)
        for policy in policy_names(include_oracles=True):
            walls = []
            for _ in range(repeats):
                start = time.perf_counter()
                command = [str(elasim), "simulate", "-t", name, "-p", policy]
                command += ["--deadline-h", f"{hours:g}", "--on-demand-price-per-hour", "3.06"]
                subprocess.run([*command, "--json"], check=True, capture_output=True)
                walls.append(time.perf_counter() - start)
            wall = statistics.median(walls)
            worst = max(worst, wall)
            print(f"{name:20} {hours:7.1f} h {policy:11} {wall:6.2f} s", flush=True)
    print(f"slowest {worst:.2f} s (goal 2 s); load {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="git commit to compare with, in the same run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--case", action="append", help="TRACE:DEADLINE_H (repeatable)")
    parser.add_argument("--cli", action="store_true", help="time whole simulate processes")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker)))
    elif args.cli:
        cli_times(args.repeats)
    else:
        compare(args)


if __name__ == "__main__":
    main()
