"""A worker's end of the run's store, as a ``torch.distributed.Store``.

Why a Python ``Store`` subclass: gloo and NCCL rendezvous through whatever Store
they are given, so wrapping :class:`~.authstore.StoreClient` (authenticated, see
:mod:`.auth`) lets ``init_process_group(store=PrefixStore(prefix, store))`` form
process groups exactly as over a TCPStore.  One pitfall: the Python object must stay
referenced for as long as C++ uses it (``Worker.store`` keeps it); a PrefixStore over
a collected Python store fails with "INTERNAL ASSERT ... Not implemented".
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from .authstore import StoreClient, StoreOp, _as_bytes

__all__ = ["AuthStore", "connect_store"]


def _ms(timeout: timedelta | float | None, default_s: float) -> tuple[bytes, float]:
    if timeout is None:
        seconds = default_s
    elif isinstance(timeout, timedelta):
        seconds = timeout.total_seconds()
    else:
        seconds = float(timeout)
    return str(int(seconds * 1000)).encode(), seconds


class AuthStore(dist.Store):
    """The run's store for ``torch.distributed`` (TCPStore's semantics)."""

    def __init__(self, client: StoreClient) -> None:
        super().__init__()
        self._client = client

    def set(self, key: str, value: Any) -> None:
        """Store ``value``."""
        self._client.request(StoreOp.SET, [key.encode(), _as_bytes(value)])

    def get(self, key: str) -> bytes:
        """The value of ``key``, waiting for it up to the client's timeout."""
        ms, wait_s = _ms(None, self._client.timeout_s)
        return self._client.request(StoreOp.GET, [ms, key.encode()], wait_s)[0]

    def add(self, key: str, amount: int) -> int:
        """Add to an integer key; the new value."""
        return int(self._client.request(StoreOp.ADD, [key.encode(), str(int(amount)).encode()])[0])

    def append(self, key: str, value: Any) -> None:
        """Append bytes to ``key``."""
        self._client.request(StoreOp.APPEND, [key.encode(), _as_bytes(value)])

    def check(self, keys: Sequence[str]) -> bool:
        """Whether every key exists."""
        return self._client.request(StoreOp.CHECK, [k.encode() for k in keys])[0] == b"1"

    def wait(self, keys: Sequence[str], timeout: timedelta | float | None = None) -> None:
        """Block until every key exists (raises with "timeout" in the message)."""
        ms, wait_s = _ms(timeout, self._client.timeout_s)
        self._client.request(StoreOp.WAIT, [ms, *(k.encode() for k in keys)], wait_s)

    def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
        """Compare-and-set; the value after it."""
        fields = [key.encode(), _as_bytes(expected), _as_bytes(desired)]
        return self._client.request(StoreOp.COMPARE_SET, fields)[0]

    def delete_key(self, key: str) -> bool:
        """Remove ``key``; whether it existed."""
        return self._client.request(StoreOp.DELETE, [key.encode()])[0] == b"1"

    def num_keys(self) -> int:
        """How many keys the store holds."""
        return int(self._client.request(StoreOp.NUM_KEYS, [])[0])

    def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        """Several values in one round trip (waits for all of them)."""
        ms, wait_s = _ms(None, self._client.timeout_s)
        return self._client.request(StoreOp.MULTI_GET, [ms, *(k.encode() for k in keys)], wait_s)

    def multi_set(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        """Several keys in one round trip."""
        fields: list[bytes] = []
        for key, value in zip(keys, values, strict=True):
            fields += [key.encode(), _as_bytes(value)]
        self._client.request(StoreOp.MULTI_SET, fields)

    def close(self) -> None:
        """Close the connections."""
        self._client.close()


def connect_store(
    address: str, secret: bytes, *, timeout_s: float = 300.0, connect_s: float = 60.0
) -> AuthStore:
    """Connect to the run's store at ``HOST:PORT`` and authenticate.

    Raises:
        StoreError: unreachable, or the handshake failed.
        ValueError: ``address`` is not ``HOST:PORT``.
    """
    return AuthStore(StoreClient(address, secret, timeout_s=timeout_s, connect_s=connect_s))
