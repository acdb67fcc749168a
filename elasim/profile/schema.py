"""The measured profile itself: its schema, its JSON file and its rows for people.

:class:`Profile` is what one calibration measured; this module checks it, writes and
reads the versioned JSON file, and lists it as (measurement, value) rows.  How a
profile is made from runs (:mod:`.runs`) and how the simulator uses it
(:mod:`.apply`) live apart: each changes for its own reasons, and both depend on this
schema only.  Pure Python; no simpy, no torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasim.policies import PAUSE_COMPONENTS, PauseComponents

__all__ = [
    "PROFILE_VERSION",
    "SUPPORTED_VERSIONS",
    "MeasuredPause",
    "Profile",
    "ProfileError",
    "describe_profile",
    "load_profile",
    "save_profile",
]


PROFILE_VERSION = 2
#: Versions this code reads (1 had no measured cold-start batches).
SUPPORTED_VERSIONS = (1, 2)


class ProfileError(ValueError):
    """A profile that cannot be used; ``str()`` is one line naming the file."""


@dataclass(frozen=True)
class MeasuredPause:
    """Median pause of one kind of transition.

    Attributes:
        mechanism: ``inplace`` or ``restart``.
        nodes_before: group size before.
        nodes_after: group size after.
        failure: the change followed an unannounced failure (a killed worker).
        samples: how many events the median is over.
        components: median of each pause component (seconds).
    """

    mechanism: str
    nodes_before: int
    nodes_after: int
    failure: bool
    samples: int
    components: PauseComponents

    @property
    def key(self) -> tuple[str, int, int, bool]:
        """The lookup key of the pause table."""
        return (self.mechanism, self.nodes_before, self.nodes_after, self.failure)


@dataclass(frozen=True)
class Profile:
    """Everything one calibration measured.

    Attributes:
        version: schema version (:data:`PROFILE_VERSION`).
        hardware: machine description (cpu, cores, gpu, ...).
        torch_version: torch the executor ran.
        backend: ``gloo`` or ``nccl``.
        model: model description (name, parameters, state bytes, global batch).
        global_batch: samples per optimizer step (the executor keeps it fixed).
        step_time_s: mean step time per world size (quiet steps only).
        pauses: measured transitions.
        checkpoint_size_bytes: size of one checkpoint file.
        checkpoint_save_s: median atomic save time.
        checkpoint_load_s: median load time.
        worker_start_s: median time for a fresh interpreter to start and import torch.
        cold_start_s: measured cold starts of worker processes spawned together:
            ``(k, offsets)``, for batches of ``k``, the median seconds from spawn to
            READY of the first, second, ... to be ready.
        shared_host_cores: every worker ran on one host with this many cores (0: not
            measured on a single host).
        cold_start_alone_s: start time of one worker alone on that host (each batch's
            times scaled by the share of a core its workers had).
        starting_weight: CPU a starting worker takes, in training workers (fitted on
            the slowdown of the trainers next to it, :func:`starting_weight`).
        detect_s: median time for survivors to notice a killed peer.
        source: what produced it (``calibrate`` or a run directory).
        gradient_noise_scale: ``B_noise`` (samples) measured while training, pooled
            over the runs (:mod:`elasim.noise_scale`); None: not measured.
    """

    version: int
    hardware: tuple[tuple[str, Any], ...]
    torch_version: str
    backend: str
    model: tuple[tuple[str, Any], ...]
    global_batch: int
    step_time_s: tuple[tuple[int, float], ...]
    pauses: tuple[MeasuredPause, ...] = ()
    checkpoint_size_bytes: float = 0.0
    checkpoint_save_s: float = 0.0
    checkpoint_load_s: float = 0.0
    worker_start_s: float = 0.0
    detect_s: float = 0.0
    source: str = ""
    cold_start_s: tuple[tuple[int, tuple[float, ...]], ...] = ()
    shared_host_cores: int = 0
    cold_start_alone_s: float = 0.0
    starting_weight: float = 1.0
    extra: tuple[tuple[str, Any], ...] = field(default=())
    gradient_noise_scale: float | None = None

    def __post_init__(self) -> None:
        for name in ("hardware", "model", "extra"):  # canonical order: equal files compare equal
            object.__setattr__(self, name, tuple(sorted(dict(getattr(self, name)).items())))
        if self.version not in SUPPORTED_VERSIONS:
            raise ProfileError(
                f"profile version {self.version} is not supported "
                f"(expected one of {', '.join(map(str, SUPPORTED_VERSIONS))})"
            )
        for count, offsets in self.cold_start_s:
            if count < 1 or len(offsets) != count:
                raise ProfileError(f"cold start batch {count} needs {count} offsets")
            if not all(math.isfinite(o) and o >= 0 for o in offsets):
                raise ProfileError(f"cold start offsets must be >= 0, got {list(offsets)}")
        if self.global_batch < 1:
            raise ProfileError("global_batch must be >= 1")
        gns = self.gradient_noise_scale
        if gns is not None and not (math.isfinite(gns) and gns >= 0):
            raise ProfileError(f"gradient_noise_scale must be >= 0, got {gns!r}")
        if not self.step_time_s:
            raise ProfileError("a profile needs at least one measured step time")
        for world, seconds in self.step_time_s:
            if world < 1 or not (math.isfinite(seconds) and seconds > 0):
                raise ProfileError(f"bad step time {seconds!r} for world size {world!r}")

    @property
    def max_world(self) -> int:
        """Largest world size measured."""
        return max(world for world, _ in self.step_time_s)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the file format; the noise scale only when measured)."""
        gns = self.gradient_noise_scale
        measured = {} if gns is None else {"gradient_noise_scale": gns}
        return {
            "elasim_profile_version": self.version,
            "source": self.source,
            "hardware": dict(self.hardware),
            "torch_version": self.torch_version,
            "backend": self.backend,
            "model": dict(self.model),
            "global_batch": self.global_batch,
            "step_time_s": {str(w): t for w, t in self.step_time_s},
            "pauses": [
                {
                    "mechanism": p.mechanism,
                    "nodes_before": p.nodes_before,
                    "nodes_after": p.nodes_after,
                    "failure": p.failure,
                    "samples": p.samples,
                    **p.components.as_dict(),
                }
                for p in self.pauses
            ],
            "checkpoint_size_bytes": self.checkpoint_size_bytes,
            "checkpoint_save_s": self.checkpoint_save_s,
            "checkpoint_load_s": self.checkpoint_load_s,
            "worker_start_s": self.worker_start_s,
            "cold_start_s": {str(k): list(v) for k, v in self.cold_start_s},
            "shared_host_cores": self.shared_host_cores,
            "cold_start_alone_s": self.cold_start_alone_s,
            "starting_weight": self.starting_weight,
            "detect_s": self.detect_s,
            **measured,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "<profile>") -> Profile:
        """Parse the file format, with one-line errors naming ``where``."""
        try:
            pauses = tuple(
                MeasuredPause(
                    mechanism=str(p["mechanism"]),
                    nodes_before=int(p["nodes_before"]),
                    nodes_after=int(p["nodes_after"]),
                    failure=bool(p["failure"]),
                    samples=int(p.get("samples", 1)),
                    components=PauseComponents(**{k: float(p[k]) for k in PAUSE_COMPONENTS}),
                )
                for p in data.get("pauses", [])
            )
            return cls(
                version=int(data["elasim_profile_version"]),
                source=str(data.get("source", "")),
                hardware=tuple(sorted(dict(data.get("hardware", {})).items())),
                torch_version=str(data.get("torch_version", "")),
                backend=str(data.get("backend", "")),
                model=tuple(sorted(dict(data.get("model", {})).items())),
                global_batch=int(data["global_batch"]),
                step_time_s=tuple(
                    sorted((int(k), float(v)) for k, v in dict(data["step_time_s"]).items())
                ),
                pauses=pauses,
                checkpoint_size_bytes=float(data.get("checkpoint_size_bytes", 0.0)),
                checkpoint_save_s=float(data.get("checkpoint_save_s", 0.0)),
                checkpoint_load_s=float(data.get("checkpoint_load_s", 0.0)),
                worker_start_s=float(data.get("worker_start_s", 0.0)),
                cold_start_s=tuple(
                    sorted(
                        (int(k), tuple(float(o) for o in v))
                        for k, v in dict(data.get("cold_start_s", {})).items()
                    )
                ),
                shared_host_cores=int(data.get("shared_host_cores", 0)),
                cold_start_alone_s=float(data.get("cold_start_alone_s", 0.0)),
                starting_weight=float(data.get("starting_weight", 1.0)),
                detect_s=float(data.get("detect_s", 0.0)),
                extra=tuple(sorted(dict(data.get("extra", {})).items())),
                gradient_noise_scale=None
                if data.get("gradient_noise_scale") is None
                else float(data["gradient_noise_scale"]),
            )
        except ProfileError as exc:
            raise ProfileError(f"{where}: {exc}") from None
        except KeyError as exc:
            raise ProfileError(f"{where}: missing key {exc.args[0]!r}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise ProfileError(f"{where}: malformed profile: {exc}") from None


def _measured(seconds: float) -> str:
    """A time the profile holds, or ``not measured`` (0 is what a profile stores then)."""
    return f"{seconds:.4f}" if seconds > 0 else "not measured"


def describe_profile(profile: Profile) -> list[tuple[str, str]]:
    """The profile as (measurement, value) rows, for ``elasim calibrate`` and notebooks."""
    rows = [(f"step time, {w} workers (s)", f"{t:.4f}") for w, t in profile.step_time_s]
    # the scaling curve: the global batch is fixed, so throughput is batch / step time
    steps = dict(profile.step_time_s)
    base = profile.global_batch / steps[min(steps)]
    for world, seconds in profile.step_time_s:
        throughput = profile.global_batch / seconds
        rows.append(
            (
                f"throughput, {world} workers (samples/s)",
                f"{throughput:,.0f} (x{throughput / base:.2f} of {min(steps)} worker)",
            )
        )
    for pause in profile.pauses:
        label = f"{pause.mechanism} {pause.nodes_before}->{pause.nodes_after}" + (
            " (kill)" if pause.failure else ""
        )
        parts = [
            f"{name[:-2]} {value:.3f}"
            for name, value in pause.components.as_dict().items()
            if name != "pause_s" and value >= 0.0005
        ]
        detail = f" ({', '.join(parts)})" if parts else ""
        rows.append((f"pause {label} (s)", f"{pause.components.pause_s:.3f}{detail}"))
    rows += [
        ("checkpoint save (s)", _measured(profile.checkpoint_save_s)),
        ("checkpoint load (s)", _measured(profile.checkpoint_load_s)),
        ("interpreter + torch import (s)", f"{profile.worker_start_s:.2f}"),
    ]
    for count, offsets in profile.cold_start_s:
        rows.append(
            (f"cold start, {count} spawned together (s)", " / ".join(f"{o:.2f}" for o in offsets))
        )
    if profile.shared_host_cores:
        rows.append(
            (
                f"cold start alone on the {profile.shared_host_cores}-core host (s)",
                f"{profile.cold_start_alone_s:.2f}",
            )
        )
        rows.append(("a starting worker's CPU, in trainers", f"{profile.starting_weight:.2f}"))
    gns = profile.gradient_noise_scale
    shown = "not measured" if gns is None else f"{gns:,.0f}"
    rows.append(("gradient noise scale B_noise (samples)", shown))
    return rows


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write a profile atomically."""
    from elasim.output import write_json

    return write_json(path, profile.to_json())


def load_profile(path: str | Path) -> Profile:
    """Read a profile; errors are one line naming the file (and line/column for bad JSON)."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{where}: cannot read profile: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{where}:{exc.lineno}:{exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: a profile is a JSON object")
    return Profile.from_json(data, where)
