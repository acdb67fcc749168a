"""Failing over between zones against staying in the best single zone, on real traces.

Run: ``python benchmarks/bench_zones.py [--windows 8] [--bounds 4] [--prices dime]
[--price-start 2020-01-01T00:00:00Z]``.

Issue 25, item 4.  Two real multi-zone sets beside the checkout
(``../shared/traces-real/skypilot-spot-traces``, the Can't Be Late / SkyPilot traces,
imported with elasim's ``skypilot`` importer):

* ``16-node``: ``availability/16-node/aws-08-27-2023``, 16 x p3.2xlarge one-time spot
  requests every 300 s in us-east-2b, us-west-2a and us-west-2c (the zones share a
  clock: the same start date; us-east-2b's trace is shorter, so every window lies in
  its 11.3 days).  The job: ResNet-50 on up to 16 nodes.
* ``1-node``: ``availability/1-node/aws-02-15-2023``, one p3.2xlarge in each of 9
  zones every 195 s for 45.5 days.  The job: ResNet-50 on one node.

The traces record availability only.  By default (``--prices flat``) every zone is
priced alike, 0.918 USD per spot node-hour and 3.06 on demand (the p3.2xlarge figures
the bundled traces use, ``bench_spot_policies.py`` does the same): what the zones save
comes from their availability alone.  ``--prices dime`` prices each zone's spot by the
real AWS spot price history of the *same zone name* for p3.2xlarge
(``../shared/traces-real/training-on-a-dime``, Dec 2019 - Mar 2020), spliced in as
the trace's price column by elasim's ``aws-price`` importer: trace time 0 is
2020-01-01T00:00Z in every zone (as in the bundled ``spot_us_*.csv``;
``--price-start`` to move it), so the zones'
prices at a moment are the ones AWS recorded at one moment, and they repeat with the
availability trace when a job outlasts it.  Availability (2022-23, SkyPilot) and
prices (2019-20, AWS) come from different periods, paired by zone name: a
construction from two real sources, not a recorded joint trace.  A zone without a
price series is left out of the priced set (the output says which; ``--prices flat
--same-zones`` leaves it out too, the control with flat prices).  On demand stays
3.06 USD/h, the AWS on-demand price of p3.2xlarge.

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

Each move of ``failover``, ``deadline`` and the zone program's plan is classed by the
zones' state when it was made: *for availability* (the destination offers more usable
nodes), *for price* (no more nodes, but cheaper spot) or *other*.

Moves cost a restart plus the checkpoint's transfer: the job's checkpoint (the
preset's size) over 10 Gbit/s, the spec's default (``--transfer-gbps`` to change).
Everything is measured in this one run and printed with the load average.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from collections import Counter
from pathlib import Path

import numpy as np

from elasim.job import load_job
from elasim.jobmodel import JobSpec
from elasim.optimal.zones import zone_bounds
from elasim.policies import make_policy
from elasim.sim import SimConfig, fastest_finish_h, resolve, simulate
from elasim.traces.errors import TraceError
from elasim.traces.from_aws_price import import_aws_price
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
DIME = REPO.parent / "shared" / "traces-real" / "training-on-a-dime" / "aws" / "cost"
#: Trace time 0 in the price history (the bundled spliced ``spot_us_*.csv`` use it too).
PRICE_START_UTC = "2020-01-01T00:00:00Z"
INSTANCE_TYPE = "p3.2xlarge"
JOB = "resnet50_v100"


def zone_set(folder: str, zones: tuple[str, ...]) -> ZoneSet:
    """The set's zones as capacity traces, each named after its zone."""
    return ZoneSet(
        tuple(
            import_skypilot(
                SKY / folder / f"{zone}_v100_1.json",
                name=zone,
                instance_type=INSTANCE_TYPE,
                on_demand_price_per_hour=ON_DEMAND_PRICE,
            )
            for zone in zones
        )
    )


