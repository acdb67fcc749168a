"""Answers drawn from a sweep: the cheapest, the fastest, the cheapest on time, and twins.

A sweep's table holds medians; a user wants the answer they imply.  This module
turns a sweep frame into values (frozen dataclasses), one :class:`GroupAnswers` per
trace (per workload for a cluster sweep), which ``elasim sweep`` and ``elasim
cluster sweep`` print and put in ``report.html``.

The rules, chosen so that an answer is never flattered by a run that did not count:

* **Medians** over a policy's runs in the group (its seeds), as in the table.
* **Unfinished runs.**  A policy with a run that did not finish (or, in a cluster
  sweep, a job that did not) takes no part in the answers of that group and is
  named on a ``left out`` line: its cost is the cost of a job that never ended,
  cheap because it stopped, and its median time is undefined.
* **Ties.**  Medians equal to the best within a relative 1e-9 tie; the answer names
  every tied policy, in alphabetical order.
* **The deadline.**  A policy *meets* it when every one of its runs met it (a run
  that did not finish missed it); among those, the lowest median cost wins.  When
  none did, the answer says so and names the policies that met it most often.
* **Identical policies.**  Two policies behaved identically when every run (same
  seed, notice and mechanism) has the same outcome figures to nine significant
  digits.  Grouping by that signature makes "identical" an equivalence relation
  (rounding to a tolerance band would not be transitive).
* **Oracles** (``optimal``) are left out of the answers: they know the future, so
  they are a yardstick, not a policy to pick.

Library code: nothing here prints or writes files.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

__all__ = [
    "CLUSTER_OUTCOMES",
    "JOB_OUTCOMES",
    "RUN_KEYS",
    "Answer",
    "GroupAnswers",
    "best_policies",
    "cluster_answers",
    "group_label",
    "identical_classes",
    "policy_labels",
    "run_cost",
    "sweep_answers",
]

#: Per-run figures that say how a job-sweep run went (two policies with the same
#: figures on every run behaved identically).
JOB_OUTCOMES = (
    "completed",
    "completion_time_h",
    "cost_usd",
    "spot_node_hours",
    "on_demand_node_hours",
    "rescales",
    "preemptions",
    "lost_work_h",
)
#: The same for a cluster-sweep run (one run per workload and policy).
CLUSTER_OUTCOMES = (
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "makespan_s",
    "jobs_completed",
    "gpu_utilization",
    "rescales",
)
#: What tells two runs of one policy in one group apart.
RUN_KEYS = ("seed", "notice_s", "rescale")
#: Relative tolerance within which two medians tie.
TIE_REL_TOL = 1e-9
#: Significant digits of the outcome figures compared for identical behaviour.
SIGNIFICANT_DIGITS = 9


@dataclass(frozen=True)
class Answer:
    """One objective's answer within one group.

    Attributes:
        objective: what was asked, e.g. ``cheapest`` or ``fastest``.
        policies: the winners (several on a tie), alphabetical; empty when no
            policy qualified.
        median: the winners' median figure (None when no policy qualified).
        unit: the figure's unit (``USD``, ``h``, ``s``, ``GPU-h``).
        digits: decimals the figure is shown with.
        note: a remark (why none qualified, how often the deadline was met).
    """

    objective: str
    policies: tuple[str, ...]
    median: float | None
    unit: str
    digits: int = 2
    note: str = ""

    def line(self) -> str:
        """``cheapest: greedy, 114.52 USD``; ``... none met it (...)`` when none did."""
        if not self.policies or self.median is None:
            return f"{self.objective}: {self.note or 'none'}"
        tie = " (tie)" if len(self.policies) > 1 else ""
        note = f" ({self.note})" if self.note else ""
        figure = f"{self.median:,.{self.digits}f} {self.unit}"
        return f"{self.objective}: {', '.join(self.policies)}, {figure}{tie}{note}"


@dataclass(frozen=True)
class GroupAnswers:
    """The answers for one trace (or workload): what a user reads under the table.

    Attributes:
        group: the trace or workload (and the notice and mechanism when they vary).
        answers: one per objective, in the order asked.
        identical: classes of two or more policies that behaved identically.
        left_out: policies left out of the answers (a run did not finish).
    """

    group: str
    answers: tuple[Answer, ...]
    identical: tuple[tuple[str, ...], ...] = ()
    left_out: tuple[str, ...] = ()

    def lines(self) -> tuple[str, ...]:
        """The answer lines, then the identical and left-out footnotes."""
        out = [answer.line() for answer in self.answers]
        out += [f"{' = '.join(names)} (identical runs)" for names in self.identical]
        if self.left_out:
            out.append(f"left out (a run did not finish): {', '.join(self.left_out)}")
        return tuple(out)


def best_policies(medians: Mapping[str, float]) -> tuple[tuple[str, ...], float | None]:
    """The policies whose median is the lowest (ties within :data:`TIE_REL_TOL`).

    NaN and infinite medians never win.  Returns ``((), None)`` when none is finite.
    """
    finite = {name: float(v) for name, v in medians.items() if math.isfinite(float(v))}
    if not finite:
        return (), None
    low = min(finite.values())
    winners = sorted(
        name
        for name, value in finite.items()
        if math.isclose(value, low, rel_tol=TIE_REL_TOL, abs_tol=1e-12)
    )
    return tuple(winners), low


def _canonical(value: Any) -> Any:
    """A figure as compared for identical behaviour: floats to nine significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return value


