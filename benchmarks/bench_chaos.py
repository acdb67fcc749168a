"""The executor under chaos: many real runs, each with faults at random (seeded) moments.

Run: ``python benchmarks/bench_chaos.py`` (full mode: 100 faults over runs of 9,000
steps, about 35 minutes on the loaded 2-core machine; ``--quick`` for one run of
1,500 steps with one fault of each kind, about 2 minutes; ``--faults N``,
``--max-steps N``, ``--seed N``; ``--json PATH`` keeps the numbers, ``--keep DIR``
the runs' folders).  It exits 1 if a goal is missed (a hang, an orphan, an
unloadable checkpoint, an in-place kill losing more than the step in flight).

Each run replays the eventful window of ``spot_us_east.csv`` (from trace second
119,000, ``--time-scale 300``, 4 workers, a checkpoint every 50 steps, collective
timeout 2 s) with ``elasim run`` in a subprocess, as a user would, and injects faults
from outside at random (seeded) moments once training has started, until the run
ends; runs repeat until the fault count is reached:

* ``worker``: SIGKILL of a random worker process (member or warm standby);
* ``checkpoint``: SIGKILL of the worker writing a checkpoint, while its temporary
  file exists (the folder is polled every 2 ms).  If the kill lands after the
  rename (the file is gone), it is counted as a ``worker`` kill and reported;
* ``stop``: SIGSTOP of a random worker, SIGCONT after more than the collective
  timeout;
* ``controller``: SIGKILL of the controller, then ``elasim run --resume`` on the
  same folder.

What it counts, per fault and per run:

* **hangs**: a controller that neither finishes nor gives up within its bound;
* **orphans**: a worker process still alive 5 s after its controller exited or was
  killed (every worker pid seen is remembered with its start time);
* **unloadable checkpoints**: after every run, and after every checkpoint kill, the
  checkpoint must load with ``torch.load(weights_only=True)``;
* **lost steps beyond the step in flight**: ``preempt`` events that left survivors
  (in-place re-formation) with ``lost_steps > 1``; total losses (every member, or
  the controller) roll back to the checkpoint and are reported on their own;
* **summary-to-exit**: real seconds from the JSON summary line to process exit;
* **survivors**: runs that completed (every segment chained by ``--resume``).

The machine is shared: wall times are noisy; the counts are what this measures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasim.executor.lifeline import descendants, still_alive

KINDS = ("worker", "checkpoint", "stop", "controller")
COLLECTIVE_TIMEOUT_S = 2.0
ORPHAN_GRACE_S = 5.0


@dataclass
class Tally:
    """Everything counted over the benchmark."""

    runs: int = 0
    completed: int = 0
    segments: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    missed: Counter[str] = field(default_factory=Counter)
    hangs: int = 0
    orphans: int = 0
    unloadable: int = 0
    checkpoints_checked: int = 0
    lost_beyond_inflight: int = 0
    inplace_kills: int = 0
    total_losses: int = 0
    total_lost_steps: int = 0
    exit_after_summary_s: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The table's numbers."""
        exits = self.exit_after_summary_s
        return {
            "runs": self.runs,
            "survivors (completed)": self.completed,
            "segments (controllers)": self.segments,
            "faults": sum(self.faults.values()),
            **{f"faults: {k}": self.faults[k] for k in KINDS},
            "checkpoint kills that came after the rename": self.missed["checkpoint"],
            "hangs": self.hangs,
            "orphaned processes": self.orphans,
            "checkpoints checked": self.checkpoints_checked,
            "unloadable checkpoints": self.unloadable,
            "in-place preemptions (survivors left)": self.inplace_kills,
            "lost steps beyond the step in flight": self.lost_beyond_inflight,
            "total losses (rollback to checkpoint)": self.total_losses,
            "steps lost in total losses": self.total_lost_steps,
            "summary-to-exit median s": round(statistics.median(exits), 3) if exits else None,
            "summary-to-exit max s": round(max(exits), 3) if exits else None,
        }


