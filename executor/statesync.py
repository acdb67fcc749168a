"""State sync: bring every member of a new generation to the same training state.

Members all-gather ``(committed step, parameter checksum, step-in-flight)``.  The
*source* is the lowest rank at the highest committed step (a survivor: after a hard
failure, a step counts as committed once any survivor applied the all-reduced
gradient, which already contains every rank's contribution).  Ranks whose step or
checksum differ (newcomers, a survivor that lost the in-flight step) receive model,
optimizer and sampler position by broadcast, from memory, not from disk.  A pure
scale-down skips the broadcast.

Why a module of its own: this is plain ``torch.distributed`` over a
:class:`~.api.TrainState`, with no store, commands or phases in it, and it changes
for its own reasons (what a state holds, how it travels); the worker process
(:mod:`.worker`) calls :func:`sync_state` once per generation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from .api import TrainState

__all__ = ["broadcast_state", "checksum", "sync_state"]


@dataclass(frozen=True)
class _TensorRef:
    """Placeholder for tensor ``index`` in a broadcast state skeleton."""

    index: int


def _flatten(obj: Any, tensors: list[torch.Tensor]) -> Any:
    """Replace tensors in a nested state by :class:`_TensorRef` (collected in order)."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return _TensorRef(len(tensors) - 1)
    if isinstance(obj, dict):
        return {k: _flatten(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_flatten(v, tensors) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_flatten(v, tensors) for v in obj)
    return obj


def _unflatten(obj: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(obj, _TensorRef):
        return tensors[obj.index]
    if isinstance(obj, dict):
        return {k: _unflatten(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unflatten(v, tensors) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_unflatten(v, tensors) for v in obj)
    return obj


def checksum(state: TrainState) -> float:
    """Sum of every parameter (float64): equal states have equal checksums."""
    with torch.no_grad():
        params = state.model.parameters()
        return float(sum(p.detach().double().sum().item() for p in params))


def sync_state(
    state: TrainState, device: torch.device, rank: int, world: int, inflight: bool
) -> dict[str, Any]:
    """All-gather (step, checksum, in-flight), then broadcast from the source if needed."""
    mine = torch.tensor(
        [float(state.step), checksum(state), float(inflight)],
        dtype=torch.float64,
        device=device,
    )
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    rows = [g.tolist() for g in gathered]
    top = max(r[0] for r in rows)
    src = min(i for i, r in enumerate(rows) if r[0] == top)
    needy = [i for i, r in enumerate(rows) if (r[0], r[1]) != (rows[src][0], rows[src][1])]
    state_bytes = 0
    if needy:
        state_bytes = broadcast_state(state, device, src, receive=rank in needy)
    return {
        "source_rank": src,
        "receivers": len(needy),
        "state_bytes": state_bytes,
        "adopted_step": int(top),
        "steps_before": [int(r[0]) for r in rows],
        "inflight_lost": any(r[2] > 0 for r in rows),
    }


def broadcast_state(state: TrainState, device: torch.device, src: int, *, receive: bool) -> int:
    """Broadcast the whole TrainState from ``src``: skeleton, then one buffer per dtype.

    Returns the bytes that went over the wire.
    """
    rank = dist.get_rank()
    tensors: list[torch.Tensor] = []
    skeleton: Any = None
    layout: list[tuple[str, list[tuple[int, tuple[int, ...]]]]] = []
    if rank == src:
        skeleton = _flatten(state.state_dict(), tensors)
        groups: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
        for i, t in enumerate(tensors):
            groups.setdefault(str(t.dtype).removeprefix("torch."), []).append((i, tuple(t.shape)))
        layout = list(groups.items())
    box = [(skeleton, layout, len(tensors))]
    dist.broadcast_object_list(box, src=src, device=device)
    skeleton, layout, count = box[0]
    received: list[torch.Tensor | None] = [None] * count
    total_bytes = 0
    for dtype_name, entries in layout:
        dtype = getattr(torch, dtype_name)
        wire = torch.uint8 if dtype == torch.bool else dtype
        sizes = [math.prod(shape) for _, shape in entries]
        if rank == src:
            flat = torch.cat([tensors[i].detach().reshape(-1).to(wire) for i, _ in entries])
            flat = flat.to(device)
        else:
            flat = torch.empty(sum(sizes), dtype=wire, device=device)
        dist.broadcast(flat, src=src)
        total_bytes += flat.numel() * flat.element_size()
        if receive:
            for (i, shape), part in zip(entries, torch.split(flat, sizes), strict=True):
                received[i] = part.reshape(shape).to(dtype).clone()
    if receive:
        state.load_state_dict(_unflatten(skeleton, received))  # type: ignore[arg-type]
    return total_bytes
