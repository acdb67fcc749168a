"""``elasim run --launcher ray``: bad input gets one line and exit 2, before any worker starts.

The run across hosts is ``test_executor_ray_netns.py``.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from elasim.ray_connect import check_address  # noqa: E402

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
    _one_line_exit_2(_run("--launcher", "ray", env=env), "'.[ray]'")


class _FakeRay:
    """Just enough of ``ray`` for the launcher's bookkeeping (no cluster)."""

    class exceptions:  # noqa: N801 - mirrors ray.exceptions
        class RayError(Exception):
            pass

    def __init__(self, nodes):
        self._nodes = nodes
        self.ready: dict[object, object] = {}
        self.killed: list[object] = []

    def is_initialized(self):
        return True

    def remote(self, **_options):
        return lambda cls: cls

    def nodes(self):
        return self._nodes

    def wait(self, refs, timeout):
        return [r for r in refs if r in self.ready], []

    def get(self, ref):
        value = self.ready[ref]
        if isinstance(value, Exception):
            raise value
        return value

    def kill(self, actor, no_restart):
        self.killed.append(actor)


def _launcher(monkeypatch, nodes, **kwargs):
    import elasim.executor.ray_launcher as rl

    fake = _FakeRay(nodes)
    monkeypatch.setattr(rl, "_ray", lambda: fake)
    return rl.RayLauncher(4, **kwargs), fake


def _node(alive=True, **resources):
    return {"Alive": alive, "Resources": resources}


def test_slots_are_what_the_alive_nodes_hold_capped_by_max_nodes(monkeypatch):
    nodes = [_node(CPU=2.0), _node(CPU=1.0), _node(alive=False, CPU=8.0)]
    launcher, _ = _launcher(monkeypatch, nodes)
    assert launcher.slots == 3  # 2 + 1; the dead node's CPUs do not count
    launcher, _ = _launcher(monkeypatch, nodes + [_node(CPU=4.0)])
    assert launcher.slots == 4  # 7 would fit: capped by max_slots
    custom = [_node(CPU=8.0, trainer=1.0), _node(CPU=8.0)]
    launcher, _ = _launcher(monkeypatch, custom, resources={"CPU": 1.0, "trainer": 1.0})
    assert launcher.slots == 1  # only the node that offers the custom resource


def test_a_dead_actor_reads_as_a_sigkilled_worker_and_sigkill_is_ray_kill(monkeypatch):
    import signal

    from elasim.executor.ray_launcher import RayProcess

    launcher, fake = _launcher(monkeypatch, [_node(CPU=2.0)])
    alive, lost, clean = (RayProcess(launcher, i, f"actor{i}", f"ref{i}") for i in range(3))
    fake.ready = {"ref1": fake.exceptions.RayError("node died"), "ref2": 0}
    assert alive.poll() is None
    assert lost.poll() == -signal.SIGKILL
    assert clean.poll() == 0
    # an ended worker's actor is killed: an idle actor would keep its slot's resources
    assert fake.killed == ["actor1", "actor2"] and clean.poll() == 0
    alive.send_signal(signal.SIGKILL)
    assert fake.killed == ["actor1", "actor2", "actor0"]


class _Context:
    def get_node_id(self):
        return "n2"


def _ids(nodes):
    for i, node in enumerate(nodes):
        node.update(NodeID=f"n{i}", NodeManagerAddress=f"10.0.0.{9 - i}")
    return nodes


def test_a_node_of_cluster_run_is_one_ray_node_its_slots_only_while_alive(monkeypatch):
    """``cluster run --launcher ray``: one launcher per node, the controller's first."""
    import elasim.executor.ray_launcher as rl

    nodes = _ids([_node(CPU=2.0), _node(CPU=0.0), _node(CPU=3.0), _node(CPU=2.0)])
    fake = _FakeRay(nodes)
    fake.get_runtime_context = _Context
    monkeypatch.setattr(rl, "_ray", lambda: fake)
    launchers = rl.node_launchers(2, resources={"CPU": 1.0})
    # n2 runs the controller (node 0); n1 holds no worker; then by address
    assert [x.node_id for x in launchers] == ["n2", "n3", "n0"]
    assert [x.slots for x in launchers] == [2, 2, 2]  # n2 could hold 3: one node's slots
    assert launchers[0].name == "ray:10.0.0.7"
    nodes[3]["Alive"] = False  # its host is gone
    fresh = rl.RayLauncher(2, resources={"CPU": 1.0}, node_id="n3")
    assert fresh.slots == 0
    with pytest.raises(ValueError, match="fewer than --gpus-per-node 3"):
        rl.node_launchers(3, resources={"CPU": 1.0})


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_workers_of_a_private_instance_run_at_our_niceness_not_rays():
    """Ray starts its workers at niceness 15; beside two busy processes a trainer that
    inherited it got a few percent of a core, and no worker started within 120 s."""
    import os

    pytest.importorskip("ray")
    from elasim.ray_connect import connected

    with connected(None, missing="ray is missing", flag="--launcher ray", num_cpus=1) as conn:
        assert conn.private and conn.connected_here

        @conn.ray.remote
        def niceness() -> int:
            return os.getpriority(os.PRIO_PROCESS, 0)

        assert conn.ray.get(niceness.remote()) == os.getpriority(os.PRIO_PROCESS, 0)
    assert not conn.ray.is_initialized()
