"""Failing over between zones against staying in the best single zone, on real traces.

Run: ``python benchmarks/bench_zones.py [--windows 8] [--bounds 4]``.

Issue 25, item 4.  Two real multi-zone sets beside the checkout
(``../shared/traces-real/skypilot-spot-traces``, the Can't Be Late / SkyPilot traces,
imported with elasim's ``skypilot`` importer):

* ``16-node``: ``availability/16-node/aws-08-27-2023``, 16 x p3.2xlarge one-time spot
  requests every 300 s in us-east-2b, us-west-2a and us-west-2c (the zones share a
  clock: the same start date; us-east-2b's trace is shorter, so every window lies in
  its 11.3 days).  The job: ResNet-50 on up to 16 nodes.
* ``1-node``: ``availability/1-node/aws-02-15-2023``, one p3.2xlarge in each of 9
  zones every 195 s for 45.5 days.  The job: ResNet-50 on one node.

The traces record availability only.  Every zone is priced alike, 0.918 USD per
spot node-hour and 3.06 on demand (the p3.2xlarge figures the bundled traces use,
``bench_spot_policies.py`` does the same): what the zones save here comes from their
availability alone, not from price differences, which these traces do not record.

Per random window (``--windows``, the same windows for every run):

* **live policies, no deadline**: ``greedy`` staying in each zone against
  ``failover`` over all the zones: completion time and cost, and failover's moves.
  The best single zone is chosen *in hindsight* per window (the cheapest completion
  among the zones), the strongest baseline a fixed-zone run can have, and also the
  zone that is best over all windows (a choice one could make in advance).
* **``deadline``, deadline 1.5 x the fastest time**: staying in each zone (the best
  in hindsight: the cheapest that met it) against moving between them (its
  ``failover`` option, on in several zones);
* **offline optimum, the same deadline** (first ``--bounds`` windows):
  each zone's own optimum (the job staying there) against the optimum of the zones
  (:func:`elasim.optimal.zones.zone_bounds`: the lower bound, and the zone program's
  replayed plan and its moves).

Moves cost a restart plus the checkpoint's transfer: the job's checkpoint (the
preset's size) over 10 Gbit/s, the spec's default (``--transfer-gbps`` to change).
Everything is measured in this one run and printed with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from elasim.job import load_job
from elasim.jobmodel import JobSpec
from elasim.optimal.zones import zone_bounds
from elasim.policies import make_policy
from elasim.sim import SimConfig, fastest_finish_h, resolve, simulate
from elasim.traces.from_skypilot import import_skypilot
from elasim.traces.model import start_offset_of
from elasim.traces.zones import ZoneSet

REPO = Path(__file__).resolve().parents[1]
SKY = REPO.parent / "shared" / "traces-real" / "skypilot-spot-traces" / "availability"
SETS = {
    "16-node": ("16-node/aws-08-27-2023", ("us-east-2b", "us-west-2a", "us-west-2c"), 16),
    "1-node": (
        "1-node/aws-02-15-2023",
        tuple(
            f"us-{z}"
            for z in ("east-1a", "east-1c", "east-1d", "east-1f", "east-2a", "east-2b")
            + ("west-2a", "west-2b", "west-2c")
        ),
        1,
    ),
}
SPOT_PRICE, ON_DEMAND_PRICE = 0.918, 3.06
JOB = "resnet50_v100"


def zone_set(folder: str, zones: tuple[str, ...]) -> ZoneSet:
    """The set's zones as capacity traces, each named after its zone."""
    return ZoneSet(
        tuple(
            import_skypilot(
                SKY / folder / f"{zone}_v100_1.json",
                name=zone,
                instance_type="p3.2xlarge",
                on_demand_price_per_hour=ON_DEMAND_PRICE,
            )
            for zone in zones
        )
    )


def _run(spec: JobSpec, trace, policy: str, job) -> tuple[float, float, bool, int]:
    """``(completion h, cost USD, deadline met, moves)`` of one simulation."""
    result = simulate(spec, SimConfig(), trace=trace, policy=make_policy(policy), job=job)
    moves = int(dict(result.simulator).get("zone_moves", 0))
    return result.completion_time_h or float("nan"), result.cost_usd, result.deadline_met, moves


def live(zones: ZoneSet, nodes: int, windows: int) -> None:
    """greedy in each zone against failover over all of them, no deadline."""
    job = load_job(JOB).with_nodes(1, nodes)
    rows = []
    for seed in range(windows):
        offset = start_offset_of(zones.shortest(), None, seed)
        base = JobSpec(
            max_nodes=nodes,
            start_offset_s=offset,
            spot_price_per_hour=SPOT_PRICE,
            on_demand_price_per_hour=ON_DEMAND_PRICE,
            seed=seed,
        )
        spec, *_ = resolve(base, trace=zones, policy=make_policy("failover"), job=job)
        each = {t.name: _run(base.replace(trace=t.name), t, "greedy", job) for t in zones.traces}
        rows.append((each, _run(spec, zones, "failover", job)))
    means = {z: statistics.mean(r[0][z][1] for r in rows) for z in zones.names}
    fixed = min(means, key=means.__getitem__)
    print(f"  move: {spec.checkpoint_size_gb:.3f} GB at {spec.transfer_gbps:g} Gbit/s")
    print(f"  {'window':>6} {'best zone':>11} {'h':>7} {'USD':>8} | {fixed + ' h':>14} "
          f"{'USD':>8} | {'failover h':>10} {'USD':>8} {'moves':>5}")  # fmt: skip
    ratios_best, ratios_fixed, times_best, moves = [], [], [], []
    for seed, (each, (fo_h, fo_usd, _, fo_moves)) in enumerate(rows):
        best = min(each, key=lambda z: each[z][1])
        print(f"  {seed:>6} {best:>11} {each[best][0]:>7.2f} {each[best][1]:>8.2f} | "
              f"{each[fixed][0]:>14.2f} {each[fixed][1]:>8.2f} | {fo_h:>10.2f} "
              f"{fo_usd:>8.2f} {fo_moves:>5}")  # fmt: skip
        ratios_best.append(fo_usd / each[best][1])
        ratios_fixed.append(fo_usd / each[fixed][1])
        times_best.append(fo_h / each[best][0])
        moves.append(fo_moves)
    print(f"  failover / best zone in hindsight: cost median {statistics.median(ratios_best):.3f} "
          f"(worst {max(ratios_best):.3f}), completion time median "
          f"{statistics.median(times_best):.3f}; / {fixed} (best on average): cost median "
          f"{statistics.median(ratios_fixed):.3f}; moves median {statistics.median(moves):g}, "
          f"max {max(moves)}")  # fmt: skip


