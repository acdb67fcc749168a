"""Notebook parameters turned into names: ``"all"``, comma-separated strings, counts.

A notebook states its grid as papermill parameters (``POLICIES = "all"``,
``SEEDS = 5``); these helpers turn them into explicit tuples, failing on an empty
selection before any simulation starts.  ``"all"`` is resolved at call time from the
registries, so a policy or trace added later appears without editing a notebook.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elasim.job import TrainingJob
    from elasim.traces import CapacityTrace


__all__ = [
    "capacity_trace_names",
    "job_trace_names",
    "resolve_policies",
    "resolve_seeds",
    "resolve_traces",
]


def resolve_policies(policies: str | Sequence[str]) -> tuple[str, ...]:
    """Policy specs from ``"all"``, a comma-separated string or a sequence.

    ``"all"`` is every registered policy (:func:`elasim.policies.policy_names`), so a
    policy added later shows up in the notebooks without editing them.
    """
    from elasim.policies import policy_names

    if isinstance(policies, str):
        if policies.strip() == "all":
            return tuple(policy_names())
        names = [p.strip() for p in policies.split(",")]
    else:
        names = [str(p).strip() for p in policies]
    names = [n for n in names if n]
    if not names:
        raise ValueError("no policies given")
    return tuple(names)


def resolve_seeds(seeds: int | Sequence[int]) -> tuple[int, ...]:
    """``5`` means seeds ``0..4``; a sequence is taken as it is."""
    if isinstance(seeds, int | np.integer):
        if seeds < 1:
            raise ValueError(f"need at least one seed, got {seeds}")
        return tuple(range(int(seeds)))
    out = tuple(int(s) for s in seeds)
    if not out:
        raise ValueError("no seeds given")
    return out


def resolve_traces(traces: str | Sequence[str]) -> tuple[str, ...]:
    """Trace names from ``"all"`` (every bundled trace), a comma-separated string or a list."""
    if isinstance(traces, str):
        if traces.strip() == "all":
            return (*capacity_trace_names(), *job_trace_names())
        names = [t.strip() for t in traces.split(",")]
    else:
        names = [str(t).strip() for t in traces]
    names = [n for n in names if n]
    if not names:
        raise ValueError("no traces given")
    return tuple(names)


def capacity_trace_names() -> list[str]:
    """Bundled capacity (spot) traces, sorted."""
    from elasim.traces import bundled_traces

    return [info.name for info in bundled_traces() if info.kind == "capacity"]


def job_trace_names() -> list[str]:
    """Bundled shared-cluster job traces, sorted."""
    from elasim.traces import bundled_traces

    return [info.name for info in bundled_traces() if info.kind == "jobs"]


def _job(job: str | TrainingJob, max_nodes: int | None = None) -> TrainingJob:
    from elasim.job import load_job

    spec = load_job(job) if isinstance(job, str) else job
    return spec if max_nodes is None else spec.with_nodes(max_nodes=max_nodes)


def _capacity(trace: str | CapacityTrace) -> CapacityTrace:
    from elasim.traces import CapacityTrace, load_trace

    loaded = load_trace(trace) if isinstance(trace, str) else trace
    if not isinstance(loaded, CapacityTrace):
        raise ValueError(f"{getattr(loaded, 'name', trace)} is not a capacity trace")
    return loaded
