"""Side by side with Pollux's own simulator: average JCT and speed on its eight workloads.

    python benchmarks/bench_vs_pollux.py [--workloads 1,2,...] [--policies tiresias,optimus,pollux]
        [--repeats 1] [--pollux-python PATH] [--pollux-dir PATH] [--budget-s 3600]

Pollux's artifact simulator (OSDI'21, ``../shared/pollux-simulator``, Apache-2.0) runs
as a separate process from its own folder with its own Python (a venv built as its
``SOURCE.md`` says; default ``../pollux-venv/bin/python`` beside this repository, or
``$ELASIM_POLLUX_PYTHON``).  None of its code is imported here.  elasim runs as a user
runs it: ``elasim cluster simulate -w pollux-workload-N -p POLICY --json``.  Both are
whole processes (start-up, loading profiles, the simulation), timed with a wall clock and
with the CPU time of the child (``RUSAGE_CHILDREN``), which a loaded machine distorts
less.

For every repeat, workload and policy the two simulators run one after the other,
interleaved (elasim first on even repeats, Pollux first on odd ones), so that both
sides see the same load.  Each row prints as soon as its pair is done: each side's
average JCT, elasim's deviation from Pollux's, both wall times and the ratios.  Then
per policy: the mean over workloads of the average JCT (as Pollux's ``summary.json``
computes it) on each side and the medians of the ratios; and the goal (under
``pollux``: >= 100x faster, average JCT within 5 %).  A run past ``--budget-s`` is
stopped: its JCT is unknown and its ratio a lower bound (``>``).  Pollux's ``pollux``
policy is a genetic algorithm with unseeded randomness: repeated runs differ slightly.

Without the folder, its Python or its dependencies, the benchmark prints one line
saying why and exits 0 (skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_POLLUX_DIR = REPO.parent / "shared" / "pollux-simulator"
DEFAULT_POLLUX_PYTHON = REPO.parent / "pollux-venv" / "bin" / "python"
POLICIES = ("tiresias", "optimus", "pollux")
#: the goal under ``pollux``: this many times faster, average JCT within this fraction
GOAL_SPEEDUP, GOAL_JCT_DEV = 100.0, 0.05
#: bytes read from the end of Pollux's output, which ends with ``Average JCT: ...``
TAIL_BYTES = 65536


@dataclass(frozen=True)
class Run:
    """One whole-process run of one simulator: its average JCT (None if stopped).

    ``reached_s``: for a run stopped at its budget, the simulated time it had reached
    (Pollux's last ``SIMULATOR TIME``), so that its lower bound can be read.
    """

    avg_jct_s: float | None
    wall_s: float
    cpu_s: float
    reached_s: float | None = None

    @property
    def finished(self) -> bool:
        return self.avg_jct_s is not None


def timed(cmd: list[str], cwd: Path, budget_s: float, out) -> tuple[float, float, bool]:
    """Run ``cmd`` to completion or ``budget_s``; wall and CPU seconds, and whether it ended.

    Raises:
        RuntimeError: the process ended with a non-zero status.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=budget_s)
        ended = True
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        ended = False
    wall_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if ended and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.strip()[-2000:]}")
    return wall_s, cpu_s, ended


def run_elasim(elasim: str, workload: int, policy: str, budget_s: float, extra: list[str]) -> Run:
    """``elasim cluster simulate`` on ``pollux-workload-N`` (Pollux's testbed: 16 x 4 GPUs).

    ``extra`` carries ``--rescale`` (default ``restart``: Pollux's simulator restarts a
    job, 30 s without progress, whenever its allocation changes, while elasim's CLI
    rescales in place) and ``--pause-job``.
    """
    name = f"pollux-workload-{workload}"
    cmd = [elasim, "cluster", "simulate", "-w", name, "-p", policy, *extra]
    with tempfile.TemporaryFile("w+") as out:
        wall_s, cpu_s, ended = timed([*cmd, "--json"], REPO, budget_s, out)
        out.seek(0)
        text = out.read()
    if not ended:
        return Run(None, wall_s, cpu_s)
    summary = json.loads(text)
    assert summary["jobs_completed"] == summary["jobs"], summary
    return Run(float(summary["avg_jct_s"]), wall_s, cpu_s)


