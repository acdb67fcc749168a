"""In-place pause on the Ray launcher next to the local launcher, in one run.

Run: ``python benchmarks/bench_ray_pause.py`` (``--repeats N``, ``--json PATH``).
Needs the ``ray`` extra.

Both launchers go through the same transitions as ``bench_executor_pause.py``
(1 -> 2 -> 4 -> 2 -> 1 workers, warm standbys ready before each scale-up, then a
SIGKILL of one worker at 2 and at 4 workers), with the executor's default job (MLP on
scikit-learn digits, gloo on CPU):

* **local**: workers are subprocesses of the controller (the default launcher).
* **ray**: workers are Ray actors of a private local Ray instance (one host: what
  differs is only the launcher, not the network); a SIGKILL is ``ray.kill`` of the
  actor, and the group learns of the death when Ray reports the actor gone.

Pause = survivors' last step end before the change -> first step end after it (the
raw interval; ``pause_s`` subtracts one typical step).  Medians per launcher and the
ratio ray / local are printed; the machine's load is whatever it is during the run,
so compare the two columns of one run, not numbers of different runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_executor_pause import bench_group  # noqa: E402

from elasim.executor.group import RescaleMode  # noqa: E402
from elasim.executor.ray_launcher import RayLauncher, RaySession  # noqa: E402

#: the Ray instance's slots are a custom resource and it has no CPUs: a node with
#: CPUs prestarts that many idle Python workers, which would load the machine
SLOT = "elasim_slot"


def _ray_session(attempts: int = 3) -> RaySession:
    """A private local Ray instance, retried: on a loaded machine a Ray node can fail
    to start (its raylet gives its agents 15 s)."""
    for attempt in range(attempts):
        try:
            return RaySession(None, num_cpus=0, resources={SLOT: 4})
        except ValueError as exc:
            print(f"ray did not start (attempt {attempt + 1}): {exc}", file=sys.stderr)
    raise SystemExit("ray did not start")


def _median(rows: list[dict], mode: str) -> float | None:
    values = [r["interval_s"] for r in rows if r["mode"] == mode and r["interval_s"] is not None]
    return statistics.median(values) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="rounds of the sequence")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-ray-pause-") as tmp_name:
        tmp = Path(tmp_name)
        started = time.perf_counter()
        rows += bench_group(RescaleMode.INPLACE, args.repeats, 25, tmp, label="local-")
        session = _ray_session()
        try:
            launcher = RayLauncher(4, resources={SLOT: 1.0}, log_dir=tmp / "logs-ray")
            rows += bench_group(
                RescaleMode.INPLACE, args.repeats, 25, tmp, launcher=launcher, label="ray-"
            )
        finally:
            session.close()
        elapsed = time.perf_counter() - started
    print(f"in-place pause in seconds (median raw interval), measured in {elapsed:.0f} s")
    print(f"{'change':26s} {'n':>3s} {'local':>8s} {'ray':>8s} {'ray/local':>9s}")
    for name, suffix in (("scale up/down", "inplace"), ("SIGKILL of a worker", "inplace-kill")):
        for transition in sorted({r["transition"] for r in rows if r["mode"].endswith(suffix)}):
            sel = {
                who: [
                    r["interval_s"]
                    for r in rows
                    if r["mode"] == f"{who}-{suffix}" and r["transition"] == transition
                ]
                for who in ("local", "ray")
            }
            med = {k: statistics.median(v) if v else None for k, v in sel.items()}
            ratio = med["ray"] / med["local"] if med["ray"] and med["local"] else None
            print(
                f"{name + ' ' + transition:26s} {len(sel['ray']):3d} "
                + " ".join("       -" if v is None else f"{v:8.3f}" for v in med.values())
                + ("         -" if ratio is None else f" {ratio:8.1f}x")
            )
    for suffix in ("inplace", "inplace-kill"):
        local = _median(rows, f"local-{suffix}")
        ray = _median(rows, f"ray-{suffix}")
        if local and ray:
            ratio = ray / local
            print(f"all {suffix:13s}: local {local:6.3f} s  ray {ray:6.3f} s  ratio {ratio:5.1f}x")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
