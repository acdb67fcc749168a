"""Survivors' pause per membership change: in-place vs restart vs plain torchrun.

Run: ``python benchmarks/bench_executor_pause.py`` (about 3 minutes on a 2-core box;
``--quick`` for fewer repetitions, ``--json PATH`` to keep the numbers).

What is measured, in one run on this machine, with the executor's default job
(MLP on scikit-learn digits, gloo on CPU, one thread per worker):

* **inplace**: transitions 1 -> 2 -> 4 -> 2 -> 1 workers, repeated; warm standbys are
  ready before each scale-up (that is the mechanism: newcomers import torch before
  they join).  Also a SIGKILL of one worker at 2 and at 4 workers.
* **restart** (the executor's TorchElastic-semantics mode): the same transitions;
  every change stops all workers (checkpoint at a step boundary), cold-starts fresh
  processes and restores the checkpoint.
* **torchrun**: a plain ``torchrun --max-restarts`` job of the same model (DDP,
  checkpoint every 20 steps, see ``bench_executor_torchrun_worker.py``) at 1, 2 and 4
  workers; one worker is SIGKILLed and torchrun restarts the group.  The child runs
  with ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: with torchrun's default shared
  rendezvous store most restarts after a killed worker fail or hang on this machine
  (pytorch/pytorch#135712, #167288).

Pause = survivors' last step end before the change -> first step end after it (the
raw interval, one step included; the executor's ``pause_s`` subtracts one typical
step and is printed alongside).  Ratios compare medians of the raw intervals.
Targets: inplace median <= 0.25 s at 4 workers; inplace >= 10x faster than torchrun.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from elasim.executor.group import (
    GroupSettings,
    LocalLauncher,
    ProcessWorkerGroup,
    RescaleMode,
)
from elasim.executor.protocol import WorkerSettings

HERE = Path(__file__).resolve().parent
SEQUENCE = (1, 2, 4, 2, 1)


def _wait_steps(group: ProcessWorkerGroup, steps: int, timeout_s: float = 60.0) -> None:
    target = group.progress().step + steps
    deadline = time.monotonic() + timeout_s
    while group.progress().step < target:
        if time.monotonic() > deadline:
            raise RuntimeError("training stalled")
        group.wait(0.01)


def _record(rows: list[dict[str, Any]], mode: str, before: int, after: int, event: Any) -> None:
    rows.append(
        {
            "mode": mode,
            "transition": f"{before}->{after}",
            "before": before,
            "after": after,
            "interval_s": event.interval_s,
            "pause_s": event.pause.pause_s,
            **event.pause.as_dict(),
        }
    )


def bench_group(
    mode: RescaleMode,
    repeats: int,
    steps_between: int,
    tmp: Path,
    *,
    launcher: Any = None,
    label: str = "",
) -> list[dict]:
    """Transitions 1 -> 2 -> 4 -> 2 -> 1 (and SIGKILLs in inplace mode).

    ``launcher`` places the 4 workers (default: this host's processes); ``label``
    prefixes the rows' mode (``bench_ray_pause.py`` runs this with the Ray launcher).
    """
    worker = WorkerSettings(max_steps=10**9, checkpoint_dir=str(tmp / f"ckpt-{label}{mode.value}"))
    launcher = launcher or LocalLauncher(4, log_dir=tmp / f"logs-{mode.value}")
    group = ProcessWorkerGroup(
        GroupSettings(mode=mode, worker=worker, change_timeout_s=60, ready_timeout_s=120),
        [launcher],
    )
    rows: list[dict[str, Any]] = []
    try:
        group.start()
        group.apply(SEQUENCE[0], 0)
        _wait_steps(group, steps_between)
        for _ in range(repeats):
            for before, after in zip(SEQUENCE, SEQUENCE[1:], strict=False):
                if mode is RescaleMode.INPLACE and after > before:
                    group.warm(after - before)
                    _wait_steps(group, steps_between)
                events = group.apply(after, 0)
                main = [e for e in events if e.nodes_after == after and e.interval_s]
                if main:
                    _record(rows, label + mode.value, before, after, main[-1])
                _wait_steps(group, steps_between)
        if mode is RescaleMode.INPLACE:
            for size in (2, 4) * repeats:
                group.warm(size - sum(group.held()))
                group.apply(size, 0)
                _wait_steps(group, steps_between)
                events = group.preempt(1, graceful=False)
                down = [e for e in events if e.interval_s]
                if down:
                    _record(rows, f"{label}inplace-kill", size, size - 1, down[-1])
                _wait_steps(group, steps_between)
    finally:
        group.close()
    return rows


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _read_steps(path: Path) -> list[float]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(float(json.loads(line)["t"]))
    return out


def _stop_torchrun(proc: subprocess.Popen[bytes], out: Path) -> None:
    """SIGTERM torchrun (it stops its workers), then SIGKILL any worker left.

    torchrun's workers do not share its process group, so killing the group is not
    enough: the pids the workers wrote are checked one by one.
    """
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)
    for pid_file in out.glob("pid-*"):
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline")
        with contextlib.suppress(OSError):
            if str(out) in cmdline.read_bytes().decode(errors="replace"):
                os.kill(pid, signal.SIGKILL)


def _launch_torchrun(world: int, out: Path) -> tuple[subprocess.Popen, Any]:
    """A plain torchrun job of ``world`` workers writing its steps under ``out``."""
    env = dict(os.environ, TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1", OMP_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={world}",
        "--max-restarts=3",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{_free_port()}",
        str(HERE / "bench_executor_torchrun_worker.py"),
        "--out",
        str(out),
    ]
    log = open(out / "torchrun.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    return proc, log


def _kill_one_and_time(proc: subprocess.Popen, world: int, out: Path) -> float:
    """Kill the last rank after 100 steps; seconds from the survivors' last step to the next."""
    victim_rank = world - 1
    deadline = time.monotonic() + 120
    while len(_read_steps(out / f"steps-0-{victim_rank}.jsonl")) < 100:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"torchrun did not start (see {out / 'torchrun.log'})")
        time.sleep(0.1)
    pid = int((out / f"pid-0-{victim_rank}").read_text())
    kill_wall = time.time()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 120
    after: list[float] = []
    while not after:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"torchrun did not restart (see {out / 'torchrun.log'})")
        time.sleep(0.05)
        after = [t for r in range(world) for t in _read_steps(out / f"steps-1-{r}.jsonl")]
    survivors = [r for r in range(world) if r != victim_rank] or [victim_rank]
    before = [
        t for r in survivors for t in _read_steps(out / f"steps-0-{r}.jsonl") if t <= kill_wall
    ]
    return min(after) - max(before)


