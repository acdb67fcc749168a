r"""A plain torchrun training script: torch.distributed + DDP, its own checkpoint and resume.

It runs unchanged under both (``--max-steps`` tells elasim the script's ``--steps``)::

    torchrun --standalone --nproc_per_node 2 examples/torchrun_ddp.py --checkpoint-dir ckpt
    elasim run -t spot_us_east.csv --max-steps 200 --script examples/torchrun_ddp.py \
        -- --checkpoint-dir ckpt

It uses only the TorchElastic contract: ``init_process_group`` reads ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` from the environment,
``LOCAL_RANK`` picks the GPU, and ``TORCHELASTIC_RESTART_COUNT`` is logged.  What it
does for elasticity is what any restartable torchrun job does:

* it **resumes** from the newest checkpoint in ``--checkpoint-dir`` (loaded with
  ``weights_only=True``), so a restart on another number of processes carries on;
* it **checkpoints** every ``--checkpoint-every`` steps and when it stops, atomically
  (temporary file, fsync, rename), from rank 0;
* on **SIGTERM** (a preemption notice, or torchrun stopping the group) it finishes the
  step in flight, checkpoints and exits 0.  The ranks agree on stopping through one
  all-reduced flag per step, so they stop at the same step; a collective that fails
  (a peer was killed) also stops it, and rank 0 still saves its consistent state.

The one optional line for elasim is ``step_done(...)`` after each optimizer step: a
no-op outside ``elasim run --script``, and replaced by a no-op where elasim is not
installed.  The data is generated (a noisy linear target), so the script needs
nothing but torch.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn
from torch.nn.parallel import DistributedDataParallel

try:  # the one optional line for elasim; nothing without it
    from elasim.executor import step_done
except ImportError:  # pragma: no cover - elasim not installed

    def step_done(step=None, *, loss=None, samples=None):  # noqa: D103
        return None


FEATURES = 16
CHECKPOINT = "checkpoint.pt"
_stop_requested = False


def _on_sigterm(_signum, _frame):
    global _stop_requested
    _stop_requested = True


def parse_args(argv=None):
    """The script's own arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="Total optimizer steps.")
    parser.add_argument("--batch", type=int, default=64, help="Global batch size.")
    parser.add_argument("--checkpoint-dir", default="checkpoints", help="Checkpoint folder.")
    parser.add_argument("--checkpoint-every", type=int, default=50, help="Steps between saves.")
    parser.add_argument("--step-sleep-s", type=float, default=0.0, help="Extra time per step.")
    return parser.parse_args(argv)


def save(path, model, optimizer, step):
    """Write the checkpoint atomically: a temporary file, fsync, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
    with open(tmp, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def load(path, model, optimizer, device):
    """Resume from ``path`` if it exists; returns the step to continue from."""
    if not path.exists():
        return 0
    state = torch.load(path, map_location=device, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return int(state["step"])


def batch_of(step, rank, world, global_batch, device):
    """The share of step ``step``'s batch that ``rank`` trains on: a noisy linear target."""
    per_rank = global_batch // world + (1 if rank < global_batch % world else 0)
    gen = torch.Generator().manual_seed(1_000_003 * step + rank)
    x = torch.randn(per_rank, FEATURES, generator=gen)
    weights = torch.linspace(-1.0, 1.0, FEATURES)
    y = x @ weights + 0.1 * torch.randn(per_rank, generator=gen)
    return x.to(device), y.unsqueeze(1).to(device)


def stop_agreed(device):
    """Whether any rank was asked to stop (True as well when a peer is gone)."""
    flag = torch.tensor([1.0 if _stop_requested else 0.0], device=device)
    try:
        dist.all_reduce(flag)
    except RuntimeError:  # a peer died: the group is broken, stop here
        return True, False
    return bool(flag.item() > 0), True


def train(args, device):
    """The training loop; returns whether the process group is still healthy."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    path = Path(args.checkpoint_dir) / CHECKPOINT
    step = load(path, model, optimizer, device)
    restarts = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if rank == 0:
        print(f"world {world}, restart {restarts}, resuming at step {step}", flush=True)
    ddp = DistributedDataParallel(model)
    healthy = True
    while step < args.steps:
        stop, healthy = stop_agreed(device)
        if stop:
            break
        x, y = batch_of(step, rank, world, args.batch, device)
        try:
            loss = F.mse_loss(ddp(x), y)
            optimizer.zero_grad()
            loss.backward()
        except RuntimeError:  # a peer died mid-step: the update was not applied
            healthy = False
            break
        optimizer.step()
        step += 1
        if args.step_sleep_s:
            time.sleep(args.step_sleep_s)
        step_done(step, loss=loss.item(), samples=args.batch)
        if rank == 0 and step % args.checkpoint_every == 0:
            save(path, model, optimizer, step)
    if rank == 0:
        save(path, model, optimizer, step)
        print(f"stopped at step {step} of {args.steps}", flush=True)
    return healthy


def main(argv=None):
    """Join the process group from the environment, train, leave."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    healthy = train(args, device)
    if healthy:
        # leave together: a rank that tore the group down while rank 0 still wrote the
        # last checkpoint could make gloo abort the other (exit -6 under torchrun)
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
