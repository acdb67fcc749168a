"""Real spot-capacity and shared-cluster job traces: loaders, importers, bundled data.

Public API (see ``traces/README.md`` for the formats and the provenance of the
bundled traces)::

    from elasim.traces import load_trace, bundled_traces, import_trace

    trace = load_trace("spot_us_east.csv")      # bundled name or a path
    trace.value_at(t_s)                         # (available, price), repeats past the end

This package uses numpy (and the standard library); never simpy or torch.
matplotlib is imported only inside :func:`plot_trace`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import TraceError
from .io import (
    BundledTraceInfo,
    bundled_trace_names,
    bundled_traces,
    capacity_rows,
    load_capacity_trace,
    load_job_trace,
    load_trace,
    resolve_trace,
)
from .model import CapacityTrace, JobTrace, TraceMetadata
from .plot import plot_trace, summarize
from .writer import (
    format_capacity_trace,
    format_job_trace,
    write_capacity_trace,
    write_job_trace,
    write_trace,
)

if TYPE_CHECKING:
    from .csv_rows import rows_left_out
    from .importers import (
        IMPORT_FORMATS,
        ImporterOption,
        import_aws_price,
        import_bamboo,
        import_csv,
        import_philly,
        import_skypilot,
        import_trace,
        importer_options,
    )

#: Names imported on first use: the importers (six formats, about 20 ms of imports)
#: serve ``elasim traces import``, never a simulation that loads a canonical trace.
_LAZY: dict[str, str] = {
    "rows_left_out": ".csv_rows",
    **dict.fromkeys(
        (
            "IMPORT_FORMATS",
            "ImporterOption",
            "import_aws_price",
            "import_bamboo",
            "import_csv",
            "import_philly",
            "import_skypilot",
            "import_trace",
            "importer_options",
        ),
        ".importers",
    ),
}


def __getattr__(name: str) -> Any:
    """A lazy name of :data:`_LAZY`, imported (and kept) on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "BundledTraceInfo",
    "CapacityTrace",
    "IMPORT_FORMATS",
    "ImporterOption",
    "JobTrace",
    "TraceError",
    "TraceMetadata",
    "bundled_trace_names",
    "bundled_traces",
    "format_capacity_trace",
    "format_job_trace",
    "import_aws_price",
    "import_bamboo",
    "import_csv",
    "import_philly",
    "import_skypilot",
    "import_trace",
    "importer_options",
    "capacity_rows",
    "load_capacity_trace",
    "load_job_trace",
    "load_trace",
    "plot_trace",
    "resolve_trace",
    "rows_left_out",
    "summarize",
    "write_capacity_trace",
    "write_job_trace",
    "write_trace",
]