def bench_torchrun(world: int, repeats: int, tmp: Path) -> list[dict]:
    """Kill one worker of a plain torchrun job; the pause until the restarted group steps."""
    rows: list[dict[str, Any]] = []
    for attempt in range(repeats):
        out = tmp / f"torchrun-{world}-{attempt}"
        out.mkdir(parents=True)
        proc, log = _launch_torchrun(world, out)
        try:
            interval = _kill_one_and_time(proc, world, out)
            rows.append(
                {
                    "mode": "torchrun",
                    "transition": f"kill@{world}",
                    "before": world,
                    "after": world,
                    "interval_s": interval,
                    "pause_s": interval,
                }
            )
        finally:
            _stop_torchrun(proc, out)
            log.close()
    return rows


def _median(rows: list[dict], key: str = "interval_s", **match: Any) -> float | None:
    values = [
        r[key] for r in rows if all(r[k] == v for k, v in match.items()) and r.get(key) is not None
    ]
    return statistics.median(values) if values else None


def _fmt(value: float | None) -> str:
    return "     -" if value is None else f"{value:6.3f}"


def print_components(rows: list[dict[str, Any]], elapsed_s: float) -> None:
    """One line per mode and transition: the median pause and its components."""
    print(f"survivors' pause in seconds (median), measured in {elapsed_s:.0f} s on this machine")
    print(
        f"{'mode':14s} {'transition':10s} {'n':>3s} {'interval':>8s} {'pause_s':>8s} "
        f"{'detect':>7s} {'acquire':>7s} {'rdzv':>7s} {'state':>7s} {'warmup':>7s}"
    )
    keys = sorted({(r["mode"], r["transition"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for mode, transition in keys:
        sel = [r for r in rows if r["mode"] == mode and r["transition"] == transition]
        comps = [
            _fmt(_median(sel, c)) if c in sel[0] else "     -"
            for c in ("detect_s", "acquire_s", "rendezvous_s", "state_s", "warmup_s")
        ]
        print(
            f"{mode:14s} {transition:10s} {len(sel):3d} {_fmt(_median(sel))}   "
            f"{_fmt(_median(sel, 'pause_s'))} " + " ".join(comps)
        )


def print_ratios(rows: list[dict[str, Any]]) -> None:
    """The targets: inplace at 4 workers, restart and torchrun against inplace."""
    inplace = _median(rows, mode="inplace")
    inplace4 = statistics.median(
        [r["interval_s"] for r in rows if r["mode"] == "inplace" and 4 in (r["before"], r["after"])]
    )
    kill = {w: _median(rows, mode="inplace-kill", before=w) for w in (2, 4)}
    restart = _median(rows, mode="restart")
    torchrun = {w: _median(rows, mode="torchrun", before=w) for w in (1, 2, 4)}
    print()
    print(f"inplace, all transitions:        median {_fmt(inplace)} s")
    print(
        f"inplace, transitions with 4:     median {_fmt(inplace4)} s  (target <= 0.25 s: "
        f"{'met' if inplace4 <= 0.25 else 'NOT met'})"
    )
    print(
        f"restart, all transitions:        median {_fmt(restart)} s  "
        f"ratio to inplace {restart / inplace:6.1f}x"
    )
    for w in (2, 4):
        t, k = torchrun[w], kill[w]
        if t and k:
            print(
                f"SIGKILL at {w}: torchrun {t:6.3f} s vs inplace {k:6.3f} s   ratio {t / k:6.1f}x"
            )
    t_all = _median(rows, mode="torchrun")
    if t_all and inplace:
        ratio = t_all / inplace
        print(
            f"torchrun restart median {t_all:6.3f} s  ratio to inplace {ratio:6.1f}x  "
            f"(target >= 10x: {'met' if ratio >= 10 else 'NOT met'})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    repeats = 2 if args.quick else 5
    restart_repeats = 1 if args.quick else 2
    torchrun_repeats = 1 if args.quick else 3
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-pause-") as tmp_name:
        tmp = Path(tmp_name)
        started = time.perf_counter()
        rows += bench_group(RescaleMode.INPLACE, repeats, 25, tmp)
        rows += bench_group(RescaleMode.RESTART, restart_repeats, 25, tmp)
        for world in (1, 2, 4):
            rows += bench_torchrun(world, torchrun_repeats, tmp)
        elapsed_s = time.perf_counter() - started

    print_components(rows, elapsed_s)
    print_ratios(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
