"""``hysteresis``: scale down at once, scale up only when it pays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ._common import (
    HOLD_NOTHING,
    TIME_EPS_S,
    best_goodput_count,
    check_float,
    usable_spot,
    wake_after,
)
from .base import Decision, Observation, PolicyBase
from .registry import register


def breakeven_dwell_s(rescale_cost_s: float, goodput_now: float, goodput_target: float) -> float:
    """How long extra capacity must last for a scale-up (and the later scale-down) to pay.

    Going from goodput ``g_c`` to ``g_t > g_c`` costs a pause of ``C`` seconds now and,
    when the extra nodes vanish again, another pause of ``C`` (the forced scale-down
    that would not have happened otherwise).  If the extra capacity lasts ``T``
    seconds, scaling gains ``g_t (T - C) - g_c (T + C)`` effective samples, which is
    positive when::

        T > T* = C * (g_t + g_c) / (g_t - g_c)

    Returns ``inf`` when the target is no faster, 0 when nothing runs now.
    """
    if goodput_target <= goodput_now:
        return float("inf")
    if goodput_now <= 0.0:
        return 0.0
    return rescale_cost_s * (goodput_target + goodput_now) / (goodput_target - goodput_now)


@register
class HysteresisPolicy(PolicyBase):
    """Scale down at once; scale up only after extra capacity has lasted long enough.

    Greedy elasticity pays a rescale for every short-lived blip of spot capacity.
    This policy treats a scale-up as a ski-rental problem: the job does not know
    how long the extra nodes will stay, so it "rents" (keeps its current size)
    until the gain it has forgone equals the price of "buying" (rescaling).

    With goodput ``g_c`` now, ``g_t`` on the best larger node count that is
    available, and ``C = obs.rescale_cost_s`` per planned membership change, the
    round trip (scale up now, forced down when the capacity goes) pays for itself
    if the capacity lasts longer than ``T* = C (g_t + g_c) / (g_t - g_c)``
    (see :func:`breakeven_dwell_s`).  The policy scales up once extra capacity has
    been seen *continuously* for::

        dwell_s = payback_factor * T*

    ``payback_factor = 1`` is the deterministic ski-rental rule, which never loses
    more than twice what an oracle that knew the capacity's lifetime would.  The
    target is re-evaluated at every decision (more or less extra capacity changes
    ``g_t``), but the clock only restarts when the extra capacity disappears.
    While waiting, the decision carries ``wake_after_s`` so that the driver asks
    again exactly when the dwell will be satisfied.

    Scale-downs are never delayed: losing capacity is forced by the provider, and
    the new size is the best one that fits.  A job that is not running (fewer than
    ``min_nodes`` held) has ``g_c = 0`` and starts at once.  Spot only.

    State: the time at which the current stretch of extra capacity was first seen.
    """

    name: ClassVar[str] = "hysteresis"

    @dataclass(frozen=True)
    class Config:
        """Options of the ``hysteresis`` policy.

        Attributes:
            payback_factor: multiplies the break-even dwell ``T*``; above 1 waits
                longer (fewer, surer scale-ups), below 1 is more eager, 0 is greedy.
        """

        payback_factor: float = 1.0

        def __post_init__(self) -> None:
            check_float("payback_factor", self.payback_factor)

    config: Config

    def __init__(self, config: HysteresisPolicy.Config | None = None) -> None:
        super().__init__(config)
        self._extra_since_s: float | None = None

    def required_dwell_s(self, obs: Observation, current: int, target: int) -> float:
        """The dwell before scaling from ``current`` to ``target`` nodes."""
        dwell = breakeven_dwell_s(obs.rescale_cost_s, obs.goodput(current), obs.goodput(target))
        if self.config.payback_factor == 0.0:
            return 0.0  # greedy, even if the cost estimate is infinite (0 * inf is NaN)
        return self.config.payback_factor * dwell

    def decide(self, obs: Observation) -> Decision:
        """Follow capacity down at once; follow it up after the break-even dwell."""
        available = usable_spot(obs)
        if available < obs.min_nodes:
            self._extra_since_s = None
            return HOLD_NOTHING
        held = obs.spot_held
        if held < obs.min_nodes or held > available:
            # Not running, or losing nodes anyway: a rescale happens regardless, so
            # take the best size that fits now.
            self._extra_since_s = None
            best = best_goodput_count(obs, obs.min_nodes, available)
            assert best is not None
            return Decision(best, 0, None)
        target = best_goodput_count(obs, held + 1, available)
        if target is None or obs.goodput(target) <= obs.goodput(held):
            self._extra_since_s = None
            return Decision(held, 0, None)
        if self._extra_since_s is None:
            self._extra_since_s = obs.now_s
        dwell_s = self.required_dwell_s(obs, held, target)
        remaining_s = self._extra_since_s + dwell_s - obs.now_s
        if remaining_s <= TIME_EPS_S:
            self._extra_since_s = None
            return Decision(target, 0, None)
        return Decision(held, 0, wake_after(remaining_s))
