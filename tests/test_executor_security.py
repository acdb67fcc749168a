"""Issue 11: nobody without the run's secret is served, and nothing from the wire is run.

The attack that motivated it: ``elasim run`` kept the job configuration in its
TCPStore, which served anyone; a local ``TCPStore(host, port, is_master=False)``
client rewrote ``config`` so that ``job`` named ``subprocess:getoutput``, killed a
worker, and the respawned worker called it.  These tests replay that attack (and the
same with a raw socket, and even with the secret) against a real worker group, check
the handshake's corner cases, and an agent that does not know the secret.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from elasim.executor.agent import Agent, AgentError, AgentServer
from elasim.executor.auth import (
    AGENT,
    MAGIC,
    STORE,
    AuthError,
    client_handshake,
    read_secret,
    server_handshake,
)
from elasim.executor.authstore import StoreClient, StoreError, StoreOp, StoreServer, pack
from elasim.executor.protocol import WorkerSettings
from elasim.executor.runfiles import RunFiles, read_worker_settings

SECRET = bytes(range(32))
OTHER = bytes(range(1, 33))


def _pair_handshake(server_secret: bytes, client_secret: bytes, purpose=(STORE, STORE)):
    """Run both ends over a socket pair; returns (server error, client error)."""
    a, b = socket.socketpair()
    errors: dict[str, BaseException | None] = {"server": None, "client": None}

    def serve() -> None:
        try:
            server_handshake(a, server_secret, purpose[0], deadline_s=2.0)
        except (AuthError, OSError) as exc:
            errors["server"] = exc
        finally:
            a.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        client_handshake(b, client_secret, purpose[1], deadline_s=2.0)
    except (AuthError, OSError) as exc:
        errors["client"] = exc
    thread.join(5)
    b.close()
    return errors["server"], errors["client"]


# -- the handshake ---------------------------------------------------------------------------

pytestmark = [pytest.mark.timeout(60)]


def test_the_same_secret_passes_both_ways():
    assert _pair_handshake(SECRET, SECRET) == (None, None)


def test_a_wrong_secret_is_rejected_by_the_server():
    server_error, client_error = _pair_handshake(SECRET, OTHER)
    assert isinstance(server_error, AuthError) and "wrong proof" in str(server_error)
    assert client_error is not None  # the server hung up instead of answering


def test_a_proof_for_the_store_is_not_one_for_an_agent():
    server_error, _ = _pair_handshake(SECRET, SECRET, purpose=(AGENT, STORE))
    assert isinstance(server_error, AuthError)


def test_a_truncated_or_silent_client_is_dropped_within_the_deadline():
    a, b = socket.socketpair()
    b.sendall(b"x" * 10)  # ten bytes of the 64 and silence
    started = time.monotonic()
    with pytest.raises(AuthError, match="not completed within"):
        server_handshake(a, SECRET, STORE, deadline_s=0.5)
    assert time.monotonic() - started < 2.0
    a2, b2 = socket.socketpair()
    b2.sendall(b"y" * 20)
    b2.shutdown(socket.SHUT_WR)  # and a client that gives up half way
    with pytest.raises(AuthError, match="closed during the handshake"):
        server_handshake(a2, SECRET, STORE, deadline_s=2.0)
    for s in (a, b, a2, b2):
        s.close()


def test_a_recorded_proof_cannot_be_replayed_on_a_new_connection():
    # a legitimate exchange, recorded by an eavesdropper
    a, b = socket.socketpair()
    recorded: list[bytes] = []

    def serve() -> None:
        server_handshake(a, SECRET, STORE)

    thread = threading.Thread(target=serve)
    thread.start()
    hello = b.recv(len(MAGIC) + 32)
    from elasim.executor import auth

    client_nonce = os.urandom(32)
    proof = auth._proof(SECRET, b"client", STORE, hello[len(MAGIC) :], client_nonce)
    b.sendall(client_nonce + proof)
    recorded.append(client_nonce + proof)
    b.recv(32)
    thread.join(5)
    # the replay, on a fresh connection: the server's nonce differs, so the proof fails
    a2, b2 = socket.socketpair()
    errors: list[BaseException] = []

    def serve_again() -> None:
        try:
            server_handshake(a2, SECRET, STORE, deadline_s=2.0)
        except AuthError as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve_again)
    thread.start()
    b2.recv(len(MAGIC) + 32)
    b2.sendall(recorded[0])
    thread.join(5)
    assert errors and "wrong proof" in str(errors[0])
    for s in (a, b, a2, b2):
        s.close()


def test_a_client_checks_that_the_server_knows_the_secret_too():
    a, b = socket.socketpair()

    def impostor() -> None:  # accepts any proof, then cannot prove the secret itself
        a.sendall(MAGIC + os.urandom(32))
        a.recv(64)
        a.sendall(os.urandom(32))

    thread = threading.Thread(target=impostor)
    thread.start()
    with pytest.raises(AuthError, match="does not know the run secret"):
        client_handshake(b, SECRET, STORE, deadline_s=2.0)
    thread.join(5)
    with pytest.raises(AuthError, match="not an elasim endpoint"):
        c, d = socket.socketpair()
        c.sendall(b"HTTP/1.1 200 OK\r\n" + b"x" * 60)
        client_handshake(d, SECRET, STORE, deadline_s=2.0)
    for s in (a, b, c, d):
        s.close()


# -- the run's private files -----------------------------------------------------------------


def test_secret_and_settings_files_must_be_private(tmp_path):
    files = RunFiles.create(WorkerSettings(max_steps=7), run_dir=tmp_path / "run")
    assert oct(files.run_dir.stat().st_mode & 0o777) == "0o700"
    for path in (files.secret_path, files.settings_path):
        assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert len(read_secret(files.secret_path)) == 32
    assert read_worker_settings(files.settings_path).max_steps == 7
    os.chmod(files.secret_path, 0o644)
    with pytest.raises(AuthError, match="mode 0644, must be 0600"):
        read_secret(files.secret_path)
    os.chmod(files.settings_path, 0o640)
    with pytest.raises(AuthError, match="mode 0640"):
        read_worker_settings(files.settings_path)
    with pytest.raises(AuthError, match="secret file .*missing"):
        read_secret(tmp_path / "missing")
    # two runs never share a secret
    other = RunFiles.create(WorkerSettings(), run_dir=tmp_path / "run2")
    temporary = RunFiles.create(WorkerSettings())  # a fresh private temporary folder
    try:
        assert oct(temporary.run_dir.stat().st_mode & 0o777) == "0o700"
        assert other.secret() != temporary.secret()
    finally:
        temporary.cleanup()
    assert not temporary.run_dir.exists()


# -- the store -------------------------------------------------------------------------------


@pytest.fixture
def store(caplog):
    server = StoreServer(SECRET)
    server.start()
    server.set("kept", b"1")
    with caplog.at_level(logging.WARNING, logger="elasim.executor.authstore"):
        yield server
    server.close()


def _wait_rejected(server: StoreServer, count: int) -> None:
    deadline = time.monotonic() + 10
    while server.rejected < count and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.timeout(30)
def test_a_raw_socket_cannot_write_to_the_store(store, caplog):
    with socket.create_connection(("127.0.0.1", store.port)) as sock:
        frame = pack(int(StoreOp.SET), [b"config", b'{"job":"subprocess:getoutput"}'])
        sock.sendall(frame * 3)
        sock.settimeout(10)
        received = b""
        with pytest.raises(OSError):  # the server hangs up: reset, or an end of stream
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    raise ConnectionResetError("closed")
                received += chunk
    assert received.startswith(MAGIC)  # the challenge, and nothing else
    _wait_rejected(store, 1)
    assert store.keys() == ["kept"] and store.rejected == 1
    lines = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert lines and all("\n" not in line for line in lines)
    assert "wrong proof" in lines[0]


@pytest.mark.timeout(60)
def test_a_torch_tcpstore_client_cannot_use_the_store(store):
    dist = pytest.importorskip("torch.distributed")
    from datetime import timedelta

    with pytest.raises(Exception):  # noqa: B017 - whatever TCPStore raises, it is refused
        client = dist.TCPStore(
            "127.0.0.1", store.port, is_master=False, timeout=timedelta(seconds=3)
        )
        client.set("config", '{"job": "subprocess:getoutput"}')
    _wait_rejected(store, 1)
    assert "config" not in store.keys() and store.rejected >= 1


def test_a_client_with_the_wrong_secret_is_refused(store):
    with pytest.raises(StoreError, match="wrong|closed|reset|handshake"):
        StoreClient(f"127.0.0.1:{store.port}", OTHER, connect_s=1.0)
    good = StoreClient(f"127.0.0.1:{store.port}", SECRET)
    assert good.request(StoreOp.GET, [b"1000", b"kept"]) == [b"1"]
    good.close()


# -- the attack, replayed on a real worker group ---------------------------------------------


@pytest.mark.timeout(240)
def test_the_store_attack_runs_nothing(tmp_path):
    """Rewrite ``config`` (no secret: refused; with it: ignored), kill a worker: no marker."""
    pytest.importorskip("torch")
    from elasim.executor.group import GroupSettings, LocalLauncher, ProcessWorkerGroup

    marker = tmp_path / "pwned"
    evil = json.dumps(
        {"job": "subprocess:getoutput", "job_options": {"cmd": f"touch {marker}"}}
    ).encode()
    settings = WorkerSettings(max_steps=10**6, checkpoint_dir=str(tmp_path / "ckpt"))
    group = ProcessWorkerGroup(
        GroupSettings(worker=settings, change_timeout_s=60.0, ready_timeout_s=180.0),
        [LocalLauncher(3, log_dir=tmp_path / "logs")],
    )
    try:
        group.start()
        assert group.apply(2, 0)
        store = group.pool._store  # noqa: SLF001 - the run's store
        host, port = "127.0.0.1", store.port
        # 1. a TCPStore client, as in the report: refused at the handshake
        from datetime import timedelta

        import torch.distributed as dist

        with pytest.raises(Exception):  # noqa: B017
            dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=3)).set(
                "config", evil
            )
        # 2. a raw socket speaking the store's own wire format: refused too
        with socket.create_connection((host, port)) as raw:
            raw.sendall(pack(int(StoreOp.SET), [b"config", evil]))
            raw.settimeout(10)
            with pytest.raises(OSError):
                while raw.recv(4096):
                    pass
                raise ConnectionResetError
        assert "config" not in store.keys()
        # 3. even a client *with* the secret: the store holds data, nobody reads config
        insider = StoreClient(f"{host}:{port}", group.pool._files.secret())  # noqa: SLF001
        insider.request(StoreOp.SET, [b"config", evil])
        insider.close()
        # then kill a member: the pool respawns a standby, which reads its settings file
        killed = group.kill_member()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not group.poll():
            group.wait(0.05)
        assert killed not in group.members
        assert group.warm(1, timeout_s=180) >= 1  # a fresh process, warm and ready
        assert not marker.exists()
        assert str(group.job_name).startswith("digits")  # the job of the settings file
        assert store.rejected >= 2
    finally:
        group.close()
    assert not marker.exists()


# -- agents ----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_an_agent_without_the_secret_is_rejected(tmp_path, caplog):
    files = RunFiles.create(WorkerSettings(), run_dir=tmp_path / "run")
    wrong = RunFiles.create(WorkerSettings(), run_dir=tmp_path / "wrong")
    server = AgentServer("127.0.0.1", 0, secret=files.secret())
    server.start()
    try:
        with caplog.at_level(logging.WARNING, logger="elasim.executor.agent"):
            impostor = Agent(f"127.0.0.1:{server.port}", 1, wrong.secret_path, files.settings_path)
            with pytest.raises(AgentError, match="controller at"):
                impostor.run()
            # the old protocol (a hello, no handshake) is refused as well
            with socket.create_connection(("127.0.0.1", server.port)) as old:
                old.sendall(b'{"op":"hello","slots":4,"host":"old"}\n')
                old.settimeout(10)
                with pytest.raises(OSError):
                    while old.recv(4096):
                        pass
                    raise ConnectionResetError
            deadline = time.monotonic() + 10
            while server.rejected < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
        assert server.rejected == 2
        with pytest.raises(AgentError, match="only 0 of 1 agents"):
            server.wait_for_agents(1, timeout_s=0.5)
        lines = [r.getMessage() for r in caplog.records if "rejected agent" in r.getMessage()]
        assert len(lines) == 2 and all("\n" not in line for line in lines)
    finally:
        server.close()


def test_an_agent_runs_no_argv_from_the_connection(tmp_path):
    files = RunFiles.create(WorkerSettings(), run_dir=tmp_path / "run")
    marker = tmp_path / "pwned"
    agent = Agent("127.0.0.1:1", 2, files.secret_path, files.settings_path, python="/bin/false")
    a, b = socket.socketpair()
    lock = threading.Lock()
    hostile = [
        {"op": "spawn", "wid": 1, "args": ["-c", f"open('{marker}', 'w')"]},  # the old form
        {
            "op": "spawn",
            "wid": 2,
            "store": "--help:1",
            "spawn_wall_s": 0.0,
            "device_index": 0,
            "idle_warmup": False,
        },  # fmt: skip
        {
            "op": "spawn",
            "wid": -3,
            "store": "127.0.0.1:5",
            "spawn_wall_s": 0.0,
            "device_index": 0,
            "idle_warmup": False,
        },  # fmt: skip
        {"op": "signal", "wid": 1, "sig": 31},  # not a signal the controller sends
    ]
    try:
        for message in hostile:
            assert agent._handle(a, lock, message)  # noqa: SLF001 - refused, still serving
        b.settimeout(2)
        replies = [json.loads(line) for line in b.recv(65536).decode().splitlines()]
        assert [r["op"] for r in replies] == ["error", "error", "error"]
        assert all("bad request" in r["reason"] for r in replies)
        assert not agent._procs and not marker.exists()  # noqa: SLF001
    finally:
        a.close()
        b.close()


# -- bad input to run and agent --------------------------------------------------------------


def _elasim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "elasim.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.executor  # the flags are checked after the CLI finds torch
@pytest.mark.timeout(300)
def test_bad_security_flags_are_one_line_with_exit_code_2(tmp_path):
    files = RunFiles.create(WorkerSettings(), run_dir=tmp_path / "run")
    loose = tmp_path / "loose"
    loose.write_text(SECRET.hex())
    os.chmod(loose, 0o644)
    cases = {
        ("run", "-t", "spot_us_east.csv", "--secret-file", str(tmp_path / "nope")): "--secret-file",
        ("run", "-t", "spot_us_east.csv", "--secret-file", str(loose)): "must be 0600",
        ("run", "-t", "spot_us_east.csv", "--bind", "no such host"): "--bind",
        ("agent", "--controller", "127.0.0.1:9"): "--secret-file is required",
        (
            "agent",
            "--controller",
            "127.0.0.1:9",
            "--secret-file",
            str(files.secret_path),
            "--settings",
            str(tmp_path / "missing.json"),
        ): "--settings",
        (
            "agent",
            "--controller",
            "127.0.0.1:99999",
            "--secret-file",
            str(files.secret_path),
            "--settings",
            str(files.settings_path),
        ): "--controller port",
    }
    for args, expected in cases.items():
        proc = _elasim(*args)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("error:"), (args, proc.stderr)
        assert expected in lines[0], (args, lines[0])


def test_worker_command_lines_name_files_not_values(tmp_path):
    from elasim.executor.launchers import WorkerLaunch, worker_argv

    launch = WorkerLaunch(3, "127.0.0.1:4000", 12.5, device_index=1)
    argv = worker_argv("python", launch, settings_path=Path("/r/s.json"), secret_path="/r/k")
    assert argv[:4] == ["python", "-P", "-m", "elasim.executor._entry"]
    assert argv[argv.index("--settings") + 1] == "/r/s.json"
    assert argv[argv.index("--secret-file") + 1] == "/r/k"
    assert SECRET.hex() not in " ".join(argv)
    with pytest.raises(ValueError):
        WorkerLaunch(3, "-x:1", 0.0)
    with pytest.raises(ValueError):
        WorkerLaunch(True, "h:1", 0.0)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_the_store_keeps_tcpstores_semantics(store):
    """What the workers and gloo rely on: blocking get/wait, add, compare_set, prefixes."""
    pytest.importorskip("torch")
    from datetime import timedelta

    import torch.distributed as dist

    from elasim.executor.storeclient import connect_store

    client = connect_store(f"127.0.0.1:{store.port}", SECRET, timeout_s=5.0)
    assert client.add("n", 2) == 2 and client.add("n", 0) == 2 and client.get("n") == b"2"
    assert client.compare_set("go", "", "ok") == b"ok"  # a missing key, empty expected: set
    assert client.compare_set("go", "", "abort") == b"ok"  # first writer wins
    assert client.compare_set("other", "x", "y") == b"x"  # missing, not expected: unchanged
    assert not client.check(["late"])
    threading.Timer(0.2, lambda: store.set("late", b"v")).start()
    client.wait(["late"], timedelta(seconds=5))  # blocks until the controller sets it
    with pytest.raises(RuntimeError, match="timeout"):  # the worker's test for a timeout
        client.wait(["never"], timedelta(milliseconds=200))
    client.multi_set(["a", "b"], [b"1", "2"])
    assert client.multi_get(["a", "b"]) == [b"1", b"2"]
    prefixed = dist.PrefixStore("gen/1/pg", client)  # how a generation's group sees it
    prefixed.set("addr", b"x")
    assert store.get("gen/1/pg/addr") == b"x" and client.delete_key("a")
    assert client.num_keys() == store.num_keys()
    client.close()
