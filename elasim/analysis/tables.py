"""Tables drawn from a :func:`~elasim.analysis.run_grid` frame, and the prose check.

Waste breakdowns, deadline hit rates, paired effects and Pareto tables: the numbers
a notebook quotes.  :func:`check_quoted` compares those quotes with a fresh run, so
prose cannot go stale silently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from .grids import GRID_KEYS, WASTE_COMPONENTS

__all__ = [
    "check_quoted",
    "deadline_hit_rate",
    "median_table",
    "paired_effect",
    "pareto_front",
    "pareto_table",
    "waste_breakdown",
    "yardstick_table",
]


def _aggregate(grouped: Any, stat: str) -> pd.DataFrame:
    if stat == "median":
        return grouped.median()
    if stat == "mean":
        return grouped.mean()
    raise ValueError(f"stat must be 'median' or 'mean', got {stat!r}")


def waste_breakdown(
    frame: pd.DataFrame,
    by: Sequence[str] = ("trace", "policy"),
    stat: str = "median",
) -> pd.DataFrame:
    """Where each policy's time went: the waste components and convergence cost.

    Each component is aggregated on its own over the runs of a group (the median by
    default: it is robust to the one start offset that lands in a long outage).  The
    medians of the parts need not add up to the median of the whole, so
    ``waste_h`` is the *sum of the aggregated components* (what a stacked bar shows),
    not the aggregate of each run's sum.

    Returns:
        One row per group: ``by`` columns, each column of :data:`WASTE_COMPONENTS`,
        ``waste_h``, ``convergence_cost_h``, ``completion_time_h``, ``largest``
        (the column of the largest component), ``runs`` and ``completed_share``.
    """
    parts = [c for c, _ in WASTE_COMPONENTS]
    columns = [*parts, "convergence_cost_h", "completion_time_h"]
    grouped = frame.groupby(list(by), sort=True)
    out = _aggregate(grouped[columns], stat)
    out.insert(len(parts), "waste_h", out[parts].sum(axis=1))
    out["largest"] = out[parts].idxmax(axis=1)
    out["runs"] = grouped.size()
    out["completed_share"] = grouped["completed"].mean().astype(float)
    return out.reset_index()


def yardstick_table(frame: pd.DataFrame, by: Sequence[str] = ("trace", "policy")) -> pd.DataFrame:
    """Each policy against the on-demand plan and the offline optimum (a grid with a deadline).

    Returns:
        One row per group: ``cost_vs_on_demand`` (median and max over runs),
        ``gap_closed`` (mean over the runs that met the deadline and had a gap to
        close, and how many did), ``cost_vs_greedy`` and ``cost_vs_optimal`` (medians
        over runs: against plain greedy and the offline optimum, which greedy with
        fallback, ``gap_closed``'s baseline, can hide), ``hit_rate`` and ``runs``.
        A grid recorded before those two columns existed gets none.
    """
    if "cost_vs_on_demand" not in frame:
        raise ValueError("no yardstick columns: run the grid with a deadline and yardstick=True")
    grouped = frame.groupby(list(by), sort=True)
    met = frame["deadline_met"].astype(bool)
    out = pd.DataFrame(
        {
            "cost_vs_on_demand": grouped["cost_vs_on_demand"].median(),
            "cost_vs_on_demand_max": grouped["cost_vs_on_demand"].max(),
            "gap_closed": grouped["gap_closed"].mean(),
            "gap_runs": grouped["gap_closed"].count(),
            **{
                name: grouped[name].median()
                for name in ("cost_vs_greedy", "cost_vs_optimal")
                if name in frame
            },
            "hit_rate": met.groupby([frame[c] for c in by]).mean(),
            "runs": grouped.size(),
        }
    )
    return out.reset_index()


def deadline_hit_rate(frame: pd.DataFrame, by: Sequence[str] = ("trace", "policy")) -> pd.DataFrame:
    """Share of runs that finished by their deadline, per group.

    A run that never completes misses its deadline.  Runs without a deadline
    (``deadline_met`` missing) are left out.

    Raises:
        ValueError: no run in ``frame`` had a deadline.
    """
    has = frame["deadline_met"].notna()
    if not has.any():
        raise ValueError("no run has a deadline (pass deadline_h to run_grid)")
    runs = frame[has].copy()
    runs["hit"] = runs["deadline_met"].astype(bool)
    grouped = runs.groupby(list(by), sort=True)["hit"]
    out = pd.DataFrame({"hits": grouped.sum().astype(int), "runs": grouped.size()})
    out["hit_rate"] = out["hits"] / out["runs"]
    return out.reset_index()


def paired_effect(
    frame: pd.DataFrame,
    factor: str,
    baseline: Any,
    alternative: Any,
    metric: str,
    by: Sequence[str] = ("trace",),
    tolerance: float = 1e-9,
) -> pd.DataFrame:
    """How ``metric`` changes when ``factor`` goes from ``baseline`` to ``alternative``.

    Runs are paired on every other grid key (same trace, policy, seed, and so the
    same start offset), so the comparison is between the same situations and not
    between two noisy samples.

    Args:
        frame: a :func:`run_grid` frame containing both settings of ``factor``.
        factor: a grid key, e.g. ``"rescale"`` or ``"notice_s"``.
        baseline: the reference value (``"inplace"``, ``0.0``).
        alternative: the value compared with it.
        metric: the column compared, e.g. ``"lost_work_h"``.
        by: groups of pairs.
        tolerance: differences within it count as ties.

    Returns:
        One row per group: ``pairs``, ``baseline_median``, ``alternative_median``,
        ``baseline_mean``, ``alternative_mean``, ``median_difference`` (alternative
        minus baseline, per pair), ``share_higher`` and ``share_lower`` (share of
        pairs where the alternative is above / below the baseline).

    Raises:
        ValueError: ``factor`` is not a grid key, or no pairs exist.
    """
    if factor not in GRID_KEYS:
        raise ValueError(f"factor must be one of {', '.join(GRID_KEYS)}, got {factor!r}")
    keys = [k for k in GRID_KEYS if k != factor]
    a = frame[frame[factor] == baseline].set_index(keys)[metric]
    b = frame[frame[factor] == alternative].set_index(keys)[metric]
    pairs = pd.concat({"baseline": a, "alternative": b}, axis=1, join="inner").reset_index()
    if pairs.empty:
        raise ValueError(f"no pairs of {factor}={baseline!r} and {factor}={alternative!r}")
    pairs["difference"] = pairs["alternative"] - pairs["baseline"]
    pairs["higher"] = pairs["difference"] > tolerance
    pairs["lower"] = pairs["difference"] < -tolerance
    grouped = pairs.groupby(list(by), sort=True)
    out = pd.DataFrame(
        {
            "pairs": grouped.size(),
            "baseline_median": grouped["baseline"].median(),
            "alternative_median": grouped["alternative"].median(),
            "baseline_mean": grouped["baseline"].mean(),
            "alternative_mean": grouped["alternative"].mean(),
            "median_difference": grouped["difference"].median(),
            "share_higher": grouped["higher"].mean(),
            "share_lower": grouped["lower"].mean(),
        }
    )
    return out.reset_index()


def _cost_axis(frame: pd.DataFrame) -> tuple[str, str]:
    """``cost_usd`` for priced traces, node-hours for the rest (their cost is 0)."""
    if "priced" not in frame or bool(frame["priced"].all()):
        return "cost_usd", "cost (USD)"
    return "node_hours", "node-hours held (trace has no price)"


def pareto_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Each policy's median completion time and cost per trace, and whether it is on the front.

    The cost is ``cost_usd`` on priced traces and ``node_hours`` on the others (whose
    dollar cost is 0 by construction); ``cost_metric`` says which.  A policy is on the
    front when no other policy's medians are at least as fast *and* strictly cheaper
    (:func:`pareto_front`).
    """
    tables = []
    for trace, rows in frame.groupby("trace", sort=True):
        cost, _ = _cost_axis(rows)
        done = rows.dropna(subset=["completion_time_h"])
        medians = (
            done.groupby("policy", sort=True)[["completion_time_h", cost]]
            .median()
            .rename(columns={cost: "cost"})
            .reset_index()
        )
        front = pareto_front(medians.rename(columns={"cost": "cost_usd"}))
        medians["on_front"] = medians["policy"].isin(front["policy"])
        medians.insert(0, "trace", trace)
        medians["cost_metric"] = cost
        tables.append(medians)
    return pd.concat(tables, ignore_index=True)


def median_table(
    frame: pd.DataFrame, metric: str, index: str = "trace", columns: str = "policy"
) -> pd.DataFrame:
    """Medians of ``metric`` with ``index`` values as rows and ``columns`` values as columns."""
    return frame.pivot_table(index=index, columns=columns, values=metric, aggfunc="median")


def check_quoted(
    table: pd.DataFrame | pd.Series,
    quoted: Mapping[Any, float],
    rel_tol: float = 0.01,
    abs_tol: float = 0.005,
) -> None:
    """Check numbers quoted in prose against the table they were read from.

    A notebook's prose quotes numbers from its full-size run; calling this next to
    the prose makes a re-run with different results fail instead of leaving the
    text stale.

    Args:
        table: a DataFrame (keys are ``(row, column)`` pairs) or a Series (keys are
            labels).
        quoted: the numbers as quoted, by key.
        rel_tol: relative tolerance (quoted numbers are rounded).
        abs_tol: absolute tolerance.

    Raises:
        AssertionError: listing every quoted number that no longer matches.
    """
    wrong = []
    for key, expected in quoted.items():
        actual = float(
            table.loc[key] if isinstance(table, pd.Series) else table.loc[key[0], key[1]]
        )
        if not math.isclose(actual, expected, rel_tol=rel_tol, abs_tol=abs_tol):
            wrong.append(f"{key}: quoted {expected:g}, now {actual:.4g}")
    if wrong:
        raise AssertionError("prose is stale: " + "; ".join(wrong))


def pareto_front(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows not dominated in (completion time, cost), sorted by completion time."""
    done = frame.dropna(subset=["completion_time_h"]).sort_values(["completion_time_h", "cost_usd"])
    best_cost = math.inf
    keep = []
    for index, row in done.iterrows():
        if row["cost_usd"] < best_cost:
            keep.append(index)
            best_cost = row["cost_usd"]
    return done.loc[keep]
