"""Simulator fidelity: measured executor runs against their simulations, repeated.

Run: ``python benchmarks/bench_fidelity.py`` (about 10 minutes on a 2-core box;
``--repeats N`` for more or fewer runs per window, ``--profile PATH`` to skip the
calibration, ``--keep DIR`` to keep every run, ``--analyze DIR`` to report again on
runs kept there without running anything, ``--json PATH`` for the numbers).

What it does, all in one run on this machine:

1. ``elasim calibrate`` (both mechanisms): the profile the simulations use.  The
   machine's speed drifts (other tenants, clock frequency), so the profile is taken
   right before the runs it predicts.
2. For each window of ``spot_us_east.csv`` below, ``--repeats`` executor runs of
   ``greedy`` at x300 on 4 CPU gloo workers, each compared with its simulation
   (:func:`elasim.compare.run_and_simulate`).  The simulation is deterministic; the
   measured runs are not, so every run is compared separately and the medians are
   reported.  So is the same comparison between the measured repeats themselves (the
   noise floor: no model can be closer to one run than the runs are to each other).

Windows:

* ``eventful``: trace second 119,000, 9,000 steps (about 90 s real).  Kills of 1, 3
  and 2 workers, a total loss and a resume, and the scale-ups back.
* ``total-loss``: trace second 26,000, 2,000 steps (about 20 s real).  One total
  loss and the cold start of four replacements dominate it.

Goals (issue 4): completion time within 5 %, median per-event pause error within 20 %.

``--cluster``: the same question for a cluster of jobs (issue 22).  The README's
example (``examples/cluster_small.csv``, 4 jobs on 4 local slots, the commands of
``docs/guide/cluster-run.md``): ``elasim cluster calibrate`` once, then for every
registered cluster policy ``--repeats`` runs of ``elasim cluster run --compare``
(the real run against ``elasim cluster simulate`` of the same workload, profile and
policy), each with the load average during it.  Prints per run and the medians per
policy of the average-JCT error and the median per-job JCT error (goals: 10 % and
15 %).  About 15 minutes on a 2-core box; ``--applications DIR`` skips the calibration.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from elasim.compare import (
    FIDELITY_GOALS,
    compare_repeats,
    compare_runs,
    run_and_simulate,
    run_to_run_errors,
)
from elasim.jobmodel import JobSpec
from elasim.profile import load_profile, save_profile

#: name -> (trace start, steps)
WINDOWS: dict[str, tuple[float, int]] = {
    "eventful": (119000.0, 9000),
    "total-loss": (26000.0, 2000),
}
TRACE = "spot_us_east.csv"
TIME_SCALE = 300.0


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values) if values else float("nan")


def _row(real_dir: Path, sim_dir: Path) -> dict[str, Any]:
    result = compare_runs(real_dir, sim_dir)
    return {
        "real_completion_s": result.real_completion_s,
        "sim_completion_s": result.sim_completion_s,
        "completion_time_rel_error": result.completion_time_rel_error,
        "median_pause_rel_error": result.median_pause_rel_error,
        "events_matched": result.events_matched,
    }


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", type=Path, default=None, help="skip the calibration")
    parser.add_argument("--segment-s", type=float, default=4.0, help="calibration segment")
    parser.add_argument("--keep", type=Path, default=None, help="keep the runs here")
    parser.add_argument(
        "--analyze", type=Path, default=None, help="only report on the runs kept in this folder"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--cluster", action="store_true", help="the cluster comparison instead")
    parser.add_argument("--applications", type=Path, default=None, help="--cluster: profiles")
    return parser.parse_args(argv)


def _profile(args: argparse.Namespace, root: Path) -> Any:
    """The profile the simulations use: kept, given, or calibrated now (saved in ``root``)."""
    if args.analyze is not None:
        return load_profile(root / "profile.json")
    if args.profile is None:
        from elasim.executor.calibrate import CalibrationConfig, calibrate

        print(f"calibrating ({args.segment_s:g} s segments) ...", flush=True)
        profile = calibrate(CalibrationConfig(segment_s=args.segment_s), work_dir=root / "cal")
    else:
        profile = load_profile(args.profile)
    save_profile(profile, root / "profile.json")
    return profile


def _window(
    name: str, start_s: float, steps: int, root: Path, args: argparse.Namespace, profile: Any
) -> dict[str, Any]:
    """Run (or, with ``--analyze``, read) one window's repeats; print a line per run."""
    rows = []
    real_dirs = []
    runs = (
        sorted(root.glob(f"{name}-*"), key=lambda d: int(d.name.rsplit("-", 1)[1]))
        if args.analyze is not None
        else [root / f"{name}-{i + 1}" for i in range(args.repeats)]
    )
    for i, run_dir in enumerate(runs):
        if args.analyze is None:
            spec = JobSpec(trace=TRACE, policy="greedy", start_offset_s=start_s)
            run_and_simulate(spec, profile, run_dir, time_scale=TIME_SCALE, max_steps=steps)
        row = _row(run_dir / "real", run_dir / "sim")
        rows.append(row)
        real_dirs.append(run_dir / "real")
        print(
            f"{name:<11} {i + 1:>3} {row['real_completion_s']:>8.2f} "
            f"{row['sim_completion_s']:>8.2f} {_pct(row['completion_time_rel_error']):>10} "
            f"{_pct(row['median_pause_rel_error'], 0):>9} {row['events_matched']:>7}",
            flush=True,
        )
    pauses = [r["median_pause_rel_error"] for r in rows if r["median_pause_rel_error"] is not None]
    floor_of = run_to_run_errors(real_dirs)
    return {
        "median_completion_time_rel_error": statistics.median(
            r["completion_time_rel_error"] for r in rows
        ),
        "median_pause_rel_error": statistics.median(pauses) if pauses else None,
        "measured_completion_spread": _spread([r["real_completion_s"] for r in rows]),
        # the simulation is deterministic: one prediction for every repeat
        "completion_error_vs_mean": float(
            compare_repeats(real_dirs, runs[0] / "sim").loc["mean of runs", "completion time error"]
        ),
        "run_to_run": {
            "completion_time_rel_error": floor_of["completion time error"],
            "median_pause_rel_error": floor_of["median pause error"],
        },
        "runs": rows,
    }


