"""Sim vs real: match a measured run's events with a simulation's, event by event.

Both sides write the same schema (``summary.json`` and ``events.parquet`` with
:data:`elasim.policies.EVENT_COLUMNS`), so the comparison is a join, not a
translation.  Times are compared in the executor's *real* seconds: the simulation to
compare with is run on the trace compressed by the executor's time scale
(:func:`elasim.traces.model.scale_trace`), with a profile measured on the same
machine.

Matching: membership changes (``scale_up``, ``scale_down``, ``resume``) and
preemptions are matched in order, by kind and node counts, each with the first
unmatched simulated event of the same signature whose time lies within the window;
an event without a partner is reported as unmatched rather than forced onto another.

Only runs of the same job are compared: both ``summary.json`` files record their
:class:`~elasim.jobmodel.JobSpec` as ``inputs`` (the same keys in ``simulate`` and
``run``), and :func:`check_same_run` refuses two runs whose specs differ (trace,
policy, job, mechanism, notice, checkpoints, deadline, window, nodes, prices), whose
time scales differ, or whose work differs (steps, or samples against a simulation),
with :class:`~elasim.jobmodel.SpecMismatchError` naming the first field; a matching
that pairs no event at all is logged as a warning.

The package's parts: :mod:`.events` (the matching), :mod:`.runs` (two runs' files,
the same-run check, simulating a measured run), :mod:`.tables` and :mod:`.plots`
(what ``elasim compare`` shows), :mod:`.repeats` (repeats of one run, the noise
floor, and simpler models of the overheads).
"""

from elasim.compare.events import (
    FIDELITY_GOALS,
    MATCHED_KINDS,
    CompareResult,
    EventPair,
    compare_frames,
)
from elasim.compare.plots import compare_figure, plot_compare
from elasim.compare.repeats import (
    compare_model_variants,
    compare_repeats,
    model_variants,
    run_to_run_errors,
)
from elasim.compare.runs import (
    check_same_run,
    compare_runs,
    load_timeline,
    run_and_simulate,
    simulate_run,
)
from elasim.compare.tables import fidelity_summary, summarize_pairs
from elasim.jobmodel import SpecMismatchError

__all__ = [
    "MATCHED_KINDS",
    "CompareResult",
    "SpecMismatchError",
    "FIDELITY_GOALS",
    "EventPair",
    "compare_figure",
    "compare_model_variants",
    "compare_repeats",
    "fidelity_summary",
    "model_variants",
    "compare_frames",
    "compare_runs",
    "load_timeline",
    "plot_compare",
    "run_and_simulate",
    "run_to_run_errors",
    "check_same_run",
    "simulate_run",
    "summarize_pairs",
]
