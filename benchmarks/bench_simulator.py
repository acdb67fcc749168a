"""Simulator speed, as ratios measured in one run on one machine.

    python benchmarks/bench_simulator.py [--repeats 5] [--philly PATH]

Prints, for each bundled trace and for the full Philly job trace as background load:
SimPy events processed per second by elasim, the same for a bare SimPy timeout loop
measured in the same run, and their ratio (goal: >= 0.3).  Also the wall time of
simulating the whole 11.3-day ``spot_us_east.csv`` trace (goal: < 1 s).  Medians over
``--repeats`` runs; the machines are noisy, so read ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import simpy

from elasim.job import load_job
from elasim.policies import make_policy
from elasim.sim import SimConfig, simulate
from elasim.traces import bundled_trace_names, import_trace, load_trace

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PHILLY = REPO.parent / "shared" / "traces-real" / "pollux-philly" / "philly.csv"


def bare_simpy_rate(events: int = 300_000) -> float:
    """Events per second of the simplest SimPy model: one process, one timeout per step."""
    env = simpy.Environment()

    def loop(env: simpy.Environment):
        for _ in range(events):
            yield env.timeout(1.0)

    env.process(loop(env))
    start = time.perf_counter()
    env.run()
    return events / (time.perf_counter() - start)


def run_once(trace, policy: str, job, config: SimConfig) -> tuple[int, float]:
    start = time.perf_counter()
    result = simulate(trace, make_policy(policy), job, config)
    return result.events_processed, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--philly", type=Path, default=DEFAULT_PHILLY)
    parser.add_argument("--cluster-gpus", type=int, default=512)
    args = parser.parse_args()

    job = load_job("resnet50_v100")
    # a job that never finishes, so each run covers the whole trace (max_sim_time_s)
    endless = dataclasses.replace(job, target_samples=1e18)
    cases = []
    for name in bundled_trace_names():
        trace = load_trace(name)
        if trace.kind == "capacity":
            span = float(trace.duration_s)
            config = SimConfig(max_sim_time_s=span, record_timeline=False)
            cases.append((name, trace, span, config))
        else:
            span = float(trace.submit_time_s.max())
            config = SimConfig(max_sim_time_s=span, record_timeline=False, cluster_gpus=64)
            cases.append((f"{name} (64 GPUs)", trace, span, config))
    if args.philly.is_file():
        philly = import_trace("philly", args.philly)
        span = float(philly.submit_time_s.max())
        config = SimConfig(
            max_sim_time_s=span, record_timeline=False, cluster_gpus=args.cluster_gpus
        )
        cases.append(
            (
                f"full Philly, {len(philly.submit_time_s):,} jobs ({args.cluster_gpus} GPUs)",
                philly,
                span,
                config,
            )
        )
    else:
        print(f"(full Philly trace not found at {args.philly}; skipped)")

    print(
        f"{'case':58} {'sim days':>9} {'events':>9} {'wall s':>8} "
        f"{'ev/s':>10} {'bare ev/s':>10} {'ratio':>6}"
    )
    for label, trace, span, config in cases:
        rates, walls, events = [], [], 0
        bare = []
        for _ in range(args.repeats):
            bare.append(bare_simpy_rate())
            events, wall = run_once(trace, "greedy", endless, config)
            walls.append(wall)
            rates.append(events / wall)
        rate, bare_rate = statistics.median(rates), statistics.median(bare)
        print(
            f"{label:58} {span / 86400:9.1f} {events:9,d} {statistics.median(walls):8.3f} "
            f"{rate:10,.0f} {bare_rate:10,.0f} {rate / bare_rate:6.2f}"
        )

    # The headline: the default job on the whole 11-day trace, every policy.
    trace = load_trace("spot_us_east.csv")
    long_job = dataclasses.replace(job, target_samples=job.target_samples * 40)
    print()
    print(f"spot_us_east.csv ({trace.duration_s / 86400:.1f} days), a job spanning the trace:")
    for policy in ("fixed", "greedy", "hysteresis", "price", "deadline", "goodput"):
        walls = []
        for _ in range(args.repeats):
            config = SimConfig(max_sim_time_s=float(trace.duration_s))
            _, wall = run_once(trace, policy, long_job, config)
            walls.append(wall)
        print(f"  {policy:12} median wall time {statistics.median(walls):.3f} s  (goal < 1 s)")


if __name__ == "__main__":
    main()
