"""One job model, two clocks: the life of one elastic job, standard library only.

The simulator (:mod:`elasim.sim`, SimPy's clock, the fluid model) and the executor
(:mod:`elasim.executor`, real time scaled by ``--time-scale``, real workers) are thin
shells around the same :class:`JobLoop`.  Nothing here imports SimPy, torch, NumPy or
pandas (``tests/test_layering.py`` checks it), so both shells, and the parity test
between them, run it unchanged.

* :mod:`.spec`: :class:`JobSpec`, one run of one job as both shells run it.
* :mod:`.build`: :func:`build_job_loop`, a spec made into the loop both shells drive.
* :mod:`.options`: :class:`RescaleMode`, :class:`JobRules`, ``auto|off|SECONDS``.
* :mod:`.replay`: :class:`CapacityReplay`, the trace with its notices.
* :mod:`.rules`: the checkpoint schedule (Young/Daly ``auto``) and the leave rule.
* :mod:`.accounting`: cost, node-time and time books; the enforced ``JobState``.
* :mod:`.actuator`: what the loop drives (:class:`Actuator`).
* :mod:`.pause`: :func:`pause_for`, the pause of one group re-formation.
* :mod:`.fluid`: the simulator's actuator, the fluid progress model.
* :mod:`.durability`: what survives a loss of nodes (the fluid job holds its parts).
* :mod:`.loop`: :class:`JobLoop`, observe -> decide -> apply.
* :mod:`.timeline`: :class:`TimelineRow`, one row of the job's timeline.
* :mod:`.summary`: :class:`RunSummary`, the one summary schema.
* :mod:`.zones`: a job in several zones (:class:`ZoneMoves`, :class:`ZoneReplay`).
"""

from __future__ import annotations

from .accounting import Accounting, Activity, JobStateMachine
from .actuator import Actuator
from .build import build_job_loop, job_rules
from .fluid import FluidJob
from .loop import JobLoop, PolicyError, TimelineRow
from .options import (
    CHECKPOINT_AUTO,
    CHECKPOINT_OFF,
    JobRules,
    RescaleMode,
    describe_checkpoint_interval,
    parse_checkpoint_interval,
)
from .pause import pause_for
from .replay import CapacityReplay, ReplayItem
from .rules import (
    LEAVE_STEPS,
    MIN_AUTO_INTERVAL_S,
    CheckpointSchedule,
    checkpoint_timer_after,
    leave_lead_s,
    young_daly_interval_s,
)
from .spec import SPEC_FLAGS, JobSpec, SpecMismatchError
from .summary import RunSummary, summarize
from .zones import ZoneMoves, ZoneReplay, zone_move_s

__all__ = [
    "CHECKPOINT_AUTO",
    "CHECKPOINT_OFF",
    "LEAVE_STEPS",
    "SPEC_FLAGS",
    "MIN_AUTO_INTERVAL_S",
    "Accounting",
    "Activity",
    "Actuator",
    "CapacityReplay",
    "CheckpointSchedule",
    "FluidJob",
    "JobLoop",
    "JobRules",
    "JobSpec",
    "JobStateMachine",
    "PolicyError",
    "ReplayItem",
    "RescaleMode",
    "RunSummary",
    "SpecMismatchError",
    "TimelineRow",
    "build_job_loop",
    "checkpoint_timer_after",
    "describe_checkpoint_interval",
    "job_rules",
    "leave_lead_s",
    "parse_checkpoint_interval",
    "pause_for",
    "summarize",
    "young_daly_interval_s",
    "ZoneMoves",
    "ZoneReplay",
    "zone_move_s",
]
