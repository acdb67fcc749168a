"""Repeats of one measured run, the noise floor, and simpler models of the overheads.

Each repeat is compared with the one simulation; the repeats with each other give
the floor no model can beat; the variants show what each modelled overhead buys.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from elasim.compare.events import compare_frames
from elasim.compare.runs import _completion_s, check_same_run, compare_runs, simulate_run
from elasim.profile import apply_profile


def model_variants(profile: Any, target_samples: float | None = None) -> dict[str, Any]:
    """The measured model and simpler ones, to show what each modelled overhead buys.

    * ``elasim``: the profile as :func:`elasim.profile.apply_profile` uses it (measured
      pause table, cold starts, shared-host contention when measured on one host);
    * ``no shared-host contention``: the same, but a starting worker slows nobody and
      starts as fast as the measured batch of its size;
    * ``flat cold start``: every replacement ready after the time an interpreter
      takes to import torch (the model of profile version 1);
    * ``constant pause``: every change costs the median measured in-place pause and
      replacements are there at once, as a simulator with one flat reallocation
      cost (Pollux's 30 s, Parcae's swept constant) models it.

    Returns:
        Variant name -> :class:`elasim.job.TrainingJob`.
    """
    full = apply_profile(profile, target_samples=target_samples)
    rescale = full.rescale
    no_share = dataclasses.replace(
        full, rescale=dataclasses.replace(rescale, shared_host_cores=0.0, cold_start_s=0.0)
    )
    flat = dataclasses.replace(
        full,
        rescale=dataclasses.replace(
            rescale,
            shared_host_cores=0.0,
            cold_start_table=(),
            cold_start_s=profile.worker_start_s,
        ),
    )
    inplace = [p.components.pause_s for p in profile.pauses if p.mechanism == "inplace"]
    constant_s = statistics.median(inplace) if inplace else 0.0
    constant = dataclasses.replace(
        full,
        pause_table=(),
        rescale=dataclasses.replace(
            rescale,
            detect_s=0.0,
            boot_s=0.0,
            rendezvous_base_s=constant_s,
            rendezvous_per_node_s=0.0,
            state_bandwidth_bytes_per_s=1e18,
            warmup_s=0.0,
            cold_start_s=0.0,
            cold_start_table=(),
            shared_host_cores=0.0,
        ),
        checkpoint=dataclasses.replace(full.checkpoint, read_bandwidth_bytes_per_s=1e18),
    )
    return {
        "elasim": full,
        "no shared-host contention": no_share,
        "flat cold start": flat,
        "constant pause": constant,
    }


def _dirs(real_dirs: str | Path | Sequence[str | Path]) -> list[Path]:
    if isinstance(real_dirs, (str, Path)):
        return [Path(real_dirs)]
    dirs = [Path(d) for d in real_dirs]
    if not dirs:
        raise ValueError("no measured run given")
    return dirs


def compare_repeats(
    real_dirs: str | Path | Sequence[str | Path], sim_dir: str | Path, *, force: bool = False
) -> pd.DataFrame:
    """Compare measured repeats of one run (same inputs) with its one simulation.

    The simulation is deterministic and a measured run is one draw from a noisy
    machine, so besides each run's errors the last row compares the simulation with
    the *mean* of the repeats (``mean of runs``): what the simulator predicts is the
    expected completion time, not one run's.

    ``force`` is passed to :func:`compare_runs` (compare runs of another job too).

    Returns:
        One row per run, then ``mean of runs``: measured and simulated completion (s),
        completion time error, median per-event pause error, events matched.
    """
    rows = []
    for i, real_dir in enumerate(_dirs(real_dirs), start=1):
        result = compare_runs(real_dir, sim_dir, force=force)
        rows.append(
            {
                "run": f"run {i}",
                "measured completion (s)": result.real_completion_s,
                "simulated completion (s)": result.sim_completion_s,
                "completion time error": result.completion_time_rel_error,
                "median pause error": result.median_pause_rel_error,
                "events matched": result.events_matched,
            }
        )
    frame = pd.DataFrame(rows).set_index("run")
    mean_s = float(frame["measured completion (s)"].mean())
    sim_s = float(frame["simulated completion (s)"].iloc[0])
    frame.loc["mean of runs"] = {
        "measured completion (s)": mean_s,
        "simulated completion (s)": sim_s,
        "completion time error": abs(sim_s - mean_s) / mean_s,
        "median pause error": float(frame["median pause error"].median()),
        "events matched": float(frame["events matched"].median()),
    }
    return frame


def compare_model_variants(
    real_dirs: str | Path | Sequence[str | Path],
    profile: Any,
    out_dir: str | Path,
    *,
    trace: str | None = None,
) -> pd.DataFrame:
    """Simulate measured runs under every :func:`model_variants` entry and compare each.

    Args:
        real_dirs: one measured run, or repeats of it (same inputs).
        profile: the profile the variants are built from.
        out_dir: the simulations are written to ``out_dir/<n>``.
        trace: the trace file, if the runs' recorded one cannot be found.

    Returns:
        One row per variant: simulated completion, its error against the mean of the
        runs, the median over runs of the completion and median pause errors.
    """
    dirs = _dirs(real_dirs)
    summary = json.loads((dirs[0] / "summary.json").read_text())
    samples = float(summary.get("samples") or 0.0) or None
    rows = []
    for i, (name, job) in enumerate(model_variants(profile, samples).items()):
        sim_dir = simulate_run(dirs[0], job, Path(out_dir) / str(i), trace=trace)
        table = compare_repeats(dirs, sim_dir)
        runs = table.drop(index="mean of runs")
        rows.append(
            {
                "model": name,
                "simulated completion (s)": table.loc["mean of runs", "simulated completion (s)"],
                "error vs mean of runs": table.loc["mean of runs", "completion time error"],
                "median completion error": float(runs["completion time error"].median()),
                "median pause error": float(runs["median pause error"].median()),
            }
        )
    return pd.DataFrame(rows).set_index("model")


def run_to_run_errors(real_dirs: Sequence[str | Path], *, force: bool = False) -> pd.Series:
    """How far measured repeats of one run are from each other: the noise floor.

    The same two errors as sim vs real, between every pair of repeats (the earlier
    one as the reference), then the median over pairs.  No model can be expected to
    come closer to one run than the runs come to each other.

    Raises:
        SpecMismatchError: two of the runs are not repeats of one run (unless
            ``force``).
    """
    completion, pause = [], []
    for a, b in itertools.combinations(_dirs(real_dirs), 2):
        sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
        if not force:
            check_same_run(sa, sb, names=(str(a), str(b)))
        ca, cb = _completion_s(sa), _completion_s(sb)
        if ca and cb:
            completion.append(abs(cb - ca) / ca)
        pairs = compare_frames(
            pd.read_parquet(a / "events.parquet"),
            pd.read_parquet(b / "events.parquet"),
            sim_time_column="real_time_s",
        )
        errors = [p.rel_error for p in pairs if p.rel_error is not None]
        if errors:
            pause.append(statistics.median(errors))
    return pd.Series(
        {
            "completion time error": statistics.median(completion) if completion else None,
            "median pause error": statistics.median(pause) if pause else None,
            "pairs of runs": len(completion),
        },
        dtype=object,
    )
