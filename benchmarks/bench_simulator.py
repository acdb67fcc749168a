"""Simulator speed, as medians and ratios measured in one run on one machine.

    python benchmarks/bench_simulator.py [--repeats 5] [--philly PATH] [--against REF]

Prints, for each bundled trace and for the full Philly job trace as background load,
the wall time of simulating the whole trace with ``greedy`` and the job loop's turns
per second; then the wall time of the 11.3-day ``spot_us_east.csv`` trace for every
policy (goal: < 1 s).

``--against REF`` (a git commit, e.g. ``HEAD~3``) also times that commit's simulator
in the same run, interleaving the two so that the machine's drift hits both alike, and
prints new / old wall-time ratios (below 1: faster now).  The old tree is exported
with ``git archive`` into a temporary folder laid out as the installed package, so
nothing is installed.  The machines are noisy: read medians and ratios, not single
numbers.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PHILLY = REPO.parent / "shared" / "traces-real" / "pollux-philly" / "philly.csv"
POLICIES = ("fixed", "greedy", "hysteresis", "price", "deadline", "goodput")


def measure(philly: Path, cluster_gpus: int) -> dict[str, list[float]]:
    """Wall times (and loop turns) of every case, once, with whatever elasim imports."""
    import dataclasses
    import importlib.util

    from elasim.job import load_job
    from elasim.policies import make_policy
    from elasim.sim import SimConfig, simulate
    from elasim.traces import bundled_trace_names, import_trace, load_trace

    if importlib.util.find_spec("elasim.jobmodel.spec") is not None:
        from elasim.jobmodel import JobSpec

    job = load_job("resnet50_v100")
    endless = dataclasses.replace(job, target_samples=1e18)  # covers the whole trace
    out: dict[str, list[float]] = {}

    # a commit from before the run's spec (elasim.jobmodel.spec) took one SimConfig
    # with the job's settings in it; --against measures such commits too
    with_spec = importlib.util.find_spec("elasim.jobmodel.spec") is not None

    def run(label: str, trace, policy: str, job, config) -> None:
        gc.collect()  # each case starts from a clean heap: no earlier case's garbage
        start = time.perf_counter()
        if with_spec:
            result = simulate(JobSpec(), config, trace=trace, policy=make_policy(policy), job=job)
        else:
            result = simulate(trace, make_policy(policy), job, config)
        wall = time.perf_counter() - start
        turns = getattr(result, "loop_turns", None) or getattr(result, "events_processed", 0)
        out[label] = [wall, float(turns)]

    for name in bundled_trace_names():
        trace = load_trace(name)
        if trace.kind == "capacity":
            span = float(trace.duration_s)
            config = SimConfig(max_sim_time_s=span, record_timeline=False)
            run(f"{name} (whole trace)", trace, "greedy", endless, config)
        else:
            span = float(trace.submit_time_s.max())
            config = SimConfig(max_sim_time_s=span, record_timeline=False, cluster_gpus=64)
            run(f"{name} (64 GPUs)", trace, "greedy", endless, config)
    if philly.is_file():
        trace = import_trace("philly", philly)
        span = float(trace.submit_time_s.max())
        config = SimConfig(max_sim_time_s=span, record_timeline=False, cluster_gpus=cluster_gpus)
        run(f"full Philly ({cluster_gpus} GPUs)", trace, "greedy", endless, config)
    trace = load_trace("spot_us_east.csv")
    long_job = dataclasses.replace(job, target_samples=job.target_samples * 40)
    for policy in POLICIES:
        config = SimConfig(max_sim_time_s=float(trace.duration_s))
        run(f"spot_us_east, {policy}", trace, policy, long_job, config)
    return out


def export_tree(ref: str, into: Path) -> Path:
    """``ref``'s sources laid out as the installed package (``elasim.policies``, ...)."""
    raw = into / "src"
    raw.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(raw)], input=archive, check=True)
    pkg = into / "pkg"
    shutil.copytree(raw / "elasim", pkg / "elasim")
    for folder in ("policies", "traces", "executor"):
        shutil.copytree(raw / folder, pkg / "elasim" / folder)
    return pkg


def measure_in(pythonpath: Path | None, args: argparse.Namespace) -> dict[str, list[float]]:
    """:func:`measure` in a fresh interpreter, importing elasim from ``pythonpath``."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    command = [sys.executable, __file__, "--worker", "--philly", str(args.philly)]
    command += ["--cluster-gpus", str(args.cluster_gpus)]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd="/")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--philly", type=Path, default=DEFAULT_PHILLY)
    parser.add_argument("--cluster-gpus", type=int, default=512)
    parser.add_argument("--against", help="git commit to compare with, in the same run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.philly, args.cluster_gpus)))
        return
    if not args.philly.is_file():
        print(f"(full Philly trace not found at {args.philly}; skipped)")
    new_runs: list[dict[str, list[float]]] = []
    old_runs: list[dict[str, list[float]]] = []
    with tempfile.TemporaryDirectory(prefix="elasim-bench-") as tmp:
        old_path = export_tree(args.against, Path(tmp)) if args.against else None
        for _ in range(args.repeats):
            new_runs.append(measure_in(None, args))
            if old_path is not None:
                old_runs.append(measure_in(old_path, args))
    header = f"{'case':44} {'wall s':>8} {'turns':>8} {'turns/s':>10}"
    if old_runs:
        header += f" {'old wall s':>10} {'new/old':>8}"
    print(header)
    ratios = []
    for label in new_runs[0]:
        wall = statistics.median(r[label][0] for r in new_runs)
        turns = new_runs[0][label][1]
        line = f"{label:44} {wall:8.3f} {turns:8,.0f} {turns / wall:10,.0f}"
        if old_runs and all(label in r for r in old_runs):
            old = statistics.median(r[label][0] for r in old_runs)
            # the ratio of medians, and the median of per-round ratios (same moment)
            per_round = statistics.median(
                n[label][0] / o[label][0] for n, o in zip(new_runs, old_runs, strict=True)
            )
            ratios.append(per_round)
            line += f" {old:10.3f} {per_round:8.2f}"
        print(line)
    if ratios:
        print(
            f"\nmedian new/old wall-time ratio over the cases: {statistics.median(ratios):.2f} "
            f"(against {args.against}; below 1 is faster now)"
        )


if __name__ == "__main__":
    main()
