"""Small helpers shared by the built-in policies (private; standard library only).

Two kinds of helper live here:

* ``check_*``: the validation used by every built-in ``Config.__post_init__``.  A
  dataclass does not check the types of its fields, and configs are also built by
  hand in notebooks, so each field is checked for its type *and* its range, and a
  failure is a ``ValueError`` whose one-line message names the field.
* decision helpers that several policies need: how many spot nodes are usable, the
  cheapest spot / on-demand mix for a node count, the best node count in a range.

Every helper is O(max_nodes) at most: ``decide`` runs once per capacity change, so it
sits on the simulator's hot path.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from .base import Decision, Observation

#: Tolerance, in seconds, when comparing environment times.  A wake-up scheduled for
#: "when the dwell is over" arrives a few ulps early or late after float arithmetic;
#: without a tolerance the policy would ask to be woken again a femtosecond later.
TIME_EPS_S = 1e-6

#: The decision "hold nothing and wait for a change".
HOLD_NOTHING = Decision(0, 0, None)


# --------------------------------------------------------------------------- checks


def check_bool(name: str, value: object) -> None:
    """Reject anything but a real ``bool`` (``1`` or ``"yes"`` are mistakes here)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")


def check_int(name: str, value: object, *, minimum: int, optional: bool = False) -> None:
    """Reject non-ints (bools included) and ints below ``minimum``; None if ``optional``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an int or None" if optional else "an int"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def check_float(
    name: str,
    value: object,
    *,
    minimum: float = 0.0,
    strict: bool = False,
    optional: bool = False,
) -> None:
    """Reject non-numbers, NaN, infinities and values below (or at, if ``strict``) ``minimum``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "a number or None" if optional else "a number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if value < minimum or (strict and value == minimum):
        relation = ">" if strict else ">="
        raise ValueError(f"{name} must be {relation} {minimum:g}, got {value!r}")


def check_choice(name: str, value: object, choices: Collection[str]) -> None:
    """Reject a value that is not one of ``choices``."""
    if value not in choices:
        listed = ", ".join(repr(c) for c in sorted(choices))
        raise ValueError(f"{name} must be one of {listed}, got {value!r}")


# ------------------------------------------------------------------------ decisions


def usable_spot(obs: Observation) -> int:
    """Spot nodes the job could hold now: what is available, capped at ``max_nodes``."""
    return min(obs.spot_available, obs.max_nodes)


def all_usable_spot(obs: Observation) -> Decision:
    """As many spot nodes as usable, or nothing when that is too few to run."""
    spot = usable_spot(obs)
    if spot < obs.min_nodes:
        return HOLD_NOTHING
    return Decision(spot, 0, None)


def best_goodput_count(obs: Observation, low: int, high: int) -> int | None:
    """The node count in ``[low, high]`` with the most goodput; ties go to fewer nodes.

    Fewer nodes win ties because they cost less and leave less to lose to a
    preemption.  Returns None when the range is empty.
    """
    best_n: int | None = None
    best_g = -math.inf
    for n in range(max(low, 0), high + 1):
        g = obs.goodput(n)
        if g > best_g:
            best_n, best_g = n, g
    return best_n


def cheapest_mix(obs: Observation, nodes: int, spot_limit: int) -> tuple[int, int]:
    """Split ``nodes`` into (spot, on-demand), filling from the cheaper market first.

    Spot is limited to ``spot_limit``; on-demand is always obtainable.  Spot wins a
    tie in price because the caller asked for spot when it is no dearer.
    """
    if obs.spot_price_per_hour <= obs.on_demand_price_per_hour:
        spot = min(nodes, spot_limit)
        return spot, nodes - spot
    return 0, nodes


def cost_per_hour(obs: Observation, spot: int, on_demand: int) -> float:
    """USD per hour of holding ``spot`` spot and ``on_demand`` on-demand nodes now.

    A market with no nodes in the mix adds nothing even if its price is infinite
    (the simulator reports an infinite on-demand price when on-demand is disabled;
    ``0 * inf`` would be NaN).
    """
    cost = 0.0
    if spot:
        cost += spot * obs.spot_price_per_hour
    if on_demand:
        cost += on_demand * obs.on_demand_price_per_hour
    return cost


def wake_after(seconds: float) -> float | None:
    """A legal ``Decision.wake_after_s``: None unless ``seconds`` is finite and > 0."""
    if math.isfinite(seconds) and seconds > 0.0:
        return seconds
    return None
