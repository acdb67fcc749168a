"""Cluster mode at scale: the full Philly trace, mapped to applications, on 64 and 1,024 GPUs.

    python benchmarks/bench_cluster_scale.py [--philly PATH] [--policies fifo,pollux]
        [--clusters 256x4,16x4] [--max-jobs N] [--budget-s S] [--view-chunk N]

Each (cluster, policy) case runs to completion in a fresh child process, so that its
peak memory (``resource.getrusage`` max RSS of that process, which includes the
interpreter and the loaded profiles) is its own; the child also reports the
wall time of the simulation alone (building the workload is timed apart).  The
workload is ``philly:PATH`` (:mod:`elasim.traces.philly_workload`): the raw Pollux
``philly.csv`` (82,247 jobs, 74,428 after Pollux's filter, 106 days of arrivals).
Each case runs once (a case can take minutes): on a shared, loaded machine read the
numbers as one sample, not a median.  A case that outlives ``--budget-s`` of wall
time stops and says how far it got (``finished`` false).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: seconds of wall time between progress lines on stderr (a case can take many minutes)
REPORT_EVERY_S = 60.0
DEFAULT_PHILLY = REPO.parent / "shared" / "traces-real" / "pollux-philly" / "philly.csv"


def one_case(
    workload: str, policy: str, nodes: int, gpus_per_node: int, budget_s: float
) -> dict[str, object]:
    """Run one case in this process; the numbers the parent prints.

    The loop is driven on a plain clock (the same turns as the SimPy shell: the loop
    is clock-agnostic) so that a case over ``budget_s`` of wall time can stop and
    still say how far it got: simulated days, jobs done, jobs waiting or running.
    """
    from elasim.cluster import ClusterSetup, build_loop

    setup = ClusterSetup(
        workload=workload, policy=policy, num_nodes=nodes, gpus_per_node=gpus_per_node
    )
    start = time.perf_counter()
    loop = build_loop(setup, record_timeline=False)
    built_s = time.perf_counter() - start
    start = time.perf_counter()
    now, finished, peak_active = 0.0, False, 0
    next_report_s = REPORT_EVERY_S
    while True:
        nxt = loop.turn(now)
        peak_active = max(peak_active, len(loop.active))
        if nxt == math.inf:
            finished = True
            break
        now = max(nxt, now)
        if loop.turns % 2000 == 0:
            elapsed_s = time.perf_counter() - start
            if elapsed_s > budget_s:
                break
            if elapsed_s >= next_report_s:
                next_report_s += REPORT_EVERY_S
                done = sum(1 for job in loop.jobs if job.done)
                print(
                    f"{elapsed_s:7.0f} s wall: {now / 86400:7.1f} simulated days, "
                    f"{done:,} jobs done, {len(loop.active):,} active",
                    file=sys.stderr,
                    flush=True,
                )
    wall_s = time.perf_counter() - start
    summary = loop.result(wall_time_s=wall_s).summary
    return {
        "policy": policy,
        "gpus": nodes * gpus_per_node,
        "finished": finished,
        "sim_days": now / 86400.0,
        "jobs": summary.jobs,
        "jobs_completed": summary.jobs_completed,
        "peak_active": peak_active,
        "avg_jct_h": summary.avg_jct_s / 3600.0,
        "turns": loop.turns,
        "decisions": summary.decisions,
        "build_s": built_s,
        "wall_s": wall_s,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def run_cases(args: argparse.Namespace, workload: str) -> list[dict[str, Any]] | None:
    """Every cluster x policy in its own process (peak memory is per process); None: failed."""
    rows = []
    for cluster in args.clusters.split(","):
        nodes, gpus = (int(x) for x in cluster.lower().split("x"))
        for policy in args.policies.split(","):
            cmd = [sys.executable, __file__, "--one", workload, policy, str(nodes), str(gpus)]
            cmd.append(str(args.budget_s))
            if args.view_chunk is not None:
                cmd += ["--view-chunk", str(args.view_chunk)]
            try:
                # the child's progress lines and errors go straight to our stderr
                done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
            except subprocess.CalledProcessError:
                print(f"{cluster} {policy}: failed (its error is above)", file=sys.stderr)
                return None
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def print_rows(workload: str, rows: list[dict[str, Any]]) -> None:
    """The cases as one Markdown table."""
    print(f"\nworkload: {workload}")
    head = ("gpus", "policy", "finished", "sim days", "jobs done", "peak active", "avg JCT h")
    head += ("turns", "wall s", "peak MiB")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = (
            r["gpus"],
            r["policy"],
            "yes" if r["finished"] else "no (budget)",
            f"{r['sim_days']:.1f}",
            f"{r['jobs_completed']:,} / {r['jobs']:,}",
            f"{r['peak_active']:,}",
            f"{r['avg_jct_h']:.2f}",
            f"{r['turns']:,}",
            f"{r['wall_s']:.0f}",
            f"{r['peak_rss_mib']:.0f}",
        )
        print("| " + " | ".join(str(c) for c in cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--philly", type=Path, default=DEFAULT_PHILLY)
    parser.add_argument("--policies", default="fifo")
    parser.add_argument("--clusters", default="256x4,16x4", help="NODESxGPUS, comma-separated")
    parser.add_argument("--max-jobs", type=int, default=None, help="a sample (quick check)")
    parser.add_argument(
        "--budget-s", type=float, default=1800.0, help="wall time per case before it stops"
    )
    parser.add_argument(
        "--view-chunk",
        type=int,
        default=None,
        help="jobs per chunk of the observation (default: the loop's VIEW_CHUNK; a number "
        "above the job count rebuilds one tuple of every view per decision, as before JobViews)",
    )
    parser.add_argument("--one", nargs=5, metavar=("WORKLOAD", "POLICY", "NODES", "GPUS", "S"))
    args = parser.parse_args(argv)
    if args.view_chunk is not None:
        if args.view_chunk < 1:
            print(f"error: --view-chunk must be >= 1, got {args.view_chunk}", file=sys.stderr)
            return 2
        import elasim.cluster.loop

        elasim.cluster.loop.VIEW_CHUNK = args.view_chunk
    if args.one:
        workload, policy, nodes, gpus, budget = args.one
        print(json.dumps(one_case(workload, policy, int(nodes), int(gpus), float(budget))))
        return 0
    if not args.philly.is_file():
        print(f"error: --philly {args.philly}: no such file", file=sys.stderr)
        return 2
    workload = f"philly:{args.philly}" + (f":max_jobs={args.max_jobs}" if args.max_jobs else "")
    rows = run_cases(args, workload)
    if rows is None:
        return 1
    print_rows(workload, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