def priced_zones(
    zones: ZoneSet, price_root: Path = DIME, start_utc: str = PRICE_START_UTC
) -> tuple[ZoneSet, dict[str, str]]:
    """Each zone's trace with the AWS spot prices of the same zone name as its price column.

    The prices come from ``price_root/<region>/*p3.2xlarge.json`` (the region is the
    zone less its letter), spliced by the ``aws-price`` importer with trace time 0 at
    ``start_utc`` in every zone, so the zones' prices stay simultaneous with each
    other.  Returns the priced set and, by zone, why a zone was left out (no price
    series): a zone priced by anything but its own history would not be a real price.

    Raises:
        SystemExit: fewer than two zones have prices.
    """
    priced, missing = [], {}
    for trace in zones.traces:
        region = price_root / re.sub(r"[a-z]+$", "", trace.name)
        try:
            priced.append(
                import_aws_price(
                    sorted(region.glob(f"*{INSTANCE_TYPE}.json")),
                    base=trace,
                    zone=trace.name,
                    instance_type=INSTANCE_TYPE,
                    start=start_utc,
                )
            )
        except TraceError as exc:
            missing[trace.name] = str(exc)
    if len(priced) < 2:
        raise SystemExit(f"fewer than two zones have prices: {missing}")
    return ZoneSet(tuple(priced)), missing


def _spot_price(zones: ZoneSet) -> float | None:
    """The spec's flat spot price; none where the zones' traces carry their own."""
    return None if zones.priced else SPOT_PRICE


def move_kinds(zones: ZoneSet, offset_s: float, moves, max_nodes: int) -> Counter:
    """Each move ``(t_s, from, to)`` classed as ``availability``, ``price`` or ``other``.

    *availability*: the destination offered more usable nodes at ``offset_s + t_s``;
    *price*: not more nodes, but cheaper spot; *other*: neither.
    """
    by_name = {t.name: t for t in zones.traces}
    kinds: Counter = Counter()
    for t_s, here, there in moves:
        (a_here, p_here), (a_there, p_there) = (
            by_name[z].value_at(offset_s + t_s) for z in (here, there)
        )
        if min(a_there, max_nodes) > min(a_here, max_nodes):
            kinds["availability"] += 1
        elif p_there is not None and p_here is not None and p_there < p_here:
            kinds["price"] += 1
        else:
            kinds["other"] += 1
    return kinds


def _kinds_text(kinds: Counter) -> str:
    order = ("availability", "price", "other")
    return ", ".join(f"{kinds[k]} for {k}" for k in order if kinds[k]) or "none"


def _run(spec: JobSpec, trace, policy: str, job) -> tuple[float, float, bool, int, list]:
    """``(completion h, cost USD, deadline met, moves, [(t_s, from, to)])`` of one run."""
    result = simulate(spec, SimConfig(), trace=trace, policy=make_policy(policy), job=job)
    log = list(dict(result.simulator).get("moves", []))
    h = result.completion_time_h or float("nan")
    return h, result.cost_usd, result.deadline_met, len(log), log


def live(zones: ZoneSet, nodes: int, windows: int) -> None:
    """greedy in each zone against failover over all of them, no deadline."""
    job = load_job(JOB).with_nodes(1, nodes)
    rows, kinds = [], Counter()
    for seed in range(windows):
        offset = start_offset_of(zones.shortest(), None, seed)
        base = JobSpec(
            max_nodes=nodes,
            start_offset_s=offset,
            spot_price_per_hour=_spot_price(zones),
            on_demand_price_per_hour=ON_DEMAND_PRICE,
            seed=seed,
        )
        spec, *_ = resolve(base, trace=zones, policy=make_policy("failover"), job=job)
        each = {t.name: _run(base.replace(trace=t.name), t, "greedy", job) for t in zones.traces}
        rows.append((each, _run(spec, zones, "failover", job)))
        kinds += move_kinds(zones, offset, rows[-1][1][4], nodes)
    means = {z: statistics.mean(r[0][z][1] for r in rows) for z in zones.names}
    fixed = min(means, key=means.__getitem__)
    print(f"  move: {spec.checkpoint_size_gb:.3f} GB at {spec.transfer_gbps:g} Gbit/s")
    print(f"  {'window':>6} {'best zone':>11} {'h':>7} {'USD':>8} | {fixed + ' h':>14} "
          f"{'USD':>8} | {'failover h':>10} {'USD':>8} {'moves':>5}")  # fmt: skip
    ratios_best, ratios_fixed, times_best, moves = [], [], [], []
    for seed, (each, (fo_h, fo_usd, _, fo_moves, _)) in enumerate(rows):
        best = min(each, key=lambda z: each[z][1])
        print(f"  {seed:>6} {best:>11} {each[best][0]:>7.2f} {each[best][1]:>8.2f} | "
              f"{each[fixed][0]:>14.2f} {each[fixed][1]:>8.2f} | {fo_h:>10.2f} "
              f"{fo_usd:>8.2f} {fo_moves:>5}")  # fmt: skip
        ratios_best.append(fo_usd / each[best][1])
        ratios_fixed.append(fo_usd / each[fixed][1])
        times_best.append(fo_h / each[best][0])
        moves.append(fo_moves)
    print(f"  per window, failover's cost (USD) / the best zone's in hindsight (where greedy "
          f"cost least that window): median {statistics.median(ratios_best):.3f} (worst "
          f"{max(ratios_best):.3f}); its completion time / that zone's: median "
          f"{statistics.median(times_best):.3f}; its cost / {fixed}'s (greedy's lowest mean "
          f"cost over the windows): median {statistics.median(ratios_fixed):.3f}; its moves: "
          f"median {statistics.median(moves):g}, max {max(moves)} "
          f"({_kinds_text(kinds)})")  # fmt: skip


