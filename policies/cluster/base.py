"""What a cluster policy sees and what it answers (standard library only).

A cluster policy divides the GPUs of a shared cluster among the jobs that have
arrived and not finished.  It is pure like a job policy: ``decide`` maps a frozen
:class:`ClusterObservation` to a frozen :class:`ClusterDecision`, and the loop that
calls it (:class:`elasim.cluster.ClusterLoop`, the same in the simulator and on real
workers) applies the answer.  A job missing from the decision gets no GPUs.

A placement is sparse, ``((node, gpus), ...)`` sorted by node index: a 1,024-GPU
cluster has 256 nodes, and a job uses a handful of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import ClassVar, Protocol, overload, runtime_checkable

from ..base import ConfiguredPolicy

__all__ = [
    "ClusterDecision",
    "ClusterDecisionRecord",
    "ClusterJobView",
    "ClusterObservation",
    "ClusterPolicy",
    "ClusterPolicyBase",
    "JobSpeed",
    "JobViews",
    "Placement",
    "placement_gpus",
    "placement_nodes",
]

#: GPUs per node a job holds: ``((node index, gpus), ...)``, sorted by node, gpus > 0.
Placement = tuple[tuple[int, int], ...]
_gpus_of = itemgetter(1)  # a placement cell's GPUs (``sum(map(...))`` runs in C)
_first = itemgetter(0)  # a pair's key


def placement_gpus(placement: Placement) -> int:
    """GPUs in a placement."""
    return sum(map(_gpus_of, placement))


def placement_nodes(placement: Placement) -> int:
    """Nodes a placement spans."""
    return len(placement)


@runtime_checkable
class JobSpeed(Protocol):
    """What a policy may know of a job's speed: a model, not the job's future.

    Speeds are in *progress per second*, where progress counts optimizer steps at the
    application's smallest validated batch (statistical efficiency included), so the
    speeds of different jobs compare and ``remaining / goodput`` is a time.  They hold
    for the job's current epoch (the gradient noise scale moves between epochs).
    """

    def goodput(self, nodes: int, gpus: int, batch_size: int | None = None) -> float:
        """Progress per second on ``gpus`` GPUs over ``nodes`` nodes.

        ``batch_size`` None: the best batch for that shape (batch-size co-adaptation);
        otherwise that global batch (accumulating where it does not fit).
        """
        ...

    def best_batch(self, nodes: int, gpus: int) -> int:
        """The global batch of highest goodput on that shape."""
        ...


@dataclass(frozen=True)
class ClusterJobView:
    """One active job, as the policy sees it.

    Attributes:
        name: unique job name.
        application: the application it runs.
        arrival_s: when it arrived.
        requested_gpus: GPUs the workload asks for (rigid policies use it).
        requested_batch_size: global batch the workload asks for.
        max_gpus: most GPUs the application can use.
        placement: GPUs it holds now, per node.
        batch_size: global batch it trains with now (its requested one before it runs).
        attained_gpu_s: GPU-seconds it has held so far (pauses included).
        running_s: seconds it has held GPUs so far.
        progress: fraction of its work done.
        remaining: progress units to go (see :class:`JobSpeed`).
        epoch: epochs completed.
        restarts: reallocations after its first start.
        peak_gpus: most GPUs it has held at once (what it has been profiled on).
        speed: its speed model (not compared: two views are equal by their state).
    """

    name: str
    application: str
    arrival_s: float
    requested_gpus: int
    requested_batch_size: int
    max_gpus: int
    placement: Placement
    batch_size: int
    attained_gpu_s: float
    running_s: float
    progress: float
    remaining: float
    epoch: int
    restarts: int
    peak_gpus: int = 0
    speed: JobSpeed | None = field(default=None, compare=False, repr=False)

    @property
    def gpus(self) -> int:
        """GPUs held now."""
        return placement_gpus(self.placement)


class JobViews(Sequence[ClusterJobView]):
    """An immutable sequence of job views, stored as a tuple of tuples (chunks).

    Why not one tuple: on an overloaded cluster (the full Philly trace on 64 GPUs) the
    active jobs are tens of thousands of waiting ones and a few dozen running ones,
    and a decision is due at every arrival and completion.  Copying every view into a
    fresh tuple per decision made the run quadratic in the queue; in chunks, the loop
    rebuilds only the chunks whose jobs changed and shares the others, which are
    immutable too.  To a policy it is a read-only sequence like a tuple: iterate it,
    index or slice it, take ``len``; it equals any sequence with the same views.
    """

    __slots__ = ("_chunks", "_flat", "_len")

    def __init__(self, chunks: Iterable[tuple[ClusterJobView, ...]] = ()) -> None:
        self._chunks = tuple(chunk for chunk in chunks if chunk)
        self._len = sum(map(len, self._chunks))
        self._flat: tuple[ClusterJobView, ...] | None = None

    def _tuple(self) -> tuple[ClusterJobView, ...]:
        """The views as one tuple, built once, on the first index or slice."""
        if self._flat is None:
            self._flat = tuple(chain.from_iterable(self._chunks))
        return self._flat

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[ClusterJobView]:
        return chain.from_iterable(self._chunks)

    @overload
    def __getitem__(self, index: int) -> ClusterJobView: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ClusterJobView, ...]: ...

    def __getitem__(self, index: int | slice) -> ClusterJobView | tuple[ClusterJobView, ...]:
        return self._tuple()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (JobViews, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __repr__(self) -> str:
        return f"JobViews({self._tuple()!r})"


@dataclass(frozen=True)
class ClusterObservation:
    """The cluster at one decision.

    Attributes:
        now_s: time of the decision (s).
        num_nodes: nodes in the cluster.
        gpus_per_node: GPUs per node.
        jobs: the active jobs (arrived, not finished), by arrival then name: a
            tuple, or the loop's :class:`JobViews` (a read-only sequence that shares
            unchanged chunks between decisions).
        rescale_cost_s: the pause a reallocation costs a typical job (estimate).
        available_nodes: nodes usable now when capacity varies (spot capacity from
            a trace: nodes ``0 .. available_nodes - 1``); None: all of them.
        held: the jobs of ``jobs`` that hold GPUs, in the same order, when the shell
            keeps track of them (the loop does); None: :attr:`holding` finds them.
    """

    now_s: float
    num_nodes: int
    gpus_per_node: int
    jobs: Sequence[ClusterJobView]
    rescale_cost_s: float = 0.0
    available_nodes: int | None = None
    held: tuple[ClusterJobView, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def holding(self) -> tuple[ClusterJobView, ...]:
        """The jobs that hold GPUs now, in the order of ``jobs``.

        On an overloaded cluster ``jobs`` is mostly a queue of thousands of waiting
        jobs; a policy that keeps the running ones and starts a few more (``fifo``)
        reads them here instead of scanning the queue at every decision.
        """
        if self.held is not None:
            return self.held
        return tuple(job for job in self.jobs if job.placement)

    @property
    def usable_nodes(self) -> int:
        """Nodes a policy may place on now (``0 .. usable_nodes - 1``)."""
        if self.available_nodes is None:
            return self.num_nodes
        return min(self.available_nodes, self.num_nodes)

    @property
    def total_gpus(self) -> int:
        """GPUs usable now (those of the usable nodes)."""
        return self.usable_nodes * self.gpus_per_node


@dataclass(frozen=True)
class ClusterDecision:
    """The allocation from now on.

    Attributes:
        allocations: ``((job, placement), ...)``; jobs not named get no GPUs.
        batch_sizes: ``((job, global batch), ...)`` for jobs whose batch the policy
            chooses; the others train with their requested batch.
        wake_after_s: ask again after this long even if nothing happens (None: only
            at arrivals and completions).
    """

    allocations: tuple[tuple[str, Placement], ...] = ()
    batch_sizes: tuple[tuple[str, int], ...] = ()
    wake_after_s: float | None = None

    @classmethod
    def of(
        cls,
        allocations: Mapping[str, Placement],
        batch_sizes: Mapping[str, int] | None = None,
        wake_after_s: float | None = None,
    ) -> ClusterDecision:
        """Build a decision from mappings, in a canonical (sorted) order.

        Jobs are sorted by name, and a placement that is not a tuple is sorted into
        one.  A tuple is kept as it is, unchecked: a job's kept placement is then the
        job's own tuple, which the loop compares by identity first (a decision keeps
        hundreds of them on a large cluster), and the loop sorts any other placement
        where it checks the decision, once, so a policy that builds an unsorted tuple
        still has its job placed sorted.
        """
        allocs = tuple(
            (k, v if type(v) is tuple else tuple(sorted(v)))
            for k, v in sorted(allocations.items(), key=_first)  # names are unique
            if v
        )
        batches = tuple(sorted((batch_sizes or {}).items()))
        return cls(allocs, batches, wake_after_s)

    def allocation_map(self) -> dict[str, Placement]:
        """The allocations as a dict."""
        return dict(self.allocations)

    def batch_map(self) -> dict[str, int]:
        """The batch sizes as a dict."""
        return dict(self.batch_sizes)


@dataclass(frozen=True)
class ClusterDecisionRecord:
    """One decision as the loop logs it (both shells log the same records).

    Attributes:
        time_s: when it was made.
        active_jobs: jobs the policy saw.
        decision: what it answered (validated).
        trained_batches: ``((job, global batch), ...)``: the batch each job it placed
            trains with once it is applied (an adaptive choice resolved), by name.
    """

    time_s: float
    active_jobs: int
    decision: ClusterDecision
    trained_batches: tuple[tuple[str, int], ...] = ()


class ClusterPolicy(Protocol):
    """The interface: a ``name`` and a pure ``decide``."""

    name: str

    def decide(self, obs: ClusterObservation) -> ClusterDecision:
        """Return the allocation from now on."""
        ...


class ClusterPolicyBase(ConfiguredPolicy):
    """Convenience base class of cluster policies: a validated ``Config``, ``name``.

    ``adaptive_batches``: True for a policy that may set a job's batch to 0 (adaptive:
    the job trains with its best batch for its placement, AdaptDL's co-adaptation).
    For any other policy, a plugin's included, a batch of 0 is a bad batch (one log
    line, the job keeps its last good one), as are negative ones.
    """

    adaptive_batches: ClassVar[bool] = False

    def decide(self, obs: ClusterObservation) -> ClusterDecision:  # pragma: no cover
        """Return the allocation from now on."""
        raise NotImplementedError
