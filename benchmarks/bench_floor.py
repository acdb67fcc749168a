"""The single-job simulator against its floor: whole processes, measured in one run.

    python benchmarks/bench_floor.py [--repeats 5] [--philly PATH] [--cluster-gpus 512]
        [--target-samples 1.5e10] [--bytecode cached|source|both]

The case: one job (the default ``resnet50_v100`` with ``--target-samples 1.5e10``, which
finishes after 103 simulated days) with the full Philly job trace (82,247 jobs,
imported once with ``elasim traces import --format philly`` into a temporary canonical
CSV) as its shared-cluster background on 512 GPUs, run as a user runs it::

    elasim simulate -t philly_full.csv --cluster-gpus 512 -p greedy \\
        --target-samples 1.5e10 --json

The floor is what no simulator of this case can avoid in Python: a process that
imports pandas, simpy and typer, reads the same CSV with pandas' pyarrow engine, and
runs a bare SimPy loop of as many turns as elasim's job loop took (one timeout per
turn).  Both are timed as whole processes (CPU time, user + system, of the child; wall
time beside it), interleaved round by round so that the machine's drift hits both
alike.  It prints the medians, the ratio of medians and the median of per-round ratios
(goal: <= 3x), with the load average at start and end.

Two ways to start, both measured by default (``--bytecode``):

* ``cached``: every module's bytecode is cached (in a temporary
  ``PYTHONPYCACHEPREFIX``, filled by one untimed run of each side first), as in an
  installed package: pip compiles it at install time, and the floor's libraries
  have theirs in ``site-packages``.  This is the goal's measure.
* ``source``: the environment as it is.  Under ``PYTHONDONTWRITEBYTECODE=1`` (the
  development machines set it) an editable checkout compiles elasim's modules at
  every start (about 0.1 s), while the floor's libraries load their installed
  bytecode.

The machines are noisy: read medians and ratios, not single numbers.
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

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PHILLY = REPO.parent / "shared" / "traces-real" / "pollux-philly" / "philly.csv"
GOAL_RATIO = 3.0

# what cannot be avoided: the imports, the same CSV through the fastest pandas reader,
# and a bare SimPy loop of as many turns as elasim's job loop took
FLOOR_SCRIPT = """
import sys
import pandas, simpy, typer
frame = pandas.read_csv(sys.argv[1], engine="pyarrow", skiprows=int(sys.argv[2]))
assert len(frame) > 0
def loop(env, turns):
    for _ in range(turns):
        yield env.timeout(1.0)
env = simpy.Environment()
env.process(loop(env, int(sys.argv[3])))
env.run()
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """CPU seconds (user + system) and wall seconds of one child process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True, cwd="/", env=env)
    wall_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu_s, wall_s, done.stdout


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes), for the record."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def header_lines(csv: Path) -> int:
    """How many ``#`` comment lines open the canonical CSV (pyarrow reads no comments)."""
    with csv.open() as handle:
        return sum(1 for _ in iter(lambda: handle.readline().startswith("#"), False))


def environments(mode: str, tmp: Path) -> dict[str, dict[str, str]]:
    """The child environments to measure, by name (see the module docstring)."""
    out: dict[str, dict[str, str]] = {}
    if mode in ("cached", "both"):
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        out["cached"] = cached
    if mode in ("source", "both"):
        out["source"] = dict(os.environ)
    return out


def rounds(
    simulate: list[str], floor: list[str], env: dict[str, str], repeats: int
) -> tuple[list[tuple[float, float, float, float]], dict]:
    """``repeats`` interleaved rounds of elasim then the floor (after one untimed each).

    The floor's turns are elasim's, known after the untimed run (its last argument).
    """
    summary = json.loads(timed(simulate, env)[2])
    floor = [*floor, str(summary["loop_turns"])]
    timed(floor, env)
    rows = []
    for _ in range(repeats):
        cpu_s, wall_s, _ = timed(simulate, env)
        floor_cpu_s, floor_wall_s, _ = timed(floor, env)
        rows.append((cpu_s, wall_s, floor_cpu_s, floor_wall_s))
        print(
            f"  elasim {cpu_s:5.2f} s CPU ({wall_s:5.2f} s wall), floor {floor_cpu_s:5.2f} s "
            f"CPU ({floor_wall_s:5.2f} s wall): {cpu_s / floor_cpu_s:4.2f}x",
            flush=True,
        )
    return rows, summary


def report(name: str, rows: list[tuple[float, float, float, float]]) -> None:
    """Medians and ratios of one way to start."""
    cpu, wall, floor_cpu, floor_wall = (statistics.median(c) for c in zip(*rows, strict=True))
    per_round = statistics.median(r[0] / r[2] for r in rows)
    print(f"[{name}] elasim simulate, median  {cpu:5.2f} s CPU  {wall:5.2f} s wall")
    print(f"[{name}] floor, median            {floor_cpu:5.2f} s CPU  {floor_wall:5.2f} s wall")
    print(
        f"[{name}] ratio {cpu / floor_cpu:.2f}x (of medians), {per_round:.2f}x (median per "
        f"round); goal <= {GOAL_RATIO:g}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--philly", type=Path, default=DEFAULT_PHILLY)
    parser.add_argument("--cluster-gpus", type=int, default=512)
    parser.add_argument("--target-samples", default="1.5e10")
    parser.add_argument("--bytecode", choices=("cached", "source", "both"), default="both")
    args = parser.parse_args()
    if not args.philly.is_file():
        print(f"(full Philly trace not found at {args.philly}; skipped)")
        return 0
    elasim = str(Path(sys.executable).with_name("elasim"))
    results = {}
    with tempfile.TemporaryDirectory(prefix="elasim-floor-") as tmp:
        csv = Path(tmp) / "philly_full.csv"
        importing = [elasim, "traces", "import", "--format", "philly", str(args.philly), str(csv)]
        subprocess.run(importing, check=True, capture_output=True)
        simulate = [elasim, "simulate", "-t", str(csv), "-p", "greedy", "--json"]
        simulate += ["--cluster-gpus", str(args.cluster_gpus)]
        simulate += ["--target-samples", args.target_samples]
        floor = [sys.executable, "-c", FLOOR_SCRIPT, str(csv), str(header_lines(csv))]
        print(f"load {load()} at start; {args.repeats} interleaved rounds, whole processes")
        for name, env in environments(args.bytecode, Path(tmp)).items():
            print(f"bytecode {name}:")
            results[name], summary = rounds(simulate, floor, env, args.repeats)
    days = summary["sim_time_h"] / 24
    print(
        f"case: {days:.1f} simulated days, {summary['loop_turns']:,} job-loop turns, "
        f"{args.cluster_gpus} GPUs"
    )
    for name, rows in results.items():
        report(name, rows)
    print(f"load {load()} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
