"""What ``receding``'s tail would be if it knew more of spot: the future's share, or the past.

Run: ``python benchmarks/receding_what_if.py ROWS.csv [--past-h 12,24,48] [--workers 2]``
where ``ROWS.csv`` is ``bench_spot_policies.py --policies receding --out``'s table.

Issue 25's tail.  ``receding`` plans at the certainty equivalent of the availability it
has seen (:class:`~elasim.policies.receding.AvailabilityHistory`: the share of time at
each level, with a 4-hour uniform prior).  Two questions a reader asks of that design,
answered by replaying every window of the table with the same policy told more:

* **told the share**: its history answers with the window's own future share of each
  availability level (the time to the deadline, on a 30 s grid), the thing
  certainty equivalence estimates.  Not an online policy (it knows how much spot
  comes, not when): if the tail came from misjudging the share, this would close it.
* **warmed with H hours**: its history is first fed the trace's ``H`` hours before the
  window, a minute apart, through the policy's own ``observe`` (an online policy may
  know its zone's past, as SkyPilot's and Can't Be Late's traces record it).

Each variant's cost over the table's ``optimal_usd`` (the sweep's replayed optimum):
mean, median, 90th percentile, worst, windows above 1.15x per node count and
deadlines met, next to the table's own ``receding`` replayed here (``as run``: it
must match the table).  Every deadline and the plan plus the bet hold in every
variant (the guarantees do not depend on the history).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_spot_policies as bench  # noqa: E402

from elasim.policies import RecedingPolicy  # noqa: E402
from elasim.sim import simulate  # noqa: E402
from elasim.traces import load_trace  # noqa: E402

GRID_S = 30.0
WARM_STEP_S = 60.0


class ToldShares:
    """A history that answers ``shares`` with given ones and delegates the rest."""

    def __init__(self, history, shares: list[tuple[int, float]]) -> None:
        self._history = history
        self._shares = shares

    def shares(self, max_nodes: int) -> list[tuple[int, float]]:
        return self._shares

    def __getattr__(self, name: str):
        return getattr(self._history, name)


def levels(trace, start_s: float, span_s: float, step_s: float, nodes: int) -> np.ndarray:
    """Spot nodes available (capped at ``nodes``) every ``step_s`` of ``[start, start + span)``."""
    rows = trace.rows_at(start_s + np.arange(0.0, span_s, step_s))
    return np.minimum(trace.available[rows], nodes)


def future_shares(trace, offset_s: float, deadline_s: float, nodes: int):
    """The share of the window's time at each availability level (capped at ``nodes``)."""
    seen, counts = np.unique(levels(trace, offset_s, deadline_s, GRID_S, nodes), return_counts=True)
    return [(int(level), float(n / counts.sum())) for level, n in zip(seen, counts, strict=True)]


def replay(
    row: dict, paths: dict[str, str], *, told: bool = False, past_h: float = 0.0
) -> tuple[float, bool, float]:
    """``(cost / optimum, deadline met, cost / on-demand plan)`` of one window.

    ``told``: the history answers with the window's future shares; ``past_h``: hours
    of the trace before the window fed to the history first; neither: as run.
    """
    trace = load_trace(paths.get(Path(row["trace"]).name, row["trace"]))
    offset_s = float(row["start_offset_s"])
    spec, job = bench.window(int(row["nodes"]), float(row["factor"]), offset_s)
    policy = RecedingPolicy()
    if told:
        shares = future_shares(trace, offset_s, spec.deadline_s, spec.max_nodes)
        policy.history = ToldShares(policy.history, shares)
    if past_h > 0.0:
        past_s = past_h * 3600.0
        past = levels(trace, offset_s - past_s, past_s, WARM_STEP_S, spec.max_nodes)
        for step, level in enumerate(past):
            policy.history.observe(step * WARM_STEP_S - past_s, int(level))
    result = simulate(spec, trace=trace, policy=policy, job=job)
    met = bool(result.summary()["deadline_met"])
    return result.cost_usd / row["optimal_usd"], met, result.cost_usd / row["on_demand_plan_usd"]


def summary(ratios: pd.DataFrame) -> str:
    """One line: mean, median, p90, worst, windows above 1.15x per node count, met."""
    r = ratios["ratio"]
    above = {int(n): int((g["ratio"] > 1.15).sum()) for n, g in ratios.groupby("nodes")}
    return (
        f"mean {r.mean():.4f}  median {r.median():.3f}  p90 {r.quantile(0.9):.3f}  "
        f"worst {r.max():.3f}  above 1.15x by nodes {above}  "
        f"met {int(ratios['met'].sum())}/{len(ratios)}  worst/plan {ratios['plan'].max():.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="bench_spot_policies.py --out's CSV")
    parser.add_argument("--past-h", default="12,24,48", help="hours of past to warm with")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    frame = bench.read_rows(parser, args.rows)
    try:
        hours = [float(h) for h in args.past_h.split(",") if h.strip()]
    except ValueError:
        hours = [-1.0]
    if any(not h > 0.0 for h in hours):  # also NaN
        parser.exit(2, f"{parser.prog}: error: --past-h {args.past_h!r}: positive hours, a,b,c\n")
    start = time.perf_counter()
    print(f"load {os.getloadavg()[0]:.2f} at start")
    frame = frame[frame["policy"] == "receding"]
    rows = frame.to_dict("records")
    seeds = f"seeds {frame['seed'].min()}-{frame['seed'].max()}"
    print(f"{len(rows)} windows of {args.rows.name} ({seeds}); cost / the table's optimum\n")
    variants: list[tuple[str, dict]] = [("as run", {}), ("told the share", {"told": True})]
    variants += [(f"warmed with {h:g} hours", {"past_h": h}) for h in hours]
    with tempfile.TemporaryDirectory(prefix="elasim-what-if-") as tmp:
        paths = {Path(p).name: p for p in bench.shared_traces(Path(tmp), 6)}
        with ProcessPoolExecutor(max(args.workers, 1)) as pool:
            for variant, options in variants:
                run = partial(replay, paths=paths, **options)
                out = list(pool.map(run, rows, chunksize=16))
                ratios = pd.DataFrame(out, columns=["ratio", "met", "plan"])
                ratios["nodes"] = frame["nodes"].to_numpy()
                if variant == "as run":
                    drift = (ratios["ratio"] - frame["cost_vs_optimal"].to_numpy()).abs().max()
                    print(f"{'(largest difference from the table)':<24} {drift:.2e}")
                print(f"{variant:<24} {summary(ratios)}")
    print(f"\nwall {time.perf_counter() - start:.0f} s, load {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
