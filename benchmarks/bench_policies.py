"""Deadline policies against the on-demand plan and the offline optimum.

Run: ``python benchmarks/bench_policies.py`` (no arguments needed).

For every bundled spot trace, and for random windows of the real traces in
``../shared/traces-real`` when they are beside the checkout, the ResNet-50 preset runs
on up to ``--nodes`` nodes with its deadline at ``--slack`` times its fastest time.
Each window is simulated with ``deadline``, greedy with fallback, the cheapest pure
on-demand plan and the replayed offline optimum (``optimal``); the table gives, per
trace, the deadline hit rate, ``cost_vs_on_demand`` and ``gap_closed`` (means over
windows) and the optimum's own figures.

Then the planner itself: its duality gap (plan cost in its model against its lower
bound), the grid's effect (the same windows planned at ``step_s`` and at half of
it), and the time ``optimal`` takes on the 11-day ``spot_us_east.csv`` at 4 nodes
with a job spanning the trace (median of ``--repeats``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time
from pathlib import Path

import numpy as np

from elasim.job import load_job
from elasim.jobmodel import JobSpec
from elasim.optimal import plan_optimal
from elasim.policies import DeadlinePolicy, OptimalPolicy, make_policy
from elasim.sim import SimConfig, fastest_finish_h, simulate
from elasim.traces import import_trace, load_trace
from elasim.yardstick import GREEDY_FALLBACK, Yardstick, on_demand_baseline

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "traces-real"
BUNDLED = ("spot_us_east.csv", "spot_us_west.csv", "spot_p3_bamboo.csv")
#: Bamboo's trace has no prices: priced like the bundled p3.2xlarge traces.
SPOT_PRICE, ON_DEMAND_PRICE = 0.918, 3.06


#: Shared files already in the table: the bundled us_east / us_west traces are these
#: availability traces with prices spliced in.
BUNDLED_FROM = {"aws-08-27-2023/us-east-2b_v100_1", "aws-08-27-2023/us-west-2a_v100_1"}


def shared_traces() -> list:
    """Real availability traces beside the checkout (none when ../shared is absent).

    Every SkyPilot / Can't Be Late availability trace but the two the bundled traces
    are built from.  The raw probe logs (``skypilot-spot-strategy-raw``) are the same
    data as the ``aws-10-26-2022`` files, so they are not counted twice.
    """
    if not SHARED.is_dir():
        return []
    sky = SHARED / "skypilot-spot-traces" / "availability"
    out = []
    for path in sorted(sky.rglob("*.json")):
        name = f"{path.parent.name}/{path.stem}"
        if name not in BUNDLED_FROM:
            out.append(dataclasses.replace(import_trace("skypilot", path), name=name))
    return out


def window(trace, job, nodes: int, slack: float, seed: int, step_s: float) -> dict:
    """One window: the four runs and the yardstick columns of ``deadline``."""
    deadline_h = slack * fastest_finish_h(job, JobSpec())
    spec = JobSpec(
        deadline_s=deadline_h * 3600.0,
        seed=seed,
        start_offset_s=None,
        on_demand_price_per_hour=ON_DEMAND_PRICE,
        spot_price_per_hour=SPOT_PRICE,
    )
    config = SimConfig(record_timeline=False)
    baseline = on_demand_baseline(trace, job, spec, config)
    ours = simulate(spec, config, trace=trace, policy=DeadlinePolicy(), job=job)
    greedy = simulate(spec, config, trace=trace, policy=make_policy(*GREEDY_FALLBACK), job=job)
    others = [r.cost_usd for r in (ours, greedy) if r.deadline_met]
    others += [baseline[0]] if baseline is not None else []
    oracle = OptimalPolicy(OptimalPolicy.Config(step_s=step_s))
    best = simulate(spec, config, trace=trace, policy=oracle, job=job)
    plan = dict(best.simulator)["oracle_plan"]
    reference = Yardstick(
        on_demand_cost_usd=None if baseline is None else baseline[0],
        on_demand_nodes=None if baseline is None else baseline[1],
        greedy_fallback_cost_usd=greedy.cost_usd,
        greedy_fallback_met=greedy.deadline_met,
        optimal_cost_usd=best.cost_usd,
        optimal_met=best.deadline_met,
    )
    return {
        "met": bool(ours.deadline_met),
        "vs_od": reference.cost_vs_on_demand(ours.cost_usd),
        "gap": reference.gap_closed(ours.cost_usd, ours.deadline_met),
        "greedy_vs_od": reference.cost_vs_on_demand(greedy.cost_usd),
        "optimal_vs_od": reference.cost_vs_on_demand(best.cost_usd),
        "optimal_met": bool(best.deadline_met),
        "excess": (best.cost_usd - min(others)) / best.cost_usd,
        "model_usd": plan["model_cost_usd"],
        "bound_usd": plan["lower_bound_usd"],
        "sim_usd": best.cost_usd,
        "spec": spec,
    }


def mean(values) -> float:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else float("nan")


def summary_line(label: str, results: list[dict]) -> None:
    """One aggregate row: means over the windows (gap closed over those with a gap)."""
    gaps = [r["gap"] for r in results if r["gap"] is not None]
    print(
        f"{label}: {len(results)} windows, deadline met {sum(r['met'] for r in results)}, "
        f"cost/OD mean {mean(r['vs_od'] for r in results):.3f} "
        f"max {max(r['vs_od'] or 0 for r in results):.3f}, gap closed mean {mean(gaps):.3f} "
        f"({len(gaps)} with a gap), greedy/OD {mean(r['greedy_vs_od'] for r in results):.3f}, "
        f"optimal/OD {mean(r['optimal_vs_od'] for r in results):.3f}"
    )


def print_table(rows: list[tuple[str, list[dict]]]) -> list[dict]:
    header = (
        f"{'trace':<42} {'win':>3} {'met':>5} {'cost/OD':>8} {'max':>6} {'gap closed':>10} "
        f"{'greedy/OD':>9} {'opt/OD':>7} {'opt met':>7}"
    )
    print(header)
    print("-" * len(header))
    everything = []
    for name, results in rows:
        everything += results
        met = sum(r["met"] for r in results)
        print(
            f"{name:<42} {len(results):>3} {met:>2}/{len(results):<2} "
            f"{mean(r['vs_od'] for r in results):>8.3f} "
            f"{max(r['vs_od'] or 0 for r in results):>6.3f} "
            f"{mean(r['gap'] for r in results):>10.3f} "
            f"{mean(r['greedy_vs_od'] for r in results):>9.3f} "
            f"{mean(r['optimal_vs_od'] for r in results):>7.3f} "
            f"{sum(r['optimal_met'] for r in results):>4}/{len(results):<2}"
        )
    gaps = [r["gap"] for r in everything if r["gap"] is not None]
    print("-" * len(header))
    shared = [r for name, results in rows if "/" in name for r in results]
    if shared:
        summary_line(
            f"the {len(shared) // max(len(rows[-1][1]), 1)} real traces in ../shared", shared
        )
    print(
        f"all {len(everything)} windows: deadline met {sum(r['met'] for r in everything)}, "
        f"cost/OD mean {mean(r['vs_od'] for r in everything):.3f} "
        f"max {max(r['vs_od'] or 0 for r in everything):.3f}, "
        f"gap closed mean {mean(gaps):.3f} over {len(gaps)} windows with a gap "
        f"(median {statistics.median(gaps) if gaps else float('nan'):.3f}), "
        f"optimal beaten in {sum(r['excess'] > 1e-9 for r in everything)} "
        f"(by more than 1 %: {sum(r['excess'] > 0.01 for r in everything)}, at most "
        f"{max(r['excess'] for r in everything):.2%})"
    )
    return everything


def planner_figures(results: list[dict], traces: dict, job, step_s: float) -> None:
    """The planner's duality gap, and a finer grid on the first windows."""
    duality = [
        (r["model_usd"] - r["bound_usd"]) / r["model_usd"]
        for r in results
        if r["bound_usd"] is not None and r["model_usd"]
    ]
    model = [abs(r["sim_usd"] - r["model_usd"]) / r["sim_usd"] for r in results if r["model_usd"]]
    print(
        f"\nplanner: step {step_s:g} s; duality gap (plan cost in its model vs its lower bound) "
        f"median {statistics.median(duality):.4f}, max {max(duality):.4f}; "
        f"model vs simulated cost of the plan: median {statistics.median(model):.4f}, "
        f"max {max(model):.4f}"
    )
    finer = []
    for r in results[:12]:
        trace = traces[r["trace"]]
        coarse, _ = r["sim_usd"], None
        policy = OptimalPolicy(OptimalPolicy.Config(step_s=step_s / 2))
        fine = simulate(
            r["spec"], SimConfig(record_timeline=False), trace=trace, policy=policy, job=job
        )
        fine = fine.cost_usd
        finer.append((coarse - fine) / coarse)
    print(
        f"grid {step_s:g} s vs {step_s / 2:g} s on {len(finer)} windows: the finer grid is "
        f"cheaper by median {statistics.median(finer):.4f}, at most {max(finer):.4f} "
        f"(negative: dearer)"
    )


