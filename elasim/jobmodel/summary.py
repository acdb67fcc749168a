"""One typed summary for a simulated and a real run (``summary.json``).

:class:`RunSummary` holds the fields both environments report, typed once; the
executor's summary adds what only a real run has.  Hour figures are *trace* hours on
both sides (the executor's real seconds times ``--time-scale``), so a simulation and a
replay of the same trace window compare field by field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from elasim.policies import deadline_feasible

from .loop import JobLoop

__all__ = ["RunSummary", "deadline_met", "mean_nodes", "summarize"]

_EPS = 1e-9


@dataclass(frozen=True)
class RunSummary:
    """What one run of the job found.

    Attributes:
        completed: whether the job reached its target.
        completion_time_h: time to reach the target (None if not completed).
        cost_usd: spot plus on-demand spend.
        spot_cost_usd: spot spend.
        on_demand_cost_usd: on-demand spend.
        spot_node_hours: spot node-hours paid for (booting / starting nodes included).
        on_demand_node_hours: on-demand node-hours paid for.
        mean_nodes: time-averaged nodes paid for.
        rescales: group re-formations after the first start (rows of ``events``).
        preemptions: capacity drops that took at least one member (rows of ``events``).
        checkpoints: checkpoints written (the ``checkpoint`` rows of ``events``).
        lost_work_h: job hours whose work was thrown away.
        rescale_overhead_h: time spent forming groups (including waiting for boots).
        checkpoint_overhead_h: time spent writing checkpoints.
        idle_h: time holding no running group and not acquiring one.
        running_h: time training (including work later lost); ``running_h +
            rescale_overhead_h + checkpoint_overhead_h + idle_h == sim_time_h``.
        convergence_cost_h: running time whose samples the gradient-noise-scale model
            discounts (extra time caused by large global batches).
        convergence_cost_samples: the matching extra raw samples.
        raw_samples: samples processed (including later-lost ones).
        deadline_met: None without a deadline.
        deadline_feasible: whether the deadline could be met at all, with ``max_nodes``
            nodes from the start and nothing going wrong (None without a deadline);
            False means no policy could have met it (see
            :func:`elasim.policies.deadline_feasible`).
        loop_turns: turns of the job loop (the same loop on both sides).
        sim_time_h: trace time at the end of the run.
    """

    completed: bool
    completion_time_h: float | None
    cost_usd: float
    spot_cost_usd: float
    on_demand_cost_usd: float
    spot_node_hours: float
    on_demand_node_hours: float
    mean_nodes: float
    rescales: int
    preemptions: int
    checkpoints: int
    lost_work_h: float
    rescale_overhead_h: float
    checkpoint_overhead_h: float
    idle_h: float
    running_h: float
    convergence_cost_h: float
    convergence_cost_samples: float
    raw_samples: float
    deadline_met: bool | None
    deadline_feasible: bool | None
    loop_turns: int
    sim_time_h: float

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The summary's keys in order (the ``--json`` keys too)."""
        return tuple(f.name for f in fields(RunSummary))

    def summary_fields(self) -> dict[str, Any]:
        """The shared fields as a dict, floats rounded so equal runs give equal bytes."""
        out: dict[str, Any] = {}
        for key in RunSummary.keys():
            value = getattr(self, key)
            out[key] = round(value, 9) if isinstance(value, float) else value
        return out


def mean_nodes(node_s: float, end_s: float) -> float:
    """Time-averaged nodes paid for: node-time over the run's time (0 for no time)."""
    return node_s / end_s if end_s > 0 else 0.0


def deadline_met(done_s: float | None, deadline_s: float | None) -> bool | None:
    """Whether a job that finished at ``done_s`` (None: not) met ``deadline_s`` (None: none)."""
    if deadline_s is None:
        return None
    return done_s is not None and done_s <= deadline_s + _EPS


def summarize(loop: JobLoop, end_s: float) -> dict[str, Any]:
    """The shared summary fields of a finished loop, as keyword arguments.

    Both shells build their typed result from this, so the shared fields are computed
    in exactly one place.
    """
    books = loop.books
    done_s = loop.done_s
    completed = done_s is not None
    deadline = loop.rules.deadline_s
    node_s = books.spot_node_s + books.on_demand_node_s
    return {
        "completed": completed,
        "completion_time_h": done_s / 3600.0 if done_s is not None else None,
        "cost_usd": books.spot_cost_usd + books.on_demand_cost_usd,
        "spot_cost_usd": books.spot_cost_usd,
        "on_demand_cost_usd": books.on_demand_cost_usd,
        "spot_node_hours": books.spot_node_s / 3600.0,
        "on_demand_node_hours": books.on_demand_node_s / 3600.0,
        "mean_nodes": mean_nodes(node_s, end_s),
        "rescales": books.rescales,
        "preemptions": books.preemptions,
        "checkpoints": books.checkpoints,
        "lost_work_h": books.lost_s / 3600.0,
        "rescale_overhead_h": books.rescale_s / 3600.0,
        "checkpoint_overhead_h": books.checkpoint_s / 3600.0,
        "idle_h": books.idle_s / 3600.0,
        "running_h": books.running_s / 3600.0,
        "convergence_cost_h": books.convergence_s / 3600.0,
        "convergence_cost_samples": books.convergence_samples,
        "raw_samples": books.raw_samples,
        "deadline_met": deadline_met(done_s, deadline),
        "deadline_feasible": None
        if deadline is None or loop.first_observation is None
        else deadline_feasible(loop.first_observation),
        "loop_turns": loop.turns,
        "sim_time_h": end_s / 3600.0,
    }
