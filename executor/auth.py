"""Per-run secrets and the handshake every connection of a run must pass.

Why: the run's store and the agent port listen on TCP.  Without a check, anyone who
can reach them (any local user on loopback; anyone on the network with ``--bind``)
can read and write the run's coordination keys or ask an agent to start processes.
So every connection first proves that it knows the run's secret, a 32-byte value from
:func:`secrets.token_bytes` that never travels on the wire; it is passed out of band in
a file only the user can read (``0600``, in a ``0700`` folder).

The handshake (mutual, HMAC-SHA256, one round trip each way):

1. server -> client: ``MAGIC`` + a fresh 32-byte server nonce;
2. client -> server: a fresh 32-byte client nonce + ``HMAC(secret, "client" | purpose
   | server nonce | client nonce)``;
3. server -> client: ``HMAC(secret, "server" | purpose | server nonce | client nonce)``.

Each side checks the other's proof with :func:`hmac.compare_digest`.  A recorded
proof is worthless on a new connection (the server nonce differs: no replay), a
server's proof cannot be reflected back as a client's (the labels differ), and a
proof for the store is not one for an agent (``purpose``).  A peer that sends
anything else, too little, or too late is dropped, and the server logs one line
saying why.  Nothing the peer sends before the handshake succeeds is interpreted.

Stdlib only, so the controller's side needs no torch.
"""

from __future__ import annotations

import hmac
import os
import secrets
import socket
import stat
import time
from hashlib import sha256
from pathlib import Path

__all__ = [
    "MAGIC",
    "SECRET_BYTES",
    "AuthError",
    "check_private_file",
    "client_handshake",
    "generate_secret",
    "read_secret",
    "server_handshake",
    "write_private",
]

MAGIC = b"ELASIM-AUTH-1\n"
SECRET_BYTES = 32
NONCE_BYTES = 32
#: A peer must complete the handshake within this long, however it trickles its bytes.
HANDSHAKE_DEADLINE_S = 5.0
#: The purposes a proof is bound to.
STORE = b"store"
AGENT = b"agent"


class AuthError(ValueError):
    """A peer failed the handshake, or a secret file is missing or not private."""


def generate_secret() -> bytes:
    """A fresh per-run secret (``SECRET_BYTES`` random bytes)."""
    return secrets.token_bytes(SECRET_BYTES)


def write_private(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to a new file only the user can read or write (``0600``), durably.

    The file is created with ``O_EXCL`` and mode ``0600`` from the start (never
    readable by others, not even for a moment), then fsynced.

    Raises:
        OSError: the file exists or cannot be written.
    """
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def check_private_file(path: str | Path, what: str) -> Path:
    """``path``, after checking it is a regular file of this user that nobody else can read.

    Why: a secret or settings file that another user can read (or write) gives them
    the run.  The folder holding it must not be writable by others either (they
    could swap the file).

    Raises:
        AuthError: one line naming the file and what is wrong.
    """
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise AuthError(f"{what} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise AuthError(f"{what} {path}: not a regular file")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise AuthError(f"{what} {path}: owned by another user (uid {info.st_uid})")
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise AuthError(f"{what} {path}: mode {mode:04o}, must be 0600 (chmod 600 {path})")
    parent = path.resolve().parent
    pinfo = parent.stat()
    if pinfo.st_mode & 0o022 and not pinfo.st_mode & stat.S_ISVTX:
        raise AuthError(f"{what} {path}: its folder {parent} is writable by others")
    return path


def read_secret(path: str | Path) -> bytes:
    """The run secret stored (hex) in ``path``, a private file.

    Raises:
        AuthError: missing, unreadable, not private, or not a secret.
    """
    path = check_private_file(path, "secret file")
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthError(f"secret file {path}: cannot read it ({exc})") from None
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        raise AuthError(f"secret file {path}: not a hex secret") from None
    if len(secret) < SECRET_BYTES:
        raise AuthError(f"secret file {path}: {len(secret)} bytes, need >= {SECRET_BYTES}")
    return secret


def _proof(secret: bytes, label: bytes, purpose: bytes, server: bytes, client: bytes) -> bytes:
    return hmac.new(secret, label + b"|" + purpose + b"|" + server + client, sha256).digest()


def _recv_exact(sock: socket.socket, count: int, deadline: float) -> bytes:
    """Exactly ``count`` bytes before ``deadline`` (monotonic), or :class:`AuthError`."""
    chunks: list[bytes] = []
    got = 0
    while got < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AuthError(f"handshake not completed within {HANDSHAKE_DEADLINE_S:g} s")
        sock.settimeout(left)
        try:
            chunk = sock.recv(count - got)
        except TimeoutError:
            continue
        if not chunk:
            raise AuthError(f"connection closed during the handshake ({got} of {count} bytes)")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def server_handshake(
    sock: socket.socket,
    secret: bytes,
    purpose: bytes,
    *,
    deadline_s: float = HANDSHAKE_DEADLINE_S,
) -> None:
    """Challenge a new connection; return only if it proved it knows ``secret``.

    The socket is left blocking (no timeout) on success.

    Raises:
        AuthError: wrong proof, truncated, or too slow (the caller logs and closes).
        OSError: the connection failed.
    """
    deadline = time.monotonic() + deadline_s
    server_nonce = secrets.token_bytes(NONCE_BYTES)
    sock.settimeout(deadline_s)
    sock.sendall(MAGIC + server_nonce)
    reply = _recv_exact(sock, NONCE_BYTES + sha256().digest_size, deadline)
    client_nonce, proof = reply[:NONCE_BYTES], reply[NONCE_BYTES:]
    expected = _proof(secret, b"client", purpose, server_nonce, client_nonce)
    if not hmac.compare_digest(proof, expected):
        raise AuthError("wrong proof of the run secret")
    sock.sendall(_proof(secret, b"server", purpose, server_nonce, client_nonce))
    sock.settimeout(None)


def client_handshake(
    sock: socket.socket,
    secret: bytes,
    purpose: bytes,
    *,
    deadline_s: float = HANDSHAKE_DEADLINE_S,
) -> None:
    """Answer the server's challenge, and check that the server knows ``secret`` too.

    Why mutual: a worker or an agent that reached an impostor (a wrong address, a
    port taken over after the controller died) must not act on what it says.

    Raises:
        AuthError: not one of our servers, or the server's proof is wrong.
        OSError: the connection failed.
    """
    deadline = time.monotonic() + deadline_s
    hello = _recv_exact(sock, len(MAGIC) + NONCE_BYTES, deadline)
    if not hello.startswith(MAGIC):
        raise AuthError("the peer is not an elasim endpoint (no handshake)")
    server_nonce = hello[len(MAGIC) :]
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    proof = _proof(secret, b"client", purpose, server_nonce, client_nonce)
    sock.sendall(client_nonce + proof)
    answer = _recv_exact(sock, sha256().digest_size, deadline)
    expected = _proof(secret, b"server", purpose, server_nonce, client_nonce)
    if not hmac.compare_digest(answer, expected):
        raise AuthError("the server does not know the run secret")
    sock.settimeout(None)
