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

from elasim.profile import Profile, profile_from_runs
from elasim.traces import CapacityTrace, TraceMetadata, write_capacity_trace

from .group import RescaleMode
from .run import DEFAULT_JOB, RunConfig, run_trace, write_run

__all__ = [
    "INPLACE_SCHEDULE",
    "RESTART_SCHEDULE",
    "CalibrationConfig",
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
#: Real seconds of a start-up run (the ``0 -> n`` start, then a few steps).
STARTUP_SEGMENT_S = 1.5


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
    """

    segment_s: float = 6.0
    max_nodes: int = 4
    job: str = DEFAULT_JOB
    mechanisms: tuple[str, ...] = ("inplace", "restart")
    checkpoint_interval_steps: int = 200
    starts: int = 3
    max_wall_real_s: float = 300.0


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


def calibrate(
    config: CalibrationConfig,
    *,
    work_dir: str | Path | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> Profile:
    """Run the calibration and return the profile (the caller saves it).

    Args:
        config: what to measure.
        work_dir: keep the runs here (default: a temporary directory).
        on_stage: called with a short description as each stage starts (CLI progress).
    """
    from .api import check_job_spec

    check_job_spec(config.job)
    stage = on_stage or (lambda _text: None)
    tmp = None
    if work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="elasim-calibrate-")
        work_dir = tmp.name
    root = Path(work_dir)
    root.mkdir(parents=True, exist_ok=True)
    try:
        run_dirs = []
        checkpoint_bytes = 0
        runs: list[tuple[str, str, tuple[int, ...], float]] = []
        for mechanism in config.mechanisms:
            if mechanism == "restart":
                # a restart takes seconds (fresh processes), so its segments are longer
                runs.append(("restart", "restart", RESTART_SCHEDULE, config.segment_s * 3.0))
            else:
                runs.append((mechanism, mechanism, INPLACE_SCHEDULE, config.segment_s))
                for size in range(2, config.max_nodes + 1):
                    runs.append((f"startup-{size}", mechanism, (size,), STARTUP_SEGMENT_S))
        for name, mechanism, schedule, segment_s in runs:
            trace_path = write_capacity_trace(
                calibration_trace(segment_s, config.max_nodes, schedule),
                root / f"calibration-{name}.csv",
            )
            shape = "-".join(str(min(n, config.max_nodes)) for n in schedule)
            stage(f"{name}: {len(schedule)} segment(s) of {segment_s:g} s ({shape})")
            ckpt_dir = root / f"ckpt-{name}"
            run = RunConfig(
                trace=str(trace_path),
                policy="greedy",
                time_scale=1.0,
                max_nodes=config.max_nodes,
                rescale=RescaleMode(mechanism),
                max_steps=10**9,
                checkpoint_interval_trace_s=math.inf,  # saves are timed by steps here
                checkpoint_interval_steps=config.checkpoint_interval_steps,
                checkpoint_dir=str(ckpt_dir),
                job=config.job,
                # one pass through the schedule, then stop (the trace would repeat)
                max_wall_real_s=min(config.max_wall_real_s, segment_s * len(schedule)),
            )
            result = run_trace(run)
            out = root / name
            write_run(result, out, plot=False)
            run_dirs.append(out)
            files = [p for p in ckpt_dir.glob("*") if p.is_file() and not p.name.startswith(".")]
            if files:
                checkpoint_bytes = max(checkpoint_bytes, max(p.stat().st_size for p in files))
        stage("worker start time")
        return profile_of_runs(
            run_dirs,
            job=config.job,
            checkpoint_bytes=checkpoint_bytes,
            worker_start_s=measure_worker_start_s(config.starts),
            source=f"elasim calibrate ({', '.join(config.mechanisms)}, "
            f"{config.segment_s:g} s segments)",
            # every calibration worker runs on this host, sharing its cores
            shared_host_cores=os.cpu_count() or 1,
        )
    finally:
        if tmp is not None:
            tmp.cleanup()
