"""The pause model of measured applications: each transition's pause, as calibration timed it.

``elasim cluster calibrate`` writes, beside each profile, ``pauses.json``: the
median pause components of every in-place change between 1 and ``--slots``
workers and of every start from nothing.  Any simulation whose profiles have it
(``cluster simulate --applications``, the loop of ``cluster run`` and so its
``--compare``) prices a transition with those figures rather than the pause
preset's, which describe a ResNet-50 on V100s.  One place, so that the real run's
loop and every simulation of it price a pause alike.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elasim.job import TrainingJob, load_job

__all__ = ["PAUSES_FILE", "measured_pause_job"]

#: measured pause components per transition, in an application profile folder
PAUSES_FILE = "pauses.json"


def measured_pause_job(
    preset: str | TrainingJob, applications: str | Path | None, names: Sequence[str]
) -> TrainingJob:
    """The pause model: ``preset`` with the measured pause table of the applications.

    Every ``<applications>/<name>/pauses.json`` found is read (rows of ``mode``,
    ``before``, ``after``, ``failure`` and the pause components, real seconds); a
    transition measured for several applications keeps the first one's figures (in
    name order).  Without any such file the preset is returned as it is.

    Raises:
        ValueError: a ``pauses.json`` that cannot be read (one line, naming it).
    """
    from elasim.policies import PAUSE_COMPONENTS, PauseComponents

    job = load_job(preset) if isinstance(preset, str) else preset
    if applications is None:
        return job
    table: dict[tuple[str, int, int, bool], Any] = {}
    for name in sorted(names):
        path = Path(applications) / name / PAUSES_FILE
        if not path.is_file():
            continue
        try:
            rows = json.loads(path.read_text())
            for row in rows:
                before, after = int(row["before"]), int(row["after"])
                key = (str(row["mode"]), before, after, bool(row["failure"]))
                comps = PauseComponents(**{c: float(row[c]) for c in PAUSE_COMPONENTS})
                table.setdefault(key, comps)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a pause table ({type(exc).__name__}: {exc})") from None
    if not table:
        return job
    table = _restarts_as_starts(_fill_gaps(table))  # gaps filled first: every start known
    return dataclasses.replace(job, pause_table=tuple(sorted(table.items())))


def _restarts_as_starts(
    table: dict[tuple[str, int, int, bool], Any],
) -> dict[tuple[str, int, int, bool], Any]:
    """Where no restart was measured, each restart ``b -> a`` priced as the start ``0 -> a``.

    Why: ``elasim cluster calibrate`` measures in-place changes and starts from
    nothing, and a restart is exactly a start: every worker stops, and ``a`` new ones
    start from the checkpoint (written and read in milliseconds for the executor's
    jobs).  Left out, every change of a ``--rescale restart`` run, its first start
    included, fell to the pause preset's figures (a ResNet-50's seconds of rendezvous
    and warm-up on V100s): the README's example under ``pollux`` simulated 45 s of
    pauses against 6.8 s real.  Measured restarts, where a profile has them, win.
    The checkpoint's write before the stop is not in it (calibration does not time
    one; the executor's jobs write theirs in milliseconds): a profile of a large
    model under ``--rescale restart`` should measure its restarts.
    """
    if any(mode == "restart" for mode, *_ in table):
        return table
    out = dict(table)
    starts = {(a, failure): c for (mode, b, a, failure), c in table.items() if b == 0}
    top = max((max(k[1], k[2]) for k in table), default=0)
    for (after, failure), components in starts.items():
        for before in range(top + 1):
            if before != after:
                out[("restart", before, after, failure)] = components
    return out


def _fill_gaps(
    table: dict[tuple[str, int, int, bool], Any],
) -> dict[tuple[str, int, int, bool], Any]:
    """Every transition between the sizes measured, each priced like the nearest measured one.

    Why: workers join a real group when each is ready, so a calibration that asks for
    ``1 -> 3`` may see ``1 -> 2 -> 3``, and a transition never seen was priced by the
    pause preset's analytical figures (a ResNet-50 on V100s: 1.5 s of rendezvous and
    5 s of warm-up, against tens of milliseconds measured here), which made the
    simulated JCTs of the README's example tens of percent too long.  The nearest
    measured change of the same kind (a start from nothing, a growth, a shrink) is a
    far better estimate than a model of another machine.
    """
    out = dict(table)
    for mode, failure in {(k[0], k[3]) for k in table}:
        keys = [k for k in table if k[0] == mode and k[3] == failure]
        top = max(max(k[1], k[2]) for k in keys)
        for before in range(top + 1):
            for after in range(1, top + 1):
                key = (mode, before, after, failure)
                if before == after or key in out:
                    continue
                kind = _change_kind(before, after)
                alike = [k for k in keys if _change_kind(k[1], k[2]) == kind]
                if alike:
                    near = min(alike, key=lambda k: (abs(k[1] - before) + abs(k[2] - after), k))
                    out[key] = table[near]
    return out


def _change_kind(before: int, after: int) -> int:
    """0: a start from nothing, 1: a growth, 2: a shrink (same size: 3)."""
    if before == 0:
        return 0
    return 1 if after > before else 2 if after < before else 3
