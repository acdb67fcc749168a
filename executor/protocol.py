"""The controller <-> worker protocol, carried by the run's key-value store.

Why a key-value store and not sockets of our own: the store is already what
``torch.distributed`` rendezvous on (every process needs a client anyway), it
survives any worker dying, and its ``wait``/``add``/``compare_set`` primitives are
exactly the few atomic operations the protocol needs.  The controller process hosts
the store (:class:`~.authstore.StoreServer`, authenticated); every worker is a
client.  No torch import here, so the controller's bookkeeping and the tests can use
these helpers without torch.

What is *not* in the store: the worker settings (:class:`WorkerSettings`: the job's
import spec and options).  Workers read them from a private file named on their
command line (:mod:`.runfiles`); nothing read from the store is imported, called,
unpickled or executed.  A ``JOIN``'s ``restore`` only says *whether* rank 0 restores;
it loads the checkpoint in its own ``checkpoint_dir``, never a path from the store.

Keys (all small JSON or integers):

* ``cmdseq``: number of commands published; command ``k`` (1-based) is ``cmd/k``.
  The controller writes ``cmd/k`` *before* incrementing ``cmdseq``, so a reader who
  sees ``cmdseq = k`` can read ``cmd/1 .. cmd/k``.
* ``gen/{g}/arrived``, ``gen/{g}/go``: the pre-rendezvous barrier of generation
  ``g``; the last member to arrive sets ``go = ok``, the controller may set
  ``go = abort`` (a member died) so nobody waits for a peer that will never come.
  ``compare_set`` makes the first writer win.
* ``gen/{g}/pg/...``: the ``PrefixStore`` of generation ``g``'s process group, so
  generations never see each other's keys (stale addresses were the torchrun bug).
* ``ev/{wid}/n`` and ``ev/{wid}/{k}``: events posted by worker ``wid`` (one writer
  per sequence, so a plain ``set`` of the counter after the payload is race-free).
* ``steps/{wid}/n`` and ``steps/{wid}/{k}``: chunks of step records from the
  worker while it is rank 0.

How a *running* group agrees on commands: only rank 0 reads ``cmdseq`` (at most
every ``command_poll_s``) and puts the value into a slot of the gradient all-reduce
buffer (the other ranks put 0).  After the all-reduce every rank holds the same
number, so all ranks act on the same commands at the same step boundary, at the
cost of one float in a collective that runs anyway.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = [
    "CMDSEQ_KEY",
    "Command",
    "CommandOp",
    "FaultInjection",
    "WorkerEventType",
    "WorkerSettings",
    "cmd_key",
    "decode",
    "encode",
    "event_count_key",
    "event_key",
    "gen_arrived_key",
    "gen_go_key",
    "gen_here_key",
    "gen_pg_prefix",
    "steps_count_key",
    "steps_key",
]

CMDSEQ_KEY = "cmdseq"
GO_OK = "ok"
GO_ABORT = "abort"


def cmd_key(seq: int) -> str:
    """Key of command number ``seq`` (1-based)."""
    return f"cmd/{seq}"


def gen_arrived_key(gen: int) -> str:
    """Counter of members that reached the barrier of generation ``gen``."""
    return f"gen/{gen}/arrived"


def gen_here_key(gen: int, wid: int) -> str:
    """Set by worker ``wid`` when it reaches the barrier of ``gen`` (who is missing?)."""
    return f"gen/{gen}/here/{wid}"


def gen_go_key(gen: int) -> str:
    """``ok`` or ``abort`` for generation ``gen`` (first writer wins)."""
    return f"gen/{gen}/go"


def gen_pg_prefix(gen: int) -> str:
    """``PrefixStore`` prefix of generation ``gen``'s process group."""
    return f"gen/{gen}/pg"


def event_count_key(wid: int) -> str:
    """Number of events posted by worker ``wid``."""
    return f"ev/{wid}/n"


def event_key(wid: int, index: int) -> str:
    """Event ``index`` (0-based) of worker ``wid``."""
    return f"ev/{wid}/{index}"


def steps_count_key(wid: int) -> str:
    """Number of step-record chunks posted by worker ``wid``."""
    return f"steps/{wid}/n"


def steps_key(wid: int, index: int) -> str:
    """Step-record chunk ``index`` (0-based) of worker ``wid``."""
    return f"steps/{wid}/{index}"


