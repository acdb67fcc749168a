"""What the fluid job keeps when nodes go: rollbacks and final checkpoints.

:class:`FluidDurability` is the part of :class:`~elasim.jobmodel.fluid.FluidJob` that
decides how much work survives a loss of nodes.  A preemption without notice throws
away the step in flight (in place) or everything since the last durable checkpoint
(restart, or nobody left); a graceful leave or a release of every node first writes a
final checkpoint when there is time to, which takes back the training those seconds
would have done and books them as checkpoint time.  These rules are the model's
subtlest accounting and are tested on their own (``tests/test_sim_model.py``), so they
live apart from the holdings, pauses and fluid progress of :mod:`.fluid`.

It is a mixin: it reads and writes the job's progress, ledger and clock, which
:class:`~elasim.jobmodel.fluid.FluidJob` owns (the attributes annotated below), and it
records events with the job's ``_event``.  Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from elasim.policies import EventKind, JobState, PauseComponents

from .accounting import Accounting, JobStateMachine
from .options import RescaleMode

__all__ = ["FluidDurability"]

_EPS = 1e-9


class FluidDurability:
    """Rollbacks and final checkpoints of the fluid job (mixed into ``FluidJob``)."""

    # owned by FluidJob: the job's clock, mode, tables, ledger and progress
    job: Any
    mode: RescaleMode
    now: float
    books: Accounting
    _sm: JobStateMachine
    _good: tuple[float, ...]
    _thr: tuple[float, ...]
    _eff: tuple[float, ...]
    _event: Callable[..., None]
    _to: Callable[[JobState], None]
    pause_end_s: float
    ckpt_cost_s: float
    progress_samples: float
    ckpt_progress: float
    ckpt_pending_progress: float
    has_checkpoint: bool
    unsaved_run_s: float
    _ckpt_pending_run_s: float
    running_since_s: float
    pause_start_s: float
    _pause_from_nodes: int

    def _lost_to_preemption(self, graceful: bool, before: int, after: int) -> tuple[float, float]:
        """Work a preemption throws away: (effective samples, running seconds)."""
        if graceful or self._sm.state is JobState.WAITING:
            return 0.0, 0.0
        if self.mode is RescaleMode.INPLACE and after > 0:
            # the step in flight on the old group
            step_eff = self.job.global_batch(before) * self._eff[before]
            lost = min(step_eff, self.progress_samples - self.ckpt_progress)
            lost_s = lost / self._good[before] if lost > 0 else 0.0
            self.unsaved_run_s = max(self.unsaved_run_s - lost_s, 0.0)
            return lost, lost_s
        return self._rollback()

    def _rollback(self) -> tuple[float, float]:
        """Everything since the last durable checkpoint is lost: (samples, run seconds)."""
        lost = max(self.progress_samples - self.ckpt_progress, 0.0)
        lost_s = self.unsaved_run_s if lost > 0 else 0.0
        self.unsaved_run_s = 0.0
        self._ckpt_pending_run_s = 0.0
        return lost, lost_s

    def _final_checkpoint(self, nodes: int) -> bool:
        """Checkpoint that ends right now, before the last nodes leave on purpose.

        The job spent its last ``ckpt_cost_s`` writing instead of training, so that
        much progress is taken back and booked as checkpoint time.  A write needs a
        running job and a running period at least as long as the write, or a group
        re-forming in place (:meth:`_final_checkpoint_in_pause`); otherwise the
        unsaved progress cannot be saved and the caller rolls it back.

        Returns:
            Whether everything done so far is durable.
        """
        if self.progress_samples <= self.ckpt_progress:
            self.unsaved_run_s = 0.0
            return True  # nothing unsaved
        state = self._sm.state
        if state is JobState.CHECKPOINTING and self.progress_samples <= self.ckpt_pending_progress:
            # warned in time, the job lets the write in progress be its final checkpoint
            self.ckpt_progress = self.ckpt_pending_progress
            self.has_checkpoint = True
            self.unsaved_run_s = 0.0
            self._ckpt_pending_run_s = 0.0
            return True
        if state is JobState.RESCALING:
            return self._final_checkpoint_in_pause(nodes)
        if state is not JobState.RUNNING:
            return False
        cost = self.ckpt_cost_s
        if cost <= 0:
            self.ckpt_progress, self.has_checkpoint = self.progress_samples, True
            self.unsaved_run_s = 0.0
            return True
        if self.now - self.running_since_s < cost - _EPS:
            return False
        self._take_back_training(nodes, cost)  # those seconds were spent writing
        self.unsaved_run_s = 0.0
        self.books.checkpoint_s += cost
        self.ckpt_progress = self.progress_samples
        self.has_checkpoint = True
        state_pause = PauseComponents(state_s=cost)
        self._event(EventKind.CHECKPOINT, nodes, nodes, state_pause, time_s=self.now - cost)
        return True

    def _final_checkpoint_in_pause(self, nodes: int) -> bool:
        """Final checkpoint when every node is released while the group re-forms.

        Unsaved work during a re-formation exists only in place, where the survivors
        keep their processes and the full state in memory (a restart, a resume and a
        restore all start from a checkpoint).  So they can write it, as the executor's
        group does when it stops after a re-formation.  As for a release while
        training, the write is placed just before the release: over the pause so far
        (booked as checkpoint instead of rescale time, no work to take back) and, for
        what the pause was too short to hold, over the training before the pause,
        whose work is taken back.  Without enough of either, nothing can be saved.
        """
        cost = self.ckpt_cost_s
        now = self.now
        in_pause = min(cost, max(now - self.pause_start_s, 0.0))
        rest = cost - in_pause
        trained = max(self.pause_start_s - self.running_since_s, 0.0)
        if rest > _EPS and trained < rest - _EPS:
            return False
        books = self.books
        books.rescale_s -= in_pause
        books.checkpoint_s += cost
        if rest > _EPS:
            self._take_back_training(self._pause_from_nodes, rest)
        else:
            books.checkpoint_s -= rest
        self.ckpt_progress = self.progress_samples
        self.has_checkpoint = True
        self.unsaved_run_s = 0.0
        self._ckpt_pending_run_s = 0.0
        state_pause = PauseComponents(state_s=cost)
        self._event(EventKind.CHECKPOINT, nodes, nodes, state_pause, time_s=now - cost)
        return True

    def _stop_all(self, before: int, failure: bool) -> None:
        """The group released every node: save what can be saved, then wait."""
        if self._sm.state is not JobState.WAITING:
            lost, lost_s = 0.0, 0.0
            if not failure and not self._final_checkpoint(before):
                lost, lost_s = self._rollback()  # released too soon to save
            self.progress_samples -= lost
            self._to(JobState.WAITING)
            self._event(EventKind.PAUSE, before, 0, lost_samples=lost, lost_s=lost_s)
        self.pause_end_s = math.inf

    def _take_back_training(self, nodes: int, seconds: float) -> None:
        """Undo ``seconds`` of training on ``nodes`` nodes that went to a final write.

        A final checkpoint is placed just before the release that needs it, over time
        the fluid model had booked as training; this takes that training's progress
        and its running, raw-sample and convergence time back out of the books.  The
        caller books the same seconds as checkpoint time.
        """
        books = self.books
        undo = min(self._good[nodes] * seconds, self.progress_samples - self.ckpt_progress)
        self.progress_samples -= undo
        books.running_s -= seconds
        books.raw_samples -= min(books.raw_samples, self._thr[nodes] * seconds)
        books.convergence_s -= min(books.convergence_s, (1 - self._eff[nodes]) * seconds)
