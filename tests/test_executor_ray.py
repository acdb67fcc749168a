"""``elasim run --launcher ray``: bad input gets one line and exit 2, before any worker starts.

The run across hosts is ``test_executor_ray_netns.py``.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from elasim.executor.ray_launcher import check_address  # noqa: E402

pytestmark = [pytest.mark.executor]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "elasim.cli", "run", "-t", "spot_us_east.csv", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def _one_line_exit_2(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    "address", ["10.0.0.1", "host:port", "http://h:6379", "a b:1", "h:70000", "ray://h:0"]
)
def test_malformed_addresses_are_refused_naming_the_flag(address):
    with pytest.raises(ValueError, match="--address"):
        check_address(address)


@pytest.mark.parametrize("address", ["auto", "10.77.0.1:6379", "head:6379", "ray://head:10001"])
def test_well_formed_addresses_pass(address):
    check_address(address)


def test_bad_address_format_exits_2():
    _one_line_exit_2(_run("--launcher", "ray", "--address", "nohostport"), "--address")


def test_unreachable_address_exits_2_in_one_line():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = _run("--launcher", "ray", "--address", f"127.0.0.1:{port}")
    _one_line_exit_2(proc, "--address", f"127.0.0.1:{port}")


def test_address_without_the_ray_launcher_exits_2():
    _one_line_exit_2(_run("--address", "127.0.0.1:6379"), "--address", "--launcher ray")


def test_unknown_launcher_exits_2():
    _one_line_exit_2(_run("--launcher", "k8s"), "--launcher")


def test_ray_launcher_with_agents_exits_2():
    _one_line_exit_2(_run("--launcher", "ray", "--agent-port", "0"), "--launcher ray")


def test_ray_missing_exits_2_and_says_which_extra(tmp_path):
    import os

    fake = tmp_path / "ray"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    _one_line_exit_2(_run("--launcher", "ray", env=env), "elasim[ray]")
