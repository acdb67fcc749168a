"""``elasim run --script``: a user's unmodified torchrun script under the job model.

The fast tests drive :class:`ScriptWorkerGroup` with a torch-free stand-in script
(it speaks the same contract: the TorchElastic environment, SIGTERM, ``step_done``);
the slow ones run the shipped DDP example under ``torchrun`` and under
``elasim run --script`` on a trace window with two preemptions.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import error_lines
from typer.testing import CliRunner

from elasim.cli import app
from elasim.executor import report
from elasim.executor.group import GroupSettings, LocalLauncher, RescaleMode
from elasim.executor.script import ScriptFailed, ScriptSpec, ScriptWorkerGroup
from elasim.policies import EventKind

pytestmark = [pytest.mark.executor]

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "torchrun_ddp.py"
runner = CliRunner()

#: A torch-free stand-in for a torchrun script: the contract, nothing else.
#: argv: OUT TOTAL_STEPS MODE [START_S] (mode: normal | ignore-term | crash | forgetful, the
#: last one never checkpoints; START_S: a slow cold start, seconds before it starts)
STAND_IN = r"""
import json, os, signal, sys, time
from elasim.executor import batch_plan, step_done

out, total, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 0.0)
rank = int(os.environ["RANK"])
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
        "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID", "GROUP_RANK", "ELASIM_STEP_FILE")
gen = os.environ["TORCHELASTIC_RESTART_COUNT"]
with open(os.path.join(out, f"env-{gen}-{rank}.json"), "w") as f:
    plan = batch_plan(default=8)  # the one optional call that tells a script its batch
    seen = {k: os.environ.get(k) for k in keys}
    json.dump({**seen, "plan": [plan.global_batch, plan.lr_gain]}, f)
if mode == "crash":
    print("boom: the script broke", file=sys.stderr)
    sys.exit(3)
stop = []
def on_term(*_):
    with open(os.path.join(out, f"term-{gen}-{rank}"), "w") as f:
        f.write(repr(time.time()))
    if mode != "ignore-term":
        stop.append(1)