def _deadline_spec(zones: ZoneSet, job, nodes: int, seed: int) -> JobSpec:
    """A window of the zones, resolved, with the deadline at 1.5 x the fastest time."""
    base = JobSpec(
        max_nodes=nodes,
        deadline_s=1.5 * fastest_finish_h(job, JobSpec()) * 3600.0,
        start_offset_s=start_offset_of(zones.shortest(), None, seed),
        spot_price_per_hour=_spot_price(zones),
        on_demand_price_per_hour=ON_DEMAND_PRICE,
        seed=seed,
    )
    spec, *_ = resolve(base, trace=zones, policy=make_policy("greedy"), job=job)
    return spec


def deadline(zones: ZoneSet, nodes: int, windows: int) -> None:
    """``deadline`` staying in each zone against ``deadline`` over the zones."""
    job = load_job(JOB).with_nodes(1, nodes)
    rows, kinds = [], Counter()
    for seed in range(windows):
        spec = _deadline_spec(zones, job, nodes, seed)
        one = spec.replace(zone_traces=())
        each = {t.name: _run(one.replace(trace=t.name), t, "deadline", job) for t in zones.traces}
        rows.append((each, _run(spec, zones, "deadline", job)))
        kinds += move_kinds(zones, spec.start_offset_s, rows[-1][1][4], nodes)
    met_all = {z: all(r[0][z][2] for r in rows) for z in zones.names}
    means = {z: statistics.mean(r[0][z][1] for r in rows) for z in zones.names if met_all[z]}
    fixed = min(means, key=means.__getitem__) if means else zones.names[0]
    everywhere = sum(all(r[0][z][2] for z in zones.names) for r in rows)
    ratios, ratios_fixed, moves, met = [], [], [], []
    for each, (_, usd, ok, n, _) in rows:
        best = min((z for z in each if each[z][2]), key=lambda z: each[z][1], default=None)
        if best is not None:
            ratios.append(usd / each[best][1])
        ratios_fixed.append(usd / each[fixed][1])
        moves.append(n)
        met.append(ok)
    print(f"  per window, deadline's cost (USD) over the zones / in the best zone in hindsight "
          f"(the cheapest that met the deadline there): median {statistics.median(ratios):.3f} "
          f"(best {min(ratios):.3f}, worst {max(ratios):.3f}); / in {fixed} (of the zones that met "
          f"every window's deadline, the lowest mean cost): median "
          f"{statistics.median(ratios_fixed):.3f}; its moves: median "
          f"{statistics.median(moves):g}, max {max(moves)} ({_kinds_text(kinds)}); "
          f"deadlines met "
          f"{sum(met)}/{len(met)} (staying, in every zone: {everywhere}/{len(rows)})")  # fmt: skip


