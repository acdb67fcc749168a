"""Cluster policies: how a shared cluster's GPUs are divided among elastic jobs.

Standard library only, pure like the job policies: ``decide(ClusterObservation) ->
ClusterDecision``.  Importing this package registers the built-ins in the cluster
registry (:data:`elasim.policies.registry.CLUSTER_KIND`; plug-ins through the
``elasim.cluster_policies`` entry-point group or ``file.py:Class``).
"""

from __future__ import annotations

from .base import (
    ClusterDecision,
    ClusterDecisionRecord,
    ClusterJobView,
    ClusterObservation,
    ClusterPolicy,
    ClusterPolicyBase,
    JobSpeed,
    JobViews,
    Placement,
    placement_gpus,
    placement_nodes,
)
from .fifo import FifoPolicy
from .optimus import OptimusPolicy
from .place import place
from .pollux import PolluxPolicy
from .srtf import SrtfPolicy
from .tiresias import TiresiasPolicy

__all__ = [
    "ClusterDecision",
    "ClusterDecisionRecord",
    "ClusterJobView",
    "ClusterObservation",
    "ClusterPolicy",
    "ClusterPolicyBase",
    "FifoPolicy",
    "OptimusPolicy",
    "PolluxPolicy",
    "SrtfPolicy",
    "TiresiasPolicy",
    "JobSpeed",
    "JobViews",
    "Placement",
    "place",
    "placement_gpus",
    "placement_nodes",
]
