"""Training jobs: what the elastic job trains, and how fast it runs on ``n`` nodes.

A :class:`TrainingJob` is a TOML file (presets ship in ``elasim/jobs/``; see its README
for the citations behind every number), named with ``--job``.  It says what is
trained; :class:`elasim.jobmodel.JobSpec` says how one run of it goes (trace, policy,
nodes, notice, checkpoints, deadline, prices).  It is deliberately an *analytical* model that a
measured profile can replace:

* **Throughput.** One step on ``n`` nodes takes ``compute_s(n) + (1 - overlap) *
  allreduce_s(n)``, where compute is the per-node batch divided by the per-node
  compute-only throughput and the all-reduce follows the alpha-beta ring model
  ``2 (n - 1) alpha + 2 (n - 1) / n * bytes / bandwidth`` (Thakur et al. 2005).  An
  optional measured ``[compute.table]`` of ``n = samples_per_s`` overrides this.
* **Global batch.** ``scaled`` keeps the per-node batch, so the global batch grows with
  ``n``; ``fixed`` keeps the global batch (accumulation / smaller per-node batches).
* **Statistical efficiency.** Under ``scaled``, a sample at global batch ``B`` is worth
  ``(B_noise + B0) / (B_noise + B)`` reference samples (McCandlish et al. 2018, the
  gradient-noise-scale model Pollux uses).  Under ``fixed`` it is 1.
* **Pause components** of a rescale (boot, rendezvous, state transfer, warm-up) and
  checkpoint costs come from the ``[rescale]`` and ``[checkpoint]`` tables.

This module is pure (no simpy, no torch): the executor imports it too.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from elasim.policies import PauseComponents

__all__ = [
    "BatchSemantics",
    "TrainingJob",
    "TrainingJobError",
    "job_presets",
    "load_job",
]


class TrainingJobError(ValueError):
    """A training job file that cannot be used; ``str()`` is one line naming file, line, column."""

    def __init__(
        self, path: str | Path, message: str, line: int | None = None, column: int | None = None
    ):
        self.path = str(path)
        self.line = line
        self.column = column
        self.message = message
        where = self.path
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {message}")


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
        _validate(spec, {})
        return spec


# -- loading --------------------------------------------------------------------------

_SECTIONS: dict[str, dict[str, type]] = {
    "work": {"target_samples": float},
    "compute": {"per_node_samples_per_s": float, "per_node_batch": int},
    "network": {
        "gradient_bytes": float,
        "latency_s": float,
        "bandwidth_bytes_per_s": float,
        "overlap_fraction": float,
    },
    "batch": {"semantics": str, "reference_batch": int, "gradient_noise_scale": float},
    "nodes": {"min": int, "max": int, "gpus_per_node": int},
    "checkpoint": {
        "size_bytes": float,
        "write_bandwidth_bytes_per_s": float,
        "read_bandwidth_bytes_per_s": float,
    },
    "rescale": {
        "detect_s": float,
        "boot_s": float,
        "rendezvous_base_s": float,
        "rendezvous_per_node_s": float,
        "state_bandwidth_bytes_per_s": float,
        "warmup_s": float,
    },
}
_OPTIONAL = {("network", "overlap_fraction"), ("nodes", "gpus_per_node")}
_TOP_LEVEL = {"name", "description", "sources", *_SECTIONS}
_TOML_POSITION = re.compile(r"^(?P<msg>.*?)\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)\s*$")


def job_presets() -> dict[str, str]:
    """Bundled preset names mapped to their one-line descriptions."""
    out: dict[str, str] = {}
    for entry in sorted(resources.files("elasim.jobs").iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".toml"):
            data = tomllib.loads(entry.read_text(encoding="utf-8"))
            out[entry.name[: -len(".toml")]] = str(data.get("description", ""))
    return out


def _locate(text: str, section: str | None, key: str) -> tuple[int | None, int | None]:
    """Best-effort 1-based (line, column) of ``key`` inside ``[section]`` for messages."""
    current: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            current = stripped.strip("[]").strip()
            if section is not None and key == "" and current == section:
                return number, raw.index("[") + 1
            continue
        if current == section and re.match(rf"{re.escape(key)}\s*=", stripped):
            return number, raw.index(key) + 1
    return None, None


def load_job(name_or_path: str | Path) -> TrainingJob:
    """Load a training job from a preset name (``resnet50_v100``) or a TOML path.

    Raises:
        TrainingJobError: with file, line and column, for any malformed or invalid spec.
    """
    raw = str(name_or_path)
    path = Path(raw)
    if path.suffix != ".toml" and "/" not in raw and "\\" not in raw:
        entry = resources.files("elasim.jobs") / f"{raw}.toml"
        if not entry.is_file():
            names = ", ".join(job_presets())
            raise TrainingJobError(raw, f"no such job preset or file (presets: {names})")
        text = entry.read_text(encoding="utf-8")
        display = f"{raw}.toml"
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TrainingJobError(raw, f"cannot read job file: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise TrainingJobError(raw, "job file is not UTF-8 text") from None
        display = raw
    return parse_job(text, display)


def _toml(text: str, path: str) -> dict[str, Any]:
    """The TOML document, or one line naming the file, line and column."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POSITION.match(str(exc))
        if match:
            line, col = int(match["line"]), int(match["col"])
            raise TrainingJobError(path, match["msg"], line, col) from None
        raise TrainingJobError(path, str(exc)) from None


