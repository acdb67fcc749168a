"""The plain ``torchrun --max-restarts`` baseline job that ``bench_executor_pause.py`` launches.

Not a benchmark by itself.  It is what a TorchElastic user writes for the same model
as the executor's default job (:mod:`elasim.executor.digits`): ``env://`` rendezvous
through torchrun, ``DistributedDataParallel`` on gloo, a ``DistributedSampler``, a
checkpoint every ``--checkpoint-every`` steps (written atomically by rank 0) that every
restart resumes from.  Each rank appends ``{"t": time.time(), "step": ..}`` per step
to ``steps-<restart>-<rank>.jsonl`` and writes its pid to ``pid-<restart>-<rank>``, so
the driver can kill a worker and measure the pause from outside.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from elasim.executor.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from elasim.executor.digits import digits_job


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--checkpoint-every", type=int, default=20)
    parser.add_argument("--global-batch", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)  # torchrun's own default (OMP_NUM_THREADS=1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"pid-{restart}-{rank}").write_text(str(os.getpid()))
    torch.manual_seed(0)
    job = digits_job(global_batch=args.global_batch)
    data = job.make_data()
    model = job.make_model()
    optimizer = job.make_optimizer(model.parameters())
    step, epoch = 0, 0
    ckpt = args.out / "checkpoint.pt"
    try:
        state = load_checkpoint(ckpt)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, epoch = int(state["step"]), int(state["epoch"])
    except CheckpointError:
        pass
    ddp = DistributedDataParallel(model)
    x_all, y_all = data.train.tensors
    per_rank = max(args.global_batch // world, 1)
    log = open(args.out / f"steps-{restart}-{rank}.jsonl", "a", buffering=1)  # noqa: SIM115
    while step < args.steps:
        sampler = torch.utils.data.DistributedSampler(
            data.train, num_replicas=world, rank=rank, shuffle=True, seed=0
        )
        sampler.set_epoch(epoch)
        ids = list(sampler)
        for start in range(0, len(ids) - per_rank + 1, per_rank):
            index = torch.tensor(ids[start : start + per_rank])
            loss = F.cross_entropy(ddp(x_all[index]), y_all[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            log.write(json.dumps({"t": time.time(), "step": step}) + "\n")
            if rank == 0 and step % args.checkpoint_every == 0:
                save_checkpoint(
                    ckpt,
                    {
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "step": step,
                        "epoch": epoch,
                    },
                )
            if step >= args.steps:
                break
        epoch += 1
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
