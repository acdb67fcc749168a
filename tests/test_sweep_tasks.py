"""``run_tasks``: the sweep machinery for grids that are not policy x trace x seed."""

from __future__ import annotations

import pytest

from elasim.tasks import run_tasks


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_back_in_item_order_with_one_tick_each(workers: int):
    ticks: list[int] = []
    items = [-i for i in range(37)]
    assert run_tasks(abs, items, workers=workers, on_done=lambda: ticks.append(1)) == list(
        range(37)
    )
    assert len(ticks) == 37


@pytest.mark.timeout(120)
def test_a_failing_item_raises_its_own_exception():
    with pytest.raises(ValueError, match="invalid literal"):
        run_tasks(int, ["1", "2", "x", "4"], workers=2)


def test_bad_backend_and_address_are_refused():
    with pytest.raises(ValueError, match="unknown sweep backend"):
        run_tasks(abs, [1], backend="slurm")
    with pytest.raises(ValueError, match="only used by the ray backend"):
        run_tasks(abs, [1], address="auto")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_ray_backend_gives_the_same_results_and_stops_its_instance():
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()
    ticks: list[int] = []
    items = [-i for i in range(9)]
    got = run_tasks(abs, items, workers=2, backend="ray", on_done=lambda: ticks.append(1))
    assert got == list(range(9)) and len(ticks) == 9
    assert not ray.is_initialized()
    with pytest.raises(ValueError, match="invalid literal"):
        run_tasks(int, ["1", "x"], workers=2, backend="ray")
    assert not ray.is_initialized()