signal.signal(signal.SIGTERM, on_term)
open(os.path.join(out, f"ready-{gen}-{rank}"), "w").close()
ckpt = os.path.join(out, "step")
step = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
while step < total and not stop:
    time.sleep(0.02)
    step += 1
    step_done(step, loss=1.0 / step, samples=8)
    if rank == 0 and step % 5 == 0 and mode != "forgetful":
        with open(ckpt + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(ckpt + ".tmp", ckpt)
if rank == 0 and mode != "forgetful":
    with open(ckpt + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(ckpt + ".tmp", ckpt)
"""


def stand_in(
    tmp_path: Path, total: int = 10_000, mode: str = "normal", start_s: float = 0.0
) -> ScriptSpec:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    args = (str(out), str(total), mode, str(start_s))
    return ScriptSpec(str(script), args, first_step_timeout_s=30.0, log_dir=None)


def script_group(spec: ScriptSpec, slots: int = 2) -> ScriptWorkerGroup:
    settings = GroupSettings(mode=RescaleMode.RESTART, stop_grace_s=3.0, poll_interval_s=0.01)
    return ScriptWorkerGroup(spec, settings, LocalLauncher(slots))


def wait_ready(out: Path, gen: int, ranks: int, timeout_s: float = 30.0) -> None:
    """Until every rank of world ``gen`` has its SIGTERM handler (ranks start unevenly)."""
    deadline = time.monotonic() + timeout_s
    while not all((out / f"ready-{gen}-{r}").exists() for r in range(ranks)):
        assert time.monotonic() < deadline, "the stand-in did not start"
        time.sleep(0.02)


def kinds(events) -> list[EventKind]:
    return [e.kind for e in events]


# -- step_done --------------------------------------------------------------------------------


def test_step_done_is_a_no_op_outside_elasim(monkeypatch, tmp_path):
    monkeypatch.delenv(report.STEP_FILE_ENV, raising=False)
    report.step_done(1, loss=0.5)  # nothing to write to, nothing raised
    monkeypatch.setattr(report, "_handle", None)
    path = tmp_path / "steps.jsonl"
    monkeypatch.setenv(report.STEP_FILE_ENV, str(path))
    report.step_done(1, loss=0.5, samples=64)
    report.step_done(loss=float("nan"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    got = [(r["step"], r["loss"], r["samples"]) for r in lines]
    assert got == [(1, 0.5, 64), (None, None, None)]
    assert all(abs(r["wall_s"] - time.time()) < 60 for r in lines)
    report._handle.close()
    monkeypatch.setattr(report, "_handle", None)


def test_step_done_does_not_import_torch():
    code = "import sys; from elasim.executor import step_done; step_done(); "
    code += "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# -- the group, with the stand-in -------------------------------------------------------------


@pytest.mark.timeout(90)
def test_a_world_gets_the_torchelastic_contract_and_restarts_are_measured(tmp_path):
    spec = stand_in(tmp_path)
    out = Path(spec.args[0])
    group = script_group(spec)
    try:
        first = group.apply(2, 0)
        assert kinds(first) == [EventKind.SCALE_UP] and first[0].pause.acquire_s > 0
        wait_ready(out, 0, 2)
        envs = [json.loads((out / f"env-0-{r}.json").read_text()) for r in (0, 1)]
        assert [e["RANK"] for e in envs] == ["0", "1"] == [e["LOCAL_RANK"] for e in envs]
        assert {e["WORLD_SIZE"] for e in envs} == {"2"} == {e["LOCAL_WORLD_SIZE"] for e in envs}
        assert envs[0]["MASTER_ADDR"] == "127.0.0.1" and envs[0]["MASTER_PORT"].isdigit()
        assert envs[0]["ELASIM_STEP_FILE"] and envs[1]["ELASIM_STEP_FILE"] is None  # rank 0 only
        assert envs[0]["plan"] == [8, 1.0]  # no batch chosen: the script's own
        time.sleep(0.5)
        group.set_batch(32, 1.5)  # a cluster policy's batch: the next world's, as for workers
        # a hard preemption: the victim is SIGKILLed, the survivor SIGTERMed and restarted
        hard = group.preempt(1, graceful=False)
        assert kinds(hard) == [EventKind.PREEMPT, EventKind.SCALE_DOWN]
        down = hard[1]
        assert (down.nodes_before, down.nodes_after) == (2, 1)
        assert down.pause.pause_s > 0 and down.interval_s is not None
        assert down.interval_s >= down.pause.pause_s * 0.5
        assert (out / "term-0-0").exists() and not (out / "term-0-1").exists()
        again = json.loads((out / "env-1-0.json").read_text())
        assert again["TORCHELASTIC_RESTART_COUNT"] == "1" and again["WORLD_SIZE"] == "1"
        assert again["MASTER_PORT"] != envs[0]["MASTER_PORT"]  # a fresh port per world
        assert again["TORCHELASTIC_RUN_ID"] == envs[0]["TORCHELASTIC_RUN_ID"]
        assert again["plan"] == [32, 1.5]
        # the survivor checkpointed on SIGTERM: at most the steps since then were redone
        assert down.lost_steps <= 1
        assert group.progress().step > 0 and group.step_time_by_world()
    finally:
        group.close()


@pytest.mark.timeout(90)
def test_a_noticed_preemption_sigterms_then_sigkills_at_the_drop(tmp_path):
    spec = stand_in(tmp_path, mode="ignore-term")  # a script that never leaves on its own
    out = Path(spec.args[0])
    group = script_group(spec)
    try:
        group.apply(2, 0)
        wait_ready(out, 0, 2)
        t0 = group._now()
        events = group.preempt(2, graceful=True, kill_at_real_s=t0 + 1.0)
        waited = group._now() - t0
        assert kinds(events) == [EventKind.PREEMPT, EventKind.PAUSE]
        assert (out / "term-0-0").exists() and (out / "term-0-1").exists()
        assert 0.9 <= waited < 4.0  # SIGKILL at the drop, not before, not after the grace
        assert all(not group.workers.alive(w) for w in group.workers)
        assert group.held() == (0, 0)
    finally:
        group.close()


@pytest.mark.timeout(60)
def test_a_script_that_finishes_is_done(tmp_path):
    group = script_group(stand_in(tmp_path, total=15))
    try:
        group.apply(1, 0)
        group.wait(30.0)
        assert group.done and group.progress().step == 15
        assert group.poll() == []
    finally:
        group.close()


@pytest.mark.timeout(60)
def test_a_script_that_crashes_fails_the_run(tmp_path):
    # both ranks crash; the error names the first one seen to exit, which on a busy
    # machine may be either
    group = script_group(stand_in(tmp_path, mode="crash"))
    try:
        with pytest.raises(ScriptFailed, match=r"rank [01] exited with code 3: boom"):
            group.apply(2, 0)
    finally:
        group.close()


# -- the command line -------------------------------------------------------------------------


def _one_line(result, code: int, *needles: str) -> None:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    # the error is one line; progress lines ("elasim run: ...") may come before it
    lines = error_lines(result.stderr)
    text = "\n".join(lines)
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in text, text


def run_args(*extra: str) -> list[str]:
    return ["run", "-t", "spot_us_east.csv", "--max-nodes", "2", "--no-plot", *extra]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--script", "no/such/train.py"], "no such file"),
        (["--script", "."], "not a file"),
        (["--script", str(EXAMPLE), "--rescale", "inplace"], "--rescale"),
        (["--script", str(EXAMPLE), "--job-set", "a=1"], "--job-set"),
        (["--script", str(EXAMPLE), "--checkpoint-interval-s", "600"], "--checkpoint-interval-s"),
        (["--", "--steps", "3"], "need --script"),
    ],
)
def test_bad_script_input_is_one_line_and_exit_2(args, needle):
    _one_line(runner.invoke(app, run_args(*args)), 2, needle)


@pytest.mark.timeout(120)
def test_a_crashing_script_is_one_line_and_exit_1(tmp_path):
    spec = stand_in(tmp_path, mode="crash")
    result = runner.invoke(app, run_args("--script", spec.path, "--", *spec.args))
    _one_line(result, 1, "the script failed", "boom")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_slow_cold_start_keeps_events_books_and_timeline_on_one_clock(tmp_path, caplog):
    # the run (spot_us_east.csv from 119,000 s at x300, 2 -> 1 at +1,300 s, 0 at
    # +4,300 s, 2 at +8,500 s) with a script whose cold start (5 real s = 1,500 trace s,
    # more on a busy machine) outlasts the first drop, and that never checkpoints
    spec = stand_in(tmp_path, total=40, mode="forgetful", start_s=5.0)
    out = tmp_path / "run"
    args = ["--start-offset-s", "119000", "--time-scale", "300", "--notice-s", "120"]
    args += ["--max-steps", "40", "--max-wall-s", "200", "--out", str(out), "--json"]
    args += ["--script", spec.path, "--", *spec.args]
    with caplog.at_level(logging.WARNING):
        result = runner.invoke(app, run_args(*args))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    events = pd.read_parquet(out / "events.parquet")
    timeline = pd.read_parquet(out / "timeline.parquet")
    columns = ["time_s", "due_s", "kind", "nodes_before", "nodes_after", "pause_s"]
    table = events.reindex(columns=[*columns, "lost_steps", "lost_work_h"])
    print(table.to_string(), timeline.head(12).to_string(), sep="\n")
    # the cold start is a pause on the timeline too: the world was starting, not training
    assert events["kind"].iloc[0] == "scale_up" and events["acquire_s"].iloc[0] >= 4.0, table
    assert timeline["state"].iloc[0] == "rescaling" and timeline["group_nodes"].iloc[0] == 0
    # each preemption comes after the timeline held the nodes it took, before the loop
    # acted on it: at its notice (120 s before the drop is due) when one was carried out,
    # else 30 trace s (0.1 real s) before the preemption; the preemption is stamped at the
    # drop or at the time it was carried out, with the drop it answered in `due_s`
    preempts = events[events["kind"] == "preempt"]
    notices = events[events["kind"] == "preempt_notice"]
    assert len(preempts) >= 1, table
    for _, ev in preempts.iterrows():
        noticed = notices[(notices["due_s"] - (ev["due_s"] - 120.0)).abs() < 1e-6]["time_s"]
        acted_s = min([ev["time_s"] - 30.0, *noticed])
        held = timeline[timeline["time_s"] < acted_s]["spot_held"]
        assert held.iloc[-1] == ev["nodes_before"], (ev, timeline.to_string())
        assert ev["due_s"] <= ev["time_s"] + 1e-6, table
    late = preempts[preempts["due_s"] < preempts["time_s"] - 1.0]
    assert len(late) >= 1 and set(late["due_s"].round()) <= {1300.0, 4300.0}, table
    # and the timeline shows the drop at its trace time, the nodes still held then
    assert (timeline["time_s"].diff().dropna() >= 0).all(), timeline.to_string()
    for _, ev in late.iterrows():
        at = timeline[(timeline["time_s"] - ev["due_s"]).abs() < 1e-6]
        assert len(at) == 1 and at["spot_available"].iloc[0] < ev["nodes_before"], timeline
        assert at["spot_held"].iloc[0] == ev["nodes_before"], timeline.to_string()
    # steps lost are work lost, in hours too
    assert summary["lost_steps"] > 0, table
    assert summary["lost_work_h"] > 0, table
    lost = events[events["lost_steps"] > 0]
    assert (lost["lost_work_h"] > 0).all(), table
    # and the run says once why the script started over
    again = [r for r in caplog.records if "restarted from step 0" in r.getMessage()]
    assert len(again) == 1 and "checkpoint" in again[0].getMessage(), caplog.text


# -- the example, under torchrun and under elasim ---------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_example_runs_unchanged_under_torchrun(tmp_path):
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    env = dict(os.environ, TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
    ckpt = tmp_path / "ckpt"
    # as torchrun users run an elastic script: with restarts, from its own checkpoint (on a
    # loaded host a gloo rank has aborted at teardown, exit -6; the group then restarts)
    cmd = [torchrun, "--standalone", "--nproc_per_node", "2", "--max-restarts", "2"]
    cmd += [str(EXAMPLE), "--steps", "40", "--checkpoint-dir", str(ckpt)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stopped at step 40 of 40" in done.stdout
    assert (ckpt / "checkpoint.pt").is_file()
    # and it resumes: started again, it has nothing left to do
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150)
    assert again.returncode == 0 and "resuming at step 40" in again.stdout, again.stderr[-2000:]


def _schema(run: Path) -> dict[str, object]:
    frames = {
        name: {c: str(t) for c, t in pd.read_parquet(run / f"{name}.parquet").dtypes.items()}
        for name in ("events", "steps", "workers", "timeline")
    }
    summary = json.loads((run / "summary.json").read_text())
    frames["summary"] = sorted(summary)
    frames["inputs"] = sorted(summary["inputs"])
    return frames


@pytest.fixture(scope="module")
def elasim_own_run(tmp_path_factory) -> Path:
    """A short run of elasim's own workers: the schema a script run must match."""
    out = tmp_path_factory.mktemp("own") / "run"
    args = ["run", "-t", "spot_us_east.csv", "--start-offset-s", "127500", "--max-nodes", "1"]
    args += ["--time-scale", "1000", "--max-steps", "30", "--out", str(out), "--no-plot"]
    args += ["--json", "--rescale", "restart"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_example_under_elasim_run_script_measures_every_restart(tmp_path, elasim_own_run):
    # spot_us_east.csv from 119,000 s, capped at 2 nodes: 2 -> 1 at +1,300 s, back to 2 at
    # +2,500 s, 0 at +4,300 s, 2 again at +8,500 s: two preemptions, each with 120 s notice
    out, ckpt = tmp_path / "run", tmp_path / "ckpt"
    args = ["--start-offset-s", "119000", "--time-scale", "300", "--notice-s", "120"]
    # 600 steps of at least 50 ms: at least 30 real s of training, so the run is still
    # going at the second drop (+4,300 s = 14.3 real s at x300) however fast the machine
    args += ["--max-steps", "600", "--max-wall-s", "240", "--out", str(out), "--json"]
    args += ["--script", str(EXAMPLE), "--", "--steps", "600", "--checkpoint-dir", str(ckpt)]
    args += ["--step-sleep-s", "0.05"]
    result = runner.invoke(app, run_args(*args))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    events = pd.read_parquet(out / "events.parquet")
    table = events[["time_s", "real_time_s", "kind", "nodes_before", "nodes_after", "pause_s"]]
    table = table.assign(interval_s=events["interval_s"], lost_steps=events["lost_steps"])
    print(table.to_string())
    assert summary["completed"] is True and summary["steps"] == 600
    assert summary["preemptions"] >= 2 and summary["inputs"]["rescale"] == "restart", table
    assert summary["inputs"]["job"] == "script:torchrun_ddp.py"
    restarts = events[events["kind"].isin(["scale_up", "scale_down", "resume"])]
    # the first start, and one after each preemption (on a loaded machine a restart can
    # block past the return to 2 nodes, and the loop then goes straight to the drop)
    assert len(restarts) >= 3, table.to_string()
    # every restart has a measured pause: process start to the script's first step
    assert (restarts["pause_s"] > 0).all() and (restarts["acquire_s"] > 0).all(), table
    with_survivors = restarts[restarts["nodes_before"] > 0]
    assert with_survivors["interval_s"].notna().all(), table
    steps = pd.read_parquet(out / "steps.parquet")
    assert steps["step"].max() == 600 and set(steps["world_size"]) <= {1, 2}
    assert _schema(out) == _schema(elasim_own_run)
    # `elasim compare` takes it, against a simulation of a profile measured from it
    from elasim.compare import simulate_run
    from elasim.executor.calibrate import profile_of_runs

    profile = profile_of_runs([out], job="script:torchrun_ddp.py", source="test")
    sim = simulate_run(out, profile, tmp_path / "sim")
    compared = runner.invoke(app, ["compare", str(out), str(sim), "-o", str(tmp_path / "cmp")])
    assert compared.exit_code == 0, compared.output
