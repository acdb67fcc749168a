"""What a trace looks like to a job: drops, availability, background load.

Kept apart from the grids because these numbers describe the *input* (a trace as a
job of a given size sees it) and change when the trace model does, not when the
simulator does.  :func:`synthetic_failure_trace` is here too: a clearly labelled
SYNTHETIC trace for the checkpoint-interval analysis, never passed off as measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elasim.job import TrainingJob
    from elasim.traces import CapacityTrace, JobTrace

from .resolve import _capacity, _job

__all__ = [
    "describe_traces",
    "mean_background_gpus",
    "mean_time_between_drops_s",
    "synthetic_failure_trace",
]


def mean_background_gpus(trace: str | JobTrace) -> float:
    """Mean GPUs a job trace asks for: GPU-hours over the span of its submissions.

    The yardstick for choosing ``cluster_gpus``: a cluster much larger than this
    leaves the elastic job alone, one close to it makes the job compete.
    """
    from elasim.traces import JobTrace, load_trace

    loaded = load_trace(trace) if isinstance(trace, str) else trace
    if not isinstance(loaded, JobTrace):
        raise ValueError(f"{getattr(loaded, 'name', trace)} is not a job trace")
    return float(loaded.gpu_hours / loaded.span_h)


def mean_time_between_drops_s(
    trace: str | CapacityTrace, max_nodes: int | None = None
) -> tuple[float, int]:
    """The trace's mean time between capacity drops, as a job of ``max_nodes`` sees it.

    Availability is capped at ``max_nodes`` first (a drop from 30 to 20 nodes never
    touches a 16-node job), and the wrap-around from the last row to the first
    counts when it is a drop, because a replay repeats the trace.  This is the prior
    the simulator's ``auto`` interval starts from, and what
    :func:`elasim.traces.summarize` reports as ``mean_time_between_drops_h`` for an
    uncapped trace without a wrap-around drop.

    Returns:
        ``(mtbf_s, drops)``; ``mtbf_s`` is ``inf`` without drops.
    """
    loaded = _capacity(trace)
    available = loaded.available
    if max_nodes is not None:
        available = np.minimum(available, max_nodes)
    drops = int(np.count_nonzero(np.diff(available) < 0))
    if available[-1] > available[0]:
        drops += 1
    return (loaded.duration_s / drops if drops else math.inf), drops


def describe_traces(
    traces: Sequence[str], job: str | TrainingJob = "resnet50_v100", max_nodes: int | None = None
) -> pd.DataFrame:
    """One row per trace: what a job of ``job``'s size sees in it.

    Capacity traces are capped at the job's ``max_nodes`` (or ``max_nodes`` when
    given; the simulator does the same), so ``drops`` and ``mtbf_h`` count only the
    drops that can hit the job.

    Returns:
        ``trace``, ``kind``, ``duration_h`` (capacity: length; jobs: span of
        submissions), ``mean_available`` and ``availability_fraction`` (share of time
        with at least one node; capacity only), ``drops``, ``mtbf_h``, ``priced``,
        ``on_demand_price_per_hour``, and for job traces ``jobs``, ``gpu_hours`` and
        ``mean_background_gpus``.
    """
    from elasim.traces import CapacityTrace, load_trace

    cap = _job(job, max_nodes).nodes.max
    rows: list[dict[str, Any]] = []
    for name in traces:
        trace = load_trace(name)
        if isinstance(trace, CapacityTrace):
            available = np.minimum(trace.available, cap)
            widths = np.diff(np.append(trace.time_s, trace.duration_s))
            mtbf_s, drops = mean_time_between_drops_s(trace, cap)
            rows.append(
                {
                    "trace": name,
                    "kind": "capacity",
                    "duration_h": trace.duration_h,
                    "mean_available": float(np.sum(available * widths) / trace.duration_s),
                    "availability_fraction": float(
                        np.sum(widths[available > 0]) / trace.duration_s
                    ),
                    "drops": drops,
                    "mtbf_h": mtbf_s / 3600.0,
                    "priced": trace.price_per_hour is not None,
                    "on_demand_price_per_hour": trace.metadata.on_demand_price_per_hour,
                }
            )
        else:
            rows.append(
                {
                    "trace": name,
                    "kind": "jobs",
                    "duration_h": trace.span_h,
                    "priced": False,
                    "jobs": trace.num_jobs,
                    "gpu_hours": trace.gpu_hours,
                    "mean_background_gpus": mean_background_gpus(trace),
                }
            )
    return pd.DataFrame(rows)


def synthetic_failure_trace(
    mtbf_s: float,
    nodes: int,
    *,
    downtime_s: float = 120.0,
    failures: int = 400,
    seed: int = 0,
) -> CapacityTrace:
    """A SYNTHETIC capacity trace with Poisson failures of the whole job.

    ``nodes`` nodes are available; after an exponentially distributed up-time of
    mean ``mtbf_s`` every node is lost for ``downtime_s``, then all come back.  So a
    job holding them fails (and, holding nothing afterwards, rolls back to its last
    checkpoint) at a known rate of one per ``mtbf_s`` of up-time: the setting of
    Young's and Daly's analyses.  The metadata say ``synthetic: true`` and the
    source line says how it was generated, so it cannot pass for measured data.

    Args:
        mtbf_s: mean up-time between failures, seconds.
        nodes: nodes available while up.
        downtime_s: how long all nodes stay gone after a failure.
        failures: failures in one pass of the trace (it repeats past its end).
        seed: seeds the exponential draws.
    """
    from elasim.traces import CapacityTrace, TraceMetadata

    if not (mtbf_s > 0 and downtime_s > 0 and nodes >= 1 and failures >= 1):
        raise ValueError("need mtbf_s > 0, downtime_s > 0, nodes >= 1 and failures >= 1")
    rng = np.random.default_rng(seed)
    # a floor of 1 ms keeps the rows strictly increasing whatever the draw
    up_s = np.maximum(rng.exponential(mtbf_s, size=failures + 1), 1e-3)
    times = [0.0]
    available = [nodes]
    now = 0.0
    for up in up_s[:-1]:
        now += float(up)
        times.append(now)
        available.append(0)
        now += downtime_s
        times.append(now)
        available.append(nodes)
    duration_s = now + float(up_s[-1])
    source = (
        f"SYNTHETIC: Poisson failures generated by elasim.analysis.synthetic_failure_trace("
        f"mtbf_s={mtbf_s:g}, nodes={nodes}, downtime_s={downtime_s:g}, failures={failures}, "
        f"seed={seed}); not a measurement"
    )
    return CapacityTrace(
        name=f"SYNTHETIC_poisson_mtbf{mtbf_s:g}s",
        time_s=np.asarray(times, dtype=np.float64),
        available=np.asarray(available, dtype=np.int64),
        price_per_hour=None,
        metadata=TraceMetadata(source=source, synthetic=True),
        duration_s=duration_s,
    )
