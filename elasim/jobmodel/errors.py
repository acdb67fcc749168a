"""The error a policy's mistake becomes: one line in the user's file, not a traceback.

Apart from :mod:`.loop` because both loops raise it (the single job's and cluster
mode's), and it is about the user's code, not about the job's life.
"""

from __future__ import annotations

import inspect
import traceback

from elasim.policies import Policy

__all__ = ["PolicyError"]


class PolicyError(ValueError):
    """A policy raised, or answered something that is not a ``Decision``.

    ``str()`` is one line naming the policy and the file and line where it failed,
    so that a user's plugin error reads as an error in the user's file, not as a
    traceback through the simulator.
    """


def _policy_error(policy: Policy, exc: BaseException | None, detail: str) -> PolicyError:
    name = getattr(policy, "name", "") or type(policy).__name__
    where = ""
    try:
        source = inspect.getsourcefile(type(policy))
    except TypeError:
        source = None
    frames = traceback.extract_tb(exc.__traceback__) if exc is not None else []
    mine = [f for f in frames if source and f.filename == source] or frames[-1:]
    if mine:
        where = f" at {mine[-1].filename}:{mine[-1].lineno}"
    elif source:
        try:
            where = f" at {source}:{inspect.getsourcelines(type(policy).decide)[1]}"
        except (OSError, TypeError):
            where = f" in {source}"
    return PolicyError(f"policy {name!r}{where}: {detail}")