def _print_summary(name: str, summary: dict[str, Any]) -> None:
    goals = FIDELITY_GOALS
    floor = summary["run_to_run"]
    print(
        f"{name}: median completion error "
        f"{_pct(summary['median_completion_time_rel_error'])} "
        f"(goal {_pct(goals['completion_time_rel_error'], 0)}; against the mean of the "
        f"runs {_pct(summary['completion_error_vs_mean'])}), median pause error "
        f"{_pct(summary['median_pause_rel_error'], 0)} "
        f"(goal {_pct(goals['median_pause_rel_error'], 0)}); measured run vs measured run: "
        f"completion {_pct(floor['completion_time_rel_error'])}, "
        f"pause {_pct(floor['median_pause_rel_error'], 0)}",
        flush=True,
    )


CLUSTER_RUN = (
    "--workload examples/cluster_small.csv --gpus-per-node 4 --sample-delay-s 0.002 "
    "--job-set train_size=4096"
).split()
CLUSTER_GOALS = {"avg_jct_error": 0.10, "median_abs_job_error": 0.15}


def _elasim(*args: str) -> str:
    import subprocess

    exe = Path(sys.executable).with_name("elasim")
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"elasim {' '.join(args[:2])} failed: {done.stderr[-2000:]}")
    return done.stdout


def _cluster_policies() -> list[str]:
    import elasim.policies.cluster  # noqa: F401 - registers the built-ins
    from elasim.policies.registry import CLUSTER_KIND, describe_policies

    return [info.name for info in describe_policies(CLUSTER_KIND)]


