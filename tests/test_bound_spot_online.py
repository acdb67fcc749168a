"""``benchmarks/bound_spot_online.py``: the bound over futures any online policy faces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from repo_scripts import load_script

from elasim.traces import CapacityTrace, load_trace

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bound():
    return load_script(REPO / "benchmarks" / "bound_spot_online.py")


def test_a_third_future_never_weakens_the_bound(bound) -> None:
    trace = load_trace("spot_us_west.csv")
    out = bound.window_bound(trace, 371698.5, 4, 1.5)
    assert 1.0 <= out["bound"] <= out["bound_c"]
    assert 0.0 <= out["done_share"] <= 1.0


def _flat(available: int) -> CapacityTrace:
    return CapacityTrace(
        name=f"flat{available}",
        time_s=np.array([0.0]),
        available=np.array([available]),
        price_per_hour=np.array([0.918]),
        duration_s=86400.0 * 30,
    )


def test_spot_always_there_is_future_c(bound) -> None:
    """With every node on spot all the time, A is C: only B's deadline insurance is left."""
    out = bound.window_bound(_flat(4), 0.0, 4, 1.5)
    assert out["bound_c"] == pytest.approx(out["bound"])
    assert 1.0 < out["bound"] < 1.01  # work kept ahead to finish on-demand if spot went


def test_no_spot_ever_is_hedged_against_c(bound) -> None:
    """No spot at all: A is B (bound 1), but work bought early is lost if spot came (C)."""
    out = bound.window_bound(_flat(0), 0.0, 4, 1.1)
    assert out["bound"] == pytest.approx(1.0)
    assert out["bound_c"] > 1.001
