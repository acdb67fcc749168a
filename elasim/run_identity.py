"""Which job a run directory is a run of, so unrelated runs are never compared.

``elasim compare`` matches a measured run's events with a simulation's.  Given two
unrelated directories it used to report a 35,628 % completion error and 0 events
matched, and exit 0: a number that looks like a finding and is not one.  Before
comparing, :func:`check_same_run` therefore checks that both sides state the same
job, trace, policy, time scale and trace window, and raises
:class:`RunMismatchError` naming the first field that differs.

The two sides state these differently, so each summary is first reduced to a
:class:`RunIdentity`:

* the executor (``executor/run.py``) writes ``inputs.job``, ``inputs.trace`` (the
  trace's name), ``inputs.policy``, ``inputs.trace_start_s`` (trace seconds) and a
  top-level ``time_scale`` (trace seconds per real second);
* the simulator (:meth:`elasim.sim.SimResult.summary`) writes ``inputs.job``,
  ``inputs.trace``, ``inputs.policy`` and ``inputs.start_offset_s`` in the seconds of
  the trace it ran on.  A simulation of a measured run
  (:func:`elasim.compare.simulate_run`) runs on the trace compressed by the run's
  time scale and says so in the trace's name (``spot_us_east (x300)``) and the job's
  (``digits-mlp256x2 (profile)`` when the job came from a profile); a plain
  simulation runs in trace time (scale 1).

A field only one side states (an older run, a hand-made summary) is not checked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import PurePath
from typing import Any

__all__ = [
    "RunIdentity",
    "RunMismatchError",
    "check_same_run",
    "recorded_checkpoint_interval",
    "run_identity",
]

#: ``name (x300)``: a trace compressed by :func:`elasim.compare.scale_trace`.
_SCALED_NAME_RE = re.compile(r"^(?P<name>.*?) \(x(?P<scale>[0-9.eE+-]+)\)$")
#: ``name (profile)``: a job spec built by :func:`elasim.profile.apply_profile`.
_PROFILE_SUFFIX = " (profile)"
#: Start offsets closer than this (trace seconds) are the same window.
_OFFSET_TOLERANCE_S = 1e-3


class RunMismatchError(ValueError):
    """Two run directories are not runs of the same job; ``str()`` is one line."""


@dataclass(frozen=True)
class RunIdentity:
    """What makes two runs comparable, as one summary states it (``None``: not stated).

    Attributes:
        job: the job's name, without the ``(profile)`` a profiled spec adds.
        trace: the trace's name, without folder, ``.csv`` or ``(xN)`` suffix.
        policy: the policy spec.
        time_scale: trace seconds per real second (1 for a plain simulation).
        trace_start_s: where in the trace the run started, in trace seconds.
    """

    job: str | None
    trace: str | None
    policy: str | None
    time_scale: float | None
    trace_start_s: float | None


def _text(value: Any) -> str | None:
    return None if value is None or str(value).strip() == "" else str(value).strip()


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _trace_and_scale(trace: Any) -> tuple[str | None, float | None]:
    """A trace name without folder and ``.csv``, and the scale its ``(xN)`` suffix states."""
    name = _text(trace)
    if name is None:
        return None, None
    scale = None
    match = _SCALED_NAME_RE.match(name)
    if match is not None:
        name, scale = match.group("name"), _number(match.group("scale"))
    name = PurePath(name).name
    return (name[: -len(".csv")] if name.endswith(".csv") else name), scale


def run_identity(summary: Mapping[str, Any]) -> RunIdentity:
    """Reduce a ``summary.json`` (executor or simulator) to the fields compared."""
    inputs = summary.get("inputs") or {}
    trace, name_scale = _trace_and_scale(inputs.get("trace"))
    scale = _number(summary.get("time_scale", inputs.get("time_scale")))
    if scale is None:
        scale = name_scale
    if scale is None and "start_offset_s" in inputs:
        scale = 1.0  # a simulation runs in the seconds of the trace it is given
    if "trace_start_s" in inputs:  # the executor: already trace seconds
        start_s = _number(inputs["trace_start_s"])
    else:  # the simulator: seconds of the (possibly compressed) trace it ran on
        offset_s = _number(inputs.get("start_offset_s"))
        start_s = None if offset_s is None or scale is None else offset_s * scale
    job = _text(inputs.get("job"))
    if job is not None and job.endswith(_PROFILE_SUFFIX):
        job = job[: -len(_PROFILE_SUFFIX)]
    return RunIdentity(
        job=job,
        trace=trace,
        policy=_text(inputs.get("policy")),
        time_scale=scale,
        trace_start_s=start_s,
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        # a scale read from a ``(xN)`` name has the 6 digits of ``{:g}``
        return math.isclose(a, b, rel_tol=1e-5, abs_tol=_OFFSET_TOLERANCE_S)
    return bool(a == b)


def check_same_run(
    real_summary: Mapping[str, Any],
    sim_summary: Mapping[str, Any],
    *,
    names: tuple[str, str] = ("real run", "simulation"),
) -> None:
    """Raise :class:`RunMismatchError` unless both summaries describe the same run.

    Fields are checked in the order of :class:`RunIdentity` (job, trace, policy, time
    scale, trace window); a field either side leaves unstated is skipped.

    Args:
        real_summary: the measured run's ``summary.json``.
        sim_summary: the simulation's ``summary.json``.
        names: how the message calls the two sides.

    Raises:
        RunMismatchError: one line naming the first field that differs and both
            values.
    """
    real, sim = run_identity(real_summary), run_identity(sim_summary)
    for field in fields(RunIdentity):
        a, b = getattr(real, field.name), getattr(sim, field.name)
        if a is None or b is None or _same(a, b):
            continue
        shown = (f"{v:g}" if isinstance(v, float) else repr(v) for v in (a, b))
        raise RunMismatchError(
            f"not the same run: {field.name} differs ({names[0]}: {next(shown)}, "
            f"{names[1]}: {next(shown)}); compare anyway with --force (force=True)"
        )


def recorded_checkpoint_interval(inputs: Mapping[str, Any], scale: float) -> float | None:
    """A run's recorded checkpoint interval on the compressed trace.

    Runs recorded before ``auto`` became the executor's default wrote ``null`` for
    "none requested"; since then ``"auto"``, ``"off"`` or trace seconds.
    """
    value = inputs.get("checkpoint_interval_s")
    if value is None or value == "off":
        return math.inf
    if value == "auto":
        return None
    return float(value) / scale
