"""Shared fixtures: tiny traces and a scripted policy for hand-computed tests."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from elasim.job import TrainingJob, load_job
from elasim.policies import Decision, Observation
from elasim.traces.model import CapacityTrace, TraceMetadata

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO.parent / "shared" / "traces-real"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked ``executor`` where torch is not installed.

    Why: the simulator must install and pass without torch (the executor is an
    extra); in such an environment those tests would fail on the CLI's "this needs
    torch" line instead of testing anything.
    """
    if importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason="needs torch (pip install '.[executor]')")
    for item in items:
        if item.get_closest_marker("executor") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _no_run_folder_left_behind():
    """Every test cleans its run's private folder (it holds the run's secret).

    After the session: no temporary run folder made by this process remains, and
    those of processes the tests killed on purpose (controllers SIGKILLed by the
    chaos tests) are removed, as the next run would remove them.
    """
    yield
    from elasim.executor.runfiles import OWNER_NAME, RUN_PREFIX, remove_stale_folders

    mine = [
        folder
        for folder in Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}*")
        if (folder / OWNER_NAME).is_file()
        and (folder / OWNER_NAME).read_text().split()[:1] == [str(os.getpid())]
    ]
    remove_stale_folders()
    assert not mine, f"tests left run folders (with secrets) behind: {mine}"


class ScriptedPolicy:
    """A policy driven by a plain function of the observation (tests only)."""

    name = "scripted"

    def __init__(self, fn: Callable[[Observation], Decision]) -> None:
        self.fn = fn
        self.seen: list[Observation] = []

    def decide(self, obs: Observation) -> Decision:
        self.seen.append(obs)
        return self.fn(obs)


class FakeProc:
    """A worker process: ``code`` is its exit code (None while it runs)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.code

    def send_signal(self, sig: int) -> None:
        if self.code is None:
            self.code = -int(sig)


def error_lines(stderr: str) -> list[str]:
    """The non-empty lines of ``elasim run``'s stderr other than its progress lines.

    A run whose settings passed says so as its workers start (``elasim run: ...``); a
    failure after that (a worker that cannot start, a policy refused at its first
    decision) is then the one error line, so the tests that check "one clear line" read
    what is left.
    """
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("elasim run: ")]


def greedy_fn(obs: Observation) -> Decision:
    return Decision(min(obs.spot_available, obs.max_nodes))


def capacity(times, available, prices=None, duration_s=None, od_price=None) -> CapacityTrace:
    return CapacityTrace(
        name="test",
        time_s=np.asarray(times, dtype=float),
        available=np.asarray(available, dtype=np.int64),
        price_per_hour=None if prices is None else np.asarray(prices, dtype=float),
        metadata=TraceMetadata(on_demand_price_per_hour=od_price, synthetic=True),
        duration_s=duration_s,
    )


@pytest.fixture
def tiny_job() -> TrainingJob:
    """1 sample/s per node, 36,000 samples, fixed batch of 1, no rescale costs."""
    return load_job(DATA / "tiny_job.toml")


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces-real is not beside the checkout")
    return SHARED_TRACES


@pytest.fixture
def shared_traces_if_any() -> Path | None:
    """``../shared/traces-real`` where it lies beside the checkout, else None.

    For a property that holds on the bundled traces too: without ``../shared`` (a
    user's clone) it is checked on those alone instead of skipped.
    """
    return SHARED_TRACES if SHARED_TRACES.is_dir() else None