def encode(value: Mapping[str, Any]) -> bytes:
    """Compact JSON bytes for the store."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def decode(raw: bytes | str) -> dict[str, Any]:
    """Inverse of :func:`encode`."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {text[:80]!r}")
    return value


class CommandOp(str, enum.Enum):
    """What a command asks for.

    * ``JOIN``: form generation ``gen`` with ``members`` (in rank order).  Members of
      the running group that are not listed leave gracefully at the step boundary
      and become warm standbys again.
    * ``CHECKPOINT``: rank 0 writes a checkpoint at the step boundary.
    * ``STOP``: every member finishes the step, rank 0 optionally checkpoints, all
      exit (``restart`` mode's planned stop, and the end of a run), or, with
      ``keep``, become warm standbys again (``inplace`` mode releasing every node).
    * ``EXIT``: the listed workers exit (standbys that are no longer needed).
    """

    JOIN = "join"
    CHECKPOINT = "checkpoint"
    STOP = "stop"
    EXIT = "exit"


@dataclass(frozen=True)
class Command:
    """One command of the controller (``cmd/{seq}``).

    Attributes:
        op: what to do.
        gen: generation number (``JOIN``).
        members: worker ids in rank order (``JOIN``).
        failure_wall_s: ``time.time()`` when a member was killed (``JOIN`` after a
            failure), for the survivors' ``detect_s``; None for a planned change.
        restore: rank 0 loads the checkpoint of its own ``checkpoint_dir`` before the
            state sync (no survivors); the value itself is never used as a path.
        checkpoint: write a checkpoint before stopping (``STOP``).
        keep: after ``STOP``, stay alive as warm standbys instead of exiting.
        wids: workers concerned (``EXIT``).
        tag: free-form label echoed in the resulting events.
        global_batch: the generation's global batch (``JOIN``; 0: the one it had).
            A cluster policy's batch size reaches the workers this way, at a
            re-formation (:meth:`~.group.ProcessWorkerGroup.set_batch`).
        gain: the generation's AdaScale gain (``JOIN``; 0: the one it had): the
            learning rate is the job's own times it, and each step counts ``gain``
            steps of progress at the job's first batch (see :mod:`.training`).
    """

    op: CommandOp
    gen: int = 0
    members: tuple[int, ...] = ()
    failure_wall_s: float | None = None
    restore: str | None = None
    checkpoint: bool = False
    keep: bool = False
    wids: tuple[int, ...] = ()
    tag: str = ""
    global_batch: int = 0
    gain: float = 0.0

    def to_bytes(self) -> bytes:
        """JSON encoding."""
        data = asdict(self)
        data["op"] = self.op.value
        data["members"] = list(self.members)
        data["wids"] = list(self.wids)
        return encode(data)

    @classmethod
    def from_bytes(cls, raw: bytes | str) -> Command:
        """Inverse of :meth:`to_bytes`."""
        data = decode(raw)
        data["op"] = CommandOp(data["op"])
        data["members"] = tuple(int(m) for m in data.get("members", ()))
        data["wids"] = tuple(int(w) for w in data.get("wids", ()))
        return cls(**data)


class WorkerEventType(str, enum.Enum):
    """Events a worker posts to ``ev/{wid}/*``.

    * ``READY``: warm (torch imported, data and model built); standby from now on.
    * ``FORMED``: rank 0: generation formed and state synchronised.
    * ``PAUSE``: rank 0: first step of a generation done, with the pause components.
    * ``CHECKPOINT``: rank 0 wrote a checkpoint.
    * ``JOIN_FAILED``: this worker could not form a generation (aborted or timed out).
    * ``COLLECTIVE_FAILED``: a collective raised (a peer died or timed out).
    * ``LEFT``: this worker left the group gracefully (``exit``: and ends, else it is
      a warm standby again).
    * ``STOPPED``: a ``STOP`` was executed (rank 0 reports the final step).
    * ``DONE``: rank 0: ``max_steps`` reached; final metrics.
    * ``ERROR``: an unexpected exception (the worker exits non-zero).
    * ``FAULT``: an injected fault is about to kill this worker (its wall time is the
      failure time, for ``detect_s``).
    """

    READY = "ready"
    FORMED = "formed"
    PAUSE = "pause"
    CHECKPOINT = "checkpoint"
    JOIN_FAILED = "join_failed"
    COLLECTIVE_FAILED = "collective_failed"
    LEFT = "left"
    STOPPED = "stopped"
    DONE = "done"
    ERROR = "error"
    FAULT = "fault"


