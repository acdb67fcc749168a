"""The one palette: a fixed colour per policy, the same in every plot.

Why a module of its own: the timeline (:mod:`elasim.output`, below the simulator) and
the analysis figures (:mod:`elasim.analysis.plots`, above it) colour policies alike,
and neither may import the other.  :func:`elasim.analysis.plots.policy_colors` is this
function, re-exported.  Grey is kept out of it: grey is for neutral marks (spot
availability, progress, "other").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["policy_color", "policy_colors"]


def policy_colors(policies: Iterable[str] | None = None) -> dict[str, Any]:
    """One fixed colour per policy, the same in every plot.

    Registered policies get their colour from their position in
    :func:`elasim.policies.policy_names` (so ``greedy`` has the same colour in every
    notebook, whatever subset a figure shows); others follow.
    """
    from matplotlib import colormaps

    from elasim.policies import policy_names

    # tab10 less its grey: grey is for neutral marks (availability, "other"), so no
    # policy may wear it
    palette = [c for i, c in enumerate(colormaps["tab10"].colors) if i != 7]
    names = list(policy_names(include_oracles=True))
    for name in policies or ():
        if name not in names:
            names.append(name)
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def policy_color(policy: str) -> Any:
    """The colour of one policy (:func:`policy_colors`)."""
    return policy_colors([policy])[policy]
