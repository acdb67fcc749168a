"""Multi-host: two ``elasim agent`` processes on loopback contribute slots to one controller."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")

from elasim.executor.agent import AgentServer  # noqa: E402
from elasim.executor.group import GroupSettings, ProcessWorkerGroup  # noqa: E402
from elasim.executor.protocol import WorkerSettings  # noqa: E402
from elasim.executor.runfiles import RunFiles  # noqa: E402
from elasim.policies import EventKind  # noqa: E402

pytestmark = [pytest.mark.executor]


def _agent(port: int, slots: int, log_dir, files: RunFiles) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "elasim.cli",
            "agent",
            "--controller",
            f"127.0.0.1:{port}",
            "--slots",
            str(slots),
            "--log-dir",
            str(log_dir),
            "--secret-file",
            str(files.secret_path),
            "--settings",
            str(files.settings_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.mark.timeout(120)
def test_two_agents_on_loopback_serve_one_elastic_group(tmp_path):
    settings = WorkerSettings(max_steps=10**6, checkpoint_dir=str(tmp_path / "ckpt"))
    files = RunFiles.create(settings, run_dir=tmp_path / "run")
    server = AgentServer("127.0.0.1", 0, secret=files.secret())
    server.start()
    agents = [_agent(server.port, 2, tmp_path / f"agent{i}", files) for i in range(2)]
    group = None
    try:
        launchers = server.wait_for_agents(2, timeout_s=60)
        assert sorted(launcher.slots for launcher in launchers) == [2, 2]
        group = ProcessWorkerGroup(GroupSettings(worker=settings, run_files=files), launchers)
        group.start()  # fills both agents' slots with warm standbys
        assert group.slots == 4
        first = group.apply(4, 0)
        assert [e.kind for e in first] == [EventKind.SCALE_UP] and group.held() == (4, 0)
        hosts = {group.pool.workers[w].launcher.name for w in group.members}
        assert len(hosts) == 2  # the group spans both agents
        start = group.progress().step
        deadline = time.monotonic() + 30
        while group.progress().step < start + 30 and time.monotonic() < deadline:
            group.wait(0.05)
        # a preemption without notice: the agent delivers the SIGKILL
        hard = group.preempt(1, graceful=False)
        assert [e.kind for e in hard] == [EventKind.PREEMPT, EventKind.SCALE_DOWN]
        assert group.held() == (3, 0) and hard[0].lost_steps == 1
        down = group.apply(2, 0)
        assert [e.kind for e in down] == [EventKind.SCALE_DOWN]
        before = group.progress().step
        deadline = time.monotonic() + 30
        while group.progress().step < before + 20 and time.monotonic() < deadline:
            group.wait(0.05)
        assert group.progress().step >= before + 20
    finally:
        if group is not None:
            group.close()
        server.close()
        codes = []
        for proc in agents:
            try:
                codes.append(proc.wait(timeout=20))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes.append(None)
    assert codes == [0, 0]  # the controller closed the connection: agents exit cleanly


@pytest.mark.timeout(60)
def test_cli_run_errors_are_one_line_with_exit_code_2(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,available\n0,2\n10,-1\n")
    cases = [
        ["run", "--trace", str(bad), "--json"],
        ["run", "--trace", "spot_us_east.csv", "--policy", "no-such-policy", "--json"],
        ["run", "--trace", "spot_us_east.csv", "--rescale", "sideways", "--json"],
        ["agent", "--controller", "nonsense", "--slots", "1"],
    ]
    for args in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "elasim.cli", *args],
            capture_output=True,
            text=True,
            timeout=50,
        )
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stdout == ""
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.mark.timeout(120)
def test_cli_run_prints_exactly_one_json_object_and_writes_the_files(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "elasim.cli",
            "run",
            "--trace",
            "spot_us_east.csv",
            "--trace-start-s",
            "127500",
            "--workers-max",
            "2",
            "--time-scale",
            "1000",
            "--max-steps",
            "150",
            "--out",
            str(out),
            "--profile-out",
            str(tmp_path / "profile.json"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)  # exactly one JSON object, nothing else
    assert summary["completed"] is True and summary["steps"] == 150
    for name in ("summary.json", "events.parquet", "steps.parquet", "workers.parquet"):
        assert (out / name).is_file()
    assert (out / "timeline.png").is_file()
    # the profile is a by-product of the run: its step times and its standbys' start
    from elasim.profile import load_profile

    profile = load_profile(tmp_path / "profile.json")
    assert profile.source.startswith("elasim run") and profile.backend == "gloo"
    assert profile.step_time_s and all(t > 0 for _, t in profile.step_time_s)
    assert profile.shared_host_cores == os.cpu_count()
    # the two standbys spawned at the start are one batch of two cold starts
    assert dict(profile.cold_start_s)[2][0] > 0 and profile.cold_start_alone_s > 0
    # the executor measures the gradient noise scale on two workers (NaN on one) and
    # records it per step; the profile carries the run's figure
    import pandas as pd

    steps = pd.read_parquet(out / "steps.parquet")
    pair = steps[steps["world_size"] >= 2]
    assert len(pair) > 50
    for column in ("grad_sq_local", "grad_sq_global", "gns_noise_trace"):
        assert (pair[column] > 0).all(), column
    assert (pair["grad_sq_local"] >= pair["grad_sq_global"]).mean() > 0.9  # smaller batch
    assert pair["gns_b_noise"].iloc[20:].between(1, 1e5).all()
    assert steps.loc[steps["world_size"] == 1, "gns_grad_sq"].isna().all()
    assert profile.gradient_noise_scale is not None and 1 < profile.gradient_noise_scale < 1e5
    with contextlib.suppress(FileNotFoundError):
        assert json.loads((out / "summary.json").read_text())["steps"] == 150
