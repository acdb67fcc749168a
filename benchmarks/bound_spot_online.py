"""How much of a window's gap to the offline optimum any online spot policy must pay.

Run: ``python benchmarks/bound_spot_online.py ROWS.csv [--above 1.15] [--policy receding]``
where ``ROWS.csv`` is ``bench_spot_policies.py --out``'s table.

Issue 25's tail.  At any time ``t`` of a window, the history seen so far is consistent
with two futures: **A**, the trace as it happened, and **B**, spot gone from ``t`` to
the deadline.  A policy that never sees the future acts the same in both until ``t``;
say it has done ``w`` samples by then.  Whatever it does next, it pays at least the
cheapest way to do ``w`` by ``t`` plus the cheapest way to do the rest after ``t`` in
the future that comes, and a policy that guarantees the deadline must have ``w`` large
enough to finish on on-demand nodes in B.  So for every online policy

    max(cost_A / OPT_A, cost_B / OPT_B) >= min over w of max(r_A(w), r_B(w))

with ``r_X(w) = (C_prefix(w) + C_X,after(W - w)) / OPT_X``.  The bound per window is the
largest over ``t`` (every change of availability in the window and every 10 minutes).
Doing more work before ``t`` costs more in A (spot came back) and less in B (it did
not); a bound above 1 is what no online policy can avoid in one of the two futures.
Column ``with C`` adds a third future, **C**: every node on spot from ``t`` on (at the
spot price seen at ``t``), the one that punishes work bought early on on-demand nodes
while A punishes waiting.  The bound over A, B and C is the largest over ``t`` of
``min over w of max(r_A, r_B, r_C)``, never below the two-future one.

Every cost is the *fluid* model's: segments hold any mix of configurations (spot
first, on-demand for the rest, at the trace's spot price and the on-demand price),
goodput is the job's, and there are no pauses, boots, checkpoints or losses.  The
fluid cost of a profile is a sweep over the lower convex hulls of ``(rate, cost)`` per
(availability, price) level (the price of work the optimum and ``receding`` use), so
``C`` is exact in that model and convex in the work.  The optimum's fluid cost is
printed next to its replayed cost, to show how far the model is from the simulator.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_spot_policies as bench  # noqa: E402

from elasim.traces import load_trace  # noqa: E402

GRID_S = 60.0
BRANCH_EVERY_S = 600.0
WORK_POINTS = 801


class Curve:
    """Cheapest fluid cost of doing ``work`` samples over a profile of levels."""

    def __init__(self, seconds: dict[tuple[int, float], float], rates: np.ndarray, od: float):
        steps = []  # (price per sample, samples at that price)
        n_max = len(rates) - 1
        for (available, spot_price), length_s in seconds.items():
            points = [(0.0, 0.0)]
            for nodes in range(1, n_max + 1):
                spot = min(available, nodes)
                cost = (spot * spot_price + (nodes - spot) * od) / 3600.0
                points.append((rates[nodes], cost))
            edges = hull(points)
            for (r0, c0), (r1, c1) in zip(edges, edges[1:], strict=False):
                steps.append(((c1 - c0) / (r1 - r0), (r1 - r0) * length_s))
        steps.sort()
        self.work = np.concatenate([[0.0], np.cumsum([s[1] for s in steps])])
        self.cost = np.concatenate([[0.0], np.cumsum([s[0] * s[1] for s in steps])])

    def __call__(self, work: np.ndarray) -> np.ndarray:
        """Cost of ``work`` (inf beyond what the profile can do)."""
        cost = np.interp(work, self.work, self.cost)
        return np.where(work > self.work[-1] * (1 + 1e-12), np.inf, cost)


def hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Lower convex hull of ``(rate, cost)`` points, by rate."""
    out: list[tuple[float, float]] = []
    for p in sorted(points):
        if out and out[-1][0] == p[0]:
            continue
        while len(out) >= 2:
            (x0, y0), (x1, y1) = out[-2], out[-1]
            if (y1 - y0) * (p[0] - x0) >= (p[1] - y0) * (x1 - x0):
                out.pop()
            else:
                break
        out.append(p)
    return out


def profile(avail: np.ndarray, price: np.ndarray, lo: int, hi: int) -> dict:
    """Seconds per (availability, spot price) over grid cells ``lo..hi``."""
    pairs = np.stack([avail[lo:hi].astype(float), price[lo:hi]], axis=1)
    levels, counts = np.unique(pairs, axis=0, return_counts=True)
    return {(int(a), float(p)): n * GRID_S for (a, p), n in zip(levels, counts, strict=True)}


