"""Scaling policies: pure decision objects shared by the simulator and the executor.

Standard library only.  See :mod:`elasim.policies.base` for the shared types.
"""

from __future__ import annotations

from .base import (
    PAUSE_COMPONENTS,
    Decision,
    DecisionRecord,
    EventKind,
    JobState,
    Observation,
    ObservedEvent,
    PauseComponents,
    Policy,
    PolicyBase,
    clamp,
)

__all__ = [
    "PAUSE_COMPONENTS",
    "Decision",
    "DecisionRecord",
    "EventKind",
    "JobState",
    "Observation",
    "ObservedEvent",
    "PauseComponents",
    "Policy",
    "PolicyBase",
    "clamp",
]
