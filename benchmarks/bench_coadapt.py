"""Batch co-adaptation on real workers: pollux against pollux fixed-batch and tiresias.

Run: ``nice -n 5 python benchmarks/bench_coadapt.py`` (about 12 minutes on a 2-core
box; ``--repeats N`` for more or fewer runs per configuration, ``--json PATH`` for the
numbers, ``--simulate-only`` for the simulated side alone, without torch).

What it does: ``examples/cluster_small.csv`` (4 jobs) on 4 local slots, profiles
``tests/data/cluster_apps_2ms_batches`` (batches 128/256/512 at 2 ms per sample), under
three configurations:

* ``pollux``: co-adaptation, every job trains at the batch of highest goodput for its
  allocation (the default);
* ``pollux-fixed``: ``--set adapt_batch=false``, every job keeps its requested 128;
* ``tiresias``: no batch choice, two-queue least-attained-service, rigid counts;
* ``pollux-r0`` and ``pollux-fixed-r0``: the two pollux ones with
  ``--set restart_delay_s=0``, a move priced at the measured pause rather than
  Pollux's 30 s (which outweighs moving a job that runs for 30 s).

``--repeats`` real runs of each (``elasim.executor.cluster.run_cluster``, the code
behind ``elasim cluster run``), interleaved so that the machine's drift falls on all
three alike, each printed with its average JCT and the load average; then the
simulation of each (``simulate_cluster`` of its setup, what ``cluster run --compare``
simulates, with the measured pauses, but letting the policy choose
batches as the real jobs do); then the medians and their ratios to ``pollux``.

The published ordering (Pollux, OSDI'21): pollux < pollux fixed-batch < tiresias in
average JCT.  The real runs on a shared 2-core host are noisy: compare the spread of
the repeats with the differences before reading an ordering into them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = REPO / "examples" / "cluster_small.csv"
APPS = REPO / "tests" / "data" / "cluster_apps_2ms_batches"
#: name -> (policy, options)
CONFIGS: dict[str, tuple[str, dict[str, str]]] = {
    "pollux": ("pollux", {}),
    "pollux-fixed": ("pollux", {"adapt_batch": "false"}),
    "tiresias": ("tiresias", {}),
    "pollux-r0": ("pollux", {"restart_delay_s": "0"}),
    "pollux-fixed-r0": ("pollux", {"restart_delay_s": "0", "adapt_batch": "false"}),
}
SAMPLE_DELAY_S = 0.002
SLOTS = 4


def _setup(name: str) -> Any:
    """What one configuration runs: the docs' example on one node of 4 slots, in place."""
    from elasim.cluster import ClusterSetup
    from elasim.jobmodel import RescaleMode

    policy, options = CONFIGS[name]
    return ClusterSetup(
        workload=str(WORKLOAD),
        policy=policy,
        options=dict(options),
        num_nodes=1,
        gpus_per_node=SLOTS,
        rescale=RescaleMode.INPLACE,
        applications=str(APPS),
    )


def _config(name: str) -> Any:
    """The real run of one configuration (2 ms per sample)."""
    from elasim.executor.cluster import ClusterRunConfig

    return ClusterRunConfig(
        _setup(name),
        slots=SLOTS,
        sample_delay_real_s=SAMPLE_DELAY_S,
        job_options={"train_size": 4096},
        collective_timeout_real_s=5.0,
        max_wall_real_s=240.0,
    )


def simulate(name: str) -> float:
    """Average JCT (s) of one configuration simulated as its real run is set up."""
    from elasim.sim.cluster import simulate_cluster

    result = simulate_cluster(_setup(name), record_timeline=False)
    return float(result.summary.avg_jct_s)


def real(name: str) -> dict[str, Any]:
    """One real run: its average JCT, wall time, load and the batches its jobs trained at."""
    from elasim.executor.cluster import run_cluster

    load_before = os.getloadavg()[0]
    out = run_cluster(_config(name))
    return {
        "config": name,
        "avg_jct_s": float(out.result.summary.avg_jct_s),
        "wall_s": out.wall_time_s,
        "gave_up": out.gave_up,
        "load1_before": load_before,
        "load1_after": os.getloadavg()[0],
        "batches": {job: sorted({b for _, b, _ in rows}) for job, rows in out.batches.items()},
    }


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return "?"


def summarise(runs: list[dict[str, Any]], sim: dict[str, float]) -> dict[str, Any]:
    """Medians per configuration and their ratios to ``pollux``, real and simulated."""
    median = {
        name: statistics.median(r["avg_jct_s"] for r in runs if r["config"] == name)
        for name in CONFIGS
        if any(r["config"] == name for r in runs)
    }
    base = median.get("pollux")
    return {
        "median_avg_jct_s": median,
        "ratio_to_pollux": {n: v / base for n, v in median.items()} if base else {},
        "sim_avg_jct_s": sim,
        "sim_ratio_to_pollux": {n: v / sim["pollux"] for n, v in sim.items()},
        "real_order": sorted(median, key=median.__getitem__),
        "sim_order": sorted(sim, key=sim.__getitem__),
    }


def _print_summary(summary: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    print(f"{'config':<13} {'real med s':>10} {'x pollux':>8} {'spread':>7} {'sim s':>7} {'x':>6}")
    for name in CONFIGS:
        sim = summary["sim_avg_jct_s"][name]
        values = [r["avg_jct_s"] for r in runs if r["config"] == name]
        med = summary["median_avg_jct_s"].get(name)
        if med is None:
            print(f"{name:<13} {'-':>10} {'-':>8} {'-':>7} {sim:>7.2f} "
                  f"{summary['sim_ratio_to_pollux'][name]:>6.3f}")  # fmt: skip
            continue
        spread = (max(values) - min(values)) / med
        print(
            f"{name:<13} {med:>10.2f} {summary['ratio_to_pollux'][name]:>8.3f} "
            f"{100 * spread:>6.0f}% {sim:>7.2f} {summary['sim_ratio_to_pollux'][name]:>6.3f}"
        )
    print(f"order real: {' < '.join(summary['real_order']) or '-'}; "
          f"simulated: {' < '.join(summary['sim_order'])}; load now {os.getloadavg()}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run every configuration ``--repeats`` times interleaved, simulate each, report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--simulate-only", action="store_true")
    args = parser.parse_args(argv)
    if not args.simulate_only and importlib.util.find_spec("torch") is None:
        print("bench_coadapt: skipped, no torch (pip install 'elasim[executor]')")
        return 0
    runs: list[dict[str, Any]] = []
    if not args.simulate_only:
        print(f"{'run':>3} {'config':<13} {'avg JCT s':>9} {'wall s':>7} {'load1':>5} batches")
        for i in range(args.repeats):
            for name in CONFIGS:
                row = real(name)
                row["repeat"] = i + 1
                runs.append(row)
                print(f"{i + 1:>3} {name:<13} {row['avg_jct_s']:>9.2f} {row['wall_s']:>7.1f} "
                      f"{row['load1_before']:>5.1f} {row['batches']}", flush=True)  # fmt: skip
    sim = {name: simulate(name) for name in CONFIGS}
    summary = summarise(runs, sim)
    _print_summary(summary, runs)
    if args.json is not None:
        report = {
            "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": _commit(),
            "host": f"{os.cpu_count()} cores, shared with other jobs",
            "workload": WORKLOAD.relative_to(REPO).as_posix(),
            "applications": APPS.relative_to(REPO).as_posix(),
            "repeats": args.repeats,
            "runs": runs,
            **summary,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
