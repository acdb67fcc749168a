"""What the fluid job keeps when nodes go: rollbacks and final checkpoints.

A preemption without notice throws away the step in flight (in place) or everything
since the last durable checkpoint (restart, or nobody left); a graceful leave or a
release of every node first writes a final checkpoint when there is time to, which
takes back the training those seconds would have done and books them as checkpoint
time.  These rules are the model's subtlest accounting, so they live apart from the
holdings, pauses and fluid progress of :mod:`.fluid`, in two pieces that need nothing
of the job but what they are handed:

* :class:`DurableProgress` owns the durable side of the progress (the checkpointed
  progress, the write under way, and the running time not saved yet) and answers
  what a rollback or a lost step costs.  :class:`~elasim.jobmodel.fluid.FluidJob`
  holds one and owns the progress itself, its clock and its state.
* :func:`final_checkpoint` decides whether a release can be saved, given the progress,
  the ledger and a :class:`Release` of explicit values; it returns the progress left
  and when the write began, and the job records the event.

Standard library only.
"""

from __future__ import annotations

from typing import NamedTuple

from elasim.policies import JobState

from .accounting import Accounting, JobStateMachine

__all__ = ["DurableProgress", "Release", "final_checkpoint"]

_EPS = 1e-9


class DurableProgress:
    """The part of a job's progress that a loss of nodes cannot take away.

    Progress itself is the job's (it grows on every turn); this keeps only what a
    loss is measured against, so that its rules change it through a few named moves
    instead of through the job's attributes.  ``unsaved_run_s`` is the running time
    whose work is not durable yet: what a rollback loses, exactly.
    """

    __slots__ = ("_checkpointed", "_pending", "_has_checkpoint", "_unsaved_run_s", "_pending_run_s")

    def __init__(self) -> None:
        self._checkpointed = 0.0  # progress the last durable checkpoint saved
        self._pending = 0.0  # progress the write under way will save
        self._has_checkpoint = False
        self._unsaved_run_s = 0.0
        self._pending_run_s = 0.0  # the part of unsaved_run_s the write under way saves

    @property
    def has_checkpoint(self) -> bool:
        """Whether a checkpoint exists to restore from."""
        return self._has_checkpoint

    @property
    def checkpointed(self) -> float:
        """Effective samples the last durable checkpoint saved."""
        return self._checkpointed

    @property
    def unsaved_run_s(self) -> float:
        """Running seconds whose work a rollback would lose."""
        return self._unsaved_run_s

    def ran(self, seconds: float) -> None:
        """The job trained ``seconds`` more, none of it saved yet (the hot path)."""
        self._unsaved_run_s += seconds

    def unsaved(self, progress: float) -> float:
        """Effective samples of ``progress`` that no checkpoint holds."""
        return progress - self._checkpointed

    def clean(self) -> None:
        """Nothing is unsaved, so no running time is at risk (the checkpoint stays)."""
        self._unsaved_run_s = 0.0

    def begin_write(self, progress: float) -> None:
        """A periodic write of ``progress`` starts; it counts only once it ends."""
        self._pending = progress
        self._pending_run_s = self._unsaved_run_s

    def finish_write(self) -> None:
        """The write under way ended: what it holds is durable."""
        self._checkpointed = self._pending
        self._unsaved_run_s = max(self._unsaved_run_s - self._pending_run_s, 0.0)
        self._pending_run_s = 0.0
        self._has_checkpoint = True

    def save(self, progress: float) -> None:
        """Everything up to ``progress`` is durable now (a write that has ended)."""
        self._checkpointed = progress
        self._has_checkpoint = True
        self._unsaved_run_s = 0.0
        # only the end of a write reads it, and every write sets it when it begins
        self._pending_run_s = 0.0

    def adopt_write(self, progress: float) -> bool:
        """Let the write under way be the final checkpoint, if it holds ``progress``.

        A job warned in time keeps writing instead of starting a second write.
        """
        if progress > self._pending:
            return False
        self.save(self._pending)
        return True

    def rollback(self, progress: float) -> tuple[float, float]:
        """Everything since the last durable checkpoint is lost: (samples, run seconds)."""
        lost = max(progress - self._checkpointed, 0.0)
        lost_s = self._unsaved_run_s if lost > 0 else 0.0
        self._unsaved_run_s = 0.0
        self._pending_run_s = 0.0
        return lost, lost_s

    def lose_step(
        self, progress: float, step_samples: float, goodput: float
    ) -> tuple[float, float]:
        """The step in flight is lost in place: (samples, run seconds).

        In-place survivors keep their state, so only the step they were taking, of
        ``step_samples`` effective samples at ``goodput``, is lost, and never more
        than is unsaved.
        """
        lost = min(step_samples, progress - self._checkpointed)
        lost_s = lost / goodput if lost > 0 else 0.0
        self._unsaved_run_s = max(self._unsaved_run_s - lost_s, 0.0)
        return lost, lost_s


