"""The SimPy simulator: one elastic job, one trace, one policy.

``simulate(trace, policy, job, config) -> SimResult`` is the whole public surface;
``write_result`` turns the result into files.  The job's life is the shared job model
(:mod:`elasim.jobmodel`); :mod:`elasim.sim.driver` only supplies SimPy's clock.
"""

from __future__ import annotations

from .config import RescaleMode, SimConfig, SimResult, Timeline, young_daly_interval_s
from .driver import capacity_for, fastest_finish_h, pause_for, simulate
from .results import timeline_frame, write_result

__all__ = [
    "RescaleMode",
    "SimConfig",
    "SimResult",
    "Timeline",
    "capacity_for",
    "fastest_finish_h",
    "pause_for",
    "simulate",
    "timeline_frame",
    "write_result",
    "young_daly_interval_s",
]
