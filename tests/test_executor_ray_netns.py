"""``elasim run --launcher ray`` across real network boundaries: two namespaces as hosts.

Each "host" is a Linux network namespace with its own address (10.77.S.0/24, only
inside these namespaces), joined through a bridge that lives in a third, private
namespace (so no device, address or firewall rule of the machine's own namespace is
touched).  The Ray head and the run's controller are in host 0, a Ray node in host 1,
two worker slots each (a custom resource, ``--ray-resources elasim_slot=1``).  The
run's two workers are Ray actors spread over both hosts; mid-run
every process of host 1 is SIGKILLed (the host is gone), and the run must complete
on host 0 (a replacement actor placed there), with an events file of the local
launcher's schema.  Two hosts rather than three: every Ray node costs seconds of
CPU to start, and this must run on a 2-core machine.

The same two hosts run ``elasim cluster run --launcher ray`` (each Ray node a node of
the cluster): host 1 is SIGKILLed while a job's workers run there, and that job must
be preempted and finish on host 0.

Needs root and ``ip`` (CI runs as root); skipped with the reason otherwise.  The
fixture's finalizer kills every process left in the namespaces and deletes them,
whatever happened.  ``ray stop`` is never used: it would stop other Ray instances on
the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray")

pytestmark = [pytest.mark.executor, pytest.mark.slow]

#: Ray's node health check, fast enough that a lost host is reported in seconds
#: (the default needs about 15 s of missed checks)
RAY_ENV = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
    "RAY_health_check_initial_delay_ms": "500",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
}
OBJECT_STORE_BYTES = str(80 * 1024 * 1024)


@dataclass
class Hosts:
    names: list[str]
    addresses: list[str]
    temp_dir: Path

    def run(self, host: int, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.names[host], *argv], **kwargs)

    def popen(self, host: int, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.names[host], *argv], **kwargs)

    def pids(self, host: int) -> list[int]:
        out = subprocess.run(
            ["ip", "netns", "pids", self.names[host]], capture_output=True, text=True
        ).stdout
        return [int(p) for p in out.split()]

    def kill_host(self, host: int) -> int:
        """SIGKILL every process in the namespace; returns how many there were."""
        pids = self.pids(host)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=20)


def _remove(namespaces: list[str], hosts: Hosts | None) -> None:
    """Kill every process in the hosts, then delete every namespace made."""
    if hosts is not None:
        for i in range(len(hosts.names)):
            for _ in range(3):  # processes may fork while being killed
                if not hosts.kill_host(i):
                    break
                time.sleep(0.2)
    for ns in namespaces:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)


@pytest.fixture
def hosts(tmp_path):
    """Two namespaces on one bridge; removed, with every process in them, at the end."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs as root)")
    if shutil.which("ip") is None:
        pytest.skip("network namespaces need iproute2's 'ip'")
    tag = os.getpid() % 100000
    subnet = f"10.77.{os.getpid() % 250}"
    switch = f"elr{tag}sw"
    names = [f"elr{tag}h{i}" for i in range(2)]
    made: list[str] = []
    temp_dir = Path(f"/tmp/elr{tag}")  # Ray's socket paths must stay short
    found = Hosts(names, [f"{subnet}.{i + 1}" for i in range(2)], temp_dir)
    try:
        for ns in (switch, *names):
            _ip("netns", "add", ns)
            made.append(ns)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        for i, ns in enumerate(names):
            _ip("-n", switch, "link", "add", f"p{i}", "type", "veth", "peer", "eth0", "netns", ns)
            _ip("-n", switch, "link", "set", f"p{i}", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{found.addresses[i]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            # Ray finds a node's address by routing towards a public one (no packet)
            _ip("-n", ns, "route", "add", "default", "dev", "eth0")
    except (subprocess.CalledProcessError, OSError) as exc:
        reason = getattr(exc, "stderr", "") or str(exc)
        _remove(made, None)
        pytest.skip(f"cannot make network namespaces here: {reason.strip()}")
    try:
        yield found
    finally:
        _remove(made, found)
        shutil.rmtree(temp_dir, ignore_errors=True)


#: Ray's own token authentication, with a token of this test only (not the user's
#: ~/.ray/auth_token, which a head would otherwise pick up and its nodes would not)
RAY_TOKEN = secrets.token_hex(32)


def _ray_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(RAY_ENV)
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": RAY_TOKEN})
    return env


#: fixed ports: a port left to Ray is announced through a file its raylet waits for, and
#: each namespace has its own ports anyway
RAY_PORTS = [
    "--node-manager-port", "52368", "--object-manager-port", "52369",
    "--metrics-export-port", "52370", "--dashboard-agent-listen-port", "52365",
    "--dashboard-agent-grpc-port", "52366", "--runtime-env-agent-port", "52367",
]  # fmt: skip


#: what a raylet waits for, per node, in ``{session_dir}/{name}_{node_id}``: the ports
#: of its agents.  -1 is what Ray's minimal agent writes for a service it does not run.
AGENT_PORT_FILES = {
    "dashboard_agent_listen_port": "-1",
    "metrics_agent_port": "-1",
    "runtime_env_agent_port": "52367",
}


def _announce_agent_ports(hosts: Hosts, host: int, stop: threading.Event) -> None:
    """Write the agents' port files for every raylet of ``host`` as soon as it starts.

    A raylet waits 15 s (hard-coded in Ray 2.60) for its agents to write these files,
    then aborts the node.  On a loaded 2-core machine importing an agent alone takes
    longer.  The ports are fixed (:data:`RAY_PORTS`), so they are known before the
    agents start: the files are written here (never over one an agent wrote), the
    raylet goes on, and it reaches the agents once they listen.
    """
    done: set[int] = set()
    while not stop.wait(0.05):
        for pid in hosts.pids(host):
            if pid in done:
                continue
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            flags = dict(
                a.decode().split("=", 1) for a in argv if a.startswith(b"--") and b"=" in a
            )
            if "--node_id" not in flags or "--session_dir" not in flags:
                continue
            done.add(pid)
            for name, port in AGENT_PORT_FILES.items():
                path = Path(flags["--session_dir"]) / f"{name}_{flags['--node_id']}"
                with contextlib.suppress(OSError):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    os.write(fd, port.encode())
                    os.close(fd)


def _ray_start(hosts: Hosts, host: int, argv: list[str], attempts: int = 3) -> None:
    """``ray start`` in one host, its agents' ports announced, retried if it fails.

    Why the ports are announced: see :func:`_announce_agent_ports`.  Fewer processes
    start with each node for the same reason (no autoscaler monitor, no log monitor,
    no CPUs, so no prestarted Python workers).  Why skipped when every attempt fails:
    Ray that cannot start here (on a loaded 2-core machine, its start-up timeouts) is
    not the launcher under test; the reason gives Ray's last line.
    """
    ray = str(Path(sys.executable).parent / "ray")
    last = ""
    for attempt in range(attempts):
        if attempt:
            hosts.kill_host(host)
            time.sleep(0.5)
        stop = threading.Event()
        announcer = threading.Thread(target=_announce_agent_ports, args=(hosts, host, stop))
        announcer.start()
        try:
            done = hosts.run(
                host, [ray, "start", *argv, *RAY_PORTS],
                capture_output=True, text=True, env=_ray_env(), timeout=180,
            )  # fmt: skip
        finally:
            stop.set()
            announcer.join()
        if done.returncode == 0:
            return
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
    pytest.skip(f"Ray could not start a node on this machine ({attempts} attempts): {last}")


def _start_ray(hosts: Hosts) -> str:
    """The head in host 0, a node in host 1, 2 slots each; returns the head's address."""
    head = f"{hosts.addresses[0]}:6379"
    # slots as a custom resource, no CPUs: a node with CPUs prestarts that many
    # Python workers, which compete with its agents' 15 s start (see _ray_start)
    common = [
        "--num-cpus", "0", "--resources", json.dumps({"elasim_slot": 2}),
        "--object-store-memory", OBJECT_STORE_BYTES, "--disable-usage-stats",
        "--include-log-monitor=false",
    ]  # fmt: skip
    _ray_start(
        hosts, 0,
        ["--head", "--no-monitor", "--node-ip-address", hosts.addresses[0], "--port", "6379",
         "--include-dashboard=false", "--temp-dir", str(hosts.temp_dir), *common],
    )  # fmt: skip
    _ray_start(hosts, 1, ["--address", head, "--node-ip-address", hosts.addresses[1], *common])
    return head


def _wait_nodes(hosts: Hosts, head: str, count: int, timeout_s: float = 60.0) -> None:
    probe = (
        "import ray, sys, time\n"
        f"ray.init(address={head!r}, logging_level='ERROR', log_to_driver=False)\n"
        f"deadline = time.monotonic() + {timeout_s}\n"
        "while time.monotonic() < deadline:\n"
        "    alive = [n for n in ray.nodes() if n['Alive']]\n"
        f"    if len(alive) >= {count}: sys.exit(0)\n"
        "    time.sleep(0.5)\n"
        "sys.exit(1)\n"
    )
    done = hosts.run(0, [sys.executable, "-c", probe], capture_output=True, text=True,
                     env=_ray_env(), timeout=timeout_s + 60)  # fmt: skip
    assert done.returncode == 0, f"the Ray nodes did not join: {done.stderr[-2000:]}"


def _steps_so_far(out: Path) -> int:
    path = out / "steps.partial.jsonl"
    if not path.exists():
        return 0
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def _run_argv(trace: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "elasim.cli", "run", "-t", str(trace), "--out", str(out),
        "--json", "--no-plot", "--collective-timeout-s", "5", "--checkpoint-interval-s",
        "off", *extra,
    ]  # fmt: skip


@pytest.mark.timeout(300)
def test_a_ray_run_across_namespaces_survives_the_loss_of_a_host(hosts, tmp_path):
    import pandas as pd

    trace = tmp_path / "four.csv"
    trace.write_text("time_s,available,price_per_hour\n0,4,0.9\n864000,4,0.9\n")
    head = _start_ray(hosts)
    _wait_nodes(hosts, head, 2)
    out = tmp_path / "ray"
    argv = _run_argv(
        trace, out, "--launcher", "ray", "--address", head, "--bind", hosts.addresses[0],
        "--ray-resources", "elasim_slot=1", "--max-nodes", "2", "--max-steps", "1200",
        "--max-wall-s", "120", "--log-dir", str(tmp_path / "logs"),
    )  # fmt: skip
    run = hosts.popen(0, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_ray_env())
    try:
        deadline = time.monotonic() + 90
        while _steps_so_far(out) < 100 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run.poll() is None, f"the run ended before the host was killed: {run.stderr}"
        assert _steps_so_far(out) >= 100, "no training within 90 s"
        killed = hosts.kill_host(1)  # the whole host: Ray's node and the worker on it
        assert killed > 0
        stdout, stderr = run.communicate(timeout=150)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, stderr.decode()[-3000:]
    summary = json.loads(stdout)
    assert summary["completed"] and summary["steps"] == 1200
    events = pd.read_parquet(out / "events.parquet")
    kinds = list(events["kind"])
    assert "preempt" in kinds, kinds  # the lost host's worker, as a preemption
    workers = pd.read_parquet(out / "workers.parquet")
    assert len(workers) >= 3  # a replacement was placed on the surviving host

    local_out = tmp_path / "local"
    local = subprocess.run(
        _run_argv(trace, local_out, "--max-nodes", "1", "--max-steps", "20"),
        capture_output=True, timeout=120,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr.decode()[-2000:]
    local_events = pd.read_parquet(local_out / "events.parquet")
    assert list(events.columns) == list(local_events.columns)
    assert dict(events.dtypes) == dict(local_events.dtypes)


def _workers_in(hosts: Hosts, host: int) -> int:
    """elasim worker processes running in ``host`` (children of its Ray actors)."""
    count = 0
    for pid in hosts.pids(host):
        with contextlib.suppress(OSError):
            if b"elasim.executor._entry" in Path(f"/proc/{pid}/cmdline").read_bytes():
                count += 1
    return count


@pytest.mark.timeout(420)
def test_a_ray_cluster_run_across_namespaces_survives_the_loss_of_a_host(hosts, tmp_path):
    """``elasim cluster run --launcher ray``: a Ray node is a node of the cluster.

    Two jobs of two workers under ``fifo`` on two nodes of two slots: ``a`` on node 0
    (the controller's host), ``b`` on node 1.  Once ``b``'s workers run in host 1,
    the host is SIGKILLed: the loop hears of it as a capacity drop, preempts ``b``,
    never places anything on node 1 again, and ``b`` finishes on node 0 after ``a``.
    """
    import pandas as pd

    data = Path(__file__).parent / "data"
    workload = tmp_path / "two.csv"
    workload.write_text(
        "name,time,application,num_replicas,batch_size\na,0,synth-160,2,128\nb,0,synth-160,2,128\n"
    )
    head = _start_ray(hosts)
    _wait_nodes(hosts, head, 2)
    out = tmp_path / "cluster"
    argv = [
        sys.executable, "-m", "elasim.cli", "cluster", "run", "--workload", str(workload),
        "--applications", str(data / "cluster_apps"), "--gpus-per-node", "2",
        "--sample-delay-s", "0.002", "--job-set", "train_size=4096",
        "--collective-timeout-s", "5", "--max-wall-s", "240", "--json", "--out", str(out),
        "--launcher", "ray", "--address", head, "--bind", hosts.addresses[0],
        "--ray-resources", "elasim_slot=1", "--log-dir", str(tmp_path / "logs"),
    ]  # fmt: skip
    run = hosts.popen(0, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_ray_env())
    try:
        deadline = time.monotonic() + 150
        while _workers_in(hosts, 1) < 2 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run.poll() is None, f"the run ended before the host was killed: {run.stderr}"
        assert _workers_in(hosts, 1) == 2, "b's workers never ran in host 1 within 150 s"
        # b's workers join its group and train: Ray's workers took up to 9 s from their
        # processes' start to the first step here, and a job killed while its workers
        # still join is not preempted (it never ran); at 2 ms per sample its 160 steps
        # then take about 20 s, so 10 s lands mid-run
        time.sleep(10.0)
        assert hosts.kill_host(1) > 0
        stdout, stderr = run.communicate(timeout=250)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, stderr.decode()[-3000:]
    summary = json.loads(stdout)
    assert summary["steps"] == {"a": 160, "b": 160}, summary
    assert summary["preemptions"] >= 1, summary
    assert b"node 1 (ray:" in stderr and b"is gone" in stderr, stderr.decode()[-3000:]
    events = pd.read_parquet(out / "events.parquet")
    assert "preempt" in set(events[events["job"] == "b"]["kind"]), events