def run_pollux(
    python: str, folder: Path, workload: int, policy: str, budget_s: float, log: Path | None = None
) -> Run:
    """Pollux's ``simulator.py`` as its README runs it; its last ``Average JCT:`` line.

    Its output (a status block every simulated minute, with every finished job's JCT)
    goes to a file, as a user's redirect would, and only its end is read: ``log`` when
    given (kept, to compare job by job), else a temporary file.
    """
    cmd = [python, "simulator.py", "--policy", policy, f"workloads/workload-{workload}.csv"]
    with open(log, "w+b") if log else tempfile.TemporaryFile("w+b") as out:
        wall_s, cpu_s, ended = timed(cmd, folder, budget_s, out)
        out.seek(max(out.seek(0, os.SEEK_END) - TAIL_BYTES, 0))
        tail = out.read().decode(errors="replace")
    if not ended:
        times = [
            line.split(":")[1].strip(" -") for line in tail.splitlines() if "SIMULATOR TIME" in line
        ]
        return Run(None, wall_s, cpu_s, float(times[-1]) if times else 0.0)
    lines = [line for line in tail.splitlines() if line.startswith("Average JCT:")]
    if not lines:
        raise RuntimeError(f"no 'Average JCT:' line at the end of {' '.join(cmd)}")
    return Run(float(lines[-1].split(":", 1)[1]), wall_s, cpu_s)


def run_pair(
    elasim: str, python: Path, folder: Path, workload: int, policy: str, args, rep: int
) -> tuple[Run, Run]:
    """Both simulators on one workload and policy, one after the other: (elasim, Pollux).

    elasim goes first on even repeats and Pollux on odd ones, so that neither side
    always meets the load the other leaves behind.
    """
    budget_s = args.budget_s
    extra = ["--rescale", args.rescale, "--pause-job", args.pause_job]
    log = None
    if args.pollux_logs:
        log = Path(args.pollux_logs) / f"{policy}-workload-{workload}-{rep}.log"
    if rep % 2 == 1:
        theirs = run_pollux(str(python), folder, workload, policy, budget_s, log)
        return run_elasim(elasim, workload, policy, budget_s, extra), theirs
    ours = run_elasim(elasim, workload, policy, budget_s, extra)
    return ours, run_pollux(str(python), folder, workload, policy, budget_s, log)


def why_skipped(python: Path, folder: Path) -> str | None:
    """Why the benchmark cannot run here, in one line; None when it can.

    Importing ``simulator`` (which runs nothing on import) checks every dependency
    of the artifact in its own Python, pymoo's old API included.
    """
    if not (folder / "simulator.py").is_file() or not (folder / "workloads").is_dir():
        return f"no Pollux simulator at {folder} (simulator.py and workloads/)"
    if not python.is_file():
        return (
            f"no Python at {python} for Pollux's simulator (build its venv as "
            f"{folder / 'SOURCE.md'} says; or --pollux-python / $ELASIM_POLLUX_PYTHON)"
        )
    check = subprocess.run(
        [str(python), "-c", "import simulator"], cwd=folder, capture_output=True, text=True
    )
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["?"])[-1]
        return f"Pollux's simulator cannot import its dependencies with {python}: {last}"
    return None


def fmt_jct(run: Run) -> str:
    """The average JCT, or how far a run stopped at its budget got (simulated hours)."""
    if run.finished:
        return f"{run.avg_jct_s:8.0f}"
    return "stopped" if run.reached_s is None else f"@{run.reached_s / 3600:.1f} h"


def fmt_ratio(slow: Run, fast: Run, attr: str) -> str:
    """Pollux's time over elasim's; a stopped Pollux run makes it a lower bound."""
    ratio = getattr(slow, attr) / max(getattr(fast, attr), 1e-9)
    return f"{'>' if not slow.finished else ' '}{ratio:6.1f}x"


HEADER = (
    f"{'workload':>8} {'policy':9} {'rep':>3} {'elasim JCT':>10} {'Pollux JCT':>10} "
    f"{'dev':>7} {'elasim s':>9} {'Pollux s':>9} {'wall':>8} {'CPU':>8}"
)


def print_row(workload: int, policy: str, rep: int, ours: Run, theirs: Run) -> None:
    dev = "-"
    if ours.finished and theirs.finished:
        dev = f"{ours.avg_jct_s / theirs.avg_jct_s - 1:+.1%}"
    print(
        f"{workload:>8} {policy:9} {rep:>3} {fmt_jct(ours):>10} {fmt_jct(theirs):>10} "
        f"{dev:>7} {ours.wall_s:9.1f} {theirs.wall_s:9.1f} "
        f"{fmt_ratio(theirs, ours, 'wall_s')} {fmt_ratio(theirs, ours, 'cpu_s')}",
        flush=True,
    )