def _deadline_spec(zones: ZoneSet, job, nodes: int, seed: int) -> JobSpec:
    """A window of the zones, resolved, with the deadline at 1.5 x the fastest time."""
    base = JobSpec(
        max_nodes=nodes,
        deadline_s=1.5 * fastest_finish_h(job, JobSpec()) * 3600.0,
        start_offset_s=start_offset_of(zones.shortest(), None, seed),
        spot_price_per_hour=SPOT_PRICE,
        on_demand_price_per_hour=ON_DEMAND_PRICE,
        seed=seed,
    )
    spec, *_ = resolve(base, trace=zones, policy=make_policy("greedy"), job=job)
    return spec


def deadline(zones: ZoneSet, nodes: int, windows: int) -> None:
    """``deadline`` staying in each zone against ``deadline`` over the zones."""
    job = load_job(JOB).with_nodes(1, nodes)
    rows = []
    for seed in range(windows):
        spec = _deadline_spec(zones, job, nodes, seed)
        one = spec.replace(zone_traces=())
        each = {t.name: _run(one.replace(trace=t.name), t, "deadline", job) for t in zones.traces}
        rows.append((each, _run(spec, zones, "deadline", job)))
    met_all = {z: all(r[0][z][2] for r in rows) for z in zones.names}
    means = {z: statistics.mean(r[0][z][1] for r in rows) for z in zones.names if met_all[z]}
    fixed = min(means, key=means.__getitem__) if means else zones.names[0]
    everywhere = sum(all(r[0][z][2] for z in zones.names) for r in rows)
    ratios, ratios_fixed, moves, met = [], [], [], []
    for each, (_, usd, ok, n) in rows:
        best = min((z for z in each if each[z][2]), key=lambda z: each[z][1], default=None)
        if best is not None:
            ratios.append(usd / each[best][1])
        ratios_fixed.append(usd / each[fixed][1])
        moves.append(n)
        met.append(ok)
    print(f"  deadline over the zones / deadline in the best zone in hindsight: cost median "
          f"{statistics.median(ratios):.3f} (best {min(ratios):.3f}, worst {max(ratios):.3f}); "
          f"/ in {fixed} (best on average): median {statistics.median(ratios_fixed):.3f}; "
          f"moves median {statistics.median(moves):g}, max {max(moves)}; deadlines met "
          f"{sum(met)}/{len(met)} (staying, in every zone: {everywhere}/{len(rows)})")  # fmt: skip


def bounds(zones: ZoneSet, nodes: int, windows: int) -> None:
    """Each zone's optimum against the optimum of the zones, deadline 1.5 x fastest."""
    job = load_job(JOB).with_nodes(1, nodes)
    savings = []
    for seed in range(windows):
        spec = _deadline_spec(zones, job, nodes, seed)
        started = time.process_time()
        b = zone_bounds(zones, job, spec)
        cpu = time.process_time() - started
        best = b.best_zone
        best_usd = b.zone_usd[best] if best else None
        line = f"  window {seed}: best zone {best} {best_usd or float('nan'):.2f} USD; zones: "
        line += f"bound {b.lower_bound_usd or float('nan'):.2f}, plan "
        line += f"{b.zone_plan_usd or float('nan'):.2f} ({b.zone_plan_moves} moves), "
        line += f"gap {b.gap if b.gap is not None else float('nan'):.3f}; {cpu:.1f} s CPU"
        print(line)
        if best_usd and b.upper_bound_usd and b.lower_bound_usd:
            savings.append((1 - b.upper_bound_usd / best_usd, 1 - b.lower_bound_usd / best_usd))
    if savings:
        low = statistics.median(s[0] for s in savings)
        high = statistics.median(s[1] for s in savings)
        print(f"  the zones' optimum saves, against the best zone's: median {low:.1%} "
              f"(its plan) to {high:.1%} (the bound)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--bounds", type=int, default=4)
    args = parser.parse_args()
    if not SKY.is_dir():
        raise SystemExit(f"no real traces at {SKY}: nothing measured")
    started = time.perf_counter()
    for label, (folder, names, nodes) in SETS.items():
        zones = zone_set(folder, names)
        print(f"{label}: {len(names)} zones ({', '.join(names)}), up to {nodes} nodes")
        live(zones, nodes, args.windows)
        deadline_h = 1.5 * fastest_finish_h(load_job(JOB).with_nodes(1, nodes), JobSpec())
        print(f"  with a deadline of {deadline_h:.2f} h (1.5 x the fastest time):")
        deadline(zones, nodes, args.windows)
        bounds(zones, nodes, args.bounds)
    print(f"{time.perf_counter() - started:.0f} s; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
