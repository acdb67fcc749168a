"""Whole-run overhead of an elastic trace replay vs fixed-size runs of the same steps.

Run: ``python benchmarks/bench_executor_overhead.py`` (about 4 minutes on 2 cores;
``--repeats 1`` for a quick look).

The replay: ``run_trace`` on the real ``spot_us_east.csv`` trace from t = 127,500 s,
capacity capped at 4 nodes (4 -> 2 at +2,100 s, back to 4 at +3,000 s, 4 -> 1 at
+17,400 s, back to 4 at +18,600 s), at 1,000x, ``greedy`` policy, 2,300 steps of the
default job.  Two variants:

* **notice 600 s**: victims leave gracefully at a step boundary before the drop;
* **no notice, spares**: victims are SIGKILLed; survivors lose the step in flight.
  Two spare warm standbys (6 slots for 4 workers) take their places when capacity
  returns, and replacements warm up at idle CPU priority, so a "booting node" does
  not share the trainers' CPUs (as in a real cluster, where it boots elsewhere);
* **no notice, same-host boot**: the same without spares or idle priority: the
  replacements cold-start on this 2-core host, competing with training, and the
  scale-up waits for them.  An artefact of emulating several nodes on one machine,
  reported as is.

Two overhead figures per replay (both use the same executor runtime, so the per-step
cost of being elastic, e.g. one store read per step, is *not* in them; it is what
``python benchmarks/bench_executor_pause.py`` does not measure either):

* **vs fixed**: replay training wall time (first to last step) against the same steps
  at the same world sizes in fixed-size runs (no change during a measurement)
  measured right before and right after the replay and averaged, so slow drift of
  the machine's load affects both alike (on a shared box this figure stays noisy);
* **within**: replay wall time against the replay's own steady-state step times (steps
  more than 10 after any change), which isolates the cost of the changes themselves
  (pauses, warm-up, lost steps) from run-to-run noise.

Medians over ``--repeats`` are printed.  Goal: <= 5 % of wall time.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

from elasim.executor.group import GroupSettings, LocalLauncher, ProcessWorkerGroup, StepRecord
from elasim.executor.protocol import WorkerSettings
from elasim.executor.run import RunConfig, run_trace
from elasim.jobmodel import JobSpec
from elasim.policies import EventKind

RESCALES = (EventKind.SCALE_UP, EventKind.SCALE_DOWN, EventKind.RESUME)
VARIANTS = (
    ("notice 600 s (graceful)", 600.0, False),
    ("no notice, spares", 0.0, True),
    ("no notice, same-host boot", 0.0, False),
)
SETTLE_STEPS = 10


def _spans(rows: tuple[StepRecord, ...]) -> list[tuple[float, int, bool]]:
    """(duration, world size, steady) for every step after the first."""
    out = []
    since_change = 0
    for prev, row in zip(rows, rows[1:], strict=False):
        since_change = 0 if row.gen != prev.gen else since_change + 1
        out.append((row.real_s - prev.real_s, row.world_size, since_change > SETTLE_STEPS))
    return out


def replay(notice_s: float, steps: int, tmp: Path, *, spares: bool = False) -> dict[str, object]:
    result = run_trace(
        RunConfig(
            spec=JobSpec(
                trace="spot_us_east.csv",
                start_offset_s=127_500.0,
                policy="greedy",
                max_nodes=4,
                notice_s=notice_s,
                checkpoint_interval_s=math.inf,  # the overhead of the replay alone
            ),
            time_scale=1000.0,
            local_slots=6 if spares else 4,
            idle_warmup=spares,
            max_steps=steps,
            checkpoint_dir=str(tmp / "ckpt"),
            max_wall_real_s=300.0,
        )
    )
    spans = _spans(result.steps)
    steady: dict[int, list[float]] = {}
    for duration, world, ok in spans:
        if ok:
            steady.setdefault(world, []).append(duration)
    rescales = [e for e in result.events if e.kind in RESCALES][1:]
    return {
        "wall_s": sum(d for d, _, _ in spans),
        "counts": {n: sum(1 for _, w, _ in spans if w == n) for n in {w for _, w, _ in spans}},
        "steady": {n: statistics.fmean(v) for n, v in steady.items()},
        "worlds": [w for _, w, _ in spans],
        "pause_sum_s": sum(e.pause_s for e in rescales),
        "rescales": len(rescales),
        "lost_steps": sum(e.lost_steps for e in result.events),
    }


def fixed_step_times(sizes: list[int], steps: int, tmp: Path) -> dict[int, float]:
    """Mean steady-state step time per world size, on one group that changes size only
    between measurements (never during one)."""
    worker = WorkerSettings(max_steps=10**9, checkpoint_dir=str(tmp / "ckpt-fixed"))
    group = ProcessWorkerGroup(GroupSettings(worker=worker), [LocalLauncher(max(sizes))])
    out: dict[int, float] = {}
    try:
        group.start()
        for n in sizes:
            group.apply(n, 0)
            first = group.progress().step + 40  # warm-up excluded
            while group.progress().step < first + steps:
                group.wait(0.02)
            rows = [r for r in group.step_records() if first <= r.step <= first + steps]
            spans = [b.real_s - a.real_s for a, b in zip(rows, rows[1:], strict=False)]
            out[n] = statistics.fmean(spans)
    finally:
        group.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2300, help="steps of each replay")
    parser.add_argument("--repeats", type=int, default=2, help="repetitions (medians)")
    args = parser.parse_args()
    started = time.perf_counter()
    table: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        for _ in range(args.repeats):
            for name, notice, spares in VARIANTS:
                sizes = [4, 3, 2, 1]
                before = fixed_step_times(sizes, 500, tmp)
                res = replay(notice, args.steps, tmp, spares=spares)
                after = fixed_step_times(sizes, 500, tmp)
                # bracketing: the machine's load (shared here) drifts between runs
                fixed = {n: (before[n] + after[n]) / 2 for n in sizes}
                counts: dict[int, int] = res["counts"]  # type: ignore[assignment]
                ideal = sum(counts[n] * fixed[n] for n in counts)
                steady: dict[int, float] = res["steady"]  # type: ignore[assignment]
                worlds: list[int] = res["worlds"]  # type: ignore[assignment]
                expected = sum(steady.get(w, fixed[w]) for w in worlds)
                wall = float(res["wall_s"])  # type: ignore[arg-type]
                table.setdefault(name, []).append(
                    {
                        "wall_s": wall,
                        "vs_fixed": wall / ideal - 1.0,
                        "within": wall / expected - 1.0,
                        "pauses": float(res["pause_sum_s"]) / expected,  # type: ignore[arg-type]
                        "rescales": float(res["rescales"]),  # type: ignore[arg-type]
                        "lost_steps": float(res["lost_steps"]),  # type: ignore[arg-type]
                    }
                )
                steps_ms = ", ".join(
                    f"{n}: {steady.get(n, math.nan) * 1e3:.2f}/{fixed[n] * 1e3:.2f}"
                    for n in sorted(counts)
                )
                print(f"  {name}: steady step ms in the replay / fixed-size, by size: {steps_ms}")
    print(
        f"measured in {time.perf_counter() - started:.0f} s on this machine "
        f"({args.repeats} repeats, medians)"
    )
    print(
        f"{'replay':26s} {'wall s':>7s} {'vs fixed':>9s} {'within':>7s} {'pauses':>7s} "
        f"{'rescales':>8s} {'lost':>5s}"
    )
    for name, runs in table.items():

        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        print(
            f"{name:26s} {med('wall_s'):7.2f} {med('vs_fixed') * 100:8.1f}% "
            f"{med('within') * 100:6.1f}% {med('pauses') * 100:6.1f}% "
            f"{med('rescales'):8.0f} {med('lost_steps'):5.0f}"
        )
    print("goal: overhead <= 5 % of wall time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
