"""The run's key-value store: authenticated, data only, served by the controller.

Why our own store and not ``torch.distributed.TCPStore``: a TCPStore serves anyone who
connects, and accepts writes.  This one serves a connection only after it proved it
knows the run's secret (:mod:`.auth`), and it only ever holds *data*: rendezvous
(generation barriers, the process groups' addresses), the controller's membership
commands and the workers' reports, all plain bytes that are parsed as JSON or
integers and never imported, called, unpickled or executed.  The job, its options
and the worker settings are not in it: workers read them from a private file named
on their command line (:mod:`.runfiles`).

The same operations as TCPStore, with its semantics (``get`` and ``wait`` block until
the key exists or the timeout passes; ``add`` keeps ASCII integers; ``compare_set``
with an empty ``expected`` creates a missing key), so gloo and NCCL rendezvous on it
through :class:`~.storeclient.AuthStore`, a ``torch.distributed.Store`` (workers).
The controller uses :class:`StoreServer`'s own methods, in process.

Wire format after the handshake: one request, one response, each a frame
``u32 length | body``.  A request body is ``op (1 byte) | fields``, a response body
``status (1 byte) | fields``, each field ``u32 length | bytes``.  Stdlib only.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import socket
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any

from .auth import STORE, AuthError, client_handshake, server_handshake

__all__ = ["StoreClient", "StoreError", "StoreOp", "StoreServer", "StoreTimeout"]

log = logging.getLogger(__name__)

#: The largest frame accepted (ours are kilobytes: addresses, commands, step records).
MAX_FRAME_BYTES = 16 << 20
_U32 = struct.Struct(">I")
_OK, _TIMEOUT, _ERROR = 0, 1, 2


class StoreError(RuntimeError):
    """The store refused a request, or the connection to it failed."""


class StoreTimeout(StoreError):
    """A ``get`` or ``wait`` timed out (the message says "timeout", as TCPStore's)."""


class StoreOp(enum.IntEnum):
    """Requests a client may make (the values are the wire's op byte)."""

    SET = 1
    GET = 2
    ADD = 3
    CHECK = 4
    WAIT = 5
    COMPARE_SET = 6
    DELETE = 7
    NUM_KEYS = 8
    MULTI_GET = 9
    MULTI_SET = 10
    APPEND = 11


def pack(head: int, fields: Sequence[bytes]) -> bytes:
    """One frame: ``u32 length | head byte | fields``."""
    body = bytes([head]) + b"".join(_U32.pack(len(f)) + f for f in fields)
    return _U32.pack(len(body)) + body


def unpack(body: bytes) -> tuple[int, list[bytes]]:
    """Inverse of :func:`pack` (without the length prefix).

    Raises:
        StoreError: a malformed body.
    """
    if not body:
        raise StoreError("empty frame")
    fields: list[bytes] = []
    at = 1
    while at < len(body):
        if at + 4 > len(body):
            raise StoreError("truncated field length")
        (size,) = _U32.unpack_from(body, at)
        at += 4
        if at + size > len(body):
            raise StoreError("truncated field")
        fields.append(body[at : at + size])
        at += size
    return body[0], fields


def recv_frame(sock: socket.socket) -> bytes | None:
    """The next frame's body, or None when the peer closed cleanly between frames.

    Raises:
        StoreError: a frame over :data:`MAX_FRAME_BYTES`, or cut short.
    """
    head = _recv(sock, 4, allow_eof=True)
    if head is None:
        return None
    (size,) = _U32.unpack(head)
    if size > MAX_FRAME_BYTES:
        raise StoreError(f"frame of {size} bytes (limit {MAX_FRAME_BYTES})")
    body = _recv(sock, size, allow_eof=False)
    assert body is not None
    return body


def _recv(sock: socket.socket, count: int, *, allow_eof: bool) -> bytes | None:
    buf = bytearray()
    while len(buf) < count:
        chunk = sock.recv(count - len(buf))
        if not chunk:
            if allow_eof and not buf:
                return None
            raise StoreError("connection closed mid-frame")
        buf += chunk
    return bytes(buf)


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, list):  # torch passes std::vector<uint8_t> as a list of ints
        return bytes(value)
    return str(value).encode()


