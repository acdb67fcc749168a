"""One row of a job's timeline: :class:`TimelineRow`, what ``timeline.parquet`` holds.

Its own module so that the loop (:mod:`.loop`), which records the rows, and the shells
that write them share the one type.  Standard library only.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TimelineRow"]


class TimelineRow(NamedTuple):
    """The world at one moment (trace seconds), for ``timeline.parquet``.

    A named tuple rather than a frozen dataclass: the simulator makes one per turn,
    and a tuple is several times cheaper to build.

    Attributes:
        time_s: trace time.
        spot_available: spot nodes available.
        spot_held: spot nodes paid for (starting ones included).
        on_demand_held: on-demand nodes paid for.
        group_nodes: nodes in the training group.
        price_per_hour: spot price.
        progress: fraction of the target done.
        state: the job's state.
        step: steps committed (executor; 0 in the simulator).
    """

    time_s: float
    spot_available: int
    spot_held: int
    on_demand_held: int
    group_nodes: int
    price_per_hour: float
    progress: float
    state: str
    step: int = 0
