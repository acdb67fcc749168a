"""``elasim calibrate``: measure this machine and write a profile the simulator can use.

A calibration is two short executor runs (in-place and restart) over a *synthetic*
capacity schedule that walks the worker count through 1 -> 2 -> 4 -> 2 -> 1 -> 2, with
every drop a hard kill (no notice), and periodic checkpoints.  From their outputs
(:func:`elasim.profile.profile_from_runs`) come the step time per world size, the
pause components per transition and mechanism, and checkpoint save/load times.  The
worker start time is measured directly: a fresh interpreter that imports torch.

The schedule is synthetic and labelled so in its metadata; it measures the machine,
it is not a trace of any cloud.
"""

from __future__ import annotations

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

__all__ = ["CalibrationConfig", "calibrate", "calibration_trace", "measure_worker_start_s"]

#: Worker counts of the calibration schedule, one segment each.
SCHEDULE: tuple[int, ...] = (1, 2, 4, 2, 1, 2)


@dataclass(frozen=True)
class CalibrationConfig:
    """What to measure.

    Attributes:
        segment_s: real seconds per schedule segment (longer: more steps timed).
        workers_max: most workers (the schedule is capped at this).
        job: import spec of the :class:`~elasim.executor.api.ElasticJob`.
        mechanisms: which rescale mechanisms to measure.
        checkpoint_interval_steps: checkpoint period, to time saves and loads.
        starts: how many interpreter starts to time for ``worker_start_s``.
        max_wall_s: give up on a run after this long.
    """

    segment_s: float = 6.0
    workers_max: int = 4
    job: str = DEFAULT_JOB
    mechanisms: tuple[str, ...] = ("inplace", "restart")
    checkpoint_interval_steps: int = 200
    starts: int = 3
    max_wall_s: float = 300.0


def calibration_trace(segment_s: float, workers_max: int) -> CapacityTrace:
    """The synthetic schedule as a capacity trace (time in real seconds, scale 1)."""
    counts = [min(n, workers_max) for n in SCHEDULE]
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
    import torch

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
        for mechanism in config.mechanisms:
            # a restart takes seconds (fresh processes), so its segments are longer
            segment_s = config.segment_s * (3.0 if mechanism == "restart" else 1.0)
            trace_path = write_capacity_trace(
                calibration_trace(segment_s, config.workers_max),
                root / f"calibration-{mechanism}.csv",
            )
            stage(f"{mechanism}: {len(SCHEDULE)} segments of {segment_s:g} s (1-2-4-2-1-2)")
            ckpt_dir = root / f"ckpt-{mechanism}"
            run = RunConfig(
                trace=str(trace_path),
                policy="greedy",
                time_scale=1.0,
                workers_max=config.workers_max,
                rescale=RescaleMode(mechanism),
                max_steps=10**9,
                checkpoint_interval_steps=config.checkpoint_interval_steps,
                checkpoint_dir=str(ckpt_dir),
                job=config.job,
                # one pass through the schedule, then stop (the trace would repeat)
                max_wall_s=min(config.max_wall_s, segment_s * len(SCHEDULE)),
            )
            result = run_trace(run)
            out = root / mechanism
            write_run(result, out, plot=False)
            run_dirs.append(out)
            files = [p for p in ckpt_dir.glob("*") if p.is_file() and not p.name.startswith(".")]
            if files:
                checkpoint_bytes = max(checkpoint_bytes, max(p.stat().st_size for p in files))
        stage("worker start time")
        start_s = measure_worker_start_s(config.starts)
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        return profile_from_runs(
            run_dirs,
            hardware=_hardware(),
            torch_version=str(torch.__version__),
            backend=backend,
            model={
                "job": config.job,
                "checkpoint_bytes": checkpoint_bytes,
                "state_bytes": checkpoint_bytes,
            },
            worker_start_s=start_s,
            source=f"elasim calibrate ({', '.join(config.mechanisms)}, "
            f"{config.segment_s:g} s segments)",
        )
    finally:
        if tmp is not None:
            tmp.cleanup()
