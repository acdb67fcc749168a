"""Where more time cannot lower the cost: the planner's horizon cap.

The replay repeats the trace forever (:class:`~elasim.jobmodel.CapacityReplay`), so a
deadline may lie any distance past the trace's end, and a planning problem over the
whole horizon would grow with it.  It need not:

**A bound for every horizon.**  Let ``rate(c) = min_k usd_k(c) / goodput(c)`` be the
cheapest price of a sample of configuration ``c`` anywhere in the (repeating) trace,
``r* = min_c rate(c)``, and ``S(c)`` the samples a start into ``c`` from nothing
loses (its pause times its goodput; the very first start loads no checkpoint).
Any schedule that does the work ``W`` starts once, into some ``c0``, and pays for
that pause at least ``rate(c0) S(c0)``; every other second it holds nodes pays at
least ``r*`` per sample it yields, and it must yield ``W``.  So its cost, up to
where the work is done, is at least ``LB = r* W + min_c rate(c) S(c)``, whatever
the deadline.

**A schedule that nearly meets it.**  A *one-run* schedule holds nothing, starts
one configuration at a segment start and keeps it, never dropped, until the work is
done; its cost ``U`` is exact in the planner's model.  If one costs ``U <= LB (1 +
1e-4)`` and is done at ``T1``, then for every horizon ``H >= T1``: ``LB <= OPT(H) <=
OPT(T1) <= U``, so planning over ``[0, T1 + 1 h]`` instead of ``[0, H]`` loses at
most ``U - LB``, a ten-thousandth (below the search's own precision).

**How far to look.**  The cheapest sample comes from a configuration ``c*`` with
``rate(c*) = r*``; a run on it needs ``(W + S(c*)) / goodput(c*)`` seconds of the
segments where it is usable at that price, a share ``f`` of the trace's period.  So
the search for such a run covers ``T_far = P + (W + S) / (goodput f)`` (one period to
wait for the first usable segment), and at least two periods: a slow, cheap run (one
node on a short trace) is found even when it outlasts the trace.  ``T_far`` depends
on the job and the trace, not on the deadline.

Otherwise (no such run within ``T_far``) the horizon is capped at ``T_far`` (at least
two full periods), and the report's lower bound is ``LB``, which holds for every
horizon: the gap it shows is then all the cap may cost.  An earlier version capped
at one period, which forced a slow, cheap run onto more nodes (3x the cost of one
node running past the trace's end on the 11.4 h Bamboo trace).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .problem import PlanningProblem

__all__ = ["HorizonCap", "find_cap"]

#: A one-run schedule this close (relative) to the bound that holds for every
#: horizon caps the horizon: no longer deadline can save more than this share.
CAP_TOLERANCE = 1e-4
#: Planned time kept after the earliest finish that meets the bound: the replay
#: lands a little after the plan (checkpoints, rounding) and the plan stays cheap.
CAP_SLACK_S = 3600.0


@dataclass(frozen=True)
class HorizonCap:
    """The horizon to plan over and what it guarantees.

    Attributes:
        horizon_s: the capped horizon (at most the one asked for).
        exact: a schedule within it costs the bound that holds for every horizon,
            so no longer horizon can cost less.
        bound_usd: ``LB``, the lower bound on the cost at any horizon.
        finish_s: the earliest finish of a schedule that costs ``LB`` (exact only).
    """

    horizon_s: float
    exact: bool
    bound_usd: float
    finish_s: float


def universal_bound(problem: PlanningProblem) -> tuple[float, float]:
    """``(LB, r*)``: the lower bound on the cost at any horizon (see the module).

    The first start into ``c`` pays ``usd(c)`` through its pause, losing ``S(c) =
    goodput(c) x pause`` samples: at least ``rate(c) S(c)`` with ``rate(c)`` the
    cheapest price of a sample of ``c`` in the trace; every other held second pays at
    least ``r*`` per sample, and the work needs ``W`` of them.
    """
    running = problem.goodput > 0
    usd = problem.hold_usd_table()
    rate = (usd[:, running] / problem.goodput[running]).min(axis=0)  # per configuration
    start = np.minimum(problem.first_loss, problem.loss[0])[running]
    best_rate = float(rate.min())
    return best_rate * problem.work_samples + float((rate * start).min()), best_rate


def far_s(problem: PlanningProblem, period_s: float) -> float:
    """``T_far``: how long the search for a run at the cheapest price must look.

    ``problem`` covers at least the trace's first period (or the whole horizon), so
    the share of time each configuration is usable at its cheapest price is read from
    it; a configuration never usable there is ignored.
    """
    running = np.flatnonzero(problem.goodput > 0)
    usd = problem.hold_usd_table()
    first = problem.start_s < period_s
    lengths = problem.length_s[first]
    rates = usd[first][:, running] / problem.goodput[running]
    usable = problem.configs[running, 0][None, :] <= problem.available[first][:, None]
    rates = np.where(usable, rates, np.inf)
    best = rates.min(axis=0)
    r_star = float(best.min())
    if not math.isfinite(r_star):
        return 2 * period_s
    share_s = ((rates <= r_star * (1 + CAP_TOLERANCE)) * lengths[:, None]).sum(axis=0)
    start = np.minimum(problem.first_loss, problem.loss[0])[running]
    some = share_s > 0  # the configurations that reach r* somewhere in the period
    work = problem.work_samples + start[some]
    need_s = work / problem.goodput[running][some] * (float(lengths.sum()) / share_s[some])
    return max(2 * period_s, period_s + float(need_s.max(initial=0.0)))


def find_cap(problem: PlanningProblem, horizon_s: float, period_s: float, far: float) -> HorizonCap:
    """The horizon cap for ``horizon_s`` from ``problem`` (planned over ``far`` or less)."""
    bound, _ = universal_bound(problem)
    finish = _earliest_finish(problem, bound)
    if finish is not None and finish <= horizon_s:
        capped = min(horizon_s, float(finish) + CAP_SLACK_S)
        return HorizonCap(capped, True, bound, float(finish))
    return HorizonCap(min(horizon_s, far), False, bound, math.nan)


def _earliest_finish(problem: PlanningProblem, bound: float) -> float | None:
    """When the earliest one-run schedule within ``CAP_TOLERANCE`` of the bound is done.

    A one-run schedule holds nothing, starts one configuration at a segment start
    (long enough to boot in) and holds it, never dropped, until the work is done;
    its cost is exact in the planner's model.  Only segments where a configuration's
    price of the work alone stays within the budget can be part of such a run.
    None: no such schedule in ``problem``.
    """
    usd = problem.hold_usd_table()
    spot = problem.configs[:, 0]
    best: float | None = None
    for c in np.flatnonzero(problem.goodput > 0):
        rate = usd[:, c] / problem.goodput[c]
        budget = bound * (1 + CAP_TOLERANCE)
        usable = (rate * problem.work_samples <= budget) & (spot[c] <= problem.available)
        if not usable.any():
            continue
        finish = _first_run(problem, usable, usd[:, c], int(c), budget)
        if finish is not None and (best is None or finish < best):
            best = finish
    return best


def _first_run(
    problem: PlanningProblem, usable: np.ndarray, usd: np.ndarray, c: int, budget_usd: float
) -> float | None:
    """Finish of the first one-run schedule of ``c`` within ``usable`` segments and budget."""
    good = float(problem.goodput[c])
    edges = np.flatnonzero(np.diff(np.concatenate([[0], usable.astype(np.int8), [0]])))
    for begin, end in zip(edges[::2], edges[1::2], strict=True):
        for k0 in range(begin, end):
            if problem.length_s[k0] >= problem.min_add_s:
                break
        else:
            continue
        start_loss = problem.first_loss[c] if k0 == 0 else problem.loss[0, c]
        lengths = problem.length_s[k0:end]
        done = np.cumsum(good * lengths) - start_loss  # work at each segment's end
        hit = int(np.searchsorted(done, problem.work_samples))
        if hit == len(done):
            continue  # the run ends before the work is done
        short = (done[hit] - problem.work_samples) / good  # seconds not needed
        paid = float(np.sum(usd[k0 : k0 + hit + 1] * lengths[: hit + 1])) - usd[k0 + hit] * short
        if paid <= budget_usd:
            return float(problem.start_s[k0 + hit] + lengths[hit]) - short
    return None