def time_optimal(repeats: int) -> None:
    """``optimal`` on the 11-day trace at 4 nodes, the job spanning the trace."""
    trace = load_trace("spot_us_east.csv")
    job = load_job("resnet50_v100").with_nodes(1, 4)
    span_h = float(trace.duration_s) / 3600.0
    # a job that needs 2/3 of the trace on 4 nodes, due at the trace's end
    samples = job.goodput(4) * span_h * 3600.0 / 1.5
    job = dataclasses.replace(job, target_samples=samples)
    spec = JobSpec(deadline_s=float(trace.duration_s))
    config = SimConfig(record_timeline=False)
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        plan, report = plan_optimal(trace, job, spec)
        policy = OptimalPolicy().with_plan(plan)
        result = simulate(spec, config, trace=trace, policy=policy, job=job)
        walls.append(time.perf_counter() - start)
    print(
        f"\noptimal on spot_us_east.csv ({span_h / 24:.1f} days) at 4 nodes, job due at the "
        f"trace's end: {report.segments} segments x {report.configurations} configurations; "
        f"plan + replay median {statistics.median(walls):.2f} s over {repeats} runs "
        f"(min {min(walls):.2f}, max {max(walls):.2f}); deadline met {result.deadline_met}, "
        f"replayed {result.cost_usd:.2f} USD; in the planner's model the plan costs "
        f"{report.model_cost_usd:.2f} USD and no schedule on its grid costs less than "
        f"{report.lower_bound_usd or math.nan:.2f} USD (a bound in that model: the replay "
        f"is the simulator's, which the model prices to within about 1 %)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--slack", type=float, default=1.5)
    parser.add_argument("--windows", type=int, default=6, help="random windows per trace")
    parser.add_argument("--step-s", type=float, default=300.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    job = load_job("resnet50_v100").with_nodes(1, args.nodes)
    traces = {name: load_trace(name) for name in BUNDLED}
    traces.update({t.name: t for t in shared_traces()})
    rows = []
    print(
        f"ResNet-50 on up to {args.nodes} nodes, deadline {args.slack:g} x its fastest time "
        f"({args.slack * fastest_finish_h(job, JobSpec()):.1f} h), {args.windows} random "
        f"windows per trace, spot {SPOT_PRICE} / on-demand {ON_DEMAND_PRICE} USD/h where "
        "the trace has no price\n"
    )
    for name, trace in traces.items():
        results = [
            window(trace, job, args.nodes, args.slack, seed, args.step_s)
            for seed in range(args.windows)
        ]
        for r in results:
            r["trace"] = name
        rows.append((name, results))
    everything = print_table(rows)
    planner_figures(everything, traces, job, args.step_s)
    time_optimal(args.repeats)


if __name__ == "__main__":
    main()