class Release(NamedTuple):
    """A release of every node on purpose, as its final checkpoint sees it.

    ``goodput``, ``throughput`` and ``efficiency`` are those of the group whose
    training a write would take back: the group now while it runs, the group before
    the re-formation while one is under way.
    """

    state: JobState
    now_s: float
    cost_s: float  # the checkpoint write
    running_since_s: float  # when training last began
    running_until_s: float  # when it last stopped (read only while it does not run)
    pause_start_s: float  # when the re-formation under way began
    goodput: float
    throughput: float
    efficiency: float

    @classmethod
    def of(
        cls, sm: JobStateMachine, now_s: float, cost_s: float, rates: tuple[float, float, float]
    ) -> Release:
        """The release now, with the times the job's state machine kept.

        Args:
            sm: the job's state machine (its state and training times).
            now_s: when the nodes leave.
            cost_s: the checkpoint write.
            rates: ``(goodput, throughput, efficiency)`` of the group that trained.
        """
        since, until, pause = sm.running_since_s, sm.running_until_s, sm.pause_start_s
        return cls(sm.state, now_s, cost_s, since, until, pause, *rates)


def final_checkpoint(
    durable: DurableProgress, books: Accounting, progress: float, release: Release
) -> tuple[float, float | None] | None:
    """A checkpoint that ends right now, before the last nodes leave on purpose.

    The job spent its last ``cost_s`` writing instead of training, so that much
    progress is taken back and booked as checkpoint time.  A write needs a running
    job and a running period at least as long as the write, or a group re-forming in
    place (:func:`_write_in_pause`); a job already writing lets that write be the
    final one if it holds everything.

    Returns:
        None when the unsaved progress cannot be saved (the caller rolls it back);
        otherwise the progress left and when a write to record began (None: there
        is nothing to record).
    """
    if progress <= durable.checkpointed:
        durable.clean()
        return progress, None
    state = release.state
    if state is JobState.CHECKPOINTING and durable.adopt_write(progress):
        return progress, None
    if state is JobState.RESCALING:
        return _write_in_pause(durable, books, progress, release)
    if state is not JobState.RUNNING:
        return None
    cost = release.cost_s
    if cost <= 0:
        durable.save(progress)
        return progress, None
    if release.now_s - release.running_since_s < cost - _EPS:
        return None
    progress = _take_back_training(durable, books, progress, release, cost)
    books.checkpoint_s += cost
    durable.save(progress)
    return progress, release.now_s - cost


def _write_in_pause(
    durable: DurableProgress, books: Accounting, progress: float, release: Release
) -> tuple[float, float] | None:
    """Final checkpoint when every node is released while the group re-forms.

    Unsaved work during a re-formation exists only in place, where the survivors
    keep their processes and the full state in memory (a restart, a resume and a
    restore all start from a checkpoint).  So they can write it, as the executor's
    group does when it stops after a re-formation.  As for a release while training,
    the write is placed just before the release: over the pause so far (booked as
    checkpoint instead of rescale time, no work to take back) and, for what the
    pause was too short to hold, over the training before the pause, whose work is
    taken back.  Without enough of either, nothing can be saved.

    The training before the pause is the last stretch that trained, which may have
    ended before the pause began: a group that grows during a periodic write
    re-forms from the write, not from training.  Counting from the pause's start, a
    final write took back the periodic write's seconds as training, running time that
    earlier rollbacks had already lost, and the books showed more work lost than run
    (the accounting property test found it: 21.9 h lost of 14.4 h run).
    """
    cost = release.cost_s
    now = release.now_s
    in_pause = min(cost, max(now - release.pause_start_s, 0.0))
    rest = cost - in_pause
    trained = max(release.running_until_s - release.running_since_s, 0.0)
    if rest > _EPS and trained < rest - _EPS:
        return None
    books.rescale_s -= in_pause
    books.checkpoint_s += cost
    if rest > _EPS:
        progress = _take_back_training(durable, books, progress, release, rest)
    else:
        books.checkpoint_s -= rest
    durable.save(progress)
    return progress, now - cost


def _take_back_training(
    durable: DurableProgress, books: Accounting, progress: float, release: Release, seconds: float
) -> float:
    """Undo ``seconds`` of training that went to a final write; the progress left.

    A final checkpoint is placed just before the release that needs it, over time
    the fluid model had booked as training; this takes that training's progress
    and its running, raw-sample and convergence time back out of the books.  The
    caller books the same seconds as checkpoint time.
    """
    undo = min(release.goodput * seconds, durable.unsaved(progress))
    books.running_s -= seconds
    books.raw_samples -= min(books.raw_samples, release.throughput * seconds)
    books.convergence_s -= min(books.convergence_s, (1 - release.efficiency) * seconds)
    return progress - undo
