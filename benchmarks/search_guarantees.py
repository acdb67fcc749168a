"""Search random windows for a broken promise of the deadline policies.

Run: ``python benchmarks/search_guarantees.py [--windows 3000] [--seed 31]
[--policies deadline,receding,uniform_progress] [--factors 1.1,1.25,1.5,2]``.

``deadline`` and ``receding`` promise to meet every deadline the cheapest on-demand
plan meets and never to pay more than that plan plus their stated bet;
``uniform_progress`` promises the deadline.  The property tests
(``tests/test_policy_invariants.py``) draw a few hundred windows per run; this draws
thousands, seeded, over the bundled spot traces and the real SkyPilot availability
traces beside the checkout (``../shared/traces-real``, when present), at 1 to 16 nodes,
with deadlines of ``--factors`` times the uninterrupted time.  The plan is elasim's
replay of the on-demand plan (the yardstick's ``on_demand_baseline``), so a policy
that prices the plan differently from the replay shows here.

It prints each violation (policy, trace, nodes, deadline factor, window) and then per
policy and deadline factor the windows checked and broken.  A rate of a few per
thousand is what the tests' random examples would meet now and then.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
import time
from collections import Counter
from pathlib import Path

from elasim.job import load_job
from elasim.jobmodel import JobSpec
from elasim.policies import make_policy
from elasim.sim import SimConfig, fastest_finish_h, simulate
from elasim.traces import import_trace, load_trace
from elasim.yardstick import on_demand_baseline

REPO = Path(__file__).resolve().parents[1]
SKY = REPO.parent / "shared" / "traces-real" / "skypilot-spot-traces" / "availability"
BUNDLED = ("spot_us_east.csv", "spot_us_west.csv", "spot_p3_bamboo.csv")
NODES = (1, 2, 4, 8, 16)
SPOT_PRICE, ON_DEMAND_PRICE = 0.918, 3.06
#: Six hours of one V100's work: windows short enough for thousands of runs.
SAMPLES = 1200.0 * 3600 * 6


def traces() -> list:
    """The bundled spot traces, and the real 1-node and 16-node sets where present."""
    out = [load_trace(name) for name in BUNDLED]
    if SKY.is_dir():
        paths = sorted((SKY / "1-node").rglob("*.json"))[:4]
        paths += sorted((SKY / "16-node").rglob("*.json"))[-1:]
        out += [import_trace("skypilot", path) for path in paths]
    return out


def check(trace, policies: list[str], nodes: int, factor: float, where: float) -> list[str] | None:
    """The policies that broke a promise on this window (None: no plan meets it)."""
    job = dataclasses.replace(
        load_job("resnet50_v100").with_nodes(1, nodes), target_samples=SAMPLES
    )
    spec = JobSpec(
        deadline_s=factor * fastest_finish_h(job, JobSpec()) * 3600.0,
        start_offset_s=where * float(trace.duration_s),
        on_demand_price_per_hour=ON_DEMAND_PRICE,
        spot_price_per_hour=SPOT_PRICE,
    )
    plan = on_demand_baseline(trace, job, spec, SimConfig())
    if plan is None:
        return None
    broken = []
    for name in policies:
        policy = make_policy(name)
        run = simulate(spec, trace=trace, policy=policy, job=job)
        bet = getattr(policy.config, "risk_fraction", None)
        bound = math.inf if bet is None else plan[0] * (1 + bet) + 0.01
        if not run.deadline_met or run.cost_usd > bound:
            broken.append(name)
            what = "late" if not run.deadline_met else f"above its bound of {bound:.2f} USD"
            print(
                f"{name}: {trace.name}, {nodes} nodes, {factor}x, window at {where:.6f}: "
                f"{what} ({run.cost_usd:.2f} USD; the on-demand plan {plan[0]:.2f} USD"
                f"{'' if bet is None else f', bet {bet:.1%}'})",
                flush=True,
            )
    return broken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=3000, help="random windows to check")
    parser.add_argument("--seed", type=int, default=31, help="seed of the windows drawn")
    parser.add_argument(
        "--policies", default="deadline,receding,uniform_progress", help="policies to check"
    )
    parser.add_argument(
        "--factors", default="1.1,1.25,1.5,2", help="deadlines, times the uninterrupted time"
    )
    args = parser.parse_args()
    policies = args.policies.split(",")
    factors = [float(f) for f in args.factors.split(",")]
    rng = random.Random(args.seed)
    start = time.perf_counter()
    print(f"load {os.getloadavg()[0]:.2f} at start")
    checked: Counter = Counter()
    broken: Counter = Counter()
    pool = traces()
    if not SKY.is_dir():
        print(f"the real traces are not beside the checkout ({SKY}): bundled traces only")
    for _ in range(args.windows):
        trace, nodes = rng.choice(pool), rng.choice(NODES)
        factor, where = rng.choice(factors), rng.random()
        found = check(trace, policies, nodes, factor, where)
        if found is None:
            continue  # infeasible: nothing is promised
        for name in found:
            broken[name, factor] += 1
        for name in policies:
            checked[name, factor] += 1
    print(f"\n{len(pool)} traces, {args.windows} windows, seed {args.seed}")
    print(f"{'policy':<18} {'factor':>6} {'windows':>8} {'broken':>7}")
    for name in policies:
        for factor in factors:
            print(f"{name:<18} {factor:>6} {checked[name, factor]:>8} {broken[name, factor]:>7}")
    print(f"wall {time.perf_counter() - start:.0f} s, load {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
