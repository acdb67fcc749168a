"""Spot policies against the offline optimum, at 1, 4 and 16 nodes and three deadlines.

Run: ``python benchmarks/bench_spot_policies.py [--windows 3] [--shared 6] [--workers 2]
[--notice-s 0]``.

Issue 25's benchmark.  The ResNet-50 preset runs on up to 1, 4 and 16 nodes with its
deadline at 1.1, 1.5 and 2 times its uninterrupted time (its fastest time from the
start, :func:`~elasim.sim.fastest_finish_h`), on the bundled spot traces and on real
availability traces beside the checkout (``../shared/traces-real``: the SkyPilot /
Can't Be Late 1-node and 16-node sets, imported with elasim's ``skypilot`` importer
and priced like the bundled p3.2xlarge traces), ``--windows`` random windows each.

Every point is one row of an ordinary ``elasim sweep`` grid
(:func:`elasim.sweep.run_sweep` with its deadline yardstick), so the optimum is the
yardstick's replayed offline optimum and ``cost_vs_optimal`` is the sweep's own
column.  Per policy the table gives ``cost / optimum``: median, 90th percentile and
worst over every window where the policy met the deadline (a late run is not
cheaper), and the deadlines met.  A drop comes without notice unless ``--notice-s``
gives one (AWS gives 120 s): with it a job leaves gracefully and loses no work, as
the optimum never does.  Then the time
per decision: each policy on ``spot_us_east.csv`` at each node count, with a wrapper
that times ``decide`` (median over the runs' decisions, next to ``greedy``'s in the
same run: the machine is shared, read the ratio).

``benchmarks/bound_spot_online.py ROWS.csv`` (rows from ``--out``) bounds, per window
above 1.15x, what any online policy that meets every deadline must pay.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from elasim.job import load_job
from elasim.jobmodel import JobSpec
from elasim.sim import fastest_finish_h, simulate
from elasim.sweep import SweepSpec, run_sweep
from elasim.traces import import_trace, load_trace

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "traces-real"
BUNDLED = ("spot_us_east.csv", "spot_us_west.csv", "spot_p3_bamboo.csv")
#: Shared traces without prices: priced like the bundled p3.2xlarge traces.
SPOT_PRICE, ON_DEMAND_PRICE = 0.918, 3.06
#: The bundled us_east / us_west traces are these, with prices spliced in.
BUNDLED_FROM = {"aws-08-27-2023/us-east-2b_v100_1", "aws-08-27-2023/us-west-2a_v100_1"}
POLICIES = ("greedy", "deadline", "uniform_progress", "receding")
NODES = (1, 4, 16)
FACTORS = (1.1, 1.5, 2.0)
JOB = "resnet50_v100"


def shared_traces(folder: Path, count: int) -> list[str]:
    """Up to ``count`` shared availability traces, imported as CSV files into ``folder``.

    Taken in turn from the 1-node and the 16-node sets (the 16-node ones have room
    for 16 nodes), skipping the two the bundled traces come from.
    """
    sky = SHARED / "skypilot-spot-traces" / "availability"
    if not sky.is_dir() or count <= 0:
        return []
    sets = [sorted(p for p in (sky / size).rglob("*.json")) for size in ("16-node", "1-node")]
    picked: list[Path] = []
    while len(picked) < count and any(sets):
        for paths in sets:
            while paths:
                path = paths.pop(0)
                if f"{path.parent.name}/{path.stem}" not in BUNDLED_FROM:
                    picked.append(path)
                    break
    out = []
    for path in picked[:count]:
        target = folder / f"{path.parent.parent.name}_{path.parent.name}_{path.stem}.csv"
        import_trace("skypilot", path, out_path=target)
        out.append(str(target))
    return out


def window(nodes: int, factor: float, start_offset_s: float | None, **spec: Any):
    """``(spec, job)`` of one window: the preset on up to ``nodes`` nodes, its deadline.

    The deadline is ``factor`` times the preset's fastest time from the start, at the
    benchmark's prices; ``start_offset_s`` None lets the sweep draw it per seed, and
    ``spec`` adds further ``JobSpec`` fields.  The one builder of a window: the
    tests that pin one and the tail's analyses replay it from here.
    """
    job = load_job(JOB).with_nodes(1, nodes)
    built = JobSpec(
        job=JOB,
        max_nodes=nodes,
        deadline_s=factor * fastest_finish_h(job, JobSpec()) * 3600.0,
        start_offset_s=start_offset_s,
        on_demand_price_per_hour=ON_DEMAND_PRICE,
        spot_price_per_hour=SPOT_PRICE,
        **spec,
    )
    return built, job


def sweep(
    traces: list[str], policies: tuple[str, ...], nodes: int, factor: float, args
) -> pd.DataFrame:
    """One grid: every trace x window at ``nodes`` nodes, deadline ``factor`` x fastest."""
    base, _ = window(nodes, factor, None)
    spec = SweepSpec(
        traces=tuple(traces),
        policies=policies,
        seeds=tuple(range(args.windows)),
        notice_s=(args.notice_s,),
        base=base,
    )
    frame = run_sweep(spec, workers=args.workers)
    frame["nodes"] = nodes
    frame["factor"] = factor
    return frame


#: The columns of ``--out``'s table that the tail's analyses read.
ROW_COLUMNS = (
    "trace",
    "policy",
    "seed",
    "nodes",
    "factor",
    "start_offset_s",
    "cost_vs_optimal",
    "optimal_usd",
    "on_demand_plan_usd",
)


def read_rows(parser: argparse.ArgumentParser, path: Path) -> pd.DataFrame:
    """``--out``'s table, or one line on what is wrong with it and exit 2 (bad input)."""
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as err:  # missing, unreadable, empty, not CSV
        why = getattr(err, "strerror", None) or err
        parser.exit(2, f"{parser.prog}: error: {path}: {why}\n")
    missing = [column for column in ROW_COLUMNS if column not in frame.columns]
    if missing:
        why = f"not a --out table of this benchmark (no {', '.join(missing)})"
        parser.exit(2, f"{parser.prog}: error: {path}: {why}\n")
    return frame


