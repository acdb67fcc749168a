"""Worker slots on other hosts: ``elasim agent --controller HOST:PORT --slots K ...``.

The no-dependency way to use several hosts (the engine way is a Ray cluster).  One
controller drives the run; every host that contributes workers runs an agent.  The
agent connects to the controller's agent port and offers ``K`` slots; the controller
then starts and signals worker processes on that host through it, exactly as it does
locally (:class:`~elasim.executor.group.LocalLauncher`).  Workers connect to the
run's store themselves, and form gloo/NCCL groups directly with each other; the
agent only starts, signals and reaps processes.

Why kept (and not retired for Ray): a user with two or three hosts and no cluster
manager can still run, with nothing to install but elasim.  It is authenticated and
narrow, so keeping it costs little:

* **Authenticated both ways.**  Before anything else, the connection passes the
  run's handshake (:mod:`.auth`, purpose ``agent``): the agent proves to the
  controller that it knows the run's secret, and the controller proves it to the
  agent.  A peer that fails is dropped with one logged line.  The agent is started
  with ``--secret-file`` (a copy of the run's secret, ``0600``).
* **No code or argv from the wire.**  A ``spawn`` carries typed fields only
  (:class:`~.launchers.WorkerLaunch`: worker id, store address, slot, spawn time,
  idle flag), validated before use; the agent builds the worker's command line
  itself with :func:`~.launchers.worker_argv`: the fixed worker entry point, the
  agent's own copies of the run's settings and secret files (``--settings``,
  ``--secret-file``).  Signals are limited to the few the controller uses.

Protocol, after the handshake: JSON objects, one per line, over one TCP connection.

==========================  =====================================================
agent -> controller         ``{"op": "hello", "slots": K, "host": name}``
controller -> agent         ``{"op": "spawn", "wid": N, "store": "H:P",
                            "spawn_wall_s": T, "device_index": I,
                            "idle_warmup": false}``
agent -> controller         ``{"op": "spawned", "wid": N, "pid": P}`` (or ``"error"``)
controller -> agent         ``{"op": "signal", "wid": N, "sig": 9}``
agent -> controller         ``{"op": "exited", "wid": N, "code": C}``
controller -> agent         ``{"op": "close"}`` (kill every worker, then exit)
==========================  =====================================================

Reachability: the agent port and the store bind ``127.0.0.1`` unless ``--bind`` says
otherwise.  Workers on other hosts reach the store at the controller's *advertised*
address (its host name when binding ``0.0.0.0``), and gloo picks its interface from
the host name; set ``GLOO_SOCKET_IFNAME`` (or ``NCCL_SOCKET_IFNAME``) in the agent's
environment when a host has several.  If the controller goes away, agents kill their
workers and exit.  See the README's "Security" section.
"""

from __future__ import annotations

import contextlib
import json
import logging
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .auth import AGENT, AuthError, client_handshake, read_secret, server_handshake
from .launchers import NoFreeSlot, WorkerLaunch, worker_argv, worker_env
from .runfiles import read_worker_settings

__all__ = ["Agent", "AgentError", "AgentServer", "RemoteLauncher", "RemoteProcess"]

log = logging.getLogger(__name__)
_SPAWN_TIMEOUT_S = 30.0
#: the reason an agent refuses a spawn because all its slots are taken
_NO_FREE_SLOT = "no free slot"
#: The signals a controller may ask an agent to deliver (kill, stop, freeze, dump stacks).
ALLOWED_SIGNALS = frozenset(
    int(s) for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
) | frozenset(int(s) for s in (signal.SIGSTOP, signal.SIGCONT))


class AgentError(RuntimeError):
    """An agent misbehaved or went away."""


def _send(sock: socket.socket, lock: threading.Lock, message: dict[str, Any]) -> None:
    data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    with lock:
        sock.sendall(data)


#: Longest message line accepted (ours are well under a kilobyte).
_MAX_LINE_BYTES = 1 << 20
#: A connecting agent must say hello within this long, however it trickles its bytes.
HELLO_DEADLINE_S = 5.0


class _LineReader:
    """Split a byte stream into JSON objects."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The complete messages in ``data`` (and what was buffered before).

        Raises:
            AgentError: a line that is not a JSON object, or a line too long to be one
                of ours (a peer that speaks another protocol, or a hostile one).
        """
        self._buffer += data
        if len(self._buffer) > _MAX_LINE_BYTES and b"\n" not in self._buffer:
            raise AgentError(f"a message longer than {_MAX_LINE_BYTES} bytes")
        out = []
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            if line.strip():
                try:
                    message = json.loads(line)
                except ValueError:
                    raise AgentError(f"malformed message {line[:60]!r}") from None
                if not isinstance(message, dict):
                    raise AgentError(f"malformed message {line[:60]!r}")
                out.append(message)
        return out