def identical_classes(
    frame: pd.DataFrame, outcomes: Sequence[str], keys: Sequence[str] = ()
) -> tuple[tuple[str, ...], ...]:
    """Partition the policies of ``frame`` by their runs: equal runs, one class.

    Args:
        frame: the runs of one group (a ``policy`` column, ``keys`` and ``outcomes``).
        outcomes: the figures compared (those missing from ``frame`` are skipped).
        keys: the columns that pair one policy's run with another's (seed, ...).

    Returns:
        Every class (singletons included), each sorted, in sorted order.  A policy
        is in exactly one class, so "same class" is an equivalence relation.
    """
    keys = [k for k in keys if k in frame]
    columns = [*keys, *(c for c in outcomes if c in frame)]
    signatures: dict[tuple[Any, ...], list[str]] = {}
    for policy, rows in frame.groupby("policy", sort=True):
        ordered = rows.sort_values(keys) if keys else rows
        signature = tuple(
            tuple(_canonical(v) for v in row)
            for row in ordered[columns].itertuples(index=False, name=None)
        )
        signatures.setdefault(signature, []).append(str(policy))
    return tuple(sorted(tuple(sorted(names)) for names in signatures.values()))


def group_label(by: Sequence[str], key: Any) -> str:
    """``spot_us_east.csv`` or ``spot_us_east.csv, notice 120 s, restart``."""
    values = key if isinstance(key, tuple) else (key,)
    parts = []
    for column, value in zip(by, values, strict=True):
        parts.append(f"notice {float(value):g} s" if column == "notice_s" else str(value))
    return ", ".join(parts)


