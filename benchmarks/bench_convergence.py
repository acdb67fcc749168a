"""Convergence cost, measured: samples to a target at three global batches vs the model.

Run: ``python benchmarks/bench_convergence.py`` (about 3 minutes on a 2-core box;
``--quick`` for fewer seeds and a shorter learning-rate grid, ``--json PATH`` to keep
the numbers).

The simulator's convergence cost rests on the gradient-noise-scale model
(McCandlish et al. 2018): a sample at global batch ``B`` is worth ``(B_noise + B0) /
(B_noise + B)`` samples at ``B0``, so the samples to a target scale as ``(B_noise +
B) / (B_noise + B0)``.  This benchmark checks it on a real model:

1. **The job**: :mod:`elasim.executor.synthetic`, generated data (a fixed random
   teacher network labels Gaussian inputs by sampling from its softmax; offline, no
   download), a 16-64-4 MLP student, plain SGD.  The teacher's temperature (4) and
   the target (test loss 8 % of the way from the best possible to the initial one)
   put its noise scale inside the batches tried.
2. **Samples to target** at ``B`` = 32, 128 and 512, each with its learning rate
   tuned on a grid (the model assumes a tuned learning rate), training in this
   process with the job's own model, optimizer and step function; the median over
   seeds at the best grid point.
3. **The noise scale, measured by the executor**: real executor runs (4 gloo worker
   processes, global batch 128, the tuned learning rate, as many steps as the target
   took) record the two-batch estimates in every step; each run's ``B_noise`` is
   what ``elasim calibrate`` would put in a profile
   (:func:`elasim.noise_scale.noise_scale_of_steps`); the median over runs is used.
4. **Prediction**: ``samples(B) = samples(B0) (B_noise + B) / (B_noise + B0)``
   with ``B0 = 128``, and its relative error against the measured samples.  The
   claim checked: within 30 % at every batch size.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from elasim.executor.api import TrainState
from elasim.executor.group import GroupSettings, LocalLauncher, ProcessWorkerGroup
from elasim.executor.protocol import WorkerSettings
from elasim.executor.run_output import steps_frame
from elasim.executor.synthetic import bayes_loss, synthetic_job
from elasim.noise_scale import noise_scale_of_steps

BATCHES = (32, 128, 512)
REFERENCE_BATCH = 128
TEMPERATURE = 4.0
TARGET_FRACTION = 0.08  # of the way from the best possible loss to the initial one
LR_GRID = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4)
EVAL_SAMPLES = 512  # evaluate the test loss about this often
MAX_SAMPLES = 400_000
WORKERS = 4
TOLERANCE = 0.30


def samples_to_target(batch: int, lr: float, seed: int, target: float) -> float:
    """Train the job at ``batch`` until its test loss reaches ``target`` (inf: never)."""
    job = synthetic_job(lr=lr, global_batch=batch, temperature=TEMPERATURE)
    data = job.make_data()
    torch.manual_seed(seed)
    model = job.make_model()
    state = TrainState(model, job.make_optimizer(model.parameters()))
    order = torch.Generator().manual_seed(seed)
    x_test, y_test = data.test.tensors
    size, samples, step = len(data.train), 0, 0
    perm = torch.randperm(size, generator=order)
    position = 0
    while samples < MAX_SAMPLES:
        if position + batch > size:
            perm, position = torch.randperm(size, generator=order), 0
        ids = perm[position : position + batch].numpy()
        position += batch
        state.optimizer.zero_grad()
        job.train_step(state, job.collate(data.train, ids))["loss"].backward()
        state.optimizer.step()
        samples, step = samples + batch, step + 1
        if step % max(1, EVAL_SAMPLES // batch) == 0:
            with torch.no_grad():
                loss = float(torch.nn.functional.cross_entropy(model(x_test), y_test))
            if not math.isfinite(loss):
                return math.inf
            if loss <= target:
                return float(samples)
    return math.inf


def tuned(batch: int, seeds: int, grid: tuple[float, ...], target: float) -> dict[str, Any]:
    """The grid learning rate with the fewest median samples to target."""
    by_lr = {}
    for lr in grid:
        runs = [samples_to_target(batch, lr, seed, target) for seed in range(seeds)]
        by_lr[lr] = statistics.median(runs)
    best = min(by_lr, key=lambda lr: by_lr[lr])
    return {"batch": batch, "lr": best, "samples": by_lr[best], "by_lr": by_lr}


def executor_noise_scale(lr: float, steps: int, seed: int, work: Path) -> float:
    """``B_noise`` of one real executor run at the reference batch (calibrate's figure)."""
    settings = WorkerSettings(
        job="elasim.executor.synthetic:synthetic_job",
        job_options={"lr": lr, "global_batch": REFERENCE_BATCH, "temperature": TEMPERATURE},
        seed=seed,
        max_steps=steps,
        checkpoint_dir=str(work / f"ckpt-{seed}"),
    )
    group = ProcessWorkerGroup(
        GroupSettings(worker=settings, change_timeout_s=60.0, ready_timeout_s=120.0),
        [LocalLauncher(WORKERS, log_dir=work / f"logs-{seed}")],
    )
    try:
        group.start()
        group.apply(WORKERS, 0)
        deadline = time.monotonic() + 300.0
        while not group.done and time.monotonic() < deadline:
            group.wait(0.05)
        if not group.done:
            raise RuntimeError(f"executor run {seed} did not finish {steps} steps in 300 s")
        records = group.step_records()
    finally:
        group.close()
    return noise_scale_of_steps(steps_frame(records, 1.0)).b_noise_samples


def predict(results: list[dict[str, Any]], b_noise: float) -> list[dict[str, Any]]:
    """Each batch's predicted samples from the reference batch's, and the error."""
    anchor = next(r["samples"] for r in results if r["batch"] == REFERENCE_BATCH)
    rows = []
    for r in results:
        predicted = anchor * (b_noise + r["batch"]) / (b_noise + REFERENCE_BATCH)
        rows.append(
            r
            | {
                "ratio": r["samples"] / anchor,
                "predicted": predicted,
                "predicted_ratio": predicted / anchor,
                "error": predicted / r["samples"] - 1.0,
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]], b_noise: float, runs: list[float]) -> None:
    shown = ", ".join(f"{v:,.0f}" for v in runs)
    print(f"B_noise measured by the executor: {b_noise:,.0f} samples (median of {shown})")
    header = ("batch", "lr", "samples", "ratio", "predicted", "pred. ratio", "error")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (6, 5, 9, 6, 10, 11, 7), strict=True)))
    for r in rows:
        print(
            f"{r['batch']:>6} {r['lr']:>5g} {r['samples']:>9,.0f} {r['ratio']:>6.2f} "
            f"{r['predicted']:>10,.0f} {r['predicted_ratio']:>11.2f} {r['error']:>+7.1%}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds, 1 executor run")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds, executor_runs = (2, 1) if args.quick else (3, 3)
    floor = bayes_loss(synthetic_job(temperature=TEMPERATURE).make_data(), TEMPERATURE)
    target = floor + TARGET_FRACTION * (math.log(4) - floor)
    print(f"target test loss {target:.4f} (best possible {floor:.4f}, initial {math.log(4):.4f})")
    started = time.perf_counter()
    results = []
    for batch in BATCHES:
        results.append(tuned(batch, seeds, LR_GRID, target))
        best = results[-1]
        print(f"  B={batch}: lr {best['lr']:g}, {best['samples']:,.0f} samples", flush=True)
    reference = next(r for r in results if r["batch"] == REFERENCE_BATCH)
    steps = int(reference["samples"] // REFERENCE_BATCH)
    with tempfile.TemporaryDirectory(prefix="bench-convergence-") as tmp:
        lr = reference["lr"]
        runs = [executor_noise_scale(lr, steps, s, Path(tmp)) for s in range(executor_runs)]
    b_noise = statistics.median(runs)
    rows = predict(results, b_noise)
    print_table(rows, b_noise, runs)
    worst = max(abs(r["error"]) for r in rows)
    verdict = "holds" if worst <= TOLERANCE else "does NOT hold"
    took = time.perf_counter() - started
    print(f"worst error {worst:.1%}: the {TOLERANCE:.0%} claim {verdict} ({took:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"b_noise": b_noise, "runs": runs, "rows": rows}, indent=1))
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
