"""A job that may run in one of several zones: the zones' replays and the loop that moves.

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

from elasim.policies import Decision, Observation, Policy, ZoneView

from .actuator import Actuator
from .loop import _EPS, JobLoop
from .options import JobRules
from .replay import CapacityReplay, ReplayItem

__all__ = ["ZoneReplay", "ZonedJobLoop", "zone_move_s"]

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


class ZonedJobLoop(JobLoop):
    """The job loop of a job in several zones (see the module docstring).

    Args:
        policy: the scaling policy.
        actuator: the environment's side of the job.
        rules: the job's rules (trace seconds).
        replay: the zones' replay.
        move_s: what moving the checkpoint to another zone takes (trace seconds).
        **kwargs: as :class:`~.loop.JobLoop` takes them.
    """

    def __init__(
        self,
        policy: Policy,
        actuator: Actuator,
        rules: JobRules,
        *,
        replay: ZoneReplay,
        move_s: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(policy, actuator, rules, replay=replay, **kwargs)
        self.zones = replay
        self.move_s = float(move_s)
        self.zone = 0
        self._arrive_s: float | None = None  # while moving: when the checkpoint arrives
        #: every move: ``(time_s, from_zone, to_zone)``
        self.moves: list[tuple[float, int, int]] = []
        #: when each move's checkpoint arrived (the clock's reading: a real run's late
        #: turn shows here; None: redirected on the way), one per move but the last
        #: while it travels
        self.arrivals_s: list[float | None] = []

    def turn(self, now_s: float) -> float:
        """As :meth:`JobLoop.turn`; a move in progress has work at its arrival."""
        next_s = super().turn(now_s)
        if self._arrive_s is not None and not self.finished and self._arrive_s < next_s:
            return self._arrive_s
        return next_s

    def observe(self, now_s: float) -> Observation:
        """The one-zone observation, with every zone, the current one and the move time."""
        obs = super().observe(now_s)
        state = list(self.zones.state)
        state[self.zone] = (self.available, self.price)
        views = tuple(
            ZoneView(name, available, price)
            for name, (available, price) in zip(self.zones.names, state, strict=True)
        )
        return dataclasses.replace(obs, zones=views, zone=self.zone, zone_move_s=self.move_s)

    def _reconcile(self, now_s: float) -> float:
        target = self.target
        if target.zone is not None:  # clamp leaves only another zone: a move
            self.target = Decision(target.spot_nodes, target.on_demand_nodes, target.wake_after_s)
            self._depart(target.zone, now_s)
        if self._arrive_s is None:
            return super()._reconcile(now_s)
        if now_s < self._arrive_s - _EPS:  # on the way: nothing held
            self._fresh = False
            events = self.actuator.apply(0, 0, now_s, True)
            if events:
                self._took(events)
            return self._last_s if self._last_s > now_s else now_s
        self._arrive_s = None  # arrived: the policy is asked again, here
        moved = getattr(self.actuator, "moved", None)  # the model's (real workers restart)
        if moved is not None:
            moved(now_s)
        self.arrivals_s.append(now_s)
        self.decision_due = True
        return now_s

    def _depart(self, zone: int, now_s: float) -> None:
        """Leave for ``zone``: its capacity from now on, no leave or cap carried over."""
        if self._arrive_s is not None:  # sent elsewhere before the last move arrived
            self.arrivals_s.append(None)
        self.moves.append((now_s, self.zone, zone))
        self.zone = zone
        self.available, self.price = self.zones.set_zone(zone)
        self._leaves.clear()
        self._caps.clear()
        self._arrive_s = now_s + self.move_s

    def zone_details(self) -> dict[str, Any]:
        """What a summary states about the zones: their names, the moves, the last zone.

        Each move is ``[time_s, from, to]``; ``move_transfer_s`` holds each one's
        transfer as the loop's clock saw it, departure to arrival (None while the
        checkpoint travels), so a real run's moves can be compared with a
        simulation's (:mod:`elasim.compare`).
        """
        transfers: list[float | None] = [
            None if a is None else a - t
            for (t, _, _), a in zip(self.moves, self.arrivals_s, strict=False)
        ]
        transfers += [None] * (len(self.moves) - len(transfers))
        return {
            "zones": list(self.zones.names),
            "zone_moves": len(self.moves),
            "zone_move_h": len(self.moves) * self.move_s / 3600.0,
            "final_zone": self.zones.names[self.zone],
            "moves": [[t, self.zones.names[a], self.zones.names[b]] for t, a, b in self.moves],
            "move_transfer_s": transfers,
        }
