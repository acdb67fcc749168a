"""The real executor: the simulator's policies drive elastic ``torch.distributed`` training.

``run_trace(RunConfig(...))`` replays a capacity trace in compressed time on real
worker processes (gloo on CPU, NCCL where CUDA is present), applies the policy's
decisions by spawning, re-forming and killing workers, measures every rescale, and
returns a :class:`RunResult` that :func:`write_run` writes in the simulator's schema.

Modules:

* :mod:`.api`: the user API (:class:`ElasticJob`, :class:`TrainState`).
* :mod:`.digits`: the default job (MLP on scikit-learn's digits, target 0.95).
* :mod:`.sampler`: the elastic, exactly-once sampler.
* :mod:`.worker`: the worker process (warm standby, re-formation), with its step loop
  (:mod:`.training`) and state broadcast (:mod:`.statesync`).
* :mod:`.group`: worker processes and generations (``inplace`` / ``restart``),
  composed of a pool (:mod:`.pool`, with :mod:`.workertable` and :mod:`.reports`),
  the pause accounting (:mod:`.pauses`) and one mechanism (:mod:`.inplace` or
  :mod:`.restart`); its settings are :mod:`.settings`, processes are started by
  :mod:`.launchers`, and what the group reports is in :mod:`.records`.
* :mod:`.controller`: the observe -> decide -> apply loop with an injected clock.
* :mod:`.checkpoint`: atomic checkpoints loaded with ``weights_only=True``.
* :mod:`.agent`: ``elasim agent``, worker slots on other hosts.
* :mod:`.script`: a user's unmodified torchrun script as the worker group
  (``elasim run --script``); :mod:`.report`: ``step_done()``, the one optional line
  such a script adds.
* :mod:`.config`: :class:`RunConfig`, the job's spec and what a real run adds.
* :mod:`.run`: ``run_trace``, and :mod:`.run_output`: ``write_run`` (the ``run``
  and ``agent`` commands are in :mod:`elasim.cli.run` and :mod:`elasim.cli.agent`).

Names are imported lazily, so ``import elasim.executor`` (and the CLI module) does not
import torch until something that needs it is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Clock",
    "Controller",
    "ControllerConfig",
    "ElasticJob",
    "ElasticSampler",
    "FakeClock",
    "FakeWorkerGroup",
    "GroupSettings",
    "JobData",
    "LocalLauncher",
    "ProcessWorkerGroup",
    "RealClock",
    "RescaleMode",
    "RunConfig",
    "RunResult",
    "BatchPlan",
    "TrainState",
    "batch_plan",
    "digits_job",
    "load_checkpoint",
    "require_torch",
    "run_trace",
    "save_checkpoint",
    "step_done",
    "write_run",
]

_WHERE = {
    "Clock": ".controller",
    "Controller": ".controller",
    "ControllerConfig": ".controller",
    "FakeClock": ".controller",
    "RealClock": ".controller",
    "ElasticJob": ".api",
    "JobData": ".api",
    "TrainState": ".api",
    "ElasticSampler": ".sampler",
    "FakeWorkerGroup": ".fakes",
    "GroupSettings": ".group",
    "LocalLauncher": ".group",
    "ProcessWorkerGroup": ".group",
    "RescaleMode": ".group",
    "RunConfig": ".config",
    "RunResult": ".run",
    "run_trace": ".run",
    "write_run": ".run_output",
    "digits_job": ".digits",
    "load_checkpoint": ".checkpoint",
    "save_checkpoint": ".checkpoint",
    "step_done": ".report",
    "batch_plan": ".report",
    "BatchPlan": ".report",
}


def require_torch() -> None:
    """Fail early, in one line, when torch (the ``executor`` extra) is not installed.

    The executor's modules import torch only where they need it, so a missing torch
    would otherwise surface deep inside a run (starting the worker group), as a
    traceback.  The commands that run workers call this first.

    Raises:
        ImportError: torch is missing; the message says how to install it.
    """
    try:
        importlib.import_module("torch.distributed")
    except ImportError as exc:
        raise ImportError(
            f"this needs torch, the executor extra ({exc}); install a torch build, e.g. "
            "`pip install torch==2.13.0`, then `pip install '.[executor]'` in the elasim checkout"
        ) from None


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
