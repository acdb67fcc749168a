"""The SimPy simulator: one elastic job, one trace, one policy.

``simulate(spec, config) -> SimResult`` is the whole public surface: ``spec`` is the
job (:class:`elasim.jobmodel.JobSpec`, shared with the executor), ``config`` what only
the simulator has (:class:`SimConfig`); ``write_result`` turns the result into files.
The job's life is the shared job model (:mod:`elasim.jobmodel`);
:mod:`elasim.sim.driver` only supplies SimPy's clock.
"""

from __future__ import annotations

from .config import RescaleMode, SimConfig, SimResult, Timeline, young_daly_interval_s
from .driver import DEFAULT_JOB, capacity_for, fastest_finish_h, pause_for, resolve, simulate
from .results import timeline_frame, write_result

__all__ = [
    "DEFAULT_JOB",
    "RescaleMode",
    "SimConfig",
    "SimResult",
    "Timeline",
    "capacity_for",
    "fastest_finish_h",
    "pause_for",
    "resolve",
    "simulate",
    "timeline_frame",
    "write_result",
    "young_daly_interval_s",
]
