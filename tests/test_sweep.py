"""run_sweep's backend selection, without Ray: errors are one line and nothing leaks."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasim import sweep, tasks
from elasim.jobmodel import JobSpec
from elasim.sweep import SweepSpec, run_sweep

TINY = SweepSpec(traces=("spot_us_east.csv",), policies=("greedy",), seeds=(0,))


def test_unknown_backend_is_a_one_line_value_error():
    with pytest.raises(
        ValueError, match=r"unknown sweep backend 'dask' \(known: local, ray\)"
    ) as info:
        run_sweep(TINY, backend="dask")
    assert "\n" not in str(info.value)


def test_an_address_without_the_ray_backend_is_refused():
    with pytest.raises(ValueError, match="only used by the ray backend"):
        run_sweep(TINY, backend="local", address="auto")


def test_negative_workers_are_refused():
    with pytest.raises(ValueError, match="workers must be >= 0"):
        run_sweep(TINY, workers=-1)


def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    with pytest.raises(ValueError) as info:
        run_sweep(TINY, backend="ray")
    assert (
        str(info.value)
        == "the ray backend needs the 'ray' extra: pip install '.[ray]' in the elasim checkout"
    )


@pytest.mark.timeout(120)
def test_the_local_backend_never_imports_ray():
    code = (
        "import sys\n"
        "from elasim.sweep import SweepSpec, run_sweep\n"
        "assert 'ray' not in sys.modules, 'import elasim.sweep imported ray'\n"
        "spec = SweepSpec(traces=('spot_us_east.csv',), policies=('greedy',), seeds=(0,))\n"
        "assert len(run_sweep(spec, workers=1)) == 1\n"
        "assert 'ray' not in sys.modules, 'the local backend imported ray'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=100, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.timeout(120)
def test_a_failing_point_raises_its_own_error_from_the_pool():
    # a window past the trace's end fails in the simulation itself, in a pool process
    far = JobSpec(job="resnet50_v100", start_offset_s=1e9)
    bad = SweepSpec(traces=("spot_us_east.csv",), policies=("greedy",), seeds=(0, 1), base=far)
    with pytest.raises(ValueError, match="--start-offset-s 1e\\+09 is outside the trace"):
        run_sweep(bad, workers=2)


@given(
    counts=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    slots=st.integers(1, 64),
)
def test_batches_cover_the_grid_in_order_one_trace_each(counts: list[int], slots: int):
    traces = tuple(f"t{k}.csv" for k in range(len(counts)))
    points = [
        sweep.SweepPoint(JobSpec(trace=trace, policy="greedy", seed=seed))
        for trace, count in zip(traces, counts, strict=True)
        for seed in range(count)
    ]
    batches = tasks.batches(points, slots)
    assert [i for batch in batches for i in batch] == list(range(len(points)))
    size = max(1, min(tasks.MAX_BATCH, len(points) // (slots * tasks.BATCHES_PER_SLOT)))
    for batch in batches:
        assert 1 <= len(batch) <= size
        assert len({points[i].trace for i in batch}) == 1
    # a batch is cut short only at a trace boundary
    for batch, following in itertools.pairwise(batches):
        if len(batch) < size:
            assert points[batch[-1]].trace != points[following[0]].trace


@pytest.mark.timeout(120)
def test_batched_pool_equals_one_process(monkeypatch: pytest.MonkeyPatch):
    grid = SweepSpec(
        traces=("spot_us_east.csv", "spot_p3_bamboo.csv"), policies=("greedy",), seeds=(0, 1, 2)
    )
    monkeypatch.setattr(tasks, "BATCHES_PER_SLOT", 1)  # 6 points, 2 workers: batches of 3
    assert [len(b) for b in tasks.batches(list(grid.points()), 2)] == [3, 3]
    ticks: list[None] = []
    two = run_sweep(grid, workers=2, on_done=lambda: ticks.append(None))
    assert len(ticks) == grid.size
    pd.testing.assert_frame_equal(two, run_sweep(grid, workers=1))