class StoreServer:
    """The run's store, hosted by the controller (see the module docstring).

    The controller calls the methods below directly (no socket); workers connect
    over TCP and must pass the handshake first.

    Attributes:
        bind_host: the address it listens on (loopback unless told otherwise).
        port: the port it listens on (after :meth:`start`).
    """

    def __init__(self, secret: bytes, bind_host: str = "127.0.0.1", port: int = 0) -> None:
        self._secret = secret
        self.bind_host = bind_host
        self._want_port = port
        self.port = 0
        self._data: dict[str, bytes] = {}
        self._cond = threading.Condition()
        self._sock: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._closed = False
        #: connections rejected at the handshake (tests and logs)
        self.rejected = 0

    # -- serving ---------------------------------------------------------------------------

    def start(self) -> None:
        """Listen, and serve connections in background threads.

        Raises:
            OSError: the address cannot be bound (the caller names it).
        """
        family = socket.AF_INET6 if ":" in self.bind_host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.bind_host, self._want_port))
        except OSError:
            sock.close()
            raise
        sock.listen(512)
        self._sock = sock
        self.port = int(sock.getsockname()[1])
        threading.Thread(target=self._accept, name="store-accept", daemon=True).start()

    def _accept(self) -> None:
        sock = self._sock
        assert sock is not None
        while not self._closed:
            try:
                conn, addr = sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(
                target=self._serve, args=(conn, addr), name="store-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket, addr: Any) -> None:
        with self._cond:
            if self._closed:
                conn.close()
                return
            self._conns.add(conn)
        try:
            try:
                server_handshake(conn, self._secret, STORE)
            except (AuthError, OSError) as exc:
                self.rejected += 1
                log.warning("store: rejected %s: %s", _peer(addr), exc)
                return
            while True:
                body = recv_frame(conn)
                if body is None:
                    return
                conn.sendall(self._answer(body))
        except (StoreError, OSError) as exc:
            if not self._closed:
                log.debug("store: dropped %s: %s", _peer(addr), exc)
        finally:
            with self._cond:
                self._conns.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _answer(self, body: bytes) -> bytes:
        """The response frame to one request (errors are answers, not exceptions)."""
        try:
            op, fields = unpack(body)
            status, out = self._dispatch(StoreOp(op), fields)
        except StoreTimeout as exc:
            return pack(_TIMEOUT, [str(exc).encode()])
        except (StoreError, ValueError, IndexError, UnicodeDecodeError) as exc:
            return pack(_ERROR, [str(exc).encode()[:300]])
        return pack(status, out)

    def _dispatch(self, op: StoreOp, f: list[bytes]) -> tuple[int, list[bytes]]:
        if op is StoreOp.SET:
            self.set(f[0].decode(), f[1])
            return _OK, []
        if op is StoreOp.GET:
            return _OK, [self.get(f[1].decode(), timeout_s=_ms(f[0]))]
        if op is StoreOp.ADD:
            return _OK, [str(self.add(f[0].decode(), int(f[1]))).encode()]
        if op is StoreOp.CHECK:
            return _OK, [b"1" if self.check([k.decode() for k in f]) else b"0"]
        if op is StoreOp.WAIT:
            self.wait([k.decode() for k in f[1:]], timeout_s=_ms(f[0]))
            return _OK, []
        if op is StoreOp.COMPARE_SET:
            return _OK, [self.compare_set(f[0].decode(), f[1], f[2])]
        if op is StoreOp.DELETE:
            return _OK, [b"1" if self.delete_key(f[0].decode()) else b"0"]
        if op is StoreOp.NUM_KEYS:
            return _OK, [str(self.num_keys()).encode()]
        if op is StoreOp.MULTI_GET:
            return _OK, self.multi_get([k.decode() for k in f[1:]], timeout_s=_ms(f[0]))
        if op is StoreOp.MULTI_SET:
            self.multi_set([k.decode() for k in f[0::2]], f[1::2])
            return _OK, []
        if op is StoreOp.APPEND:
            self.append(f[0].decode(), f[1])
            return _OK, []
        raise StoreError(f"unknown op {op}")

    def close(self) -> None:
        """Stop listening and drop every connection (clients see the controller gone)."""
        with self._cond:
            self._closed = True
            conns = list(self._conns)
            self._cond.notify_all()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.close()

    # -- the operations (the controller calls these directly) ------------------------------

    def _put(self, key: str, value: bytes) -> None:
        """Set ``key``; wake the waiters only when it is new.

        Why: waiters wait for keys to *exist*, and rank 0 updates the same few keys
        every few milliseconds (``cmdseq``, the report counters); waking every blocked
        connection thread for those would burn the controller's CPU for nothing.
        Call with the lock held.
        """
        new = key not in self._data
        self._data[key] = value
        if new:
            self._cond.notify_all()

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``."""
        with self._cond:
            self._put(key, _as_bytes(value))

    def _wait_for(self, keys: Sequence[str], timeout_s: float) -> None:
        if not self._cond.wait_for(
            lambda: self._closed or all(k in self._data for k in keys), timeout_s
        ):
            raise StoreTimeout(f"timeout after {timeout_s:g} s waiting for {list(keys)[:4]}")
        if self._closed:
            raise StoreError("the store is closed")

    def get(self, key: str, timeout_s: float = 300.0) -> bytes:
        """The value of ``key``, waiting up to ``timeout_s`` for it to be set."""
        with self._cond:
            self._wait_for([key], timeout_s)
            return self._data[key]

    def multi_get(self, keys: Sequence[str], timeout_s: float = 300.0) -> list[bytes]:
        """The values of ``keys``, waiting for all of them."""
        with self._cond:
            self._wait_for(keys, timeout_s)
            return [self._data[k] for k in keys]

    def multi_set(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        """Set several keys at once."""
        with self._cond:
            for key, value in zip(keys, values, strict=True):
                self._put(key, _as_bytes(value))

    def add(self, key: str, amount: int) -> int:
        """Add ``amount`` to the integer under ``key`` (0 if missing); the new value."""
        with self._cond:
            value = int(self._data.get(key, b"0")) + int(amount)
            self._put(key, str(value).encode())
            return value

    def append(self, key: str, value: Any) -> None:
        """Append bytes to ``key`` (created if missing)."""
        with self._cond:
            self._put(key, self._data.get(key, b"") + _as_bytes(value))

    def check(self, keys: Sequence[str]) -> bool:
        """Whether every key exists (no waiting)."""
        with self._cond:
            return all(k in self._data for k in keys)

    def wait(self, keys: Sequence[str], timeout_s: float = 300.0) -> None:
        """Block until every key exists.

        Raises:
            StoreTimeout: not within ``timeout_s``.
        """
        with self._cond:
            self._wait_for(keys, timeout_s)

    def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
        """TCPStore's compare-and-set: the value after the operation.

        A missing key is created when ``expected`` is empty; otherwise the key is set
        only when it holds ``expected``.
        """
        expected_b, desired_b = _as_bytes(expected), _as_bytes(desired)
        with self._cond:
            current = self._data.get(key)
            if (current is None and not expected_b) or current == expected_b:
                self._put(key, desired_b)
                return desired_b
            return expected_b if current is None else current

    def delete_key(self, key: str) -> bool:
        """Remove ``key``; whether it existed."""
        with self._cond:
            return self._data.pop(key, None) is not None

    def num_keys(self) -> int:
        """How many keys are set."""
        with self._cond:
            return len(self._data)

    def keys(self) -> list[str]:
        """Every key (tests: what the store holds)."""
        with self._cond:
            return sorted(self._data)


def _ms(raw: bytes) -> float:
    return max(int(raw), 0) / 1000.0


def _peer(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr)


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` -> ``(host, port)``.

    Raises:
        ValueError: one line saying what is wrong.
    """
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a HOST:PORT address: {address!r}")
    if any(c.isspace() for c in host) or host.startswith("-"):
        raise ValueError(f"not a host name: {host!r}")
    return host, int(port)


class StoreClient:
    """A client of :class:`StoreServer` (stdlib; the workers wrap it in a torch Store).

    Every request takes an idle authenticated connection, or opens a new one, so a
    thread blocked in ``wait`` never holds up another thread's ``set``.

    Attributes:
        address: ``HOST:PORT`` of the store.
        timeout_s: default timeout of ``get`` and ``wait``.
    """

    def __init__(
        self, address: str, secret: bytes, *, timeout_s: float = 300.0, connect_s: float = 60.0
    ) -> None:
        self.address = address
        self._host, self._port = parse_address(address)
        self._secret = secret
        self.timeout_s = float(timeout_s)
        self._connect_s = float(connect_s)
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._idle.append(self._open())  # fail now, not at the first request

    def _open(self) -> socket.socket:
        deadline = time.monotonic() + self._connect_s
        while True:
            try:
                sock = socket.create_connection((self._host, self._port), timeout=5.0)
                break
            except OSError as exc:
                if time.monotonic() >= deadline:
                    reason = exc.strerror or str(exc) or type(exc).__name__
                    raise StoreError(
                        f"cannot reach the store at {self.address}: {reason}"
                    ) from None
                time.sleep(0.1)
        try:
            client_handshake(sock, self._secret, STORE)
        except (AuthError, OSError) as exc:
            sock.close()
            raise StoreError(f"store at {self.address}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def request(self, op: StoreOp, fields: Sequence[bytes], wait_s: float = 0.0) -> list[bytes]:
        """One request; its response fields.

        Raises:
            StoreTimeout: a ``get``/``wait`` timed out on the server.
            StoreError: refused, or the connection failed (the controller is gone).
        """
        with self._lock:
            sock = self._idle.pop() if self._idle else None
        if sock is None:
            sock = self._open()
        try:
            sock.settimeout(wait_s + 60.0)  # a silent controller host still ends the wait
            sock.sendall(pack(int(op), fields))
            body = recv_frame(sock)
            if body is None:
                raise StoreError("the store closed the connection")
            status, out = unpack(body)
        except (OSError, StoreError) as exc:
            with contextlib.suppress(OSError):
                sock.close()
            raise StoreError(f"store at {self.address}: {exc}") from None
        with self._lock:
            self._idle.append(sock)
        if status == _TIMEOUT:
            raise StoreTimeout(out[0].decode(errors="replace") if out else "timeout")
        if status != _OK:
            raise StoreError(out[0].decode(errors="replace") if out else "refused")
        return out

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            with contextlib.suppress(OSError):
                sock.close()