def bounds(zones: ZoneSet, nodes: int, windows: int) -> None:
    """Each zone's optimum against the optimum of the zones, deadline 1.5 x fastest."""
    job = load_job(JOB).with_nodes(1, nodes)
    savings, kinds = [], Counter()
    for seed in range(windows):
        spec = _deadline_spec(zones, job, nodes, seed)
        started = time.process_time()
        b = zone_bounds(zones, job, spec)
        cpu = time.process_time() - started
        kinds += move_kinds(zones, spec.start_offset_s, b.zone_plan_move_log, nodes)
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
              f"(its plan) to {high:.1%} (the bound); the plans' moves: "
              f"{_kinds_text(kinds)}")  # fmt: skip


def price_summary(zones: ZoneSet) -> str:
    """The zones' spot prices where the windows start, in words with their units.

    Over trace time 0 to the shortest zone's end (:attr:`ZoneSet.duration_s`, where
    every window starts; a job that outlasts it runs on into the repeated trace), per
    zone: the time-weighted mean price and the lowest and highest in effect; then the
    dearest zone's mean over the cheapest's, how far apart the zones' prices are.
    """
    if not zones.priced:
        return f"spot price: {SPOT_PRICE} USD per node-hour in every zone (flat)"
    means, parts = [], []
    for t in zones.traces:
        edges = np.clip(np.append(t.time_s, t.duration_s), 0.0, zones.duration_s)
        weights = np.diff(edges)
        seen = t.price_per_hour[weights > 0]  # type: ignore[index]
        means.append(float(np.average(t.price_per_hour, weights=weights)))
        parts.append(f"{t.name} {means[-1]:.3f} ({seen.min():.3f} to {seen.max():.3f})")
    return (
        f"spot price, USD per node-hour, over trace days 0 to {zones.duration_s / 86400:.1f} "
        "(the shortest zone's trace, where every window starts), per zone time-weighted "
        f"mean (lowest to highest): {'; '.join(parts)}; the dearest zone's mean / the "
        f"cheapest's: {max(means) / min(means):.3f}"
    )


def _zones_of(label: str, folder: str, names: tuple[str, ...], args) -> ZoneSet:
    """The set's zones, priced as ``--prices`` says, zones without prices named."""
    zones = zone_set(folder, names)
    if args.prices == "flat" and not args.same_zones:
        return zones
    priced, missing = priced_zones(zones, start_utc=args.price_start)
    for zone, why in missing.items():
        print(f"{label}: {zone} has no price series ({why}): left out")
    if args.prices == "dime":
        return priced
    return ZoneSet(tuple(t for t in zones.traces if t.name not in missing))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--bounds", type=int, default=4)
    parser.add_argument(
        "--prices",
        choices=("flat", "dime"),
        default="flat",
        help="flat: 0.918 USD/h in every zone; dime: each zone's real AWS spot history",
    )
    parser.add_argument(
        "--price-start",
        default=PRICE_START_UTC,
        help="dime: the UTC time of the price history at trace time 0",
    )
    parser.add_argument(
        "--same-zones",
        action="store_true",
        help="flat: leave out the zones dime leaves out (the control: same zones, flat prices)",
    )
    args = parser.parse_args()
    if not SKY.is_dir():
        raise SystemExit(f"no real traces at {SKY}: nothing measured")
    if (args.prices == "dime" or args.same_zones) and not DIME.is_dir():
        raise SystemExit(f"no price histories at {DIME}: nothing measured")
    started = time.perf_counter()
    if args.prices == "dime":
        print(f"spot prices: AWS {INSTANCE_TYPE} history of each zone (training-on-a-dime, "
              f"2019-12 to 2020-03), t=0 at {args.price_start}; availability: SkyPilot "
              f"(2022-23). Different periods paired by zone name: a construction from two "
              f"real sources, not a recorded joint trace. On demand {ON_DEMAND_PRICE} "
              "USD/h.")  # fmt: skip
    for label, (folder, names, nodes) in SETS.items():
        zones = _zones_of(label, folder, names, args)
        print(f"{label}: {len(zones.names)} zones ({', '.join(zones.names)}), up to {nodes} nodes")
        print(f"  {price_summary(zones)}")
        live(zones, nodes, args.windows)
        deadline_h = 1.5 * fastest_finish_h(load_job(JOB).with_nodes(1, nodes), JobSpec())
        print(f"  with a deadline of {deadline_h:.2f} h (1.5 x the fastest time):")
        deadline(zones, nodes, args.windows)
        bounds(zones, nodes, args.bounds)
    print(f"{time.perf_counter() - started:.0f} s; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
