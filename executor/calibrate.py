"""``elasim calibrate``: measure this machine and write a profile the simulator can use.

A calibration is short executor runs over *synthetic* capacity schedules, every drop
a hard kill (no notice), with periodic checkpoints:

* in place: a schedule that steps the worker count up and down by one, two and three
  (:data:`INPLACE_SCHEDULE`), so the transitions a replay meets are measured rather
  than extrapolated; then one start-up run per group size, for the ``0 -> n`` start
  from warm standbys.  Cold starts of replacements overlap training here, which is
  what measures how much a starting worker slows the trainers on a shared host;
* restart: the shorter 1-2-4-2-1-2 (:data:`RESTART_SCHEDULE`), each change a few
  seconds of cold processes.

From their outputs (:func:`elasim.profile.profile_from_runs`) come the step time per
world size, the pause components per transition and mechanism, checkpoint save/load
times, and the cold starts of workers spawned together (standbys at the start,
replacements of killed workers, restarted groups).  The time a fresh interpreter
takes to import torch is measured directly too.

The schedule is synthetic and labelled so in its metadata; it measures the machine,
it is not a trace of any cloud.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from elasim.jobmodel import JobSpec
from elasim.profile import Profile, profile_from_runs
from elasim.traces import CapacityTrace, TraceMetadata, write_capacity_trace

from .config import DEFAULT_JOB, RunConfig
from .group import RescaleMode
from .run import run_trace
from .run_output import write_run

__all__ = [
    "INPLACE_SCHEDULE",
    "QUICK_SCHEDULE",
    "Budgets",
    "CalibrationError",
    "RESTART_SCHEDULE",
    "CalibrationConfig",
    "CalibrationStage",
    "calibrate",
    "calibration_trace",
    "measure_worker_start_s",
    "profile_of_runs",
]

#: Worker counts of the in-place calibration schedule, one segment each.  A count
#: held for two segments after a kill gives the replacements time to cold-start, so
#: the jump that follows (1 -> 3, 1 -> 4, 2 -> 4) happens at once, as in a replay.
INPLACE_SCHEDULE: tuple[int, ...] = (1, 2, 3, 4, 3, 3, 2, 2, 1, 1, 3, 1, 1, 4, 2, 2, 4, 1, 1, 2)
#: Worker counts of the restart schedule (a restart costs seconds: fewer changes).
RESTART_SCHEDULE: tuple[int, ...] = (1, 2, 4, 2, 1, 2)
#: The in-place schedule of ``--quick`` (at most two workers): a planned 1 -> 2, a
#: kill 2 -> 1 whose replacement has two segments to cold-start, then the same again.
QUICK_SCHEDULE: tuple[int, ...] = (1, 2, 1, 1, 2, 1, 1, 2)
#: Steps of a start-up run (the ``0 -> n`` start, then a few steps); it ends when
#: they are done, however long that takes on this machine (within its budget).
STARTUP_STEPS = 30


class CalibrationError(RuntimeError):
    """One calibration run failed; the message names it and says why (one line)."""


@dataclass(frozen=True)
class Budgets:
    """Time limits scaled from what this machine measured, not fixed.

    Why: on a busy 2-core machine a fresh interpreter took 15 s to import torch and
    a worker 40 s to become ready (measured), where an idle one takes 2 s; fixed
    limits (120 s to start, 1.5 s for a start-up run) failed there.  Every limit is
    the fixed floor or a multiple of the measured start, whichever is longer.

    Attributes:
        start_s: measured interpreter + torch import (median).
        ready_s: a worker's spawn to ready (``ready_timeout_real_s``).
        change_s: one generation change (``change_timeout_real_s``).
        startup_wall_s: a start-up run (``0 -> n`` and :data:`STARTUP_STEPS` steps).
    """

    start_s: float
    ready_s: float
    change_s: float
    startup_wall_s: float

    @classmethod
    def of(cls, start_s: float, max_nodes: int) -> Budgets:
        """Budgets for workers that take ``start_s`` to import torch, ``max_nodes`` at once."""
        cores = os.cpu_count() or 1
        together = max(1.0, max_nodes / cores)  # workers starting at once share the cores
        return cls(
            start_s=start_s,
            ready_s=max(120.0, 8.0 * start_s * together),
            change_s=max(60.0, 4.0 * start_s),
            startup_wall_s=max(30.0, 4.0 * start_s),
        )


@dataclass(frozen=True)
class CalibrationConfig:
    """What to measure.

    Attributes:
        segment_s: real seconds per schedule segment (longer: more steps timed).
        max_nodes: most workers (the schedule is capped at this).
        job: import spec of the :class:`~elasim.executor.api.ElasticJob`.
        mechanisms: which rescale mechanisms to measure.
        checkpoint_interval_steps: checkpoint period, to time saves and loads.
        starts: how many interpreter starts to time for ``worker_start_s``.
        max_wall_real_s: give up on a run after this long.
        inplace_schedule: worker counts of the in-place run, one per segment.
    """

    segment_s: float = 6.0
    max_nodes: int = 4
    job: str = DEFAULT_JOB
    mechanisms: tuple[str, ...] = ("inplace", "restart")
    checkpoint_interval_steps: int = 200
    starts: int = 3
    max_wall_real_s: float = 300.0
    inplace_schedule: tuple[int, ...] = INPLACE_SCHEDULE

    @classmethod
    def quick(cls, job: str = DEFAULT_JOB) -> CalibrationConfig:
        """``elasim calibrate --quick``: one or two workers, in place, under a minute.

        Why it is enough for a first answer: a profile's step times, pause components
        and cold starts are what ``simulate --profile`` needs, and one planned
        scale-up, one killed worker and one start from warm standbys measure each of
        them once.  It is not enough to replay more than two nodes (the profile says
        which world sizes it measured), nor restart mode, and it times no checkpoint
        write or load (those come from the restart run: ``not measured``).
        """
        return cls(
            segment_s=1.5,
            max_nodes=2,
            job=job,
            mechanisms=("inplace",),
            starts=1,
            inplace_schedule=QUICK_SCHEDULE,
        )


@dataclass(frozen=True)
class CalibrationStage:
    """A stage of a calibration as it starts, for progress and an estimate of time left.

    Attributes:
        index: 1-based position of the stage.
        total: how many stages there are.
        description: what it measures, in a few words.
        expected_s: how long it should take on an idle machine like this one (real s).
        expected_left_s: the same for this stage and every later one.
    """

    index: int
    total: int
    description: str
    expected_s: float
    expected_left_s: float


def calibration_trace(
    segment_s: float, max_nodes: int, schedule: tuple[int, ...] = RESTART_SCHEDULE
) -> CapacityTrace:
    """A synthetic schedule as a capacity trace (time in real seconds, scale 1)."""
    counts = [min(n, max_nodes) for n in schedule]
    return CapacityTrace(
        name="calibration",
        time_s=np.arange(len(counts), dtype=float) * segment_s,
        available=np.asarray(counts, dtype=np.int64),
        price_per_hour=None,
        metadata=TraceMetadata(
            source="synthetic calibration schedule of elasim (not a measured trace)",
            synthetic=True,
        ),
        duration_s=len(counts) * segment_s,
    )


def measure_worker_start_s(starts: int = 3) -> float:
    """Median time for a fresh interpreter to start and import torch."""
    times = []
    for _ in range(max(starts, 1)):
        begin = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import torch, torch.distributed"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def _hardware() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "machine": platform.machine(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": platform.system(),
    }
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpus"] = torch.cuda.device_count()
    else:
        info["gpu"] = None
    return info


def profile_of_runs(
    run_dirs: list[Path],
    *,
    job: str,
    source: str,
    checkpoint_bytes: int = 0,
    worker_start_s: float | None = None,
    shared_host_cores: int = 0,
) -> Profile:
    """A profile of executor runs made on this machine (hardware and torch recorded).

    ``elasim calibrate`` and ``elasim run --profile-out`` both end here.
    """
    import torch

    return profile_from_runs(
        run_dirs,
        hardware=_hardware(),
        torch_version=str(torch.__version__),
        backend="nccl" if torch.cuda.is_available() else "gloo",
        model={"job": job, "checkpoint_bytes": checkpoint_bytes, "state_bytes": checkpoint_bytes},
        worker_start_s=worker_start_s,
        source=source,
        shared_host_cores=shared_host_cores,
    )


def _plan(
    config: CalibrationConfig, start_s: float
) -> list[tuple[str, str, tuple[int, ...], float, int | None]]:
    """The runs: ``(name, mechanism, schedule, segment_s, steps)`` (steps None: by time).

    A segment lasts at least the measured torch start (``start_s``): a killed
    worker's replacement needs a few of them to become ready, and the schedules
    give it two segments or more.  With fixed 1.5 s segments a busy machine, where
    torch takes 15 s to import, ended the quick run before any replacement was ready
    (the profile then had no single-worker cold start).
    """
    segment_s = max(config.segment_s, start_s)
    runs: list[tuple[str, str, tuple[int, ...], float, int | None]] = []
    for mechanism in config.mechanisms:
        if mechanism == "restart":
            # a restart takes seconds (fresh processes), so its segments are longer
            runs.append(("restart", "restart", RESTART_SCHEDULE, segment_s * 3.0, None))
        else:
            runs.append((mechanism, mechanism, config.inplace_schedule, segment_s, None))
            for size in range(2, config.max_nodes + 1):
                runs.append((f"startup-{size}", mechanism, (size,), 1.0, STARTUP_STEPS))
    return runs


def _one_run(
    plan: tuple[str, str, tuple[int, ...], float, int | None],
    config: CalibrationConfig,
    budgets: Budgets,
    root: Path,
) -> tuple[Path, int]:
    """Run one calibration run; its output folder and checkpoint size.

    Raises:
        CalibrationError: it failed or measured nothing, naming it and why.
    """
    name, mechanism, schedule, segment_s, steps = plan
    shape = "-".join(str(min(n, config.max_nodes)) for n in schedule)
    trace_path = write_capacity_trace(
        calibration_trace(segment_s, config.max_nodes, schedule),
        root / f"calibration-{name}.csv",
    )
    ckpt_dir = root / f"ckpt-{name}"
    # one pass through the schedule, then stop (the trace would repeat); a start-up
    # run stops after its steps
    wall_s = (
        budgets.startup_wall_s if steps else min(config.max_wall_real_s, segment_s * len(schedule))
    )
    run = RunConfig(
        spec=JobSpec(
            trace=str(trace_path),
            policy="greedy",
            job=config.job,
            max_nodes=config.max_nodes,
            rescale=RescaleMode(mechanism),
            checkpoint_interval_s=math.inf,  # saves are timed by steps here
        ),
        time_scale=1.0,
        max_steps=steps or 10**9,
        checkpoint_interval_steps=config.checkpoint_interval_steps,
        checkpoint_dir=str(ckpt_dir),
        max_wall_real_s=wall_s,
        ready_timeout_real_s=budgets.ready_s,
        change_timeout_real_s=budgets.change_s,
    )
    what = f"calibration run {name!r} ({mechanism}, workers {shape})"
    try:
        result = run_trace(run)
    except Exception as exc:  # noqa: BLE001 - any failure ends the calibration, in one line
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CalibrationError(f"{what} failed: {reason}") from None
    budget = f"budget {wall_s:.0f} s, scaled from a {budgets.start_s:.1f} s torch start"
    if not result.steps:
        raise CalibrationError(f"{what} trained no step ({budget})")
    if steps and not result.completed:
        done = result.summary.get("steps")
        raise CalibrationError(f"{what} trained {done} of {steps} steps ({budget})")
    out = root / name
    write_run(result, out, plot=False)
    files = [p for p in ckpt_dir.glob("*") if p.is_file() and not p.name.startswith(".")]
    return out, max((p.stat().st_size for p in files), default=0)


def _expected_run_s(
    plan: tuple[str, str, tuple[int, ...], float, int | None],
    config: CalibrationConfig,
    start_s: float,
) -> float:
    """What one run should take on an idle machine (real s), for the estimate of time left.

    Its standbys start together (an interpreter, torch and the job: about four
    torch imports each, measured on the 2-core machine, sharing the cores), then
    the schedule plays (or, for a start-up run, a few seconds of steps).
    """
    _, _, schedule, segment_s, steps = plan
    cores = os.cpu_count() or 1
    standbys = 4.0 * start_s * max(1.0, config.max_nodes / cores)
    return standbys + (2.0 if steps else segment_s * len(schedule))


def calibrate(
    config: CalibrationConfig,
    *,
    work_dir: str | Path | None = None,
    on_stage: Callable[[CalibrationStage], None] | None = None,
) -> Profile:
    """Run the calibration and return the profile (the caller saves it).

    The interpreter's torch start is measured first, and every run's time limits
    scale with it (:class:`Budgets`), so a slow or busy machine is measured as it is
    rather than failing a fixed limit.

    Args:
        config: what to measure.
        work_dir: keep the runs here (default: a temporary directory).
        on_stage: called as each stage starts, with what it measures and how long it
            and the stages after it should take (CLI progress and time left).

    Raises:
        CalibrationError: a run failed (the message names it and says why).
    """
    from .api import check_job_spec

    check_job_spec(config.job)
    stage = on_stage or (lambda _stage: None)
    tmp = None
    if work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="elasim-calibrate-")
        work_dir = tmp.name
    root = Path(work_dir)
    root.mkdir(parents=True, exist_ok=True)
    guess_s = 3.0  # an idle machine's torch import, until measured
    total = len(_plan(config, guess_s)) + 1
    try:
        first = config.starts * guess_s
        runs_s = sum(_expected_run_s(each, config, guess_s) for each in _plan(config, guess_s))
        stage(
            CalibrationStage(
                1, total, "worker start time (interpreter + torch import)", first, first + runs_s
            )
        )
        start_s = measure_worker_start_s(config.starts)
        run_dirs, checkpoint_bytes = _run_plan(config, start_s, root, stage)
        return profile_of_runs(
            run_dirs,
            job=config.job,
            checkpoint_bytes=checkpoint_bytes,
            worker_start_s=start_s,
            source=f"elasim calibrate ({', '.join(config.mechanisms)}, "
            f"{config.segment_s:g} s segments)",
            # every calibration worker runs on this host, sharing its cores
            shared_host_cores=os.cpu_count() or 1,
        )
    finally:
        if tmp is not None:
            tmp.cleanup()


def _run_plan(
    config: CalibrationConfig,
    start_s: float,
    root: Path,
    stage: Callable[[CalibrationStage], None],
) -> tuple[list[Path], int]:
    """Every planned run in turn, each announced as a stage; their folders and checkpoint size.

    Why apart from :func:`calibrate`: once the torch start is measured, the plan,
    the budgets and the estimates of time left all follow from it; this runs them
    (stages 2 onwards, after the start measurement) and keeps the largest
    checkpoint seen.

    Raises:
        CalibrationError: a run failed (see :func:`_one_run`).
    """
    budgets = Budgets.of(start_s, config.max_nodes)
    plan = _plan(config, start_s)
    total = len(plan) + 1
    expected = [_expected_run_s(each, config, start_s) for each in plan]
    run_dirs = []
    checkpoint_bytes = 0
    for index, each in enumerate(plan):
        name, _, schedule, segment_s, steps = each
        shape = "-".join(str(min(n, config.max_nodes)) for n in schedule)
        length = f"{steps} steps" if steps else f"{len(schedule)} x {segment_s:g} s"
        stage(
            CalibrationStage(
                index + 2,
                total,
                f"{name}: {length} ({shape}); torch starts in {start_s:.1f} s, so "
                f"workers get {budgets.ready_s:.0f} s to start",
                expected[index],
                sum(expected[index:]),
            )
        )
        out, size = _one_run(each, config, budgets, root)
        run_dirs.append(out)
        checkpoint_bytes = max(checkpoint_bytes, size)
    return run_dirs, checkpoint_bytes
