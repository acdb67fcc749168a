"""In-memory trace types shared by the simulator and the executor.

Two kinds of trace exist (see ``traces/README.md`` for the file formats):

* :class:`CapacityTrace`: how many spot (or otherwise revocable) nodes can be held
  over time, and at what price.  It is a step function: row ``i`` holds on
  ``[time_s[i], time_s[i+1])`` and the last row on ``[time_s[-1], duration_s)``.
* :class:`JobTrace`: the background jobs of a shared cluster (submit time, run
  time, GPUs), replayed FIFO by the simulator.

Both are frozen dataclasses whose numpy arrays are marked read-only, so a trace
can be shared between simulations (and between the sweep's processes after a
fork) without anyone mutating it by accident.  ``eq=False`` because element-wise
array comparison has no single truth value; compare the arrays explicitly.

Validation in ``__post_init__`` raises plain :class:`ValueError` (there is no
file position to report); the loaders in :mod:`.io` check everything first and
raise :class:`~.errors.TraceError` with ``path:line:column``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import ClassVar, overload

import numpy as np

__all__ = [
    "CapacityTrace",
    "JobTrace",
    "METADATA_KEYS",
    "RESERVED_METADATA_KEYS",
    "TraceMetadata",
    "on_demand_price_of",
    "scale_trace",
    "start_offset_of",
    "trace_period_s",
]

#: Metadata keys with a dedicated :class:`TraceMetadata` field, in file order.
METADATA_KEYS: tuple[str, ...] = (
    "instance_type",
    "gpus_per_node",
    "region",
    "on_demand_price_per_hour",
    "source",
    "synthetic",
)
#: Keys that can never appear in :attr:`TraceMetadata.extra` (``duration_s`` is a
#: field of :class:`CapacityTrace` that the file stores as metadata).
RESERVED_METADATA_KEYS: frozenset[str] = frozenset(METADATA_KEYS) | {"duration_s"}

_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _check_text(name: str, value: str | None) -> None:
    """Metadata text must survive a round trip through a ``# key: value`` line."""
    if value is None:
        return
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    if not value or value != value.strip() or "\n" in value or "\r" in value:
        raise ValueError(
            f"{name} must be non-empty, one line, without leading/trailing spaces: {value!r}"
        )


@dataclass(frozen=True)
class TraceMetadata:
    """What a trace is about, from its leading ``# key: value`` lines.

    Attributes:
        instance_type: Cloud instance type of one node, e.g. ``p3.2xlarge``; ``None``
            when the source does not record it (never guessed).
        gpus_per_node: GPUs per node of the trace (``available`` counts nodes).
        region: Cloud region, e.g. ``us-east-2``; ``None`` when unknown.
        on_demand_price_per_hour: USD per node-hour of an on-demand node of the same
            type, the fallback a policy may buy; ``None`` when unknown.
        source: One-line provenance (repository, commit, file, transformations).
        synthetic: ``True`` when the data were generated rather than measured; the
            standards require synthetic data to say so.
        extra: Any other ``# key: value`` lines, in file order, kept verbatim so that
            tools can round-trip provenance they do not understand.
    """

    instance_type: str | None = None
    gpus_per_node: int = 1
    region: str | None = None
    on_demand_price_per_hour: float | None = None
    source: str | None = None
    synthetic: bool = False
    extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _check_text("instance_type", self.instance_type)
        _check_text("region", self.region)
        _check_text("source", self.source)
        if (
            isinstance(self.gpus_per_node, bool)
            or not isinstance(self.gpus_per_node, (int, np.integer))
            or self.gpus_per_node < 1
        ):
            raise ValueError(f"gpus_per_node must be a positive integer: {self.gpus_per_node!r}")
        object.__setattr__(self, "gpus_per_node", int(self.gpus_per_node))
        if self.on_demand_price_per_hour is not None:
            price = float(self.on_demand_price_per_hour)
            if not (math.isfinite(price) and price > 0):
                raise ValueError(f"on_demand_price_per_hour must be > 0: {price!r}")
            object.__setattr__(self, "on_demand_price_per_hour", price)
        if not isinstance(self.synthetic, (bool, np.bool_)):
            raise ValueError(f"synthetic must be a bool: {self.synthetic!r}")
        object.__setattr__(self, "synthetic", bool(self.synthetic))
        extra = tuple((str(k), str(v)) for k, v in self.extra)
        seen: set[str] = set()
        for key, value in extra:
            if not _KEY_RE.match(key):
                raise ValueError(f"metadata key must be an identifier: {key!r}")
            if key in RESERVED_METADATA_KEYS:
                raise ValueError(f"metadata key {key!r} is reserved and cannot be in extra")
            if key in seen:
                raise ValueError(f"duplicate metadata key {key!r}")
            seen.add(key)
            _check_text(key, value)
        object.__setattr__(self, "extra", extra)

    def get(self, key: str, default: str | None = None) -> str | None:
        """Return the value of an ``extra`` key (``default`` when absent)."""
        for k, v in self.extra:
            if k == key:
                return v
        return default


