"""One elastic job, as both shells run it: :class:`JobSpec`.

What a user chooses about a run of one job is the same whether it is simulated or
run on real workers: which trace is replayed, which policy decides (and its options),
what is trained, between how many nodes, how a membership change is made, the notice
a preemption gives, the checkpoint interval and cost, the deadline, where in the
trace the job starts, the prices and the seed.  That is a :class:`JobSpec`, one
frozen value; the simulator's :class:`~elasim.sim.SimConfig` and the executor's
:class:`~elasim.executor.run.RunConfig` hold only what belongs to one shell (its
clock, its timeouts, its launcher), and :func:`~.build.build_job_loop` turns a spec
into the job loop both shells drive.

Every ``summary.json`` writes the spec as its ``inputs`` (:meth:`JobSpec.as_inputs`),
with the same keys in ``simulate`` and ``run``, so comparing a simulation with a real
run is a comparison of two specs, not a translation.  Summaries written before the
spec existed still load (:meth:`JobSpec.from_inputs` reads their keys).

Times are trace seconds.  Standard library only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .options import RescaleMode, describe_checkpoint_interval, parse_checkpoint_interval

__all__ = ["SPEC_FLAGS", "JobSpec", "SpecMismatchError"]

#: The command-line flag of each field (errors name the flag a user typed).
SPEC_FLAGS: dict[str, str] = {
    "trace": "--trace",
    "zone_traces": "--trace",
    "policy": "--policy",
    "policy_options": "--set",
    "job": "--job",
    "job_options": "--job-set",
    "min_nodes": "--min-nodes",
    "max_nodes": "--max-nodes",
    "rescale": "--rescale",
    "notice_s": "--notice-s",
    "checkpoint_interval_s": "--checkpoint-interval-s",
    "checkpoint_cost_s": "--checkpoint-cost-s",
    "deadline_s": "--deadline-h",
    "start_offset_s": "--start-offset-s",
    "on_demand_price_per_hour": "--on-demand-price-per-hour",
    "spot_price_per_hour": "--spot-price-per-hour",
    "seed": "--seed",
    "checkpoint_size_gb": "--checkpoint-size-gb",
    "transfer_gbps": "--transfer-gbps",
}

#: Keys of summaries written before the spec, and the field each one is.
_OLD_KEYS = {"workers_max": "max_nodes", "trace_start_s": "start_offset_s"}

#: Job presets as summaries written before the presets were named by their files
#: (a simulation recorded ``resnet50-v100``, a sweep ``resnet50_v100``, for one job).
_OLD_JOB_NAMES = {
    "resnet50-v100": "resnet50_v100",
    "bert-large-v100": "bert_large_v100",
    "transformerxl-base-v100": "transformerxl_base_v100",
}


def _shown(name: str, value: Any) -> Any:
    """A field's value as a message shows it (``auto``, ``'restart'``, not an enum's repr)."""
    if name == "checkpoint_interval_s":
        return describe_checkpoint_interval(value)
    return value.value if isinstance(value, RescaleMode) else value


class SpecMismatchError(ValueError):
    """Two runs are not runs of the same job; ``str()`` is one line naming the field."""


def _frozen(options: Any) -> tuple[tuple[str, Any], ...]:
    """Options (a mapping or pairs) as sorted pairs, so that a spec is hashable."""
    items = options.items() if isinstance(options, Mapping) else options or ()
    return tuple(sorted((str(k), v) for k, v in items))


@dataclass(frozen=True)
class JobSpec:
    """One run of one elastic job: what both shells share (trace seconds).

    Attributes:
        trace: the trace replayed: a bundled name or a path.
        policy: the scaling policy: a registered name, ``file.py:Class`` or
            ``package.module:Class``.
        policy_options: the policy's ``--set key=value`` options.
        job: what is trained: the simulator's preset or TOML file, the executor's
            ``package.module:factory``; None: each shell's default.
        job_options: keyword arguments of the executor's job factory (``--job-set``).
        min_nodes: fewest nodes the job runs on (None: the job's own).
        max_nodes: most nodes it may hold (None: the job's own, or the executor's 4).
        rescale: how a membership change is made.
        notice_s: preemption notice (0: none).
        checkpoint_interval_s: running time between periodic checkpoints: None is
            ``auto`` (Young/Daly), ``math.inf`` is ``off``.
        checkpoint_cost_s: one checkpoint write (None: the job's size over its
            write bandwidth, or as measured on real workers).
        deadline_s: the deadline from the start (None: none).
        start_offset_s: where in the trace the job starts (None: drawn from ``seed``,
            the Can't Be Late methodology of random windows).
        on_demand_price_per_hour: overrides the trace's on-demand price.
        spot_price_per_hour: prices a trace without a price column.
        seed: seeds everything random (the start offset, the policy, the model).
        zone_traces: with several zones, every zone's trace in order (``trace`` is
            the first); empty: one zone (:mod:`~elasim.jobmodel.zones`).
        checkpoint_size_gb: what a move between zones transfers (None: the job's
            checkpoint size).
        transfer_gbps: the bandwidth of that transfer, gigabits per second.
    """

    trace: str | None = None
    policy: str | None = None
    policy_options: tuple[tuple[str, Any], ...] = ()
    job: str | None = None
    job_options: tuple[tuple[str, Any], ...] = ()
    min_nodes: int | None = None
    max_nodes: int | None = None
    rescale: RescaleMode = RescaleMode.INPLACE
    notice_s: float = 0.0
    checkpoint_interval_s: float | None = None
    checkpoint_cost_s: float | None = None
    deadline_s: float | None = None
    start_offset_s: float | None = 0.0
    on_demand_price_per_hour: float | None = None
    spot_price_per_hour: float | None = None
    seed: int = 0
    zone_traces: tuple[str, ...] = ()
    checkpoint_size_gb: float | None = None
    transfer_gbps: float = 10.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy_options", _frozen(self.policy_options))
        object.__setattr__(self, "job_options", _frozen(self.job_options))
        object.__setattr__(self, "zone_traces", tuple(str(t) for t in self.zone_traces or ()))
        try:
            rescale = RescaleMode(self.rescale)
        except ValueError:
            raise self._error("rescale", "must be 'inplace' or 'restart'") from None
        object.__setattr__(self, "rescale", rescale)
        for name in ("min_nodes", "max_nodes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or int(value) != value or value < 1):
                raise self._error(name, "must be a whole number >= 1")
        if self.min_nodes and self.max_nodes and self.min_nodes > self.max_nodes:
            raise self._error("min_nodes", f"must be <= --max-nodes ({self.max_nodes})")
        self._check_times()
        if isinstance(self.seed, bool) or int(self.seed) != self.seed or self.seed < 0:
            raise self._error("seed", "must be a whole number >= 0")

    def _check_times(self) -> None:
        def number(name: str, *, zero: bool, none: bool = True) -> None:
            value = getattr(self, name)
            if value is None and none:
                return
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or math.isnan(value) or value < 0 or (value == 0 and not zero):
                raise self._error(name, f"must be {'>= 0' if zero else '> 0'}")

        number("notice_s", zero=True, none=False)
        number("checkpoint_cost_s", zero=True)
        number("deadline_s", zero=False)
        number("start_offset_s", zero=True)
        number("on_demand_price_per_hour", zero=True)
        number("spot_price_per_hour", zero=True)
        number("checkpoint_size_gb", zero=True)
        number("transfer_gbps", zero=False, none=False)
        for name in ("notice_s", "start_offset_s", "deadline_s", "transfer_gbps"):
            value = getattr(self, name)
            if value is not None and math.isinf(value):
                raise self._error(name, "must be finite")
        interval = self.checkpoint_interval_s
        if interval is not None:
            try:
                parse_checkpoint_interval(interval)
            except ValueError as exc:
                raise ValueError(str(exc)) from None

    def _error(self, name: str, rule: str) -> ValueError:
        value = getattr(self, name)
        if name == "deadline_s" and isinstance(value, int | float):
            value = value / 3600.0  # the flag is in hours
        return ValueError(f"{SPEC_FLAGS[name]} {rule}, got {value!r}")

    # -- reading and writing ---------------------------------------------------------------

    def replace(self, **changes: Any) -> JobSpec:
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    def as_inputs(self) -> dict[str, Any]:
        """The spec as ``summary.json`` writes it: plain JSON values, every field."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("policy_options", "job_options"):
                value = dict(value)
            elif f.name == "zone_traces":
                value = list(value)
            elif f.name == "rescale":
                value = value.value
            elif f.name == "checkpoint_interval_s":
                value = describe_checkpoint_interval(value)
            out[f.name] = value
        return out

    @classmethod
    def from_inputs(cls, inputs: Mapping[str, Any]) -> JobSpec:
        """The spec a ``summary.json`` recorded, its own keys or those written before it.

        Unknown keys are left out (older summaries recorded more than the spec);
        ``trace_file`` (the executor's path, beside the trace's bare name) wins over
        ``trace``.
        """
        data = {_OLD_KEYS.get(k, k): v for k, v in inputs.items()}
        if isinstance(data.get("job"), str):
            data["job"] = _OLD_JOB_NAMES.get(data["job"], data["job"])
        if data.get("trace_file"):
            data["trace"] = data["trace_file"]
        names = {f.name for f in dataclasses.fields(cls)}
        kept = {k: v for k, v in data.items() if k in names}
        if "checkpoint_interval_s" in kept:
            recorded = kept["checkpoint_interval_s"]
            # runs before ``auto`` became the executor's default wrote null for "none"
            if recorded is None and "trace_start_s" in inputs:
                recorded = "off"
            kept["checkpoint_interval_s"] = parse_checkpoint_interval(recorded)
        return cls(**kept)

    def differences(self, other: JobSpec, *, ignore: tuple[str, ...] = ()) -> list[str]:
        """The fields in which ``other`` differs, in field order."""
        out = []
        for f in dataclasses.fields(self):
            if f.name in ignore:
                continue
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, float) and isinstance(b, float):
                if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6):
                    continue
            elif a == b:
                continue
            out.append(f.name)
        return out

    def check_same(self, other: JobSpec, names: tuple[str, str], ignore: tuple[str, ...] = ()):
        """Raise :class:`SpecMismatchError` naming the first field in which two specs differ.

        Args:
            other: the other run's spec.
            names: how the message calls the two runs.
            ignore: fields not compared.
        """
        for name in self.differences(other, ignore=ignore):
            shown = [_shown(name, getattr(spec, name)) for spec in (self, other)]
            raise SpecMismatchError(
                f"not the same run: {name} differs ({names[0]}: {shown[0]!r}, {names[1]}: "
                f"{shown[1]!r}); compare anyway with --force (force=True)"
            )
