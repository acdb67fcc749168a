"""Sweep throughput: simulations per second, local backend at 1 and 2 processes.

    python benchmarks/bench_sweep.py [--repeats 5] [--seeds 16] [--no-ray]

Runs the same grid (every registered policy x two bundled spot traces x ``--seeds``
seeds) with ``run_sweep(workers=1)`` (in this process, no pool) and
``run_sweep(workers=2)`` (a pool of two processes), and prints the median throughput
of each and their ratio.  Every timed run starts from cold trace caches, so both
sides pay for loading the traces, and every run's table is checked equal to the first.

Three more measurements make the ratio readable on a shared machine:

* the machine's own ceiling: the same number of pure-Python CPU tasks, in this
  process and split in two halves over two processes (no dispatch costs at all).
  On a dedicated two-core machine it is close to 2; on a shared or SMT machine it
  is what two processes can get there and then.
* CPU time per simulation, summed over this process and every process it started
  (pool workers; Ray's raylet, GCS and workers; read from ``/proc`` on Linux).
  Unlike wall time it hardly depends on other load, so the 2-process / 1-process
  CPU ratio is the price of parallelism itself: dispatch, pickling, worker start.
* the pool and Ray with one task per point (batching off), to show what batching
  saves.

If ``ray`` is installed, the Ray backend is also timed on a local instance with two
CPUs, started once outside the timed runs (its start-up time is printed apart), as a
long-lived cluster is how Ray is used.  All configurations are interleaved (A, B, C,
A, B, C, ...) so that drift in the machine's load hits all alike.  Read the ratios,
not the absolute numbers.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from elasim import sweep, tasks
from elasim.policies import policy_names
from elasim.sweep import SweepSpec, run_sweep

TRACES = ("spot_us_east.csv", "spot_p3_bamboo.csv")
SPIN = 60_000  # loop turns of one ceiling task: a few ms, about one simulation


def tree_cpu_s() -> float:
    """CPU seconds of this process, its reaped children and its live descendants."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    proc = Path("/proc")
    if not proc.is_dir():
        return total
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    cpu_s: dict[int, float] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the process ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        cpu_s[pid] = (int(fields[11]) + int(fields[12])) / tick
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        total += cpu_s.get(pid, 0.0)
        todo += children.get(pid, [])
    return total


def spin(turns: int) -> int:
    total = 0
    for i in range(turns):
        total += i * i
    return total


def spin_many(count: int) -> int:
    return sum(spin(SPIN) for _ in range(count))


