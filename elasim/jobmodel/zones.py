"""A job that may run in one of several zones: the zones' replays, and where the job is.

The job's life is the one :class:`~.loop.JobLoop`'s; a job in several zones is that
loop given a :class:`ZoneMoves` (``zones=``), which it consults where zones matter.

Semantics (the issue leaves them to us; SkyPilot's managed jobs work the same way):

* The job runs in **one zone at a time**.  Each zone has its own capacity and price
  trace, replayed from the same start offset (the zones' traces share a clock).  The
  on-demand price is one for every zone: on-demand nodes are obtainable anywhere.
* A policy sees every zone (:attr:`~elasim.policies.Observation.zones`) and the
  current one (``zone``); ``spot_available`` and ``spot_price_per_hour`` are the
  current zone's, so a policy that knows nothing of zones stays where it starts.
* A decision that names another zone (``Decision.zone``) is a **move**: every node is
  released at once (a planned change: a restart-mode job writes its checkpoint
  first), the checkpoint travels for ``move_s`` (its size over the transfer
  bandwidth, :func:`zone_move_s`) with no node held and nothing billed, and then the
  job starts from nothing in the new zone (the resume pause: boot, group, checkpoint
  load, warm-up), the policy asked again on arrival.  A restart plus the transfer.
* Capacity changes of the other zones are decision points too (a policy may want to
  move when capacity appears elsewhere); their notices concern no node the job holds.

Standard library only, like the rest of the job model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from elasim.policies import Decision, Observation, ZoneView

from .actions import EPS_S
from .replay import CapacityReplay, ReplayItem

__all__ = ["ZoneMoves", "ZoneReplay", "zone_move_s"]

#: Gigabytes to gigabits.
_BITS_PER_BYTE = 8.0


def zone_move_s(checkpoint_size_gb: float, transfer_gbps: float) -> float:
    """Seconds to move a checkpoint of ``checkpoint_size_gb`` at ``transfer_gbps``.

    Raises:
        ValueError: a negative size or a bandwidth that is not > 0.
    """
    if not (checkpoint_size_gb >= 0 and math.isfinite(checkpoint_size_gb)):
        raise ValueError(f"--checkpoint-size-gb must be >= 0, got {checkpoint_size_gb!r}")
    if not (transfer_gbps > 0 and math.isfinite(transfer_gbps)):
        raise ValueError(f"--transfer-gbps must be > 0, got {transfer_gbps!r}")
    return checkpoint_size_gb * _BITS_PER_BYTE / transfer_gbps


class ZoneReplay:
    """Every zone's :class:`~.replay.CapacityReplay`, read by the loop as one replay.

    The current zone's items pass through unchanged; another zone's capacity change
    comes as a change of the current zone to what it already is (nothing taken,
    a decision due), and its notices are dropped (no node of the job is there).
    """

    def __init__(self, names: Sequence[str], replays: Sequence[CapacityReplay]) -> None:
        if len(names) != len(replays) or len(replays) < 2:
            raise ValueError("a zone replay needs two or more zones, each named")
        self.names = tuple(names)
        self._replays = list(replays)
        self.zone = 0
        #: ``(available, price)`` of each zone as of the items popped so far
        self.state = [replay.initial for replay in self._replays]
        self.initial = self.state[0]
        self.prior_mtbf_s = self._replays[0].prior_mtbf_s

    @classmethod
    def from_traces(cls, traces: Sequence[Any], **kwargs: Any) -> ZoneReplay:
        """One replay per trace (each a :meth:`CapacityReplay.from_trace`), named after it."""
        replays = [CapacityReplay.from_trace(trace, **kwargs) for trace in traces]
        return cls([str(trace.name) for trace in traces], replays)

    def set_zone(self, zone: int) -> tuple[int, float]:
        """Make ``zone`` the current one; returns its ``(available, price)`` now."""
        self.zone = zone
        return self.state[zone]

    def next_time_s(self) -> float:
        """Job time of the next notice or change in any zone (``inf``: none)."""
        return min(replay.next_time_s() for replay in self._replays)

    def pop_due(self, now_s: float) -> list[ReplayItem]:
        """Every zone's items due by ``now_s``, in time order, as the current zone's."""
        due = [
            (item.time_s, zone, order, item)
            for zone, replay in enumerate(self._replays)
            for order, item in enumerate(replay.pop_due(now_s))
        ]
        due.sort(key=lambda entry: entry[:3])
        out: list[ReplayItem] = []
        for time_s, zone, _, item in due:
            if not item.notice:
                self.state[zone] = (item.available, item.price_per_hour)
            if zone == self.zone:
                out.append(item)
            elif not item.notice:
                available, price = self.state[self.zone]
                out.append(ReplayItem(time_s, False, available, price))
        return out


class ZoneMoves:
    """Where a job in several zones is, and its moves: the zones part of its one loop.

    A :class:`~.loop.JobLoop` given one (``zones=``) consults it at the few points
    where zones matter, and keeps its own state itself (the target, the capacity, the
    leaves and caps, the actuator):

    * :meth:`observed`: the observation's zone fields;
    * :meth:`moving` and :meth:`depart`: a decision that names another zone departs;
    * :meth:`arrive`: while the checkpoint travels nothing is held; on arrival the
      actuator is told (:meth:`~.actuator.Actuator.moved`) and the policy asked again;
    * :meth:`next_s`: the arrival is a wake-up;
    * :meth:`details`: what a summary states about the zones.

    Args:
        replay: the zones' replay, the one the loop reads.
        move_s: what moving the checkpoint to another zone takes (trace seconds).
    """

    def __init__(self, replay: ZoneReplay, move_s: float) -> None:
        self.replay = replay
        self.move_s = float(move_s)
        self.arrive_s: float | None = None  # while moving: when the checkpoint arrives
        #: every move: ``(time_s, from_zone, to_zone)``
        self.moves: list[tuple[float, int, int]] = []
        #: when each move's checkpoint arrived (the clock's reading: a real run's late
        #: turn shows here; None: redirected on the way), one per move but the last
        #: while it travels
        self.arrivals_s: list[float | None] = []

    @property
    def zone(self) -> int:
        """The current zone (the one moved to, while the checkpoint travels)."""
        return self.replay.zone

    def observed(self, obs: Observation, available: int, price: float) -> Observation:
        """``obs`` with every zone, the current one (``available`` at ``price``), the move time."""
        state = list(self.replay.state)
        state[self.zone] = (available, price)
        views = tuple(
            ZoneView(name, available, price)
            for name, (available, price) in zip(self.replay.names, state, strict=True)
        )
        return dataclasses.replace(obs, zones=views, zone=self.zone, zone_move_s=self.move_s)

    def moving(self, target: Decision) -> bool:
        """Whether ``target`` names another zone (clamp leaves only another), or one travels."""
        return target.zone is not None or self.arrive_s is not None

    def depart(self, zone: int, now_s: float) -> tuple[int, float]:
        """Leave for ``zone`` at ``now_s``; returns its ``(available, price)`` now."""
        if self.arrive_s is not None:  # sent elsewhere before the last move arrived
            self.arrivals_s.append(None)
        self.moves.append((now_s, self.zone, zone))
        self.arrive_s = now_s + self.move_s
        return self.replay.set_zone(zone)

    def arrive(self, now_s: float) -> bool:
        """Whether the checkpoint has arrived by ``now_s`` (then the move is over)."""
        if self.arrive_s is None or now_s < self.arrive_s - EPS_S:
            return False
        self.arrive_s = None
        self.arrivals_s.append(now_s)
        return True

    def next_s(self, next_s: float) -> float:
        """The loop's next work ``next_s``, or the arrival if that comes first."""
        arrive_s = self.arrive_s
        return arrive_s if arrive_s is not None and arrive_s < next_s else next_s

    def details(self) -> dict[str, Any]:
        """What a summary states about the zones: their names, the moves, the last zone.

        Each move is ``[time_s, from, to]``; ``move_transfer_s`` holds each one's
        transfer as the loop's clock saw it, departure to arrival (None while the
        checkpoint travels), so a real run's moves can be compared with a
        simulation's (:mod:`elasim.compare`).
        """
        names = self.replay.names
        transfers: list[float | None] = [
            None if a is None else a - t
            for (t, _, _), a in zip(self.moves, self.arrivals_s, strict=False)
        ]
        transfers += [None] * (len(self.moves) - len(transfers))
        return {
            "zones": list(names),
            "zone_moves": len(self.moves),
            "zone_move_h": len(self.moves) * self.move_s / 3600.0,
            "final_zone": names[self.zone],
            "moves": [[t, names[a], names[b]] for t, a, b in self.moves],
            "move_transfer_s": transfers,
        }
