"""A training job's figures and what follows from them: step time, batch, efficiency.

:class:`TrainingJob` and its sections (compute, network, batch, nodes, checkpoint,
rescale) are the analytical model described in :mod:`elasim.job`; :func:`validate`
holds a job to the ranges its formulas need.  The validation lives with the model
(not with the TOML loader, :mod:`.load`) because a job derived in code,
:meth:`TrainingJob.with_nodes`, is checked again without any file.  Pure (no simpy,
no torch): the executor imports it too.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from elasim.policies import PauseComponents

from .errors import TrainingJobError, locate_key

__all__ = [
    "BatchSemantics",
    "BatchSpec",
    "CheckpointSpec",
    "ComputeSpec",
    "NetworkSpec",
    "NodesSpec",
    "RescaleSpec",
    "TrainingJob",
    "validate",
]


class BatchSemantics(str, enum.Enum):
    """How the global batch reacts to a change in node count (no transitions: a job keeps one)."""

    FIXED = "fixed"
    SCALED = "scaled"


@dataclass(frozen=True)
class ComputeSpec:
    """Per-node compute.

    Attributes:
        per_node_samples_per_s: compute-only throughput of one node at ``per_node_batch``.
        per_node_batch: samples per node per step (under ``scaled``), or the per-node
            batch at ``min`` nodes (under ``fixed`` it is derived from the global batch).
        table: optional measured ``((n, samples_per_s), ...)`` overriding the model.
    """

    per_node_samples_per_s: float
    per_node_batch: int
    table: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class NetworkSpec:
    """Alpha-beta ring all-reduce parameters.

    Attributes:
        gradient_bytes: bytes all-reduced per step.
        latency_s: per-message latency (alpha).
        bandwidth_bytes_per_s: per-link bandwidth (1 / beta).
        overlap_fraction: share of the all-reduce hidden behind backward compute.
    """

    gradient_bytes: float
    latency_s: float
    bandwidth_bytes_per_s: float
    overlap_fraction: float = 0.0


@dataclass(frozen=True)
class BatchSpec:
    """Global-batch semantics and the gradient noise scale.

    Attributes:
        semantics: ``fixed`` or ``scaled``.
        reference_batch: B0, the global batch at which a sample is worth one reference
            sample; under ``fixed`` it is *the* global batch.
        gradient_noise_scale: B_noise of McCandlish et al. (2018).
    """

    semantics: BatchSemantics
    reference_batch: int
    gradient_noise_scale: float


@dataclass(frozen=True)
class NodesSpec:
    """Node bounds.

    Attributes:
        min: fewest nodes the job can run on (memory, pipeline depth).
        max: most nodes it scales to.
        gpus_per_node: GPUs per node (shared-cluster traces count GPUs).
    """

    min: int
    max: int
    gpus_per_node: int = 1


@dataclass(frozen=True)
class CheckpointSpec:
    """Checkpoint size and storage bandwidths.

    Attributes:
        size_bytes: model plus optimizer state.
        write_bandwidth_bytes_per_s: to durable storage.
        read_bandwidth_bytes_per_s: from durable storage.
    """

    size_bytes: float
    write_bandwidth_bytes_per_s: float
    read_bandwidth_bytes_per_s: float

    @property
    def write_s(self) -> float:
        """Time to write one checkpoint."""
        return self.size_bytes / self.write_bandwidth_bytes_per_s

    @property
    def read_s(self) -> float:
        """Time to load one checkpoint."""
        return self.size_bytes / self.read_bandwidth_bytes_per_s


@dataclass(frozen=True)
class RescaleSpec:
    """Analytical pause components (names shared with the executor's measurements).

    Attributes:
        detect_s: failure -> survivors notice (collective timeout, heartbeat).
        boot_s: acquiring and booting a node (``acquire_s``).
        rendezvous_base_s: fixed part of forming a group.
        rendezvous_per_node_s: per-member part of forming a group.
        state_bandwidth_bytes_per_s: broadcast bandwidth to newcomers (in-place).
        warmup_s: extra time of the first step after a change.
        cold_start_s: how long a worker slot whose process was killed needs before a
            replacement can join (the executor's cold start of a standby: spawn and
            import torch).  0 for the cloud presets, where ``boot_s`` covers it;
            measured profiles set it.
        cold_start_table: measured ready times of replacements started together:
            ``(k, offsets)`` gives, for ``k`` workers spawned at once, the seconds
            from spawn to ready of the first, second, ... of them.  Workers that start
            together share the host's cores, so their ready times grow with ``k`` and
            are staggered; a flat ``cold_start_s`` gets both wrong.  Empty: every
            replacement takes ``cold_start_s``.
        shared_host_cores: the workers share one host with this many cores (a
            single-host executor testbed, from a profile); 0, the default and every
            preset, means every node is its own machine.  On a shared host a starting
            worker competes with the training workers for the cores (processor
            sharing): with ``r`` runnable processes each gets ``min(1, cores / r)`` of
            a core, so a cold start takes ``cold_start_s * max(1, r / cores)`` and
            training slows while replacements start.  ``cold_start_s`` is then the
            start time of a worker alone on the host.
        starting_weight: on a shared host, how many training workers' worth of CPU
            a starting worker takes when it slows the trainers (measured: importing
            torch and building the job runs several threads).
    """

    detect_s: float
    boot_s: float
    rendezvous_base_s: float
    rendezvous_per_node_s: float
    state_bandwidth_bytes_per_s: float
    warmup_s: float
    cold_start_s: float = 0.0
    cold_start_table: tuple[tuple[int, tuple[float, ...]], ...] = ()
    shared_host_cores: float = 0.0
    starting_weight: float = 1.0

    def rendezvous_s(self, nodes: int) -> float:
        """Group formation time for ``nodes`` members."""
        return self.rendezvous_base_s + self.rendezvous_per_node_s * nodes

    def host_share(self, runnable: int) -> float:
        """Fraction of a core each of ``runnable`` processes gets (1 off a shared host)."""
        cores = self.shared_host_cores
        if cores <= 0 or runnable <= cores:
            return 1.0
        return cores / runnable

    def training_rate(self, trainers: int, starting: int) -> float:
        """Training speed while ``starting`` workers cold-start on the shared host.

        Relative to the measured step time at ``trainers`` workers (which already
        includes the trainers' own sharing of the cores).
        """
        if starting <= 0 or self.shared_host_cores <= 0:
            return 1.0
        cores = self.shared_host_cores
        loaded = min(1.0, cores / (trainers + starting * self.starting_weight))
        return loaded / self.host_share(trainers)

    def cold_start_offsets_s(
        self, count: int, *, trainers: int = 0, starting: int = 0
    ) -> tuple[float, ...]:
        """Seconds from spawn to ready of ``count`` replacements started together.

        On a shared host (``shared_host_cores``), each takes the alone start time
        divided by its share of a core among the ``count`` new, ``starting`` already
        starting and ``trainers`` training processes.

        Otherwise a measured batch size is used as measured.  An unmeasured size
        stretches the largest measured batch ``k`` below it by ``count / k`` (the
        ``count`` starts share the cores that ``k`` shared), its last offset repeated
        for the extra workers; below the smallest measured batch, that batch's first
        offsets are used.
        """
        if count <= 0:
            return ()
        if self.shared_host_cores > 0:
            share = self.host_share(count + starting + trainers)
            return (self.cold_start_s / share,) * count
        if not self.cold_start_table:
            return (self.cold_start_s,) * count
        table = dict(self.cold_start_table)
        if count in table:
            return tuple(table[count][:count])
        below = [k for k in table if k < count]
        if not below:
            return tuple(table[min(table)][:count])
        k = max(below)
        offsets = list(table[k]) + [table[k][-1]] * (count - len(table[k]))
        return tuple(o * count / k for o in offsets[:count])


@dataclass(frozen=True)
class TrainingJob:
    """What one elastic job trains: work, throughput model, batch semantics, nodes, costs.

    Attributes:
        name: short identifier.
        description: one line for tables.
        sources: citations for the figures.
        target_samples: effective (reference) samples to reach the target.
        compute: per-node compute.
        network: all-reduce model.
        batch: global-batch semantics.
        nodes: node bounds.
        checkpoint: checkpoint costs.
        rescale: pause components.
        path: where it was loaded from (for messages).
        pause_table: measured pause components by (mechanism, nodes before, nodes
            after, failure), from a profile (:mod:`elasim.profile`); the simulator
            uses them instead of the analytical model where a transition was measured.
    """

    name: str
    description: str
    sources: tuple[str, ...]
    target_samples: float
    compute: ComputeSpec
    network: NetworkSpec
    batch: BatchSpec
    nodes: NodesSpec
    checkpoint: CheckpointSpec
    rescale: RescaleSpec
    path: str = ""
    pause_table: tuple[tuple[tuple[str, int, int, bool], PauseComponents], ...] = ()

    def measured_pause(
        self, mechanism: str, nodes_before: int, nodes_after: int, failure: bool
    ) -> PauseComponents | None:
        """The measured pause of this transition, if the profile has it."""
        for key, components in self.pause_table:
            if key == (mechanism, nodes_before, nodes_after, failure):
                return components
        return None

    # -- the performance model ---------------------------------------------------------

    def global_batch(self, nodes: int) -> float:
        """Samples per optimizer step on ``nodes`` nodes."""
        if self.batch.semantics is BatchSemantics.FIXED:
            return float(self.batch.reference_batch)
        return float(nodes * self.compute.per_node_batch)

    def allreduce_s(self, nodes: int) -> float:
        """Ring all-reduce time of one step (0 on one node)."""
        if nodes <= 1:
            return 0.0
        net = self.network
        return 2 * (nodes - 1) * net.latency_s + 2 * (nodes - 1) / nodes * (
            net.gradient_bytes / net.bandwidth_bytes_per_s
        )

    def step_time_s(self, nodes: int) -> float:
        """Wall time of one step on ``nodes`` nodes (from the table if one is given)."""
        if nodes < 1:
            raise ValueError("a step needs at least one node")
        table = dict(self.compute.table)
        if nodes in table:
            return self.global_batch(nodes) / table[nodes]
        compute_s = (self.global_batch(nodes) / nodes) / self.compute.per_node_samples_per_s
        return compute_s + (1.0 - self.network.overlap_fraction) * self.allreduce_s(nodes)

    def throughput_samples_per_s(self, nodes: int) -> float:
        """Raw samples per second on ``nodes`` nodes (0 for 0 nodes)."""
        if nodes <= 0:
            return 0.0
        return self.global_batch(nodes) / self.step_time_s(nodes)

    def statistical_efficiency(self, nodes: int) -> float:
        """Reference samples per raw sample at the global batch of ``nodes`` nodes."""
        if nodes <= 0 or self.batch.semantics is BatchSemantics.FIXED:
            return 1.0
        b_noise = self.batch.gradient_noise_scale
        return (b_noise + self.batch.reference_batch) / (b_noise + self.global_batch(nodes))

    def goodput(self, nodes: int) -> float:
        """Effective samples per second on ``nodes`` nodes."""
        return self.throughput_samples_per_s(nodes) * self.statistical_efficiency(nodes)

    def throughput_table(self, max_nodes: int | None = None) -> tuple[float, ...]:
        """``throughput_samples_per_s`` for ``0..max_nodes`` (the Observation's table)."""
        top = self.nodes.max if max_nodes is None else max_nodes
        return tuple(self.throughput_samples_per_s(n) for n in range(top + 1))

    def efficiency_table(self, max_nodes: int | None = None) -> tuple[float, ...]:
        """``statistical_efficiency`` for ``0..max_nodes``."""
        top = self.nodes.max if max_nodes is None else max_nodes
        return tuple(self.statistical_efficiency(n) for n in range(top + 1))

    def with_nodes(self, min_nodes: int | None = None, max_nodes: int | None = None) -> TrainingJob:
        """A copy with other node bounds (``--max-nodes``), validated again."""
        nodes = dataclasses.replace(
            self.nodes,
            min=self.nodes.min if min_nodes is None else min_nodes,
            max=self.nodes.max if max_nodes is None else max_nodes,
        )
        spec = dataclasses.replace(self, nodes=nodes)
        validate(spec, {})
        return spec


# -- validation -----------------------------------------------------------------------

#: ``check(ok, section, key, message)``: raise the job's error at ``[section].key``
Check = Callable[[bool, str, str, str], None]


def validate(spec: TrainingJob, ctx: Mapping[str, str]) -> None:
    """Range checks that TOML types cannot express.

    Args:
        spec: the job, parsed or derived (:meth:`TrainingJob.with_nodes`).
        ctx: ``{"text": ...}``, the TOML it came from, to point at the offending line.

    Raises:
        TrainingJobError: for the first figure out of range, in the file's order.
    """
    text = ctx.get("text", "")

    def check(ok: bool, section: str, key: str, message: str) -> None:
        if not ok:
            line, col = locate_key(text, section, key) if text else (None, None)
            raise TrainingJobError(spec.path or spec.name, message, line, col)

    _check_speed(spec, check)
    check(spec.nodes.min >= 1, "nodes", "min", "nodes.min must be >= 1")
    check(spec.nodes.max >= spec.nodes.min, "nodes", "max", "nodes.max must be >= nodes.min")
    check(spec.nodes.gpus_per_node >= 1, "nodes", "gpus_per_node", "gpus_per_node must be >= 1")
    _check_batch(spec, check)
    _check_costs(spec, check)


def _check_speed(spec: TrainingJob, check: Check) -> None:
    """The figures of the step-time model: work, compute and the all-reduce network.

    Kept apart from the costs because these decide how fast the job trains (a zero
    throughput or bandwidth would divide by zero in :meth:`TrainingJob.step_time_s`).
    """
    check(spec.target_samples > 0, "work", "target_samples", "target_samples must be > 0")
    check(
        spec.compute.per_node_samples_per_s > 0,
        "compute",
        "per_node_samples_per_s",
        "per_node_samples_per_s must be > 0",
    )
    check(
        spec.compute.per_node_batch >= 1, "compute", "per_node_batch", "per_node_batch must be >= 1"
    )
    check(
        spec.network.gradient_bytes >= 0, "network", "gradient_bytes", "gradient_bytes must be >= 0"
    )
    check(spec.network.latency_s >= 0, "network", "latency_s", "latency_s must be >= 0")
    check(
        spec.network.bandwidth_bytes_per_s > 0,
        "network",
        "bandwidth_bytes_per_s",
        "bandwidth_bytes_per_s must be > 0",
    )
    check(
        0.0 <= spec.network.overlap_fraction <= 1.0,
        "network",
        "overlap_fraction",
        "overlap_fraction must be within [0, 1]",
    )


def _check_batch(spec: TrainingJob, check: Check) -> None:
    """The batch semantics: statistical efficiency must stay within (0, 1].

    Needs the node bounds checked first: under ``scaled`` the reference batch is held
    against the global batch at ``nodes.min``.
    """
    check(
        spec.batch.reference_batch >= 1, "batch", "reference_batch", "reference_batch must be >= 1"
    )
    check(
        spec.batch.gradient_noise_scale >= 0,
        "batch",
        "gradient_noise_scale",
        "gradient_noise_scale must be >= 0",
    )
    if spec.batch.semantics is BatchSemantics.SCALED:
        check(
            spec.batch.reference_batch <= spec.global_batch(spec.nodes.min),
            "batch",
            "reference_batch",
            "under 'scaled', reference_batch must not exceed the global batch at nodes.min "
            "(efficiency would exceed 1)",
        )


def _check_costs(spec: TrainingJob, check: Check) -> None:
    """The costs of checkpoints and re-formations: no negative pause, no zero bandwidth."""
    check(spec.checkpoint.size_bytes >= 0, "checkpoint", "size_bytes", "size_bytes must be >= 0")
    for key in ("write_bandwidth_bytes_per_s", "read_bandwidth_bytes_per_s"):
        check(getattr(spec.checkpoint, key) > 0, "checkpoint", key, f"{key} must be > 0")
    for key in ("detect_s", "boot_s", "rendezvous_base_s", "rendezvous_per_node_s", "warmup_s"):
        check(getattr(spec.rescale, key) >= 0, "rescale", key, f"{key} must be >= 0")
    check(
        spec.rescale.state_bandwidth_bytes_per_s > 0,
        "rescale",
        "state_bandwidth_bytes_per_s",
        "state_bandwidth_bytes_per_s must be > 0",
    )