def futures(avail, price, cell: int, job: tuple[int, float], model: tuple) -> list:
    """Per future A, B, C: the cheapest cost of work after ``cell``, and that future's optimum.

    A: the trace as it happened (its optimum is the window's, ``None`` here: the
    caller has it); B: spot gone from ``cell`` on; C: every node on spot from ``cell``
    on, at the spot price seen then.  ``job``: the node count and the samples;
    ``model``: the rates per node count and the on-demand price.
    """
    (nodes, target), (rates, od) = job, model
    cells = len(avail)
    later = np.arange(cells) >= cell
    out: list = [(Curve(profile(avail, price, cell, cells), rates, od), None)]
    for levels, prices in (
        (np.where(later, 0, avail), price),
        (np.where(later, nodes, avail), np.where(later, price[cell], price)),
    ):
        after = Curve(profile(levels, prices, cell, cells), rates, od)
        whole = Curve(profile(levels, prices, 0, cells), rates, od)
        out.append((after, float(whole(np.array([target]))[0])))
    return out


def window_bound(trace, offset_s: float, nodes: int, factor: float) -> dict:
    """The bounds for one window (see the module), with where they are reached."""
    spec, job = bench.window(nodes, factor, offset_s)
    deadline_s = spec.deadline_s
    rates = np.array([0.0] + [job.goodput(n) for n in range(1, nodes + 1)])
    target = float(job.target_samples)
    times = offset_s + np.arange(0.0, deadline_s, GRID_S)
    rows = trace.rows_at(times)
    avail = np.minimum(trace.available[rows], nodes)
    price = (
        trace.price_per_hour[rows]
        if trace.price_per_hour is not None
        else np.full(len(rows), bench.SPOT_PRICE)
    )
    od = bench.ON_DEMAND_PRICE
    cells = len(times)
    opt_a = float(Curve(profile(avail, price, 0, cells), rates, od)(np.array([target]))[0])
    changes = set(np.flatnonzero(np.diff(avail) != 0) + 1)
    branches = sorted(changes | set(range(0, cells, int(BRANCH_EVERY_S / GRID_S))) - {0})
    best = {
        "bound": 1.0,
        "branch_h": math.nan,
        "done_share": math.nan,
        "opt_a_fluid": opt_a,
        "bound_c": 1.0,
        "branch_c_h": math.nan,
    }
    for cell in branches:
        before = Curve(profile(avail, price, 0, cell), rates, od)
        (after_a, _), (after_b, opt_b), (after_c, opt_c) = futures(
            avail, price, cell, (nodes, target), (rates, od)
        )
        work = np.linspace(0.0, min(target, before.work[-1]), WORK_POINTS)
        prefix = before(work)
        r_a = (prefix + after_a(target - work)) / opt_a
        r_b = (prefix + after_b(target - work)) / opt_b
        r_c = (prefix + after_c(target - work)) / opt_c
        for key, worst in (
            ("bound", np.maximum(r_a, r_b)),
            ("bound_c", np.maximum.reduce([r_a, r_b, r_c])),
        ):
            i = int(np.argmin(worst))
            if worst[i] > best[key]:
                best[key] = float(worst[i])
                if key == "bound":
                    best.update(branch_h=cell * GRID_S / 3600.0, done_share=float(work[i] / target))
                else:
                    best["branch_c_h"] = cell * GRID_S / 3600.0
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="bench_spot_policies.py --out CSV")
    parser.add_argument("--above", type=float, default=1.15, help="windows above this ratio")
    parser.add_argument("--policy", default="receding")
    parser.add_argument("--shared", type=int, default=6)
    args = parser.parse_args()
    frame = bench.read_rows(parser, args.rows)
    frame = frame[(frame["policy"] == args.policy) & (frame["cost_vs_optimal"] > args.above)]
    frame = frame.sort_values("cost_vs_optimal", ascending=False)
    with tempfile.TemporaryDirectory(prefix="elasim-bound-") as tmp:
        paths = {Path(p).name: p for p in bench.shared_traces(Path(tmp), args.shared)}
        paths.update({name: name for name in bench.BUNDLED})
        head = f"{'trace':<44} {'seed':>4} {'nodes':>5} {'factor':>6} {args.policy:>9}"
        head += f" {'bound':>6} {'at_h':>6} {'done':>5} {'opt fluid/replay':>16}"
        head += f" {'with C':>6} {'at_h':>6}"
        print(head)
        print("-" * len(head))
        for row in frame.itertuples():
            name = Path(row.trace).name
            trace = load_trace(paths[name])
            out = window_bound(trace, row.start_offset_s, int(row.nodes), float(row.factor))
            print(
                f"{name:<44} {row.seed:>4} {row.nodes:>5} {row.factor:>6} "
                f"{row.cost_vs_optimal:>9.3f} {out['bound']:>6.3f} {out['branch_h']:>6.2f} "
                f"{out['done_share']:>5.2f} {out['opt_a_fluid'] / row.optimal_usd:>16.3f}"
                f" {out['bound_c']:>6.3f} {out['branch_c_h']:>6.2f}"
            )


if __name__ == "__main__":
    main()