def quantiles(values: list[float]) -> tuple[float, float, float]:
    """Median, 90th percentile and worst (NaN when empty)."""
    if not values:
        return (float("nan"),) * 3
    series = pd.Series(values)
    return float(series.median()), float(series.quantile(0.9)), float(series.max())


def print_table(
    frame: pd.DataFrame, policies: tuple[str, ...], nodes_list: tuple[int, ...] = NODES
) -> None:
    """Per policy (and per node count): cost / optimum and deadlines met."""
    head = f"{'policy':<18} {'nodes':>5} {'runs':>5} {'met':>9}"
    head += f" {'median':>7} {'p90':>7} {'worst':>7}"
    print(head)
    print("-" * len(head))
    for policy in policies:
        rows = frame[frame["policy"] == policy]
        for nodes in (*nodes_list, "all"):
            part = rows if nodes == "all" else rows[rows["nodes"] == nodes]
            on_time = part[part["deadline_met"].fillna(False).astype(bool)]
            ratios = [float(v) for v in on_time["cost_vs_optimal"].dropna()]
            met = int(part["deadline_met"].fillna(False).astype(bool).sum())
            median, p90, worst = quantiles(ratios)
            print(
                f"{policy:<18} {nodes!s:>5} {len(part):>5} {met:>4}/{len(part):<4} "
                f"{median:>7.3f} {p90:>7.3f} {worst:>7.3f}"
            )
    on_time = frame[frame["deadline_met"].fillna(False).astype(bool)]
    by = on_time.groupby(["policy", "factor"])["cost_vs_optimal"].median().unstack()
    print("\nmedian cost / optimum by deadline factor:")
    print(by.round(3).to_string())


class TimedPolicy:
    """A policy whose ``decide`` calls are timed (the wrapped policy decides)."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.config = policy.config
        self.walls: list[float] = []

    def decide(self, obs):
        start = time.perf_counter()
        decision = self.policy.decide(obs)
        self.walls.append(time.perf_counter() - start)
        return decision


def decision_times(policies: tuple[str, ...]) -> None:
    """Median microseconds per decision, per policy and node count, in one run."""
    from elasim.policies import make_policy

    trace = load_trace("spot_us_east.csv")
    print(f"\ntime per decision on spot_us_east.csv, load {os.getloadavg()[0]:.2f}:")
    for nodes in NODES:
        spec, job = window(nodes, 1.5, 0.0)
        cells = []
        for policy in policies:
            timed = TimedPolicy(make_policy(policy))
            simulate(spec, trace=trace, policy=timed, job=job)
            cells.append(
                f"{policy} {statistics.median(timed.walls) * 1e6:.0f} us "
                f"({len(timed.walls)} decisions)"
            )
        print(f"  {nodes:>2} nodes: " + "; ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=3, help="random windows per trace")
    parser.add_argument("--shared", type=int, default=6, help="shared real traces to add")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--nodes", default=",".join(map(str, NODES)), help="node counts")
    parser.add_argument("--factors", default=",".join(map(str, FACTORS)), help="deadlines")
    parser.add_argument("--out", type=Path, help="also write the rows as CSV here")
    parser.add_argument(
        "--notice-s", type=float, default=0.0, help="preemption notice (AWS gives 120 s)"
    )
    args = parser.parse_args()
    policies = tuple(args.policies.split(","))
    nodes_list = tuple(int(n) for n in args.nodes.split(","))
    factors = tuple(float(f) for f in args.factors.split(","))
    start = time.perf_counter()
    print(f"load {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory(prefix="elasim-bench-") as tmp:
        traces = [*BUNDLED, *shared_traces(Path(tmp), args.shared)]
        print(f"traces: {', '.join(Path(t).name for t in traces)}; {args.windows} windows each")
        frames = [
            sweep(traces, policies, nodes, factor, args)
            for nodes in nodes_list
            for factor in factors
        ]
    frame = pd.concat(frames, ignore_index=True)
    if args.out:
        frame.to_csv(args.out, index=False)
    optimum_met = frame.drop_duplicates(["trace", "seed", "nodes", "factor"])
    print(
        f"\n{len(optimum_met)} windows; cost / optimum over the runs that met the deadline "
        f"(the optimum's replay, deadline yardstick of elasim sweep)\n"
    )
    print_table(frame, policies, nodes_list)
    if nodes_list == NODES:
        decision_times(policies)
    print(f"\nwall {time.perf_counter() - start:.0f} s, load {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
