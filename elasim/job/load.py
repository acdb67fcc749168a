"""Training job files: the bundled presets and TOML text made into a :class:`TrainingJob`.

Every malformed file becomes one :class:`~.errors.TrainingJobError` line naming the
file, line and column: TOML syntax, unknown or missing keys, wrong types, then the
model's own range checks (:func:`.model.validate`).  Reading files is kept apart from
the model so that the model reads as formulas, and a job built in code needs no TOML.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import TrainingJobError, locate_key
from .model import (
    BatchSemantics,
    BatchSpec,
    CheckpointSpec,
    ComputeSpec,
    NetworkSpec,
    NodesSpec,
    RescaleSpec,
    TrainingJob,
    validate,
)

__all__ = ["job_presets", "load_job", "parse_job"]

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
        line, col = locate_key(text, section, key) if section or key else (None, None)
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
    validate(spec, {"text": text})
    return spec