def _readonly(values: object, dtype: type, name: str) -> np.ndarray:
    """Copy ``values`` into a fresh 1-D read-only array (never alias the caller's)."""
    try:
        arr = np.array(values, dtype=dtype, copy=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name}: cannot convert to {np.dtype(dtype).name}: {exc}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    arr.flags.writeable = False
    return arr


def _as_int_array(values: object, name: str) -> np.ndarray:
    """Integer array; floats are accepted only when integral (no silent truncation)."""
    raw = np.asarray(values)
    if raw.dtype.kind == "f":
        if not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw)):
            raise ValueError(f"{name} must hold integers")
    elif raw.dtype.kind not in "iub" and raw.size:
        raise ValueError(f"{name} must hold integers, got dtype {raw.dtype}")
    return _readonly(raw, np.int64, name)


@dataclass(frozen=True, eq=False)
class CapacityTrace:
    """Nodes obtainable over time, as a step function, with an optional price.

    Row ``i`` says: from ``time_s[i]`` until the next row's time (or ``duration_s``
    for the last row), ``available[i]`` nodes can be held, at ``price_per_hour[i]``
    USD per node-hour.  Replays longer than ``duration_s`` repeat the trace from its
    start (:meth:`value_at`, :meth:`next_change_s`), the documented end-of-trace rule.

    Attributes:
        name: Short name, by default the file stem (``spot_us_east``).
        time_s: Row start times, float64, ``time_s[0] == 0``, strictly increasing.
        available: Obtainable nodes per row, int64, ``>= 0``.
        price_per_hour: Spot price per node-hour per row (float64, ``> 0``) or
            ``None`` when the trace carries no price.
        metadata: See :class:`TraceMetadata`.
        duration_s: End of the last row.  Omitted: ``time_s[-1]`` plus the median gap
            between rows (a one-row trace must give it).
    """

    kind: ClassVar[str] = "capacity"

    name: str
    time_s: np.ndarray
    available: np.ndarray
    price_per_hour: np.ndarray | None = None
    metadata: TraceMetadata = field(default_factory=TraceMetadata)
    duration_s: float = None  # type: ignore[assignment]  # None -> last time + median gap

    def __post_init__(self) -> None:
        time_s = _readonly(self.time_s, np.float64, "time_s")
        available = _as_int_array(self.available, "available")
        n = time_s.size
        if n == 0:
            raise ValueError("a capacity trace needs at least one row")
        if available.size != n:
            raise ValueError(f"available has {available.size} rows, time_s has {n}")
        if not np.all(np.isfinite(time_s)):
            raise ValueError("time_s must be finite")
        if time_s[0] != 0:
            raise ValueError(f"time_s must start at 0, got {time_s[0]!r}")
        if n > 1 and not np.all(np.diff(time_s) > 0):
            raise ValueError("time_s must be strictly increasing")
        if np.any(available < 0):
            raise ValueError("available must be >= 0")
        price = None
        if self.price_per_hour is not None:
            price = _readonly(self.price_per_hour, np.float64, "price_per_hour")
            if price.size != n:
                raise ValueError(f"price_per_hour has {price.size} rows, time_s has {n}")
            if not np.all(np.isfinite(price) & (price > 0)):
                raise ValueError("price_per_hour must be finite and > 0")
        if self.duration_s is None:
            if n < 2:
                raise ValueError("a one-row capacity trace needs an explicit duration_s")
            duration = float(time_s[-1] + np.median(np.diff(time_s)))
        else:
            duration = float(self.duration_s)
        if not (math.isfinite(duration) and duration > time_s[-1]):
            raise ValueError(
                f"duration_s ({duration!r}) must be finite and after the last row ({time_s[-1]!r})"
            )
        if not isinstance(self.metadata, TraceMetadata):
            raise ValueError("metadata must be a TraceMetadata")
        object.__setattr__(self, "name", str(self.name))
        object.__setattr__(self, "time_s", time_s)
        object.__setattr__(self, "available", available)
        object.__setattr__(self, "price_per_hour", price)
        object.__setattr__(self, "duration_s", duration)

    def __len__(self) -> int:
        return int(self.time_s.size)

    @property
    def max_available(self) -> int:
        """Most nodes the trace ever offers (a natural ``--max-nodes``)."""
        return int(self.available.max())

    @property
    def duration_h(self) -> float:
        """``duration_s`` in hours."""
        return self.duration_s / 3600.0

    @overload
    def at(self, t_s: float) -> int: ...

    @overload
    def at(self, t_s: np.ndarray) -> np.ndarray: ...

    def at(self, t_s):
        """Index of the row in effect at trace time ``t_s`` (no wrapping).

        Uses ``np.searchsorted`` so a lookup is ``O(log n)``; arrays are accepted and
        give an array of indices.  Times at or after ``duration_s`` map to the last
        row: use :meth:`value_at` for the repeating replay.

        Raises:
            ValueError: ``t_s`` is negative or NaN.
        """
        t = np.asarray(t_s, dtype=np.float64)
        if np.any(~(t >= 0)):
            raise ValueError(f"trace time must be >= 0, got {t_s!r}")
        idx = np.searchsorted(self.time_s, t, side="right") - 1
        if idx.ndim == 0:
            return int(idx)
        return idx

    def wrap(self, t_s: float) -> float:
        """Map simulation time to trace time: the trace repeats from its start.

        If a job outlasts the trace, the trace is replayed again from ``t = 0``
        (``t_s mod duration_s``).  This keeps long runs well defined without
        inventing data beyond what was measured.
        """
        if not t_s >= 0:
            raise ValueError(f"trace time must be >= 0, got {t_s!r}")
        return math.fmod(float(t_s), self.duration_s)

    def rows_at(self, t_s: np.ndarray) -> np.ndarray:
        """Index of the row in effect at each simulation time in ``t_s``, wrapping.

        :meth:`value_at`'s lookup for a whole grid of times at once (the trace repeats
        from its start, see :meth:`wrap`), for analyses that read a window's
        availability at every step: one ``np.searchsorted``, not a call per step.
        """
        return self.at(np.mod(np.asarray(t_s, dtype=np.float64), self.duration_s))

    def value_at(self, t_s: float) -> tuple[int, float | None]:
        """``(available, price_per_hour)`` at simulation time ``t_s``, wrapping.

        The trace repeats from its start when ``t_s >= duration_s`` (see :meth:`wrap`).
        ``price_per_hour`` is ``None`` for a trace without a price column.
        """
        i = self.at(self.wrap(t_s))
        price = None if self.price_per_hour is None else float(self.price_per_hour[i])
        return int(self.available[i]), price

    def next_change_s(self, t_s: float) -> float:
        """Absolute simulation time of the next row boundary strictly after ``t_s``.

        Wraps like :meth:`value_at`, so the simulator can schedule one timeout per row
        forever.  The end of a repetition counts as a boundary even when the first and
        last rows are equal, which keeps the arithmetic simple and exact.
        """
        t = float(t_s)
        if not t >= 0:
            raise ValueError(f"trace time must be >= 0, got {t_s!r}")
        cycle = math.floor(t / self.duration_s)
        base = cycle * self.duration_s
        local = t - base
        if local >= self.duration_s:  # floating-point edge of the division
            base += self.duration_s
            local = 0.0
        elif local < 0:
            base -= self.duration_s
            local += self.duration_s
        i = int(np.searchsorted(self.time_s, local, side="right"))
        nxt = float(self.time_s[i]) if i < self.time_s.size else self.duration_s
        result = base + nxt
        # Guard against rounding at huge t so a caller's loop always advances.
        return result if result > t else math.nextafter(t, math.inf)