def _twins(classes: Iterable[tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    return tuple(names for names in classes if len(names) > 1)


def run_cost(rows: pd.DataFrame) -> tuple[pd.Series, str]:
    """Dollars on a priced trace; node-hours held on a trace without a price (cost 0)."""
    if "cost_usd" in rows and bool((rows["cost_usd"].fillna(0) > 0).any()):
        return rows["cost_usd"].astype(float), "USD"
    hours = rows.get("spot_node_hours", 0.0) + rows.get("on_demand_node_hours", 0.0)
    return pd.Series(hours, index=rows.index, dtype=float), "node-h"


def _on_time(rows: pd.DataFrame, cost: pd.Series, unit: str, deadline_h: float) -> Answer:
    """The cheapest policy that met the deadline on every run."""
    met = rows["deadline_met"].fillna(False).astype(bool)
    hits = met.groupby(rows["policy"]).sum()
    runs = met.groupby(rows["policy"]).size()
    objective = f"cheapest that meets the {deadline_h:g} h deadline"
    on_time = [str(p) for p in hits.index if hits[p] == runs[p]]
    medians = cost[rows["policy"].isin(on_time)].groupby(rows["policy"]).median()
    winners, value = best_policies(medians.to_dict())
    if winners:
        count = int(runs[winners[0]])
        return Answer(objective, winners, value, unit, note=f"{count}/{count} on time")
    most = int(hits.max()) if len(hits) else 0
    if most == 0:
        return Answer(objective, (), None, unit, note="none met it")
    often = ", ".join(sorted(str(p) for p in hits.index if hits[p] == most))
    note = f"none met it on every run; most often: {often}, {most}/{int(runs.max())}"
    return Answer(objective, (), None, unit, note=note)


def _job_group(group: str, rows: pd.DataFrame, deadline_h: float | None) -> GroupAnswers:
    """The answers of one trace's runs (oracles already removed)."""
    finished = rows.groupby("policy", sort=True)["completed"].all()
    left_out = tuple(str(p) for p, ok in finished.items() if not ok)
    done = rows[~rows["policy"].isin(left_out)]
    cost, unit = run_cost(done)
    by_policy = done["policy"]
    answers = [
        Answer("cheapest", *best_policies(cost.groupby(by_policy).median().to_dict()), unit),
        Answer(
            "fastest",
            *best_policies(done.groupby("policy")["completion_time_h"].median().to_dict()),
            "h",
        ),
    ]
    if deadline_h is not None:
        all_cost, all_unit = run_cost(rows)
        answers.append(_on_time(rows, all_cost, all_unit, deadline_h))
    classes = identical_classes(rows, JOB_OUTCOMES, RUN_KEYS)
    return GroupAnswers(group, tuple(answers), _twins(classes), left_out)


def sweep_answers(
    frame: pd.DataFrame,
    *,
    by: Sequence[str] = ("trace",),
    deadline_h: float | None = None,
    leave_out: Iterable[str] = (),
) -> tuple[GroupAnswers, ...]:
    """The answers of a job sweep (``elasim sweep``), one :class:`GroupAnswers` per group.

    Args:
        frame: a sweep frame (:func:`elasim.sweep.run_sweep`), one row per run.
        by: the columns a group is (the trace; add ``notice_s`` and ``rescale``
            when the sweep varies them, as the table does).
        deadline_h: the deadline, hours: adds *cheapest that meets the deadline*.
        leave_out: policies that take no part (the oracles).

    Returns:
        The groups in sorted order.
    """
    skip = set(leave_out)
    rows = frame[~frame["policy"].isin(skip)]
    return tuple(
        _job_group(group_label(by, key), group, deadline_h)
        for key, group in rows.groupby(list(by) if len(by) > 1 else by[0], sort=True)
    )


def cluster_answers(frame: pd.DataFrame) -> tuple[GroupAnswers, ...]:
    """The answers of a cluster sweep, one :class:`GroupAnswers` per workload.

    *fastest* is the lowest mean job completion time; *cheapest* the fewest
    GPU-hours held by the jobs (``gpu_hours``: what a per-GPU-hour bill charges).
    A policy that left a job unfinished is left out (its mean JCT counts the
    finished jobs only).
    """
    out = []
    for workload, rows in frame.groupby("workload", sort=True):
        unfinished = rows["jobs_completed"] < rows["jobs"]
        left_out = tuple(sorted(str(p) for p in rows.loc[unfinished, "policy"]))
        done = rows[~unfinished].set_index("policy")
        answers = (
            Answer("cheapest", *best_policies(done["gpu_hours"].to_dict()), "GPU-h", 1),
            Answer("fastest", *best_policies(done["avg_jct_s"].to_dict()), "s mean JCT", 0),
        )
        classes = identical_classes(rows, CLUSTER_OUTCOMES)
        out.append(GroupAnswers(str(workload), answers, _twins(classes), left_out))
    return tuple(out)


def policy_labels(specs: Iterable[str], kind: Any = None) -> dict[str, str]:
    """What to call each policy spec in a table: a plugin file's policy by its ``name``.

    ``my_policy.py:HalfPolicy`` is shown as ``half`` (its class's ``name``, else
    the class name); registered names stay as they are.  Why: the spec is a path,
    which an 80-column table cuts to ``my_policy.p…``.  A label that two specs would
    share falls back to the specs themselves, so no two policies look the same.
    """
    from elasim.policies import get_policy_class

    labels: dict[str, str] = {}
    for spec in dict.fromkeys(specs):
        label = spec
        if ":" in spec:
            try:
                cls = get_policy_class(spec, kind)
            except Exception:  # noqa: BLE001 - a label never fails a sweep
                cls = None
            label = str(getattr(cls, "name", "") or spec.rpartition(":")[2])
        labels[spec] = label
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    return {spec: label if counts[label] == 1 else spec for spec, label in labels.items()}
