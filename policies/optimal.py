"""``optimal``: the offline optimum as a policy, an *oracle* that replays a precomputed plan."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import ClassVar

from ._common import TIME_EPS_S, check_float, wake_after
from ._ondemand import fastest_count, flat_out, start_pause_s, training_rate
from .base import Decision, Observation, PolicyBase
from .registry import register

__all__ = ["OptimalPolicy", "Plan"]

#: Within the guard's reach, how often the replay checks that it is not behind.
_RECHECK_S = 60.0


@dataclass(frozen=True)
class Plan:
    """A schedule of node counts over the job's time, fixed before the run.

    Row ``i`` holds from ``start_s[i]`` (job seconds) to the next row's start.  A
    count above what can be had is clamped as every decision is (``clamp``), so
    ``Decision(max_nodes, max_nodes)`` means "every usable spot node, on-demand
    nodes for the rest".

    Attributes:
        start_s: row starts, increasing, the first 0.
        spot_nodes: spot nodes to hold in each row.
        on_demand_nodes: on-demand nodes to hold in each row.
        expected_progress: the planner's progress (fraction of the target) at each
            row's start, for reports; empty when unknown.
    """

    start_s: tuple[float, ...]
    spot_nodes: tuple[int, ...]
    on_demand_nodes: tuple[int, ...]
    expected_progress: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        rows = len(self.start_s)
        if rows == 0 or self.start_s[0] != 0.0:
            raise ValueError("a plan needs at least one row, starting at 0")
        if len(self.spot_nodes) != rows or len(self.on_demand_nodes) != rows:
            raise ValueError("start_s, spot_nodes and on_demand_nodes must have equal lengths")
        if self.expected_progress and len(self.expected_progress) != rows:
            raise ValueError("expected_progress must be empty or one value per row")
        if any(b <= a for a, b in zip(self.start_s, self.start_s[1:], strict=False)):
            raise ValueError("plan rows must start at increasing times")
        for count in (*self.spot_nodes, *self.on_demand_nodes):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"node counts must be ints >= 0, got {count!r}")

    def row_at(self, now_s: float) -> int:
        """The row in force at ``now_s`` (a wake-up an ulp early still gets its row)."""
        return max(bisect.bisect_right(self.start_s, now_s + TIME_EPS_S) - 1, 0)


@register
class OptimalPolicy(PolicyBase):
    """Offline optimum (oracle): the cheapest plan for this trace, known in advance.

    Not a policy anyone can run live: it needs the whole trace before the start.
    ``elasim.optimal`` computes the plan, the cheapest schedule of spot and
    on-demand nodes that meets the deadline under the same job model (pauses,
    boots, checkpoints, preemptions), and :func:`elasim.sim.simulate` hands it to
    this class, which replays it through the normal simulator.  So the optimum's
    cost is measured by the same ``simulate()`` as every other policy's.  It is
    the floor of the ``gap_closed`` column of the reports.

    The replay follows the plan row by row.  One safety net: when the job is behind
    its plan (the planner's expected progress) and the fastest node count could
    only just finish with ``safety_margin_s`` and one start to spare, or when any
    job could only just finish, it runs that fastest count until done: the on-demand
    nodes it holds, then every usable spot node, then on-demand nodes for the rest.

    ``oracle = True`` keeps it out of live runs: ``policy_names()`` lists it only
    when asked for oracles, ``elasim run`` refuses it, sweeps and reports add it.
    """

    name: ClassVar[str] = "optimal"
    oracle: ClassVar[bool] = True

    @dataclass(frozen=True)
    class Config:
        """Options of the ``optimal`` oracle (they shape the planner, not the replay).

        Attributes:
            step_s: the planner's decision grid, seconds: it may change the node
                counts at every multiple of it and at every change of the trace.
            safety_margin_s: plan to finish this long before the deadline, so that
                the replay's small departures from the plan (when checkpoints fall,
                how a preemption lands) do not miss it; a replay that falls behind
                anyway runs flat out at the end (see the class docstring).
        """

        step_s: float = 300.0
        safety_margin_s: float = 60.0

        def __post_init__(self) -> None:
            check_float("step_s", self.step_s, minimum=1.0)
            check_float("safety_margin_s", self.safety_margin_s)

    config: Config

    def __init__(self, config: Config | None = None, plan: Plan | None = None) -> None:
        super().__init__(config)
        if plan is not None and not isinstance(plan, Plan):
            raise TypeError(f"plan must be a Plan, got {type(plan).__name__}")
        self.plan = plan

    def with_plan(self, plan: Plan) -> OptimalPolicy:
        """A fresh oracle with the same options that replays ``plan``."""
        return type(self)(self.config, plan)

    def decide(self, obs: Observation) -> Decision:
        """The plan's row for now; everything usable when only that still makes it."""
        plan = self.plan
        if plan is None:
            raise ValueError(
                "'optimal' is an oracle: it replays a plan computed from the whole trace; "
                "run it through elasim.sim.simulate (simulate, sweep), not live"
            )
        if obs.remaining_samples <= 0.0:
            return Decision(0, 0, None)
        row = plan.row_at(obs.now_s)
        slack = self._slack_s(obs)
        guard = self.config.safety_margin_s + start_pause_s(obs)
        behind = obs.progress < self.expected_progress(obs.now_s) - 1e-4
        if slack is not None and (slack <= TIME_EPS_S or (behind and slack <= guard)):
            return flat_out(obs)
        wake = math.inf
        if row + 1 < len(plan.start_s):
            wake = plan.start_s[row + 1] - obs.now_s
        if slack is not None:
            # look again before the guard could be needed (a replay may fall behind)
            wake = min(wake, max(slack - guard, _RECHECK_S))
        return Decision(plan.spot_nodes[row], plan.on_demand_nodes[row], wake_after(wake))

    def expected_progress(self, now_s: float) -> float:
        """The plan's progress at ``now_s`` (0 when the plan does not say)."""
        plan = self.plan
        if plan is None or not plan.expected_progress:
            return 0.0
        row = plan.row_at(now_s)
        here = plan.expected_progress[row]
        if row + 1 >= len(plan.start_s):
            return here
        start, end = plan.start_s[row], plan.start_s[row + 1]
        share = min(max((now_s - start) / (end - start), 0.0), 1.0)
        return here + share * (plan.expected_progress[row + 1] - here)

    @staticmethod
    def _slack_s(obs: Observation) -> float | None:
        """Seconds left beyond what the fastest node count needs to finish from a start."""
        if obs.deadline_s is None:
            return None
        fastest = training_rate(obs, fastest_count(obs))
        if fastest <= 0.0:
            return None
        need = start_pause_s(obs) + obs.remaining_samples / fastest
        return obs.deadline_s - obs.now_s - need
