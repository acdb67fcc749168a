"""A shared cluster at a start offset holds the jobs that run there.

The elastic job of the single-job shared-cluster mode takes what a FIFO queue of
background jobs leaves.  Started at an offset, it used to find the cluster empty:
the background jobs still running at the offset were dropped.  These tests pin the
fix in :class:`elasim.sim.capacity.ClusterCapacity`, the one place the stream is
built.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasim.sim.capacity import ClusterCapacity
from elasim.traces.model import JobTrace


def _trace(submit, duration, gpus) -> JobTrace:
    return JobTrace(
        name="t",
        submit_time_s=np.asarray(submit, dtype=float),
        duration_s=np.asarray(duration, dtype=float),
        num_gpus=np.asarray(gpus, dtype=np.int64),
    )


def _stream(cluster: ClusterCapacity, horizon_s: float) -> list[tuple[float, int]]:
    """Every (job time, available nodes) change up to ``horizon_s``."""
    out: list[tuple[float, int]] = []
    while (time_s := cluster.next_time_s()) <= horizon_s:
        out.extend((item.time_s, item.available) for item in cluster.pop_due(time_s))
    return out


def test_a_job_running_across_the_offset_holds_its_gpus_after_it():
    # job A: 8 of 16 GPUs from 0 to 1,000 s; job B (16 GPUs) queues behind it at 100 s
    trace = _trace([0.0, 100.0, 2000.0], [1000.0, 50.0, 10.0], [8, 16, 1])
    cluster = ClusterCapacity(trace, cluster_gpus=16, gpus_per_node=1, start_offset_s=500.0)
    assert cluster.initial[0] == 8  # A still holds 8 GPUs at the offset
    assert cluster.running_jobs == 1 and cluster.started_jobs == 1
    changes = _stream(cluster, 1000.0)
    # A ends at 1,000 s trace time (500 s job time) and B, queued, takes everything
    assert changes == [(500.0, 0), (550.0, 16)]


def test_offset_zero_starts_empty_as_before():
    trace = _trace([10.0, 20.0, 500.0], [100.0, 100.0, 1.0], [4, 4, 1])
    cluster = ClusterCapacity(trace, cluster_gpus=8, gpus_per_node=1, start_offset_s=0.0)
    assert cluster.initial[0] == 8
    assert _stream(cluster, 200.0) == [(10.0, 4), (20.0, 0), (110.0, 4), (120.0, 8)]


@settings(max_examples=60, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(
            st.integers(0, 500), st.integers(1, 400), st.integers(1, 6)
        ),  # submit, duration, GPUs
        min_size=1,
        max_size=12,
    ),
    offset_frac=st.floats(0.0, 0.999),
)
def test_an_offset_run_sees_what_a_run_from_the_start_sees_from_the_offset(jobs, offset_frac):
    """The stream at offset ``o`` is the stream from 0, after ``o``, shifted by ``-o``.

    Integer times keep the shift exact in floating point.
    """
    jobs = sorted(jobs)
    trace = _trace(*zip(*jobs, strict=True))
    whole = ClusterCapacity(trace, cluster_gpus=8, gpus_per_node=2)
    period_s = whole.period_s
    offset_s = float(math.floor(offset_frac * period_s))
    horizon_s = 3 * period_s
    reference = _stream(whole, horizon_s + offset_s)
    before = [available for time_s, available in reference if time_s < offset_s]
    after = [(time_s - offset_s, a) for time_s, a in reference if time_s >= offset_s]
    shifted = ClusterCapacity(trace, cluster_gpus=8, gpus_per_node=2, start_offset_s=offset_s)
    assert shifted.initial[0] == (before[-1] if before else whole.initial[0])
    assert _stream(shifted, horizon_s) == [(t, a) for t, a in after if t <= horizon_s]


@pytest.mark.timeout(120)
def test_philly_at_an_offset_is_not_an_empty_cluster():
    """One week of Philly on 64 GPUs, 72 h in: background jobs are running there."""
    from elasim.traces import load_trace

    trace = load_trace("philly_jobs.csv")
    cluster = ClusterCapacity(
        trace, cluster_gpus=64, gpus_per_node=4, start_offset_s=72 * 3600.0, cap_nodes=16
    )
    assert cluster.running_jobs > 0
    assert cluster.initial[0] < 16
