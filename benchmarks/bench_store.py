"""The run's authenticated store against torch's TCPStore: one round trip, and a connect.

Run: ``python benchmarks/bench_store.py`` (about 20 s on a quiet machine; TCPStore's
connect, about 0.17 s each, dominates).

Why: the executor replaced ``torch.distributed.TCPStore`` (C++, no authentication) by
a store of its own (:mod:`elasim.executor.authstore`: Python threads, HMAC handshake).
Rank 0 reads the command counter with one ``add`` every few milliseconds, and gloo's
rendezvous does a few ``set``/``get`` per rank, so the round trip is what could slow a
run down.  Both stores are measured in the same run, alternating, on loopback:

* ``add(key, 0)``: the command poll;
* ``set`` + ``get`` of a 64-byte value: a rendezvous exchange;
* a new connection (for ours, including the handshake).

Prints medians over batches and the ratio ours / TCPStore.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import timedelta

import torch.distributed as dist

from elasim.executor.auth import generate_secret
from elasim.executor.authstore import StoreServer
from elasim.executor.storeclient import connect_store

BATCH = 300
ROUNDS = 7


def _per_call_us(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> int:
    """Measure and print (see the module docstring)."""
    secret = generate_secret()
    server = StoreServer(secret)
    server.start()
    ours = connect_store(f"127.0.0.1:{server.port}", secret)
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    theirs = dist.TCPStore("127.0.0.1", master.port, is_master=False)
    value = b"x" * 64
    cases: dict[str, dict[str, Callable[[], object]]] = {
        "add(key, 0)": {
            "tcpstore": lambda: theirs.add("seq", 0),
            "ours": lambda: ours.add("seq", 0),
        },
        "set + get (64 B)": {
            "tcpstore": lambda: (theirs.set("k", value), theirs.get("k")),
            "ours": lambda: (ours.set("k", value), ours.get("k")),
        },
        "connect": {
            "tcpstore": lambda: dist.TCPStore(
                "127.0.0.1", master.port, is_master=False, timeout=timedelta(seconds=10)
            ),
            "ours": lambda: connect_store(f"127.0.0.1:{server.port}", secret).close(),
        },
    }
    print(f"median microseconds per call, {ROUNDS} alternating rounds (loopback)")
    print(f"{'operation':18s} {'TCPStore':>10s} {'ours':>10s} {'ratio':>7s}")
    try:
        for name, sides in cases.items():
            calls = BATCH if name != "connect" else 30
            times: dict[str, list[float]] = {"tcpstore": [], "ours": []}
            for _ in range(ROUNDS):
                for side, fn in sides.items():
                    times[side].append(_per_call_us(fn, calls))
            a, b = statistics.median(times["tcpstore"]), statistics.median(times["ours"])
            print(f"{name:18s} {a:10.0f} {b:10.0f} {b / a:6.2f}x")
    finally:
        ours.close()
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
