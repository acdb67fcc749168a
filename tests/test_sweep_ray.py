"""The Ray backend on a local Ray instance gives the same table as the local backend."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from elasim import tasks
from elasim.jobmodel import JobSpec
from elasim.sweep import SweepSpec, run_sweep

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

GRID = SweepSpec(
    traces=("spot_us_east.csv", "spot_p3_bamboo.csv"),
    policies=("greedy", "hysteresis"),
    seeds=(0, 1),
)


@pytest.fixture(autouse=True)
def _no_ray_left_running():
    assert not ray.is_initialized(), "an earlier test left Ray running"
    yield
    if ray.is_initialized():  # pragma: no cover - only after a failed test
        ray.shutdown()


@pytest.mark.timeout(240)
def test_ray_results_equal_the_local_backend():
    local = run_sweep(GRID, workers=2)
    finished: list[None] = []
    on_ray = run_sweep(GRID, workers=2, backend="ray", on_done=lambda: finished.append(None))
    assert len(on_ray) == GRID.size == 8
    pd.testing.assert_frame_equal(on_ray, local)
    assert len(finished) == GRID.size
    assert not ray.is_initialized(), "run_sweep must shut down the instance it started"


@pytest.mark.timeout(240)
def test_an_existing_ray_connection_is_used_and_left_open(monkeypatch: pytest.MonkeyPatch):
    small = SweepSpec(
        traces=("spot_us_east.csv", "spot_p3_bamboo.csv"),
        policies=("greedy", "price"),
        seeds=(0, 1, 2),
    )
    # multi-point tasks, cut at the trace boundary: 12 points, 1 slot -> 4, 2, 4, 2
    monkeypatch.setattr(tasks, "BATCHES_PER_SLOT", 3)
    assert [len(b) for b in tasks.batches(list(small.points()), 1)] == [4, 2, 4, 2]
    far = JobSpec(job="resnet50_v100", start_offset_s=1e9)  # fails in the simulation
    bad = SweepSpec(traces=("spot_p3_bamboo.csv",), policies=("greedy",), base=far)
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    try:
        # workers=1 caps the tasks in flight on a cluster we did not start
        on_ray = run_sweep(small, workers=1, backend="ray")
        assert ray.is_initialized(), "run_sweep must not shut down the caller's Ray"
        pd.testing.assert_frame_equal(on_ray, run_sweep(small, workers=1))
        # a worker's error comes back as the simulation's own exception, not a RayTaskError
        with pytest.raises(ValueError, match="is outside the trace") as info:
            run_sweep(bad, backend="ray")
        assert not isinstance(info.value, ray.exceptions.RayError)
    finally:
        ray.shutdown()
