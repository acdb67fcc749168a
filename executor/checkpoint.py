"""Atomic checkpoints that a crash can never corrupt, loaded with ``weights_only=True``.

A checkpoint is the last line of defence: it is what the job restarts from when every
worker is gone, and what ``restart`` mode restarts from after every membership change.
So a writer killed half-way (a preemption during the write is the *common* case on
spot capacity) must never damage the previous checkpoint.  The recipe:

1. serialise to memory (``torch.save`` into a buffer), so the file write is one
   sequential copy;
2. write a temporary file in the *same directory* (``os.replace`` is only atomic
   within one file system), ``flush`` and ``os.fsync`` it;
3. ``os.replace`` it over the target (atomic: readers see the old or the new file,
   never a mix), then ``fsync`` the directory so the rename itself is durable.

Loading uses ``torch.load(..., weights_only=True)``: a checkpoint is data, never
code, so a tampered file cannot run anything.  That is why
:class:`~elasim.executor.api.TrainState` keeps only tensors and primitives.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "CHECKPOINT_NAME",
    "CheckpointError",
    "CheckpointInfo",
    "load_checkpoint",
    "save_checkpoint",
]

#: File name of the latest checkpoint inside a checkpoint directory.
CHECKPOINT_NAME = "checkpoint.pt"
_CHUNK_BYTES = 1 << 20


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read."""


@dataclass(frozen=True)
class CheckpointInfo:
    """What :func:`save_checkpoint` wrote.

    Attributes:
        path: the checkpoint file.
        size_bytes: its size.
        write_s: wall seconds spent serialising, writing and syncing.
    """

    path: Path
    size_bytes: int
    write_s: float


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_temps(target: Path) -> None:
    """Delete temp files of ``target`` left by writers that no longer exist.

    Temp names carry the writer's pid; a live writer's file is never touched.
    """
    for tmp in target.parent.glob(f".{target.name}.*.tmp"):
        try:
            pid = int(tmp.name.split(".")[-2])
        except (ValueError, IndexError):
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except PermissionError:  # pragma: no cover - someone else's live process
            continue


def save_checkpoint(
    path: str | Path,
    state: Mapping[str, Any],
    *,
    on_chunk: Callable[[int], None] | None = None,
    chunk_bytes: int = _CHUNK_BYTES,
) -> CheckpointInfo:
    """Atomically write ``state`` to ``path`` (see the module docstring).

    Args:
        path: target file; its directory is created.
        state: tensors and primitive containers only.
        on_chunk: called with the bytes written so far after every chunk; a fault
            injection point for tests (a hook that ``os._exit``-s simulates a writer
            killed mid-write).
        chunk_bytes: size of each write (small values make ``on_chunk`` finer).

    Raises:
        CheckpointError: the file system refused the write.
    """
    start = time.perf_counter()
    target = Path(path)
    buffer = io.BytesIO()
    torch.save(dict(state), buffer)
    data = buffer.getbuffer()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(target)
        tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as handle:
                written = 0
                while written < len(data):
                    written += handle.write(data[written : written + chunk_bytes])
                    if on_chunk is not None:
                        on_chunk(written)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(target.parent)
    except OSError as exc:
        raise CheckpointError(f"{target}: cannot write checkpoint: {exc}") from exc
    return CheckpointInfo(target, len(data), time.perf_counter() - start)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` onto the CPU.

    Raises:
        CheckpointError: missing, truncated or not a checkpoint.
    """
    target = Path(path)
    try:
        state = torch.load(target, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{target}: no checkpoint") from None
    except Exception as exc:  # torch raises many types for a corrupt file
        raise CheckpointError(f"{target}: unreadable checkpoint: {exc}") from exc
    if not isinstance(state, dict):
        raise CheckpointError(f"{target}: not a checkpoint (top level is {type(state).__name__})")
    return state
