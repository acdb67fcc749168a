"""Trace model: validation, lookups, repetition, summaries, the error type."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasim.traces import CapacityTrace, JobTrace, TraceError, TraceMetadata, summarize


def cap(**kw: object) -> CapacityTrace:
    args: dict[str, object] = {
        "name": "t",
        "time_s": [0, 100, 250],
        "available": [2, 0, 3],
        "price_per_hour": [1.0, 2.0, 4.0],
        "metadata": TraceMetadata(synthetic=True),
        "duration_s": 400.0,
    }
    args.update(kw)
    return CapacityTrace(**args)  # type: ignore[arg-type]


def test_trace_error_format_and_pickle() -> None:
    err = TraceError("bad value", "a.csv", 3, 2)
    assert str(err) == "a.csv:3:2: bad value"
    assert str(TraceError("m", "a.csv", 3)) == "a.csv:3: m"
    assert str(TraceError("m", "a.csv", None, "data[4]")) == "a.csv:data[4]: m"
    assert str(TraceError("m")) == "m"
    assert str(TraceError("two\nlines", "p")) == "p: two lines"
    assert isinstance(err, ValueError)
    back = pickle.loads(pickle.dumps(err))
    assert (back.path, back.line, back.column, back.message) == ("a.csv", 3, 2, "bad value")


def test_lookup_and_wrap() -> None:
    trace = cap()
    assert trace.max_available == 3
    assert trace.duration_h == pytest.approx(400 / 3600)
    times = (0, 99.9, 100, 249, 250, 399, 400, 1e9)
    assert [trace.at(t) for t in times] == [0, 0, 1, 1, 2, 2, 2, 2]
    assert trace.at(np.array([0.0, 150.0, 300.0])).tolist() == [0, 1, 2]
    assert trace.value_at(0) == (2, 1.0)
    assert trace.value_at(120) == (0, 2.0)
    # the trace repeats from its start after duration_s
    assert trace.value_at(400) == (2, 1.0)
    assert trace.value_at(400 + 260) == (3, 4.0)
    assert trace.value_at(3 * 400 + 99) == (2, 1.0)
    assert cap(price_per_hour=None).value_at(5) == (2, None)
    with pytest.raises(ValueError):
        trace.at(-1)
    with pytest.raises(ValueError):
        trace.value_at(float("nan"))


def test_rows_at_is_value_at_for_a_grid() -> None:
    trace = cap()
    times = np.array([0.0, 99.9, 100.0, 399.0, 400.0, 660.0, 3 * 400 + 99, 1e9])
    rows = trace.rows_at(times)
    assert [int(trace.available[i]) for i in rows] == [trace.value_at(t)[0] for t in times]
    # a time before the start reads the repetition before it (the trace's past)
    assert trace.rows_at(np.array([-10.0, -160.0])).tolist() == [2, 1]
    with pytest.raises(ValueError):
        trace.rows_at(np.array([float("nan")]))


def test_next_change_walks_rows_forever() -> None:
    trace = cap()
    t, seen = 0.0, []
    for _ in range(7):
        t = trace.next_change_s(t)
        seen.append(t)
    assert seen == [100, 250, 400, 500, 650, 800, 900]
    assert trace.next_change_s(120) == 250
    assert trace.next_change_s(399.5) == 400


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1e7, allow_nan=False))
def test_next_change_is_strictly_later_and_a_row_boundary(t: float) -> None:
    trace = cap()
    nxt = trace.next_change_s(t)
    assert nxt > t
    mid = t + (nxt - t) / 2
    if mid < nxt:  # not collapsed by rounding at 1 ulp
        assert trace.value_at(t) == trace.value_at(mid)  # no change before nxt
    local = nxt % trace.duration_s
    assert min(abs(local - b) for b in (0, 100, 250, 400)) < 1e-6 * max(1.0, nxt)


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"time_s": [5, 10, 20]}, "start at 0"),
        ({"time_s": [0, 10, 10]}, "strictly increasing"),
        ({"available": [1, -1, 2]}, ">= 0"),
        ({"available": [1, 1.5, 2]}, "integers"),
        ({"price_per_hour": [1, 0, 1]}, "> 0"),
        ({"price_per_hour": [1, 2]}, "rows"),
        ({"duration_s": 250}, "after the last row"),
        (
            {"time_s": [0.0], "available": [1], "price_per_hour": None, "duration_s": None},
            "one-row",
        ),
        ({"time_s": [0, float("inf"), 5]}, "finite"),
    ],
)
def test_capacity_validation(kw: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        cap(**kw)


def test_constructor_copies_and_freezes_inputs() -> None:
    avail = np.array([2, 0, 3])
    trace = cap(available=avail)
    avail[0] = 99
    assert trace.available[0] == 2 and avail.flags.writeable
    assert not trace.time_s.flags.writeable
    with pytest.raises(AttributeError):
        trace.name = "other"  # type: ignore[misc]
    assert cap(duration_s=None).duration_s == 250 + 125  # median of gaps 100, 150


def test_metadata_validation() -> None:
    with pytest.raises(ValueError):
        TraceMetadata(gpus_per_node=0)
    with pytest.raises(ValueError):
        TraceMetadata(on_demand_price_per_hour=-1)
    with pytest.raises(ValueError):
        TraceMetadata(source="two\nlines")
    with pytest.raises(ValueError):
        TraceMetadata(extra=(("region", "x"),))
    with pytest.raises(ValueError):
        TraceMetadata(extra=(("bad key", "x"),))
    meta = TraceMetadata(extra=(("a", "1"),))
    assert meta.get("a") == "1" and meta.get("b") is None


def test_job_trace_validation_and_defaults() -> None:
    jobs = JobTrace("j", [0, 0, 5], [1, 2, 3], [1, 4, 8])
    assert jobs.priority.tolist() == [0, 0, 0] and not jobs.priority.flags.writeable
    assert jobs.num_jobs == 3 and jobs.gpu_hours == pytest.approx((1 + 8 + 24) / 3600)
    with pytest.raises(ValueError, match="sorted"):
        JobTrace("j", [5, 0], [1, 1], [1, 1])
    with pytest.raises(ValueError, match="> 0"):
        JobTrace("j", [0], [0], [1])
    with pytest.raises(ValueError, match=">= 1"):
        JobTrace("j", [0], [1], [0])


def test_summarize_capacity_by_hand() -> None:
    s = summarize(cap())
    # rows [0,100) 2 nodes @1, [100,250) 0 @2, [250,400) 3 @4 -> time-weighted means
    assert s["rows"] == 3 and s["kind"] == "capacity"
    assert s["mean_available"] == pytest.approx((2 * 100 + 0 * 150 + 3 * 150) / 400)
    assert s["availability_fraction"] == pytest.approx(250 / 400)
    assert s["full_availability_fraction"] == pytest.approx(150 / 400)
    assert (s["drops"], s["nodes_dropped"]) == (1, 2)
    assert s["mean_time_between_drops_h"] == pytest.approx(400 / 3600)
    assert (s["price_min"], s["price_max"]) == (1.0, 4.0)
    assert s["price_mean"] == pytest.approx((100 + 300 + 600) / 400)
    assert s["synthetic"] is True
    flat = summarize(cap(available=[1, 1, 1], price_per_hour=None))
    assert flat["drops"] == 0 and flat["mean_time_between_drops_h"] is None
    assert flat["price_mean"] is None


def test_summarize_jobs_by_hand() -> None:
    jobs = JobTrace("j", [0, 0, 5, 20], [10, 5, 10, 1], [1, 4, 8, 2])
    s = summarize(jobs)
    assert s["jobs"] == 4 and s["size_histogram"] == {1: 1, 2: 1, 4: 1, 8: 1}
    assert s["gpu_hours"] == pytest.approx((10 + 20 + 80 + 2) / 3600)
    # busy: [0,10) 1, [0,5) 4, [5,15) 8, [20,21) 2 -> peak at t=5: 1 + 8 = 9 (the 4 ended)
    assert s["peak_gpus_if_unqueued"] == 9
    assert s["span_h"] == pytest.approx(20 / 3600)