@dataclass(frozen=True, eq=False)
class JobTrace:
    """Background jobs of a shared GPU cluster, sorted by submit time.

    Attributes:
        name: Short name, by default the file stem (``philly_jobs``).
        submit_time_s: Submit times (float64, ``>= 0``, non-decreasing).
        duration_s: Run time of each job once started, seconds (float64, ``> 0``).
            Per job; not the length of the trace.
        num_gpus: GPUs each job needs (int64, ``>= 1``), all at once (gang).
        priority: Scheduling priority (int64; higher runs first in priority-aware
            schedulers; the FIFO model ignores it).  ``None`` means all zero.
        metadata: See :class:`TraceMetadata`.
    """

    kind: ClassVar[str] = "jobs"

    name: str
    submit_time_s: np.ndarray
    duration_s: np.ndarray
    num_gpus: np.ndarray
    priority: np.ndarray = None  # type: ignore[assignment]  # None -> zeros
    metadata: TraceMetadata = field(default_factory=TraceMetadata)

    def __post_init__(self) -> None:
        submit = _readonly(self.submit_time_s, np.float64, "submit_time_s")
        duration = _readonly(self.duration_s, np.float64, "duration_s")
        gpus = _as_int_array(self.num_gpus, "num_gpus")
        n = submit.size
        if n == 0:
            raise ValueError("a job trace needs at least one job")
        if self.priority is None:
            priority = np.zeros(n, dtype=np.int64)
            priority.flags.writeable = False
        else:
            priority = _as_int_array(self.priority, "priority")
        for arr, label in ((duration, "duration_s"), (gpus, "num_gpus"), (priority, "priority")):
            if arr.size != n:
                raise ValueError(f"{label} has {arr.size} rows, submit_time_s has {n}")
        if not np.all(np.isfinite(submit) & (submit >= 0)):
            raise ValueError("submit_time_s must be finite and >= 0")
        if n > 1 and not np.all(np.diff(submit) >= 0):
            raise ValueError("submit_time_s must be sorted (non-decreasing)")
        if not np.all(np.isfinite(duration) & (duration > 0)):
            raise ValueError("duration_s must be finite and > 0")
        if np.any(gpus < 1):
            raise ValueError("num_gpus must be >= 1")
        if not isinstance(self.metadata, TraceMetadata):
            raise ValueError("metadata must be a TraceMetadata")
        object.__setattr__(self, "name", str(self.name))
        object.__setattr__(self, "submit_time_s", submit)
        object.__setattr__(self, "duration_s", duration)
        object.__setattr__(self, "num_gpus", gpus)
        object.__setattr__(self, "priority", priority)

    def __len__(self) -> int:
        return int(self.submit_time_s.size)

    @property
    def num_jobs(self) -> int:
        """Number of jobs."""
        return int(self.submit_time_s.size)

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last submission."""
        return float(self.submit_time_s[-1] - self.submit_time_s[0])

    @property
    def span_h(self) -> float:
        """Hours from the first to the last submission."""
        return self.span_s / 3600.0

    @property
    def gpu_hours(self) -> float:
        """Total GPU-hours of work in the trace."""
        return float(np.sum(self.duration_s * self.num_gpus)) / 3600.0


def trace_period_s(trace: CapacityTrace | JobTrace) -> float:
    """How long a trace lasts before a replay repeats it.

    A capacity trace: its ``duration_s``.  A job trace: its last submission plus one
    second (its arrivals then repeat, shifted by that much).
    """
    if isinstance(trace, CapacityTrace):
        return float(trace.duration_s)
    last = float(trace.submit_time_s.max()) if trace.submit_time_s.size else 0.0
    return max(trace.span_s, last + 1.0)


def scale_trace(trace: CapacityTrace, time_scale: float) -> CapacityTrace:
    """The same trace replayed ``time_scale`` times faster (trace seconds per real second).

    What a simulation of a real replay runs on: the executor replays the trace at
    ``--time-scale`` while its steps take real seconds, so the simulation of that run
    is in real seconds too.
    """
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
    return CapacityTrace(
        name=f"{trace.name} (x{time_scale:g})",
        time_s=np.asarray(trace.time_s, dtype=float) / time_scale,
        available=trace.available,
        price_per_hour=trace.price_per_hour,
        metadata=trace.metadata,
        duration_s=float(trace.duration_s) / time_scale,
    )


def start_offset_of(trace: CapacityTrace | JobTrace, offset_s: float | None, seed: int) -> float:
    """Where a run starts in ``trace``: the same rule for a simulation and a real run.

    None draws it uniformly over the trace's period from ``seed`` (the Can't Be Late
    methodology of random start points); a given offset must lie within the period.

    Raises:
        ValueError: an offset outside the trace, in one line naming the flag.
    """
    period_s = trace_period_s(trace)
    if offset_s is None:
        return float(np.random.default_rng(seed).uniform(0.0, period_s))
    if not 0.0 <= offset_s < period_s:
        raise ValueError(
            f"--start-offset-s {offset_s:g} is outside the trace {trace.name!r} "
            f"(0 to {period_s:g} s)"
        )
    return float(offset_s)


def on_demand_price_of(trace: CapacityTrace | JobTrace, override: float | None) -> float:
    """USD per on-demand node-hour: ``override``, else the trace's, else ``inf`` (none)."""
    if override is not None:
        return float(override)
    price = getattr(getattr(trace, "metadata", None), "on_demand_price_per_hour", None)
    return math.inf if price is None else float(price)