def ceiling(processes: int, tasks: int) -> None:
    """CPU work of ``tasks`` tasks, split evenly over ``processes`` (1: this process)."""
    if processes == 1:
        spin_many(tasks)
        return
    shares = [tasks // processes + (k < tasks % processes) for k in range(processes)]
    with ProcessPoolExecutor(max_workers=processes) as pool:
        list(pool.map(spin_many, shares))


def unbatched(run: Callable[[], Any]) -> Callable[[], Any]:
    """``run`` with one task per grid point (batching off)."""

    def wrapped() -> Any:
        saved = tasks.MAX_BATCH
        tasks.MAX_BATCH = 1
        try:
            return run()
        finally:
            tasks.MAX_BATCH = saved

    return wrapped


LOCAL_1, LOCAL_2 = "local, 1 process", "local, 2 processes"
CEIL_1, CEIL_2 = "CPU ceiling, 1 process", "CPU ceiling, 2 processes"


def configs_for(spec: SweepSpec, with_ray: bool) -> dict[str, Callable[[], Any]]:
    """Every backend set-up to time, named; the CPU ceilings run the same task count."""
    size = spec.size
    configs: dict[str, Callable[[], Any]] = {
        LOCAL_1: lambda: run_sweep(spec, workers=1),
        LOCAL_2: lambda: run_sweep(spec, workers=2),
        "local, 2 processes, unbatched": unbatched(lambda: run_sweep(spec, workers=2)),
        CEIL_1: lambda: ceiling(1, size),
        CEIL_2: lambda: ceiling(2, size),
    }
    if with_ray:
        configs["ray, 2 CPUs"] = lambda: run_sweep(spec, backend="ray")
        configs["ray, 2 CPUs, unbatched"] = unbatched(lambda: run_sweep(spec, backend="ray"))
    return configs


def start_ray(spec: SweepSpec) -> float:
    """Start a local 2-CPU Ray instance and warm its workers; the start-up's seconds."""
    import ray

    start = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    ray_start_s = time.perf_counter() - start
    run_sweep(spec, backend="ray")  # untimed: Ray's workers import elasim once
    return ray_start_s


def time_configs(
    configs: dict[str, Callable[[], Any]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of every set-up, interleaved; every table must be the same."""
    times: dict[str, list[float]] = {name: [] for name in configs}
    cpu: dict[str, list[float]] = {name: [] for name in configs}
    reference = None
    for _ in range(repeats):
        for name, run in configs.items():
            sweep._load_trace.cache_clear()
            sweep._load_job.cache_clear()
            cpu_before = tree_cpu_s()
            start = time.perf_counter()
            result = run()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(tree_cpu_s() - cpu_before)
            if isinstance(result, pd.DataFrame):
                if reference is None:
                    reference = result
                else:  # any backend, any process count, batched or not: one table
                    pd.testing.assert_frame_equal(result, reference)
    return times, cpu


def report(
    size: int, times: dict[str, list[float]], cpu: dict[str, list[float]], ray_start_s: float
) -> None:
    """Medians per set-up, then the ratios measured in this run."""
    rate = {name: size / statistics.median(values) for name, values in times.items()}
    cpu_ms = {name: 1e3 * statistics.median(values) / size for name, values in cpu.items()}
    print(f"  {'':32s} {'per second':>10s}  {'CPU ms each':>11s}  wall min-max")
    for name, values in times.items():
        spread = f"{min(values):.2f}-{max(values):.2f} s"
        print(f"  {name:32s} {rate[name]:10.1f}  {cpu_ms[name]:11.2f}  {spread}")
    print("(per second: simulations, or tasks for the CPU ceiling; medians)")
    print(f"ratio local 2 processes / 1 process: {rate[LOCAL_2] / rate[LOCAL_1]:.2f}")
    print(f"  machine ceiling, 2 / 1 process:    {rate[CEIL_2] / rate[CEIL_1]:.2f}")
    print(f"  CPU per simulation, 2 / 1 process: {cpu_ms[LOCAL_2] / cpu_ms[LOCAL_1]:.2f}")
    if "ray, 2 CPUs" in rate:
        print(f"ratio ray (2 CPUs) / local 2 processes: {rate['ray, 2 CPUs'] / rate[LOCAL_2]:.2f}")
        print(f"local Ray instance start-up (not in the rates above): {ray_start_s:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--no-ray", action="store_true", help="Skip the Ray backend.")
    args = parser.parse_args()

    spec = SweepSpec(traces=TRACES, policies=tuple(policy_names()), seeds=tuple(range(args.seeds)))
    spec.validate()
    with_ray = not args.no_ray and importlib.util.find_spec("ray") is not None
    configs = configs_for(spec, with_ray)
    ray_start_s = start_ray(spec) if with_ray else 0.0
    print(
        f"grid: {len(spec.policies)} policies x {len(TRACES)} traces x {args.seeds} seeds"
        f" = {spec.size} simulations; {args.repeats} repeats; {os.cpu_count()} CPUs;"
        f" Python {platform.python_version()}"
    )
    try:
        times, cpu = time_configs(configs, args.repeats)
    finally:
        if with_ray:
            import ray

            ray.shutdown()
    report(spec.size, times, cpu, ray_start_s)


if __name__ == "__main__":
    main()
