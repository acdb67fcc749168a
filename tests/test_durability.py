"""The durability rules on explicit values, without a job (``elasim.jobmodel.durability``).

The end-to-end cases (a notice during a write, a release while re-forming) are in
``tests/test_sim_model.py``; these pin the rules themselves.
"""

from __future__ import annotations

import pytest

from elasim.jobmodel.accounting import Accounting
from elasim.jobmodel.durability import DurableProgress, Release, final_checkpoint
from elasim.policies import JobState


def trained(progress: float, run_s: float) -> DurableProgress:
    durable = DurableProgress()
    durable.ran(run_s)
    assert durable.unsaved(progress) == progress
    return durable


def release(
    state: JobState,
    *,
    now: float = 1000.0,
    since: float = 0.0,
    pause_start: float = 0.0,
    until: float | None = None,
):
    # training ran until now, or until the pause began
    if until is None:
        until = now if state is JobState.RUNNING else pause_start
    return Release(state, now, 100.0, since, until, pause_start, 10.0, 20.0, 0.5)


def test_a_rollback_loses_everything_unsaved_and_its_running_time():
    durable = trained(5000.0, 500.0)
    assert durable.rollback(5000.0) == (5000.0, 500.0)
    assert durable.unsaved_run_s == 0.0
    assert not durable.has_checkpoint


def test_in_place_only_the_step_in_flight_is_lost_and_never_more_than_unsaved():
    durable = trained(5000.0, 500.0)
    assert durable.lose_step(5000.0, 40.0, 10.0) == (40.0, 4.0)
    assert durable.unsaved_run_s == 496.0
    durable.save(5000.0)
    assert durable.lose_step(5000.0, 40.0, 10.0) == (0.0, 0.0)


def test_a_periodic_write_saves_what_it_began_with_when_it_ends():
    durable = trained(3000.0, 300.0)
    durable.begin_write(3000.0)
    durable.ran(50.0)  # the running time after the write began stays unsaved
    assert not durable.has_checkpoint  # not durable until the write ends
    durable.finish_write()
    assert durable.has_checkpoint and durable.checkpointed == 3000.0
    assert durable.unsaved_run_s == 50.0


def test_a_final_write_takes_back_the_training_it_replaced():
    durable, books = trained(10_000.0, 1000.0), Accounting(running_s=1000.0, raw_samples=20e3)
    books.convergence_s = 500.0
    progress, start_s = final_checkpoint(durable, books, 10_000.0, release(JobState.RUNNING))
    assert progress == 10_000.0 - 100.0 * 10.0 and start_s == 900.0
    assert (books.running_s, books.checkpoint_s, books.raw_samples) == (900.0, 100.0, 18e3)
    assert books.convergence_s == 450.0
    assert durable.checkpointed == progress and durable.unsaved_run_s == 0.0


def test_a_final_write_needs_a_running_period_as_long_as_the_write():
    durable, books = trained(1000.0, 50.0), Accounting()
    assert final_checkpoint(durable, books, 1000.0, release(JobState.RUNNING, since=950.0)) is None
    assert books == Accounting() and not durable.has_checkpoint


def test_a_write_under_way_that_holds_everything_is_the_final_one():
    durable = trained(3000.0, 300.0)
    durable.begin_write(3000.0)
    done = final_checkpoint(durable, Accounting(), 3000.0, release(JobState.CHECKPOINTING))
    assert done == (3000.0, None)  # nothing more to record: the write is already an event
    assert durable.checkpointed == 3000.0 and durable.unsaved_run_s == 0.0


def test_a_final_write_while_reforming_fills_the_pause_first():
    # re-forming since 960 s after training since 0 s: 40 s of the write fit the pause,
    # the other 60 s go over the training before it
    durable, books = trained(10_000.0, 960.0), Accounting(running_s=960.0, rescale_s=40.0)
    at = release(JobState.RESCALING, pause_start=960.0)
    progress, start_s = final_checkpoint(durable, books, 10_000.0, at)
    assert start_s == 900.0 and progress == pytest.approx(10_000.0 - 60.0 * 10.0)
    assert (books.rescale_s, books.checkpoint_s, books.running_s) == (0.0, 100.0, 900.0)


def test_a_final_write_while_reforming_counts_only_the_training_before_it():
    # training 0-930 s, a periodic write from 930 s, the group re-forming from 960 s:
    # 40 s of the final write fit the pause, and the other 60 s would need training
    # right before the pause, where the periodic write was (counting 960 s of training
    # took back 60 s of it, running time a rollback may already have lost)
    durable, books = trained(10_000.0, 930.0), Accounting(running_s=930.0, checkpoint_s=30.0)
    at = release(JobState.RESCALING, pause_start=960.0, until=930.0)
    assert final_checkpoint(durable, books, 10_000.0, at) is not None  # 930 s trained
    durable, books = trained(10_000.0, 50.0), Accounting(running_s=50.0, checkpoint_s=30.0)
    at = release(JobState.RESCALING, since=880.0, pause_start=960.0, until=930.0)
    assert final_checkpoint(durable, books, 10_000.0, at) is None  # 50 s trained, 60 s needed
    assert books == Accounting(running_s=50.0, checkpoint_s=30.0) and not durable.has_checkpoint