def summarise(pairs: list[tuple[int, str, Run, Run]], policies: list[str]) -> bool:
    """Per policy: mean over workloads of each side's average JCT, median ratios; the goal."""
    ok = True
    print(
        f"\n{'policy':9} {'elasim JCT':>10} {'Pollux JCT':>10} {'dev':>7} "
        f"{'median wall':>12} {'median CPU':>11} {'pairs':>6}"
    )
    for policy in policies:
        done = [(w, o, t) for w, p, o, t in pairs if p == policy and o.finished and t.finished]
        rows = [(o, t) for w, p, o, t in pairs if p == policy]
        if not rows:
            continue
        wall = statistics.median(t.wall_s / o.wall_s for o, t in rows)
        cpu = statistics.median(t.cpu_s / max(o.cpu_s, 1e-9) for o, t in rows)
        dev = None
        if done:
            ours = statistics.fmean(_by_workload(done, 1).values())
            theirs = statistics.fmean(_by_workload(done, 2).values())
            dev = ours / theirs - 1
            jcts = f"{ours:10.0f} {theirs:10.0f} {dev:+7.1%}"
        else:
            jcts = f"{'-':>10} {'-':>10} {'-':>7}"
        bound = ">" if any(not t.finished for _, t in rows) else " "
        print(f"{policy:9} {jcts} {bound}{wall:10.1f}x {cpu:10.1f}x {len(rows):6d}")
        if policy == "pollux":
            met = wall >= GOAL_SPEEDUP and dev is not None and abs(dev) <= GOAL_JCT_DEV
            ok &= met
            print(
                f"goal under pollux (>= {GOAL_SPEEDUP:.0f}x, JCT within "
                f"{GOAL_JCT_DEV:.0%}): {'met' if met else 'NOT met'}"
            )
    return ok


def _by_workload(done: list[tuple[int, Run, Run]], side: int) -> dict[int, float]:
    """Each workload's average JCT on one side (1 elasim, 2 Pollux), mean over repeats."""
    per: dict[int, list[float]] = {}
    for row in done:
        per.setdefault(row[0], []).append(row[side].avg_jct_s)
    return {w: statistics.fmean(v) for w, v in per.items()}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="1,2,3,4,5,6,7,8", help="numbers 1..8")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--pollux-python", default=None, help="Python of Pollux's venv")
    parser.add_argument("--pollux-dir", default=str(DEFAULT_POLLUX_DIR))
    parser.add_argument(
        "--budget-s", type=float, default=3600.0, help="wall seconds per run, then stop it"
    )
    parser.add_argument(
        "--pollux-logs",
        default=None,
        help="folder to keep each Pollux run's output in (POLICY-workload-N-REP.log)",
    )
    parser.add_argument(
        "--rescale",
        default="restart",
        help="elasim's --rescale (restart: as Pollux's simulator restarts a rescaled job)",
    )
    parser.add_argument(
        "--pause-job",
        default="resnet50_v100",
        help="elasim's --pause-job (benchmarks/pause_flat30.toml: ~30 s a move, as Pollux's)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    python = Path(
        args.pollux_python or os.environ.get("ELASIM_POLLUX_PYTHON") or DEFAULT_POLLUX_PYTHON
    )
    folder = Path(args.pollux_dir)
    reason = why_skipped(python, folder)
    if reason:
        print(f"skipped: {reason}")
        return 0
    if args.pollux_logs:
        Path(args.pollux_logs).mkdir(parents=True, exist_ok=True)
    elasim = str(Path(sys.executable).with_name("elasim"))
    workloads = [int(w) for w in args.workloads.split(",")]
    policies = args.policies.split(",")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(HEADER, flush=True)
    pairs: list[tuple[int, str, Run, Run]] = []
    for rep in range(args.repeats):
        for policy in policies:
            for workload in workloads:
                ours, theirs = run_pair(elasim, python, folder, workload, policy, args, rep)
                print_row(workload, policy, rep, ours, theirs)
                pairs.append((workload, policy, ours, theirs))
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    summarise(pairs, policies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
