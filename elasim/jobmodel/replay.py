"""A capacity trace as a stream of changes and preemption notices: the one replay.

The simulator and the executor both read a spot trace through :class:`CapacityReplay`;
there is no second copy.  Assumptions (also in the README):

* A trace is a step function: from a row's ``time_s`` on, ``available`` nodes can be
  held at ``price_per_hour``.  When the job outlasts the trace, it repeats from its
  start.
* Capacity is capped at what the job can use (``cap_nodes``): a change above the cap
  is not a change the job, or its policy, needs to hear about.  Rows that change
  nothing after the cap are skipped, so they are not decision points.
* A notice for every drop is due ``notice_s`` before it (the replay knows the trace in
  advance; the policy only sees the notice).  At the same instant a notice comes before
  a capacity row.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

__all__ = ["CapacityReplay", "ReplayItem"]

_NOTICE, _ROW = 0, 1
#: The longest preemption notice accepted (a week; clouds give 30 s to 2 minutes).
MAX_NOTICE_S = 7 * 86400.0


class ReplayItem(NamedTuple):
    """One thing the trace does to the job (a named tuple: there can be very many).

    Attributes:
        time_s: when it happens (trace seconds since the job's start).
        notice: True for a preemption notice, False for a capacity (or price) change.
        available: nodes obtainable from then on (for a notice: after the drop).
        price_per_hour: spot price from then on (a notice: the current one, unused).
        drop_s: for a notice, when the drop happens.
    """

    time_s: float
    notice: bool
    available: int
    price_per_hour: float = 0.0
    drop_s: float | None = None


class CapacityReplay:
    """Replays a capacity trace from ``start_offset_s``, repeating it forever."""

    def __init__(
        self,
        time_s: Sequence[float],
        available: Sequence[int],
        price_per_hour: Sequence[float] | None,
        *,
        duration_s: float,
        start_offset_s: float = 0.0,
        notice_s: float = 0.0,
        cap_nodes: int | None = None,
        default_price_per_hour: float = 0.0,
    ) -> None:
        self._times = [float(t) for t in time_s]
        if not self._times:
            raise ValueError("a capacity trace needs at least one row")
        self.period_s = float(duration_s)
        if not 0 <= notice_s <= MAX_NOTICE_S:
            # a notice days ahead is no spot market's; an astronomical one would make
            # every drop of the repeating trace due at the start, without end
            raise ValueError(f"--notice-s must be 0 to {MAX_NOTICE_S:g} s, got {notice_s:g}")
        self.start_offset_s = float(start_offset_s) % self.period_s
        self.notice_s = float(notice_s)
        raw = [int(a) for a in available]
        cap = cap_nodes if cap_nodes is not None else max(raw)
        self._available = [min(a, cap) for a in raw]
        if price_per_hour is None:
            self._prices = [float(default_price_per_hour)] * len(self._times)
        else:
            self._prices = [float(p) for p in price_per_hour]
        drops = sum(1 for a, b in zip(self._available, self._available[1:], strict=False) if b < a)
        if self._available[-1] > self._available[0]:  # the wrap-around is a drop too
            drops += 1
        #: Mean time between capacity drops in the trace (a prior for Young/Daly).
        self.prior_mtbf_s = self.period_s / drops if drops else math.inf
        index = bisect.bisect_right(self._times, self.start_offset_s) - 1
        #: ``(available, price)`` at the job's start.
        self.initial: tuple[int, float] = (self._available[index], self._prices[index])
        self._notices = self.notice_s > 0 and drops > 0
        self._heap: list[tuple[float, int, int, float]] = []
        self._rows = self._row_iter()
        self._row_next: tuple[float, int, float] | None = next(self._rows, None)
        if len(set(zip(self._available, self._prices, strict=True))) == 1:
            self._row_next = None  # a trace that never changes: nothing will ever happen
        self._pushed = self.initial  # last (available, price) pushed as a change
        self._last_available = self.initial[0]  # last row's availability (notices)

    @classmethod
    def from_trace(cls, trace: Any, **kwargs: Any) -> CapacityReplay:
        """From an :class:`elasim.traces.CapacityTrace` (or anything shaped like one)."""
        return cls(
            trace.time_s,
            trace.available,
            trace.price_per_hour,
            duration_s=float(trace.duration_s),
            **kwargs,
        )

    def _row_iter(self) -> Iterator[tuple[float, int, float]]:
        """Rows after the start, as (job time, available, price), across repetitions.

        A trace of infinite duration does not repeat (cluster mode's capacity rows
        without a period: the last row holds forever).
        """
        times, offset = self._times, self.start_offset_s
        first = bisect.bisect_right(times, offset)
        cycle = 0
        while True:
            if cycle and math.isinf(self.period_s):
                return
            base = (cycle * self.period_s if cycle else 0.0) - offset
            for i in range(first if cycle == 0 else 0, len(times)):
                yield base + times[i], self._available[i], self._prices[i]
            cycle += 1

    def _push_next_row(self) -> None:
        assert self._row_next is not None
        t, available, price = self._row_next
        self._row_next = next(self._rows, None)
        if self._notices and available < self._last_available:
            heapq.heappush(self._heap, (max(t - self.notice_s, 0.0), _NOTICE, available, t))
        self._last_available = available
        if (available, price) != self._pushed:
            self._pushed = (available, price)
            heapq.heappush(self._heap, (t, _ROW, available, price))

    def _fill(self) -> None:
        """Push rows until the heap's head is the earliest item still to come."""
        lead = self.notice_s if self._notices else 0.0
        while self._row_next is not None and (
            not self._heap or self._row_next[0] - lead < self._heap[0][0]
        ):
            self._push_next_row()

    def next_time_s(self) -> float:
        """Job time of the next notice or change (``inf``: none)."""
        self._fill()
        return self._heap[0][0] if self._heap else math.inf

    def pop_due(self, now_s: float) -> list[ReplayItem]:
        """Every item due at or before ``now_s``, in time order (notices first at a tie)."""
        out: list[ReplayItem] = []
        self._fill()
        heap = self._heap
        limit = now_s + 1e-9 * max(1.0, abs(now_s))  # a clock that lands an ulp early
        while heap and heap[0][0] <= limit:
            t, order, available, value = heapq.heappop(heap)
            if order == _NOTICE:
                out.append(ReplayItem(t, True, available, drop_s=value))
            else:
                out.append(ReplayItem(t, False, available, value))
            self._fill()
        return out
