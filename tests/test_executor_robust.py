"""The executor never loses a run to a bad path, a bad peer or its own bookkeeping.

Each test reproduces a defect found by probing the executor as a careless user and a
hostile peer would; each failed before its fix.  The agent-listener and gloo-binding
tests need no torch; the CLI ones run ``elasim`` in a subprocess and stop before any
worker starts, except where a test says so.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import error_lines

from elasim.executor import agent as agent_mod
from elasim.executor.agent import Agent, AgentError, AgentServer
from elasim.executor.auth import AGENT, client_handshake
from elasim.executor.launchers import NoFreeSlot, WorkerLaunch, interface_of, worker_env
from elasim.executor.protocol import WorkerSettings
from elasim.executor.runfiles import RunFiles

SECRET = bytes(range(32))

REPO = Path(__file__).resolve().parents[1]


def elasim(*args: str, timeout: float = 60, env: dict | None = None):
    return subprocess.run(
        [sys.executable, "-m", "elasim.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def one_line_error(proc, code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    # a policy that misbehaves at its first decision is refused after the start line
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


# -- the agent listener (no torch) ------------------------------------------------------------


def _authenticated(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    client_handshake(sock, SECRET, AGENT)
    return sock


def _hello(port: int) -> socket.socket:
    sock = _authenticated(port)
    sock.sendall(b'{"op":"hello","slots":1,"host":"good"}\n')
    return sock


@pytest.mark.timeout(30)
def test_a_client_trickling_bytes_cannot_keep_a_real_agent_out(monkeypatch):
    monkeypatch.setattr(agent_mod, "HELLO_DEADLINE_S", 2.0)
    server = AgentServer("127.0.0.1", 0, secret=SECRET)
    server.start()
    slow = socket.create_connection(("127.0.0.1", server.port))
    stop = threading.Event()

    def trickle() -> None:  # one byte every half second, never a whole line
        with slow:
            while not stop.is_set():
                try:
                    slow.sendall(b"{")
                except OSError:
                    return
                time.sleep(0.5)

    threading.Thread(target=trickle, daemon=True).start()
    try:
        time.sleep(0.3)
        started = time.monotonic()
        good = _hello(server.port)
        launchers = server.wait_for_agents(1, timeout_s=5)
        assert launchers[0].host == "good"
        assert time.monotonic() - started < 1.5  # served at once, not after the slow one
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the slow peer is cut off at its deadline
            try:
                slow.getpeername()
            except OSError:
                break
            time.sleep(0.1)
        good.close()
    finally:
        stop.set()
        server.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("reason", "raised"), [("no free slot", NoFreeSlot), ("exec failed", AgentError)]
)
def test_an_agent_that_refuses_a_spawn_for_want_of_a_slot_reads_as_full(reason, raised):
    """Its count ran ahead of the controller's: the group counts it full (NoFreeSlot)."""
    server = AgentServer("127.0.0.1", 0, secret=SECRET)
    server.start()
    try:
        peer = _hello(server.port)
        (launcher,) = server.wait_for_agents(1, timeout_s=5)

        def refuse() -> None:
            request = json.loads(peer.makefile("rb").readline())
            reply = {"op": "error", "wid": request["wid"], "reason": reason}
            peer.sendall(json.dumps(reply).encode() + b"\n")

        threading.Thread(target=refuse, daemon=True).start()
        launch = WorkerLaunch(wid=3, store="127.0.0.1:1", spawn_wall_s=0.0)
        with pytest.raises(raised, match="worker 3"):
            launcher.spawn(launch)
        peer.close()
    finally:
        server.close()


@pytest.mark.timeout(30)
def test_a_peer_sending_malformed_json_is_dropped_in_one_line(caplog):
    crashes: list[BaseException] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: crashes.append(args.exc_value)
    server = AgentServer("127.0.0.1", 0, secret=SECRET)
    server.start()
    try:
        with caplog.at_level(logging.WARNING, logger="elasim.executor.agent"):
            peer = _hello(server.port)
            (launcher,) = server.wait_for_agents(1, timeout_s=5)
            peer.sendall(b"this is not json\n")
            deadline = time.monotonic() + 5
            while not launcher._closed and time.monotonic() < deadline:  # noqa: SLF001
                time.sleep(0.05)
            assert launcher._closed  # noqa: SLF001 - treated as a host that went away
            bad_hello = _authenticated(server.port)
            bad_hello.sendall(b"[1, 2\n")
            time.sleep(0.5)
        warnings = [r.getMessage() for r in caplog.records]
        assert any("dropped agent" in w and "malformed" in w for w in warnings), warnings
        assert any("rejected agent" in w and "malformed" in w for w in warnings), warnings
        assert all("\n" not in w for w in warnings)
        assert not crashes  # no reader thread died with a traceback
    finally:
        threading.excepthook = hook
        server.close()


