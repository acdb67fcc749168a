"""A cluster workload by spec: a workload CSV, or a job trace mapped to applications.

The one entry point every cluster command uses, so each command that takes a
workload takes a mapped job trace too.  It sits above both readers: the CSV reader
(:func:`~.cluster.read_workload_csv`) and the job-trace mapping
(:func:`~.philly_workload.load_philly_workload`, which itself reads the bundled CSV
workloads), so neither has to import the other back.
"""

from __future__ import annotations

import os
from pathlib import Path

from .cluster import PHILLY_PREFIX, WorkloadJob, read_workload_csv

__all__ = ["load_workload"]


def load_workload(spec: str | Path, applications: set[str] | None = None) -> list[WorkloadJob]:
    """The jobs of a workload: ``philly[:TRACE][:key=value...]``, a bundled name or a CSV.

    Args:
        spec: ``philly[...]`` (see :func:`~.philly_workload.parse_philly_spec`), a
            bundled workload name such as ``pollux-workload-6``, or a CSV path.
        applications: the application names it may use (None: any name).

    Returns:
        The jobs sorted by arrival (ties by name).

    Raises:
        TraceError: a bad workload file or job trace (file, line, column).
        ValueError: a bad ``philly`` spec, or an application not in ``applications``.
    """
    text = os.fspath(spec)
    if text == PHILLY_PREFIX or text.startswith(PHILLY_PREFIX + ":"):
        from .philly_workload import load_philly_workload  # NumPy, only when asked

        return load_philly_workload(text, applications)
    return read_workload_csv(spec, applications)