@dataclass(frozen=True)
class FaultInjection:
    """Deterministic faults for tests and benchmarks (off by default).

    Attributes:
        kill_wid: worker that SIGKILLs itself ...
        kill_at_step: ... in the middle of this step (after the backward pass,
            before the gradient all-reduce), i.e. with the step in flight.
        crash_checkpoint_after_bytes: rank 0 ``os._exit``-s after writing this many
            bytes of its first checkpoint's temporary file.
    """

    kill_wid: int | None = None
    kill_at_step: int | None = None
    crash_checkpoint_after_bytes: int | None = None


@dataclass(frozen=True)
class WorkerSettings:
    """Everything a worker needs to know about the run (its private settings file).

    Attributes:
        job: import spec of the :class:`~elasim.executor.api.ElasticJob`.
        job_options: keyword arguments of the job factory.
        seed: seeds model construction and the sampler.
        max_steps: the run's work, in optimizer steps.
        max_progress: the run's work in progress (steps at its first batch, each
            weighted by its AdaScale gain); 0: ``max_steps`` alone.  Whichever is
            reached first ends the run (a cluster job whose batch changes).
        backend: ``auto`` (NCCL when CUDA is available, else gloo), ``gloo`` or ``nccl``.
        collective_timeout_s: process-group timeout: a hung collective raises after
            this, so survivors never hang on a dead peer.
        rendezvous_timeout_s: how long a member waits at the barrier of a generation.
        command_poll_s: rank 0 reads ``cmdseq`` at most this often.
        report_interval_s: rank 0 flushes step records at least this often.
        checkpoint_dir: where rank 0 writes ``checkpoint.pt`` (None: never).
        checkpoint_interval_steps: rank 0 also checkpoints every this many steps.
        sample_log_dir: if set, every rank appends the sample ids of each committed
            step to ``samples-{wid}.jsonl`` there (for exactly-once tests).
        step_delay_s: synthetic extra compute per step (sleep), to emulate a heavier
            model in tests; 0 for real runs.
        stop_at_target: stop early once the job's target accuracy is reached
            (evaluated every ``eval_every_steps``).
        eval_every_steps: evaluation period for ``stop_at_target`` (0: only at the end).
        threads_per_worker: ``torch.set_num_threads`` on CPU.  1 by default, as
            ``torchrun`` does (``OMP_NUM_THREADS=1``): several processes sharing a few
            cores spend more time synchronising intra-op threads than computing
            (measured here: 8 ms vs 1 ms per step of the default job).
        faults: fault injection (tests only).
    """

    job: str = "elasim.executor.digits:digits_job"
    job_options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    max_steps: int = 300
    max_progress: float = 0.0
    backend: str = "auto"
    collective_timeout_s: float = 5.0
    rendezvous_timeout_s: float = 20.0
    command_poll_s: float = 0.005
    report_interval_s: float = 0.1
    checkpoint_dir: str | None = None
    checkpoint_interval_steps: int | None = None
    sample_log_dir: str | None = None
    step_delay_s: float = 0.0
    sample_delay_s: float = 0.0
    stop_at_target: bool = False
    eval_every_steps: int = 0
    threads_per_worker: int = 1
    faults: FaultInjection = FaultInjection()

    def __post_init__(self) -> None:
        if self.backend not in ("auto", "gloo", "nccl"):
            raise ValueError(f"backend must be auto, gloo or nccl, got {self.backend!r}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        for name in ("collective_timeout_s", "rendezvous_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        if self.checkpoint_interval_steps is not None and self.checkpoint_interval_steps < 1:
            raise ValueError("checkpoint_interval_steps must be >= 1 or None")

    def to_bytes(self) -> bytes:
        """JSON encoding."""
        return encode(asdict(self))

    @classmethod
    def from_bytes(cls, raw: bytes | str) -> WorkerSettings:
        """Inverse of :meth:`to_bytes`."""
        data = decode(raw)
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        data["faults"] = FaultInjection(**data.get("faults", {}))
        return cls(**data)
