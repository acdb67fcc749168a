"""Whole ``elasim simulate`` processes against their floor, measured in the same run.

    python benchmarks/bench_simulate_e2e.py [--repeats 3] [--against REF]
        [--traces spot_us_east.csv,...] [--policies greedy,...] [--deadlines none,fast,end]

Issue 23: ``simulate`` with any registered policy, the deadline yardstick included,
answers on every bundled spot trace at 16 nodes in <= 2 s for the whole process.
For every trace, policy and deadline it times the whole process (``python -m
elasim.cli simulate ... --json``), wall time and CPU time (user + system of the
child), and, interleaved with it, the floor: ``python -c "import elasim.cli"``, what
every command pays before it does anything.  Deadlines: ``none``; ``fast``, 1.5x
the job's uninterrupted time at its most nodes (one the deadline policies can meet);
``end``, the trace's end (the longest the optimum plans without repeating the trace);
or hours.  ``--against REF`` also runs commit ``REF`` (exported as in
``bench_simulator.py``), interleaved, and says whether each summary is byte for byte
the same (``wall_time_s`` aside).  A policy that refuses a case (``optimal`` without a
deadline) is timed as it refuses.  The machine's load is printed with the figures:
read medians and ratios, not single numbers, on a shared host.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_simulator import export_tree  # noqa: E402

GOAL_S = 2.0
NODES = 16


def timed(command: list[str], pythonpath: Path | None) -> tuple[float, float, str]:
    """Wall and CPU seconds of one process, and its summary (``wall_time_s`` dropped)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd="/")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        summary = json.loads(done.stdout)
        summary.pop("wall_time_s", None)
        text = json.dumps(summary, sort_keys=True)
    except json.JSONDecodeError:
        text = f"exit {done.returncode}: {done.stderr.strip()}"
    return wall, cpu, text


def deadlines(trace: str, names: list[str]) -> list[float | None]:
    """The deadlines (hours) the names stand for on ``trace`` (see the module)."""
    from elasim.job import load_job
    from elasim.jobmodel import JobSpec
    from elasim.sim import DEFAULT_JOB, fastest_finish_h
    from elasim.traces import load_trace

    out: list[float | None] = []
    for name in names:
        if name == "none":
            out.append(None)
        elif name == "fast":
            job = load_job(DEFAULT_JOB).with_nodes(None, NODES)
            out.append(round(1.5 * fastest_finish_h(job, JobSpec(trace=trace)), 1))
        elif name == "end":
            out.append(round(float(load_trace(trace).duration_s) / 3600 - 1, 1))
        else:
            out.append(float(name))
    return out


def case_command(trace: str, policy: str, hours: float | None) -> list[str]:
    """``elasim simulate`` for one case (an on-demand price for traces without one)."""
    command = [sys.executable, "-m", "elasim.cli", "simulate", "-t", trace, "-p", policy]
    command += ["--max-nodes", str(NODES), "--on-demand-price-per-hour", "3.06", "--json"]
    return command + ([] if hours is None else ["--deadline-h", f"{hours:g}"])


def measure(command: list[str], repeats: int, old: Path | None) -> dict[str, list]:
    """Floor, case (and the old tree's case), interleaved round by round."""
    floor_command = [sys.executable, "-c", "import elasim.cli"]
    runs: dict[str, list] = {"floor": [], "new": [], "old": []}
    for _ in range(repeats):
        runs["floor"].append(timed(floor_command, None))
        runs["new"].append(timed(command, None))
        if old is not None:
            runs["old"].append(timed(command, old))
    return runs


def report(name: str, runs: dict[str, list]) -> tuple[float, float]:
    """One line: medians (wall / CPU s) of the case, its floor, the old tree's case."""
    med = {
        side: (statistics.median(r[0] for r in got), statistics.median(r[1] for r in got))
        for side, got in runs.items()
        if got
    }
    wall, cpu = med["new"]
    line = f"{name:44} {wall:6.2f} {cpu:6.2f}  {med['floor'][0]:6.2f} {med['floor'][1]:6.2f}"
    line += f"  {cpu / med['floor'][1]:5.2f}x"
    if "old" in med:
        same = runs["new"][0][2] == runs["old"][0][2]
        line += f"  {med['old'][0]:6.2f} {med['old'][1]:6.2f}  {'same' if same else 'DIFFERS'}"
    print(f"{line}  {'' if wall <= GOAL_S else 'over'}  load {load()}", flush=True)
    return wall, cpu


def load() -> str:
    """The machine's 1-minute load average, for the record."""
    return f"{os.getloadavg()[0]:.2f}"


def main() -> None:
    from elasim.policies import policy_names
    from elasim.traces import bundled_trace_names, load_trace

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", help="git commit to compare with, in the same run")
    parser.add_argument("--traces", help="comma-separated (default: every bundled spot trace)")
    parser.add_argument("--policies", help="comma-separated (default: every registered one)")
    parser.add_argument("--deadlines", default="none,fast,end", help="none, fast, end or hours")
    args = parser.parse_args()
    traces = args.traces.split(",") if args.traces else None
    traces = traces or [n for n in bundled_trace_names() if load_trace(n).kind == "capacity"]
    policies = args.policies.split(",") if args.policies else policy_names(include_oracles=True)
    print(f"load {load()} at start; whole process, median of {args.repeats}, {NODES} nodes")
    head = f"{'trace:policy:deadline_h':44} {'wall s':>6} {'cpu s':>6}  {'floor wall/cpu':>13}"
    head += f"  {'cpu/floor':>6}" + ("  old wall/cpu   summary" if args.against else "")
    print(head)
    worst = (0.0, 0.0)
    with tempfile.TemporaryDirectory(prefix="elasim-bench-") as tmp:
        old = export_tree(args.against, Path(tmp)) if args.against else None
        for trace in traces:
            for hours in deadlines(trace, args.deadlines.split(",")):
                for policy in policies:
                    runs = measure(case_command(trace, policy, hours), args.repeats, old)
                    name = f"{trace}:{policy}:{'none' if hours is None else f'{hours:g}'}"
                    wall, cpu = report(name, runs)
                    worst = (max(worst[0], wall), max(worst[1], cpu))
    print(f"slowest: wall {worst[0]:.2f} s, cpu {worst[1]:.2f} s (goal {GOAL_S:g} s)", end="")
    print(f"; load {load()}")


if __name__ == "__main__":
    main()
