"""Scaling policies: pure decision objects shared by the simulator and the executor.

Standard library only.  See :mod:`elasim.policies.base` for the shared types and
:mod:`elasim.policies.registry` for finding policies by name, file, module or entry
point.  Importing this package registers the built-in policies: ``fixed``, ``greedy``,
``hysteresis``, ``price``, ``deadline``, ``uniform_progress``, ``receding``, ``goodput``,
``failover`` (several zones) and ``on_demand``, and the oracle
``optimal`` (the offline optimum, which only the simulator can run: see
:func:`~elasim.policies.registry.is_oracle`).
"""

from __future__ import annotations

from ._ondemand import OnDemandPlan, deadline_feasible, job_plan
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
    ZoneView,
    clamp,
)

# The built-in policy modules register themselves on import (``@register``).
from .deadline import DeadlinePolicy
from .failover import FailoverPolicy
from .fixed import FixedPolicy
from .goodput import GoodputPolicy
from .greedy import GreedyPolicy
from .hysteresis import HysteresisPolicy
from .ondemand import OnDemandPolicy
from .optimal import OptimalPolicy, Plan
from .price import PricePolicy
from .receding import RecedingPolicy
from .registry import (
    ENTRY_POINT_GROUP,
    OptionInfo,
    PolicyConfigError,
    PolicyInfo,
    PolicyLoadError,
    describe_policies,
    get_policy_class,
    is_oracle,
    make_policy,
    oracle_names,
    policy_names,
    register,
)
from .uniform import UniformProgressPolicy

__all__ = [
    "ENTRY_POINT_GROUP",
    "EVENT_COLUMNS",
    "EventRecord",
    "PAUSE_COMPONENTS",
    "DeadlinePolicy",
    "Decision",
    "DecisionRecord",
    "FailoverPolicy",
    "EventKind",
    "FixedPolicy",
    "GoodputPolicy",
    "GreedyPolicy",
    "HysteresisPolicy",
    "JobState",
    "Observation",
    "ObservedEvent",
    "OnDemandPlan",
    "OnDemandPolicy",
    "OptimalPolicy",
    "OptionInfo",
    "PauseComponents",
    "Plan",
    "Policy",
    "PolicyBase",
    "ZoneView",
    "PolicyConfigError",
    "PolicyInfo",
    "PolicyLoadError",
    "PricePolicy",
    "RecedingPolicy",
    "clamp",
    "deadline_feasible",
    "describe_policies",
    "get_policy_class",
    "is_oracle",
    "job_plan",
    "make_policy",
    "oracle_names",
    "policy_names",
    "register",
    "UniformProgressPolicy",
]
