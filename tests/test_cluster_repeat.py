"""A job trace that repeats faster than its jobs run says so, once.

A shared cluster's job trace repeats every (last submission + 1 s).  A short table
(a few pods submitted over a minute, some running for hours) then becomes a cluster
loaded many times over: copies of the long jobs overlap.  That is the documented
model, but it used to happen silently; these tests pin the one warning that names the
trace, the period and how many jobs outlast it, and that results do not change.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from elasim.sim import capacity
from elasim.sim.capacity import ClusterCapacity
from elasim.traces.model import JobTrace

LOGGER = "elasim.sim.capacity"


def _trace(name: str, submit, duration) -> JobTrace:
    return JobTrace(
        name=name,
        submit_time_s=np.asarray(submit, dtype=float),
        duration_s=np.asarray(duration, dtype=float),
        num_gpus=np.ones(len(submit), dtype=np.int64),
    )


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(capacity, "_WARNED_OVERLAP", set(), raising=False)


def _warnings(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING
    ]


def test_a_trace_shorter_than_its_jobs_warns_once(caplog):
    # submissions at 0 and 40 s: period 41 s; two jobs (100 s, 50 s) outlast it
    trace = _trace("pods_trace.csv", [0.0, 40.0, 40.0], [100.0, 50.0, 30.0])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for seed_offset in (0.0, 10.0, 20.0):  # a sweep builds one per run
            ClusterCapacity(trace, cluster_gpus=8, gpus_per_node=1, start_offset_s=seed_offset)
    messages = _warnings(caplog)
    assert len(messages) == 1, messages
    message = messages[0]
    assert "pods_trace.csv" in message
    assert "41 s" in message
    assert "2 of 3 jobs" in message and "up to 3 copies" in message
    assert "--where" in message  # says what to do


def test_a_trace_longer_than_its_jobs_is_quiet(caplog):
    trace = _trace("long.csv", [0.0, 500.0, 1000.0], [100.0, 200.0, 1000.0])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ClusterCapacity(trace, cluster_gpus=8, gpus_per_node=1)
    assert _warnings(caplog) == []


def test_the_warning_changes_no_result():
    trace = _trace("same.csv", [0.0, 40.0], [100.0, 30.0])
    streams = []
    for _ in range(2):  # the second build does not warn again
        cluster = ClusterCapacity(trace, cluster_gpus=2, gpus_per_node=1)
        out = []
        while (time_s := cluster.next_time_s()) <= 500.0:
            out.extend((i.time_s, i.available) for i in cluster.pop_due(time_s))
        streams.append(out)
    assert streams[0] == streams[1] and streams[0]


def test_a_few_long_jobs_in_a_long_trace_are_quiet(caplog):
    # as the bundled week of Philly: one long job among many, a small share overlaps
    trace = _trace("week.csv", list(range(0, 1000, 10)), [50.0] * 99 + [1200.0])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ClusterCapacity(trace, cluster_gpus=8, gpus_per_node=1)
    assert _warnings(caplog) == []