# -- controller side --------------------------------------------------------------------------


class RemoteProcess:
    """A worker process on an agent's host (implements ``ProcessHandle``)."""

    def __init__(self, launcher: RemoteLauncher, wid: int, pid: int) -> None:
        self.launcher = launcher
        self.wid = wid
        self.pid = pid

    def poll(self) -> int | None:
        """Exit code once the agent reported it, else None."""
        return self.launcher.exit_code(self.wid)

    def send_signal(self, sig: int) -> None:
        """Ask the agent to deliver ``sig``."""
        self.launcher.signal(self.wid, sig)


class RemoteLauncher:
    """The controller's end of one agent connection (implements ``Launcher``)."""

    def __init__(self, sock: socket.socket, hello: dict[str, Any], peer: Any = None) -> None:
        self.sock = sock
        self.host = str(hello.get("host", "?"))
        port = peer[1] if isinstance(peer, tuple) and len(peer) > 1 else id(self)
        self.name = f"agent:{self.host}/{port}"
        self.slots = int(hello["slots"])
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._spawned: dict[int, dict[str, Any]] = {}
        self._exit: dict[int, int] = {}
        self._closed = False
        self._reader = threading.Thread(target=self._read, name=self.name, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        reader = _LineReader()
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                for message in reader.feed(data):
                    with self._cond:
                        op = message.get("op")
                        if op in ("spawned", "error"):
                            self._spawned[int(message["wid"])] = message
                        elif op == "exited":
                            self._exit[int(message["wid"])] = int(message["code"])
                        self._cond.notify_all()
        except OSError:
            pass
        except (AgentError, ValueError, KeyError, TypeError) as exc:
            # a peer that breaks the protocol is dropped, as if its host had gone
            log.warning("dropped agent %s: %s", self.name, exc)
            with contextlib.suppress(OSError):
                self.sock.close()
        with self._cond:
            self._closed = True
            for wid in self._spawned:  # the agent is gone, and so are its workers
                self._exit.setdefault(wid, -int(signal.SIGKILL))
            self._cond.notify_all()

    def spawn(self, launch: WorkerLaunch, files: Any = None) -> RemoteProcess:
        """Start a worker on the agent's host; waits for its pid.

        Only ``launch``'s fields travel; the agent uses its own copies of the run's
        files (``files`` is this host's, unused here).

        Raises:
            NoFreeSlot: the agent had every slot taken (its workers' exits reach it
                before they reach us).
            AgentError: the agent is gone, or could not start the worker.
        """
        wid = launch.wid
        if self._closed:
            raise AgentError(f"{self.name} is disconnected")
        _send(self.sock, self._lock, {"op": "spawn", **launch.to_message()})
        deadline = time.monotonic() + _SPAWN_TIMEOUT_S
        with self._cond:
            while wid not in self._spawned and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AgentError(f"{self.name} did not start worker {wid}")
                self._cond.wait(left)
            reply = self._spawned.get(wid)
        if reply is None or reply.get("op") == "error":
            reason = reply.get("reason") if reply else "disconnected"
            if reason == _NO_FREE_SLOT:  # its count ran ahead of ours: full, for now
                raise NoFreeSlot(f"{self.name} has no free slot for worker {wid}")
            raise AgentError(f"{self.name} could not start worker {wid}: {reason}")
        return RemoteProcess(self, wid, int(reply["pid"]))

    def exit_code(self, wid: int) -> int | None:
        """Exit code of worker ``wid`` (None while it runs)."""
        with self._cond:
            return self._exit.get(wid)

    def signal(self, wid: int, sig: int) -> None:
        """Deliver ``sig`` to worker ``wid`` (no-op if the agent is gone)."""
        with contextlib.suppress(OSError):
            _send(self.sock, self._lock, {"op": "signal", "wid": wid, "sig": int(sig)})

    def close(self) -> None:
        """Tell the agent to kill its workers; close the connection."""
        with contextlib.suppress(OSError):
            _send(self.sock, self._lock, {"op": "close"})
        deadline = time.monotonic() + 10.0
        with self._cond:
            while not self._closed and time.monotonic() < deadline:
                self._cond.wait(0.1)
        with contextlib.suppress(OSError):
            self.sock.close()


class AgentServer:
    """Accepts agent connections for one run."""

    def __init__(self, bind_host: str = "127.0.0.1", port: int = 0, *, secret: bytes) -> None:
        self.bind_host = bind_host
        self._secret = secret
        #: connections that failed the handshake or the hello
        self.rejected = 0
        self._port = port
        self._sock: socket.socket | None = None
        self._launchers: list[RemoteLauncher] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The listening port (after :meth:`start`)."""
        if self._sock is None:
            raise AgentError("the agent server is not started")
        return int(self._sock.getsockname()[1])

    def start(self) -> None:
        """Listen and accept agents in a background thread."""
        family = socket.AF_INET6 if ":" in self.bind_host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.bind_host, self._port))
        except OSError as exc:
            sock.close()
            reason = exc.strerror or str(exc)
            raise AgentError(
                f"cannot listen for agents on {self.bind_host}:{self._port}: {reason}"
            ) from None
        sock.listen(64)
        self._sock = sock
        self._thread = threading.Thread(target=self._accept, name="agent-server", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        """Accept connections; each says hello in its own thread, so none can block."""
        assert self._sock is not None
        while True:
            try:
                conn, addr = self._sock.accept()
            except OSError:
                return
            threading.Thread(
                target=self._handshake, args=(conn, addr), name="agent-hello", daemon=True
            ).start()

    def _handshake(self, conn: socket.socket, addr: Any) -> None:
        """Authenticate, then read a hello, all within :data:`HELLO_DEADLINE_S`.

        A peer that fails either is rejected with one logged line.
        """
        deadline = time.monotonic() + HELLO_DEADLINE_S
        try:
            server_handshake(conn, self._secret, AGENT, deadline_s=HELLO_DEADLINE_S)
            reader = _LineReader()
            hello: list[dict[str, Any]] = []
            while not hello:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AgentError(f"no hello within {HELLO_DEADLINE_S:g} s")
                conn.settimeout(left)
                data = conn.recv(4096)
                if not data:
                    raise AgentError("closed before hello")
                hello = reader.feed(data)
            if hello[0].get("op") != "hello" or int(hello[0].get("slots", 0)) < 1:
                raise AgentError(f"bad hello {str(hello[0])[:80]}")
            conn.settimeout(None)
            launcher = RemoteLauncher(conn, hello[0], addr)
        except (OSError, ValueError, TypeError, AgentError) as exc:  # AuthError is a ValueError
            self.rejected += 1
            log.warning("rejected agent %s: %s", addr, exc)
            conn.close()
            return
        log.info("agent %s offers %d slots", launcher.host, launcher.slots)
        with self._cond:
            self._launchers.append(launcher)
            self._cond.notify_all()

    def wait_for_agents(self, count: int, timeout_s: float) -> list[RemoteLauncher]:
        """Block until ``count`` agents said hello; returns them (in arrival order).

        Raises:
            AgentError: fewer agents within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while len(self._launchers) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AgentError(
                        f"only {len(self._launchers)} of {count} agents connected "
                        f"within {timeout_s:g} s"
                    )
                self._cond.wait(left)
            return list(self._launchers[:count])

    def close(self) -> None:
        """Stop accepting; close every agent."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
        for launcher in self._launchers:
            launcher.close()


# -- agent side ---------------------------------------------------------------------------------


@dataclass
class Agent:
    """The agent process: offers ``slots`` worker slots to the controller at ``controller``.

    Attributes:
        controller: ``HOST:PORT`` of the controller's agent listener.
        slots: worker slots offered.
        secret_path: this host's copy of the run's secret (``0600``).
        settings_path: this host's copy of the run's worker settings (``0600``).
        log_dir: worker stderr logs (None: discarded).
        python: interpreter for the workers.
        connect_timeout_s: keep retrying the connection this long.
    """

    controller: str
    slots: int
    secret_path: Path
    settings_path: Path
    log_dir: Path | None = None
    python: str = sys.executable
    connect_timeout_s: float = 30.0
    _procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    _env: dict[str, str] | None = None

    def _connect(self) -> socket.socket:
        host, _, port = self.controller.rpartition(":")
        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            try:
                return socket.create_connection((host or "127.0.0.1", int(port)), timeout=5.0)
            except OSError as exc:
                if time.monotonic() >= deadline:
                    reason = exc.strerror or str(exc) or type(exc).__name__
                    raise AgentError(
                        f"cannot reach the controller at {self.controller}: {reason}"
                    ) from None
                time.sleep(0.2)

    def _spawn(self, launch: WorkerLaunch) -> subprocess.Popen[bytes]:
        stderr: Any = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            stderr = open(self.log_dir / f"worker-{launch.wid}.log", "ab")  # noqa: SIM115
        argv = worker_argv(
            self.python, launch, settings_path=self.settings_path, secret_path=self.secret_path
        )
        try:
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=self._env,
            )
        finally:
            if stderr is not subprocess.DEVNULL:
                stderr.close()

    def run(self) -> int:
        """Serve the controller until it closes the connection; returns an exit code."""
        if self.slots < 1:
            raise ValueError(f"slots must be >= 1, got {self.slots}")
        secret = read_secret(self.secret_path)
        read_worker_settings(self.settings_path)  # private and well-formed, checked now
        sock = self._connect()
        try:
            client_handshake(sock, secret, AGENT)
        except (AuthError, OSError) as exc:
            sock.close()
            raise AgentError(f"controller at {self.controller}: {exc}") from None
        sock.settimeout(None)
        # the workers' gloo listens on the interface this host reaches the controller by
        self._env = worker_env(sock.getsockname()[0])
        lock = threading.Lock()
        _send(sock, lock, {"op": "hello", "slots": self.slots, "host": socket.gethostname()})
        selector = selectors.DefaultSelector()
        selector.register(sock, selectors.EVENT_READ)
        reader = _LineReader()
        try:
            while True:
                for _key, _mask in selector.select(timeout=0.05):
                    data = sock.recv(65536)
                    if not data:
                        return 0
                    for message in reader.feed(data):
                        if not self._handle(sock, lock, message):
                            return 0
                for wid, proc in list(self._procs.items()):
                    code = proc.poll()
                    if code is not None:
                        del self._procs[wid]
                        _send(sock, lock, {"op": "exited", "wid": wid, "code": code})
        except OSError as exc:
            log.warning("lost the controller: %s", exc)
            return 3
        finally:
            self._kill_all()
            selector.close()
            sock.close()

    def _handle(self, sock: socket.socket, lock: threading.Lock, message: dict[str, Any]) -> bool:
        op = message.get("op")
        if op == "spawn":
            try:
                launch = WorkerLaunch.from_message(message)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("refused a spawn request: %s", exc)
                wid = message.get("wid") if isinstance(message.get("wid"), int) else -1
                _send(sock, lock, {"op": "error", "wid": wid, "reason": f"bad request: {exc}"})
                return True
            wid = launch.wid
            if len(self._procs) >= self.slots or wid in self._procs:
                _send(sock, lock, {"op": "error", "wid": wid, "reason": _NO_FREE_SLOT})
                return True
            try:
                proc = self._spawn(launch)
            except OSError as exc:
                _send(sock, lock, {"op": "error", "wid": wid, "reason": str(exc)})
                return True
            self._procs[wid] = proc
            _send(sock, lock, {"op": "spawned", "wid": wid, "pid": proc.pid})
        elif op == "signal":
            sig, wid = message.get("sig"), message.get("wid")
            if not isinstance(sig, int) or sig not in ALLOWED_SIGNALS or not isinstance(wid, int):
                log.warning("refused a signal request: %s", str(message)[:80])
                return True
            proc = self._procs.get(wid)
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)
        elif op == "close":
            return False
        return True

    def _kill_all(self) -> None:
        for proc in self._procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        for proc in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        self._procs.clear()


def main(argv: list[str] | None = None) -> int:
    """``python -m elasim.executor.agent --controller H:P --slots K --secret-file F --settings S``.

    ``F`` and ``S`` are this host's copies of the run's secret and worker settings.
    """
    import argparse

    parser = argparse.ArgumentParser(prog="elasim-agent", description=__doc__.splitlines()[0])
    parser.add_argument("--controller", required=True, help="HOST:PORT of the controller")
    parser.add_argument("--slots", type=int, required=True, help="worker slots to offer")
    parser.add_argument("--secret-file", type=Path, required=True, help="the run's secret")
    parser.add_argument("--settings", type=Path, required=True, help="the run's worker settings")
    parser.add_argument("--log-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="[agent] %(levelname)s %(message)s")
    agent = Agent(
        args.controller, args.slots, args.secret_file, args.settings, log_dir=args.log_dir
    )
    return agent.run()


if __name__ == "__main__":
    sys.exit(main())
