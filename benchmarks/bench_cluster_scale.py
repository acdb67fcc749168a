"""Cluster mode at scale: the full Philly trace, mapped to applications, on 64 and 1,024 GPUs.

    python benchmarks/bench_cluster_scale.py [--philly PATH] [--policies fifo,pollux]
        [--clusters 256x4,16x4] [--max-jobs N] [--budget-s S] [--view-chunk N]
    python benchmarks/bench_cluster_scale.py --growth [--sizes 10000@256x4,30000@256x4,all@256x4]

Each (cluster, policy) case runs to completion in a fresh child process, so that its
peak memory (``resource.getrusage`` max RSS of that process, which includes the
interpreter and the loaded profiles) is its own; the child also reports the wall and
CPU time of the simulation alone (building the workload is timed apart).  The loop
keeps no decision log (what ``elasim cluster simulate`` does; ``--out`` streams it to
disk).  The workload is ``philly:PATH`` (:mod:`elasim.traces.philly_workload`): the
raw Pollux ``philly.csv`` (82,247 jobs, 74,428 after Pollux's filter, 106 days of
arrivals).  Each case runs once (a case can take minutes): on a shared, loaded
machine read the numbers as one sample, not a median, and compare CPU seconds.  A case
that outlives ``--budget-s`` of wall time stops and says how far it got (``finished``
false).

``--growth`` says how the cost grows: each policy at each size ``JOBS@NODESxGPUS``
(``JOBS`` a uniform sample of the trace, ``all`` the whole of it), with the ratios of
jobs, turns, decisions and CPU time to the first size, and the exponent ``b`` of
``CPU ~ jobs^b`` between the first and last (1: linear).
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
#: The growth sizes: the trace sampled to 10,000 and 30,000 jobs, and whole, on 1,024 GPUs.
GROWTH_SIZES = "10000@256x4,30000@256x4,all@256x4"


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
    loop = build_loop(setup, record_timeline=False, keep_decisions=False)
    built_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    now, finished = 0.0, False
    next_report_s = REPORT_EVERY_S
    while True:
        nxt = loop.turn(now)  # every turn up to the next arrival, wake-up or capacity change
        if nxt == math.inf:
            finished = True
            break
        now = max(nxt, now)
        elapsed_s = time.perf_counter() - start
        if elapsed_s > budget_s:
            break
        if elapsed_s >= next_report_s:
            next_report_s += REPORT_EVERY_S
            done = sum(1 for job in loop.jobs if job.done)
            print(
                f"{elapsed_s:7.0f} s wall: {loop.now_s / 86400:7.1f} simulated days, "
                f"{done:,} jobs done, {len(loop.active):,} active",
                file=sys.stderr,
                flush=True,
            )
    wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
    summary = loop.result(wall_time_s=wall_s).summary
    return {
        "policy": policy,
        "gpus": nodes * gpus_per_node,
        "finished": finished,
        "sim_days": loop.now_s / 86400.0,  # the loop's: it takes job events past ``now``
        "jobs": summary.jobs,
        "jobs_completed": summary.jobs_completed,
        "peak_active": loop.peak_active,
        "avg_jct_h": summary.avg_jct_s / 3600.0,
        "turns": loop.turns,
        "decisions": summary.decisions,
        "build_s": built_s,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def run_child(args: argparse.Namespace, workload: str, policy: str, cluster: str) -> dict | None:
    """One case in its own process (peak memory is per process); None: it failed."""
    nodes, gpus = (int(x) for x in cluster.lower().split("x"))
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
    row["workload"] = workload
    print(json.dumps(row), flush=True)
    return row


def run_cases(args: argparse.Namespace, workload: str) -> list[dict[str, Any]] | None:
    """Every cluster x policy, each in its own process; None: one failed."""
    rows = []
    for cluster in args.clusters.split(","):
        for policy in args.policies.split(","):
            row = run_child(args, workload, policy, cluster)
            if row is None:
                return None
            rows.append(row)
    return rows


def print_rows(workload: str, rows: list[dict[str, Any]]) -> None:
    """The cases as one Markdown table."""
    print(f"\nworkload: {workload}")
    head = ("gpus", "policy", "finished", "sim days", "jobs done", "peak active", "avg JCT h")
    head += ("turns", "decisions", "wall s", "CPU s", "peak MiB")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = (
            f"{r['gpus']:,}",
            r["policy"],
            "yes" if r["finished"] else "no (budget)",
            f"{r['sim_days']:.1f}",
            f"{r['jobs_completed']:,} / {r['jobs']:,}",
            f"{r['peak_active']:,}",
            f"{r['avg_jct_h']:.2f}",
            f"{r['turns']:,}",
            f"{r['decisions']:,}",
            f"{r['wall_s']:.0f}",
            f"{r['cpu_s']:.0f}",
            f"{r['peak_rss_mib']:.0f}",
        )
        print("| " + " | ".join(str(c) for c in cells) + " |")


def run_growth(args: argparse.Namespace) -> list[dict[str, Any]] | None:
    """Every policy at every ``JOBS@NODESxGPUS`` size, each in its own process."""
    rows = []
    for policy in args.policies.split(","):
        for size in args.sizes.split(","):
            jobs, cluster = size.split("@")
            workload = f"philly:{args.philly}" + ("" if jobs == "all" else f":max_jobs={jobs}")
            row = run_child(args, workload, policy, cluster)
            if row is None:
                return None
            rows.append(row)
    return rows


def print_growth(rows: list[dict[str, Any]]) -> None:
    """Per policy: each size against the first (ratios), and the exponent of CPU in jobs."""
    head = ("policy", "gpus", "jobs", "turns", "decisions", "CPU s", "peak MiB")
    head += ("x jobs", "x turns", "x decisions", "x CPU", "us / turn", "us / decision")
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    exponents = []
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        first = mine[0]
        for r in mine:
            cells = (
                policy,
                f"{r['gpus']:,}",
                f"{r['jobs']:,}",
                f"{r['turns']:,}",
                f"{r['decisions']:,}",
                f"{r['cpu_s']:.1f}",
                f"{r['peak_rss_mib']:.0f}",
                f"{r['jobs'] / first['jobs']:.2f}",
                f"{r['turns'] / first['turns']:.2f}",
                f"{r['decisions'] / first['decisions']:.2f}",
                f"{r['cpu_s'] / first['cpu_s']:.2f}",
                f"{1e6 * r['cpu_s'] / r['turns']:.1f}",
                f"{1e6 * r['cpu_s'] / max(r['decisions'], 1):.0f}",
            )
            print("| " + " | ".join(cells) + " |")
        last = mine[-1]
        if len(mine) > 1 and last["jobs"] != first["jobs"] and first["cpu_s"] > 0:
            b = math.log(last["cpu_s"] / first["cpu_s"]) / math.log(last["jobs"] / first["jobs"])
            span = f"from {first['jobs']:,} to {last['jobs']:,} jobs"
            exponents.append(f"{policy}: CPU ~ jobs^{b:.2f} {span}")
    print("\n(us / turn and us / decision: all CPU over that count)")
    for line in exponents:
        print(line)


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
    parser.add_argument("--growth", action="store_true", help="the cost at each of --sizes")
    parser.add_argument("--sizes", default=GROWTH_SIZES, help="JOBS@NODESxGPUS, comma-separated")
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
    if args.growth:
        rows = run_growth(args)
        if rows is None:
            return 1
        print_growth(rows)
        for workload in dict.fromkeys(r["workload"] for r in rows):
            print_rows(workload, [r for r in rows if r["workload"] == workload])
        return 0
    workload = f"philly:{args.philly}" + (f":max_jobs={args.max_jobs}" if args.max_jobs else "")
    rows = run_cases(args, workload)
    if rows is None:
        return 1
    print_rows(workload, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
