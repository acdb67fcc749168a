"""The tables of ``elasim compare``: matched events, and the headline numbers."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from elasim.compare.events import FIDELITY_GOALS, CompareResult, EventPair


def summarize_pairs(pairs: Sequence[EventPair]) -> pd.DataFrame:
    """The matched events as a table (for notebooks and the CLI)."""
    rows = []
    for p in pairs:
        record = p.as_record()
        before, after = record.pop("nodes_before"), record.pop("nodes_after")
        rows.append({"kind": record.pop("kind"), "nodes": f"{before}->{after}", **record})
    return pd.DataFrame(rows)


def fidelity_summary(result: CompareResult) -> pd.Series:
    """Headline numbers of a comparison, and whether each fidelity goal is met."""
    completion = result.completion_time_rel_error
    pause = result.median_pause_rel_error
    return pd.Series(
        {
            "measured completion (s)": result.real_completion_s,
            "simulated completion (s)": result.sim_completion_s,
            "completion time error": completion,
            "completion goal met (<= 5%)": completion is not None
            and completion <= FIDELITY_GOALS["completion_time_rel_error"],
            "median per-event pause error": pause,
            "pause goal met (<= 20%)": pause is not None
            and pause <= FIDELITY_GOALS["median_pause_rel_error"],
            "events matched": result.events_matched,
            "measured events": sum(1 for p in result.pairs if p.real_time_s is not None),
            "simulated events": sum(1 for p in result.pairs if p.sim_time_s is not None),
        },
        dtype=object,
    )