def test_agent_errors_name_the_address(tmp_path):
    files = RunFiles.create(WorkerSettings(), run_dir=tmp_path / "run")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        port = busy.getsockname()[1]
        busy.listen(1)
        with pytest.raises(AgentError, match=f"127.0.0.1:{port}: Address already in use"):
            AgentServer("127.0.0.1", port, secret=SECRET).start()
    with pytest.raises(AgentError, match=f"controller at 127.0.0.1:{port}"):
        agent = Agent(f"127.0.0.1:{port}", 1, files.secret_path, files.settings_path)
        agent.connect_timeout_s = 0.3
        agent.run()


# -- gloo stays on the store's interface (no torch) -------------------------------------------


def test_workers_bind_gloo_to_the_stores_interface():
    assert interface_of("127.0.0.1") == "lo"
    env = worker_env("127.0.0.1", {"PATH": "/usr/bin"})
    assert env == {"PATH": "/usr/bin", "GLOO_SOCKET_IFNAME": "lo"}
    # the user's own choice wins, and binding everything leaves gloo alone
    assert worker_env("127.0.0.1", {"GLOO_SOCKET_IFNAME": "eth9"}) == {"GLOO_SOCKET_IFNAME": "eth9"}
    assert worker_env("0.0.0.0", {}) == {}


# -- the run command: bad input fails first, in one line -------------------------------------

torch_cases = pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None, reason="needs torch (executor)"
)


@torch_cases
@pytest.mark.executor
@pytest.mark.timeout(120)
def test_bad_run_input_is_one_line_and_exit_2_before_any_worker(tmp_path):
    a_file = tmp_path / "ckfile"
    a_file.write_text("a regular file")
    cases = {
        "--checkpoint-dir": ["--checkpoint-dir", str(a_file)],
        "--deadline-h": ["--deadline-h", "-1"],
        "--start-offset-s": ["--trace-start-s", "1e12"],
        "--backend nccl": ["--backend", "nccl"],
        "--job": ["--job", "no.such:job"],
        "--max-nodes": ["--max-nodes", "0"],
    }
    for flag, args in cases.items():
        proc = elasim("run", "-t", "spot_us_east.csv", "--max-steps", "50", *args)
        line = one_line_error(proc)
        assert flag.split()[0] in line, (flag, line)
    chatty = tmp_path / "chatty.py"
    chatty.write_text(
        "from elasim.policies import PolicyBase\n"
        "class Chatty(PolicyBase):\n"
        "    name = 'chatty'\n"
        "    def decide(self, obs):\n"
        "        return 'four nodes please'\n"
    )
    proc = elasim("run", "-t", "spot_us_east.csv", "-p", f"{chatty}:Chatty", "--max-nodes", "2")
    line = one_line_error(proc)
    assert "chatty" in line and "not a Decision" in line and str(chatty) in line
    proc = elasim("agent", "--controller", "127.0.0.1:99999")
    assert "port" in one_line_error(proc)
    proc = elasim("calibrate", "--job", "no.such:job", "--out", str(tmp_path / "p.json"))
    assert "no.such" in one_line_error(proc)


@torch_cases
@pytest.mark.executor
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_run_that_does_not_finish_exits_non_zero_and_still_writes_its_files(tmp_path):
    out = tmp_path / "out"
    proc = elasim(
        "run", "-t", "spot_us_east.csv", "--max-steps", "1000000", "--max-nodes", "2",
        "--max-wall-s", "4", "--out", str(out), "--json", timeout=150,
    )  # fmt: skip
    line = one_line_error(proc, code=1)
    assert "did not finish" in line and "--max-wall-s" in line
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] is False and summary["gave_up"] is True
    assert not (out / "events.partial.jsonl").exists()  # the journal, done with


@torch_cases
@pytest.mark.executor
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_sigterm_cleans_up_and_a_killed_controller_leaves_its_journal(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    args = [sys.executable, "-m", "elasim.cli", "run", "-t", "spot_us_east.csv",
            "--max-steps", "1000000", "--max-nodes", "2", "--json"]  # fmt: skip
    # SIGTERM without --out: the temporary checkpoint folder goes with the run
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(8)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    assert not list(tmpdir.glob("elasim-ckpt-*"))
    # SIGKILL of the controller with --out: the journal keeps the steps so far
    out = tmp_path / "out"
    proc = subprocess.Popen([*args, "--out", str(out)], env=env, stdout=subprocess.DEVNULL)
    journal = out / "steps.partial.jsonl"
    deadline = time.monotonic() + 90  # workers cold-start slowly on a loaded machine
    while time.monotonic() < deadline and not (journal.exists() and journal.stat().st_size):
        time.sleep(0.5)
    time.sleep(1.0)
    proc.kill()
    proc.wait(timeout=30)
    lines = (out / "steps.partial.jsonl").read_text().splitlines()
    assert lines and json.loads(lines[-1])["step"] >= 1
    assert (out / "events.partial.jsonl").read_text().count('"kind": "scale_up"') >= 1