def _section_values(
    data: dict[str, Any], fail: Callable[..., TrainingJobError]
) -> dict[str, dict[str, Any]]:
    """Every section's keys, each present (or optional), known, typed and finite."""
    values: dict[str, dict[str, Any]] = {}
    for section, fields in _SECTIONS.items():
        table = data.get(section)
        if not isinstance(table, dict):
            raise fail(f"missing table [{section}]")
        values[section] = {}
        for key in table:
            if key not in fields and not (section == "compute" and key == "table"):
                raise fail(f"unknown key {key!r} in [{section}]", section, key)
        for key, kind in fields.items():
            if key not in table:
                if (section, key) in _OPTIONAL:
                    continue
                raise fail(f"missing key {key!r} in [{section}]", section, "")
            values[section][key] = _typed(table[key], kind, section, key, fail)
    return values


def _typed(
    value: Any, kind: type, section: str, key: str, fail: Callable[..., TrainingJobError]
) -> Any:
    """``value`` as ``kind`` (str, int or float), or the one line saying why not."""
    ok = (
        isinstance(value, str)
        if kind is str
        else isinstance(value, int | float) and not isinstance(value, bool)
    )
    if kind is int and isinstance(value, float):
        ok = value.is_integer()
    if not ok:
        raise fail(f"[{section}].{key} must be a {kind.__name__}, got {value!r}", section, key)
    if kind is not str and not math.isfinite(float(value)):
        raise fail(f"[{section}].{key} must be finite, got {value!r}", section, key)
    return kind(value)


def _measured_table(
    data: dict[str, Any], fail: Callable[..., TrainingJobError]
) -> tuple[tuple[int, float], ...]:
    """``[compute.table]``: measured samples per second by node count."""
    table_raw = data["compute"].get("table", {})
    if not isinstance(table_raw, dict):
        raise fail("[compute].table must be a table of n = samples_per_s", "compute", "table")
    measured: list[tuple[int, float]] = []
    for key, value in table_raw.items():
        if not key.isdigit() or not isinstance(value, int | float) or value <= 0:
            raise fail(f"[compute.table] entry {key} = {value!r} must be n = samples_per_s > 0")
        measured.append((int(key), float(value)))
    return tuple(sorted(measured))


def parse_job(text: str, path: str = "<job>") -> TrainingJob:
    """Parse and validate TOML text as a training job (see :func:`load_job`)."""
    data = _toml(text, path)

    def fail(message: str, section: str | None = None, key: str = "") -> TrainingJobError:
        line, col = _locate(text, section, key) if section or key else (None, None)
        return TrainingJobError(path, message, line, col)

    for key in data:
        if key not in _TOP_LEVEL:
            raise fail(f"unknown key {key!r} (known: {', '.join(sorted(_TOP_LEVEL))})", None, key)
    values = _section_values(data, fail)
    measured = _measured_table(data, fail)
    try:
        semantics = BatchSemantics(values["batch"]["semantics"])
    except ValueError:
        raise fail("[batch].semantics must be 'fixed' or 'scaled'", "batch", "semantics") from None
    sources = data.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise fail("sources must be a list of strings", None, "sources")
    spec = TrainingJob(
        name=str(data.get("name", Path(path).stem)),
        description=str(data.get("description", "")),
        sources=tuple(sources),
        target_samples=values["work"]["target_samples"],
        compute=ComputeSpec(**values["compute"], table=measured),
        network=NetworkSpec(**values["network"]),
        batch=BatchSpec(
            semantics=semantics,
            reference_batch=values["batch"]["reference_batch"],
            gradient_noise_scale=values["batch"]["gradient_noise_scale"],
        ),
        nodes=NodesSpec(**values["nodes"]),
        checkpoint=CheckpointSpec(**values["checkpoint"]),
        rescale=RescaleSpec(**values["rescale"]),
        path=path,
    )
    _validate(spec, {"text": text})
    return spec


def _validate(spec: TrainingJob, ctx: Mapping[str, str]) -> None:
    """Range checks that TOML types cannot express."""
    text = ctx.get("text", "")

    def check(ok: bool, section: str, key: str, message: str) -> None:
        if not ok:
            line, col = _locate(text, section, key) if text else (None, None)
            raise TrainingJobError(spec.path or spec.name, message, line, col)

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
    check(spec.nodes.min >= 1, "nodes", "min", "nodes.min must be >= 1")
    check(spec.nodes.max >= spec.nodes.min, "nodes", "max", "nodes.max must be >= nodes.min")
    check(spec.nodes.gpus_per_node >= 1, "nodes", "gpus_per_node", "gpus_per_node must be >= 1")
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
