"""Real spot-capacity and shared-cluster job traces: loaders, importers, bundled data.

Public API (see ``traces/README.md`` for the formats and the provenance of the
bundled traces)::

    from elasim.traces import load_trace, bundled_traces, import_trace

    trace = load_trace("spot_us_east.csv")      # bundled name or a path
    trace.value_at(t_s)                         # (available, price), repeats past the end

This package uses numpy (and the standard library); never simpy or torch.
matplotlib is imported only inside :func:`plot_trace`.
"""

from .csv_rows import rows_left_out
from .errors import TraceError
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
from .io import (
    BundledTraceInfo,
    bundled_trace_names,
    bundled_traces,
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