def cluster_main(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Calibrate (unless given), then every policy ``--repeats`` times; per-run lines, medians."""
    import os

    apps = args.applications
    if apps is None:
        apps = root / "apps"
        print("calibrating the cluster profiles ...", flush=True)
        _elasim(
            "cluster", "calibrate", "--out", str(apps), "--steps", "40,160",
            "--sample-delay-s", "0.002", "--job-set", "train_size=4096",
        )  # fmt: skip
        rows = (apps / "synth-160" / "placements.csv").read_text().split()[1:]
        times = ", ".join(f"{r.split(',')[0]}: {float(r.split(',')[2]) * 1e3:.1f} ms" for r in rows)
        print(f"step time by workers: {times} (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"{'policy':<9} {'run':>3} {'real s':>7} {'sim s':>7} {'avg err':>8} "
          f"{'job err':>8} {'load':>5}")  # fmt: skip
    report: dict[str, Any] = {}
    for policy in _cluster_policies():
        runs = []
        for i in range(args.repeats):
            out = _elasim(
                "cluster", "run", *CLUSTER_RUN, "--applications", str(apps),
                "--policy", policy, "--compare", "--json", "--out", str(root / f"{policy}-{i + 1}"),
            )  # fmt: skip
            payload = json.loads(out.strip().splitlines()[-1])
            c = payload["compare"]
            c["load_avg"] = os.getloadavg()[0]
            c["warning"] = payload.get("compare_warning")
            runs.append(c)
            print(f"{policy:<9} {i + 1:>3} {c['real_avg_jct_s']:>7.2f} {c['sim_avg_jct_s']:>7.2f} "
                  f"{_pct(c['avg_jct_error']):>8} {_pct(c['median_abs_job_error']):>8} "
                  f"{c['load_avg']:>5.1f}", flush=True)  # fmt: skip
        avg = statistics.median(r["avg_jct_error"] for r in runs)
        job = statistics.median(r["median_abs_job_error"] for r in runs)
        floor = _spread([r["real_avg_jct_s"] for r in runs])  # real run vs real run
        ok = (
            abs(avg) <= CLUSTER_GOALS["avg_jct_error"]
            and job <= CLUSTER_GOALS["median_abs_job_error"]
        )
        print(f"{policy}: median avg-JCT error {_pct(avg)}, median per-job error {_pct(job)} "
              f"({'within' if ok else 'OUTSIDE'} the goals 10 % / 15 %); real avg JCT spread "
              f"over the runs {_pct(floor)}", flush=True)  # fmt: skip
        report[policy] = {
            "median_avg_jct_error": avg, "median_job_error": job, "real_spread": floor,
            "runs": runs,
        }  # fmt: skip
    return report


def main(argv: list[str] | None = None) -> int:
    """Calibrate, run every window ``--repeats`` times, print per-run and median errors."""
    args = _parse_args(argv)
    if args.cluster:
        with tempfile.TemporaryDirectory(prefix="elasim-cluster-fidelity-") as tmp:
            report = cluster_main(args, args.keep or Path(tmp))
        if args.json is not None:
            args.json.write_text(json.dumps(report, indent=2))
        return 0
    tmp = None
    root = args.analyze or args.keep
    if root is None:
        tmp = tempfile.TemporaryDirectory(prefix="elasim-fidelity-")
        root = Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    profile = _profile(args, root)
    report: dict[str, Any] = {"profile": profile.source, "windows": {}}
    print(
        f"{'window':<11} {'run':>3} {'real s':>8} {'sim s':>8} {'compl. err':>10} "
        f"{'pause err':>9} {'matched':>7}"
    )
    for name, (start_s, steps) in WINDOWS.items():
        summary = _window(name, start_s, steps, root, args, profile)
        report["windows"][name] = summary
        _print_summary(name, summary)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
