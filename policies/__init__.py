"""Scaling policies: pure decision objects shared by the simulator and the executor.

Standard library only.  See :mod:`elasim.policies.base` for the shared types and
:mod:`elasim.policies.registry` for finding policies by name, file, module or entry
point.  Importing this package registers the built-in policies: ``fixed``, ``greedy``,
``hysteresis``, ``price``, ``deadline`` and ``goodput``.
"""

from __future__ import annotations

from .base import (
    EVENT_COLUMNS,
    PAUSE_COMPONENTS,
    Decision,
    DecisionRecord,
    EventKind,
    EventRecord,
    JobState,
    Observation,
    ObservedEvent,
    PauseComponents,
    Policy,
    PolicyBase,
    clamp,
)

# The built-in policy modules register themselves on import (``@register``).
from .deadline import DeadlinePolicy
from .fixed import FixedPolicy
from .goodput import GoodputPolicy
from .greedy import GreedyPolicy
from .hysteresis import HysteresisPolicy
from .price import PricePolicy
from .registry import (
    ENTRY_POINT_GROUP,
    OptionInfo,
    PolicyConfigError,
    PolicyInfo,
    PolicyLoadError,
    describe_policies,
    get_policy_class,
    make_policy,
    policy_names,
    register,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "EVENT_COLUMNS",
    "EventRecord",
    "PAUSE_COMPONENTS",
    "DeadlinePolicy",
    "Decision",
    "DecisionRecord",
    "EventKind",
    "FixedPolicy",
    "GoodputPolicy",
    "GreedyPolicy",
    "HysteresisPolicy",
    "JobState",
    "Observation",
    "ObservedEvent",
    "OptionInfo",
    "PauseComponents",
    "Policy",
    "PolicyBase",
    "PolicyConfigError",
    "PolicyInfo",
    "PolicyLoadError",
    "PricePolicy",
    "clamp",
    "describe_policies",
    "get_policy_class",
    "make_policy",
    "policy_names",
    "register",
]