class Segment:
    """One ``elasim run`` process (a fresh run or a ``--resume``), watched from outside."""

    def __init__(self, argv: list[str], out: Path) -> None:
        self.out = out
        # unbuffered: the summary line arrives when it is printed, not at exit
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.seen: dict[int, int] = {}
        self.summary_at: float | None = None
        self.summary: dict[str, Any] | None = None
        self.stderr = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._errs = threading.Thread(target=self._read_err, daemon=True)
        self._errs.start()
        #: when the process exited (a thread waits on it, so the time is exact)
        self.exited_at: float | None = None
        self.code: int | None = None
        self._exited = threading.Event()
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self) -> None:
        self.code = self.proc.wait()
        self.exited_at = time.monotonic()
        self._exited.set()

    def done(self) -> bool:
        """Whether the process has exited."""
        return self._exited.is_set()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            if line.startswith("{"):
                self.summary_at = time.monotonic()
                with contextlib.suppress(ValueError):
                    self.summary = json.loads(line)

    def _read_err(self) -> None:
        self.stderr = self.proc.stderr.read()  # type: ignore[union-attr]

    def workers(self) -> dict[int, int]:
        """Worker processes now (pid -> start ticks), remembered for the orphan check."""
        now = descendants(self.proc.pid)
        self.seen.update(now)
        return now

    def wait(self, timeout_s: float) -> int | None:
        """Exit code, or None if it did not exit in time."""
        if not self._exited.wait(timeout_s):
            return None
        self._reader.join(timeout=5)
        self._errs.join(timeout=5)
        return self.code

    def kill_tree(self) -> None:
        """SIGKILL the controller and every worker seen (a hung run)."""
        self.workers()
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        for pid in still_alive(self.seen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._exited.wait(30)

    def orphans(self) -> list[int]:
        """Workers still alive ``ORPHAN_GRACE_S`` after the controller went."""
        deadline = time.monotonic() + ORPHAN_GRACE_S
        while time.monotonic() < deadline and still_alive(self.seen):
            time.sleep(0.1)
        left = still_alive(self.seen)
        for pid in left:  # clean up, after counting them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return left


def _steps_so_far(out: Path) -> int:
    try:
        with open(out / "steps.partial.jsonl", "rb") as handle:
            return sum(1 for _ in handle)
    except FileNotFoundError:
        return 0


def check_checkpoints(folder: Path, tally: Tally) -> None:
    """Every checkpoint file in ``folder`` loads with ``weights_only=True``."""
    import torch

    for path in sorted(folder.glob("*.pt")):
        tally.checkpoints_checked += 1
        try:
            torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any failure to load counts
            tally.unloadable += 1
            tally.failures.append(f"{path}: does not load: {exc}")


def _kill_during_checkpoint(seg: Segment, window_s: float) -> tuple[int, bool] | None:
    """SIGKILL the writer of the next checkpoint while it writes.

    Returns its pid and whether the kill landed mid-write (its temporary file is
    still there: the rename had not happened), or None if no write began in time.
    """
    folder = seg.out / "checkpoints"
    deadline = time.monotonic() + window_s
    while time.monotonic() < deadline and not seg.done():
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            names = []
        for name in names:
            if name.startswith(".checkpoint.pt.") and name.endswith(".tmp"):
                with contextlib.suppress(ValueError, ProcessLookupError):
                    pid = int(name.split(".")[-2])
                    os.kill(pid, signal.SIGKILL)
                    time.sleep(0.05)
                    return pid, (folder / name).exists()
        time.sleep(0.002)
    return None


def _worker_pids(seg: Segment) -> list[int]:
    """The worker processes of a segment (children running ``elasim.executor._entry``)."""
    pids = []
    for pid in seg.workers():
        with contextlib.suppress(OSError):
            if b"elasim.executor._entry" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
    return sorted(pids)


@dataclass(frozen=True)
class Plan:
    """How the benchmark runs (``--quick`` or full).

    Runs repeat until ``faults`` faults were injected (at most ``max_runs`` runs);
    inside a run, faults follow each other at random gaps until the run ends.
    """

    faults: int
    max_steps: int
    gap_s: tuple[float, float]
    max_runs: int = 50
    max_nodes: int = 4
    checkpoint_every_steps: int = 50
    max_wall_s: float = 600.0
    seed: int = 0
    weights: tuple[tuple[str, int], ...] = tuple((kind, 1) for kind in KINDS)


class Kinds:
    """Fault kinds drawn from a shuffled bag (seeded), refilled when empty.

    ``weights`` says how many of each kind a bag holds.  Why not even: a controller
    kill costs a cold start of every worker on resume (40-60 s on the loaded 2-core
    machine), the other faults a second or two, so the full mode holds one
    controller kill per eight faults to fit its fault count in half an hour.
    """

    def __init__(self, rng: random.Random, weights: dict[str, int]) -> None:
        self.rng = rng
        self.weights = weights
        self.bag: list[str] = []

    def next(self) -> str:
        """The next kind."""
        if not self.bag:
            self.bag = [kind for kind in KINDS for _ in range(self.weights.get(kind, 0))]
            self.rng.shuffle(self.bag)
        return self.bag.pop()


def _argv(plan: Plan, out: Path, resume: bool) -> list[str]:
    base = [sys.executable, "-m", "elasim.cli", "run"]
    if resume:
        return [*base, "--resume", str(out), "--json", "--no-plot"]
    return [
        *base,
        "--trace", "spot_us_east.csv", "--start-offset-s", "119000", "--time-scale", "300",
        "--max-steps", str(plan.max_steps), "--max-nodes", str(plan.max_nodes),
        "--checkpoint-interval-steps", str(plan.checkpoint_every_steps),
        "--collective-timeout-s", str(COLLECTIVE_TIMEOUT_S), "--max-wall-s", str(plan.max_wall_s),
        "--seed", str(plan.seed), "--out", str(out), "--log-dir", str(out / "logs"),
        "--json", "--no-plot",
    ]  # fmt: skip


def _started(seg: Segment, timeout_s: float) -> bool:
    """Wait until the segment trains (a new step row in its journal) or ends."""
    before = _steps_so_far(seg.out)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not seg.done():
        if _steps_so_far(seg.out) > before:
            return True
        time.sleep(0.1)
    return False


def inject(kind: str, seg: Segment, rng: random.Random, tally: Tally) -> bool:
    """One fault of ``kind`` on ``seg``; whether it was injected."""
    if kind == "checkpoint":
        caught = _kill_during_checkpoint(seg, window_s=10.0)
        if caught is None or not caught[1]:
            tally.missed[kind] += 1  # no write, or the kill came after the rename
            return caught is not None  # ... which is still a SIGKILL of a worker
        check_checkpoints(seg.out / "checkpoints", tally)
        return True
    if kind == "controller":
        seg.workers()
        seg.proc.kill()
        seg.wait(30)
        left = seg.orphans()
        tally.orphans += len(left)
        if left:
            tally.failures.append(f"{seg.out}: orphans after a controller kill: {left}")
        return True
    pids = _worker_pids(seg)
    if not pids:
        return False
    victim = rng.choice(pids)
    if kind == "worker":
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(victim, signal.SIGSTOP)
        time.sleep(COLLECTIVE_TIMEOUT_S * 1.5 + rng.uniform(0.0, 1.0))
        os.kill(victim, signal.SIGCONT)
    return True


def _finish(seg: Segment, plan: Plan, tally: Tally) -> dict[str, Any] | None:
    """Wait for the segment's end: a hang, or a summary and the time to exit after it."""
    code = seg.wait(plan.max_wall_s + 120.0)
    if code is None:
        tally.hangs += 1
        tally.failures.append(f"{seg.out}: hung (no exit within its bound)")
        seg.kill_tree()
    elif seg.summary_at is not None and seg.exited_at is not None:
        tally.exit_after_summary_s.append(max(seg.exited_at - seg.summary_at, 0.0))
    elif code not in (0, 1):
        tally.failures.append(f"{seg.out}: exit {code}: {seg.stderr.strip()[-300:]}")
    left = seg.orphans()
    tally.orphans += len(left)
    if left:
        tally.failures.append(f"{seg.out}: orphans after exit: {left}")
    return seg.summary


def _books(out: Path, tally: Tally) -> None:
    """Lost work from the finished run's events."""
    import pandas as pd

    path = out / "events.parquet"
    if not path.exists():
        return
    events = pd.read_parquet(path)
    preempts = events[events["kind"] == "preempt"]
    inplace = preempts[preempts["nodes_after"] > 0]
    total = preempts[preempts["nodes_after"] == 0]
    tally.inplace_kills += len(inplace)
    beyond = int((inplace["lost_steps"] > 1).sum())
    tally.lost_beyond_inflight += beyond
    if beyond:
        tally.failures.append(f"{out}: {beyond} in-place preemptions lost more than 1 step")
    tally.total_losses += len(total)
    tally.total_lost_steps += int(total["lost_steps"].sum())


def one_run(index: int, plan: Plan, root: Path, rng: random.Random, tally: Tally) -> None:
    """One replay with faults until it ends (or the plan's faults are all in).

    After a controller kill the run is resumed (``--resume``) and the faults go on.
    """
    out = root / f"run-{index:03d}"
    tally.runs += 1
    seg = Segment(_argv(plan, out, resume=False), out)
    tally.segments += 1
    _started(seg, 180.0)
    kinds = Kinds(rng, dict(plan.weights))
    while sum(tally.faults.values()) < plan.faults:
        deadline = time.monotonic() + rng.uniform(*plan.gap_s)
        while time.monotonic() < deadline and not seg.done():
            seg.workers()
            time.sleep(0.05)
        if seg.done():
            break
        kind = kinds.next()
        missed = tally.missed["checkpoint"]
        if not inject(kind, seg, rng, tally):
            continue
        if kind == "checkpoint" and tally.missed["checkpoint"] > missed:
            kind = "worker"  # it killed the writer after its rename: a plain worker kill
        tally.faults[kind] += 1
        if kind == "controller":
            seg = Segment(_argv(plan, out, resume=True), out)
            tally.segments += 1
            _started(seg, 180.0)
    summary = _finish(seg, plan, tally)
    if summary is not None and summary.get("completed"):
        tally.completed += 1
    elif summary is not None:
        tally.failures.append(f"{out}: did not complete ({summary.get('steps')} steps)")
    check_checkpoints(out / "checkpoints", tally)
    _books(out, tally)


def _table(row: dict[str, Any], plan: Plan, wall_s: float) -> str:
    lines = ["| measure | value |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in row.items()]
    lines.append(f"| wall time (s) | {wall_s:.0f} |")
    head = (
        f"{plan.faults} faults over runs of {plan.max_steps} steps, spot_us_east.csv from "
        f"119000 s at x300, up to {plan.max_nodes} workers, faults {plan.gap_s[0]:g}-"
        f"{plan.gap_s[1]:g} s apart, kinds {dict(plan.weights)} per bag, seed {plan.seed}"
    )
    return head + "\n\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 if a goal was missed (hangs, orphans, bad checkpoints)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one short run, 4 faults")
    parser.add_argument("--faults", type=int, default=100, help="faults to inject in all")
    parser.add_argument("--max-steps", type=int, default=9000, help="steps of each run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the runs' folders here")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args(argv)
    if args.quick:
        plan = Plan(len(KINDS), 1500, (2.0, 3.0), max_runs=3, seed=args.seed)
    else:
        weights = (("worker", 3), ("checkpoint", 2), ("stop", 2), ("controller", 1))
        plan = Plan(args.faults, args.max_steps, (1.5, 5.0), seed=args.seed, weights=weights)
    rng = random.Random(args.seed)
    tally = Tally()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="elasim-chaos-") as tmp:
        root = args.keep or Path(tmp)
        for index in range(plan.max_runs):
            if sum(tally.faults.values()) >= plan.faults:
                break
            one_run(index, plan, root, rng, tally)
            print(f"run {index + 1}: {dict(tally.faults)}", file=sys.stderr, flush=True)
    row = tally.row()
    print(_table(row, plan, time.monotonic() - start))
    for line in tally.failures:
        print("failure:", line)
    if args.json is not None:
        args.json.write_text(json.dumps({**row, "failures": tally.failures}, indent=1) + "\n")
    bad = tally.hangs or tally.orphans or tally.unloadable or tally.lost_beyond_inflight
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
