"""The CLI as a user meets it: outputs, files, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from elasim.cli import app
from elasim.policies import EVENT_COLUMNS

runner = CliRunner()

REQUIRED_KEYS = {
    "completion_time_h",
    "cost_usd",
    "spot_node_hours",
    "on_demand_node_hours",
    "mean_nodes",
    "rescales",
    "preemptions",
    "lost_work_h",
    "rescale_overhead_h",
    "checkpoint_overhead_h",
    "convergence_cost_h",
    "deadline_met",
    "loop_turns",
    "wall_time_s",
}


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_simulate_json_prints_exactly_one_object_with_the_documented_keys():
    result = invoke("simulate", "--trace", "spot_us_east.csv", "--policy", "greedy", "--json")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert REQUIRED_KEYS <= summary.keys()
    assert summary["deadline_met"] is None
    assert summary["completed"] is True
    assert summary["completion_time_h"] > 0 and summary["cost_usd"] > 0


def test_an_unfinished_simulation_exits_1_with_one_line_after_its_output(tmp_path: Path):
    # on_demand on a trace without an on-demand price holds nothing: the job idles to
    # the simulator's horizon; the output is still written, then one line and exit 1
    result = runner.invoke(
        app, ["simulate", "-t", "spot_p3_bamboo.csv", "-p", "on_demand", "--json"]
    )
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout.splitlines()[0])["completed"] is False
    assert "did not finish" in result.stderr and "never held a node" in result.stderr
    assert invoke("simulate", "-t", "spot_p3_bamboo.csv", "-p", "greedy").exit_code == 0


def test_simulate_table_is_the_default():
    result = invoke("simulate", "--trace", "spot_us_east.csv", "--policy", "greedy")
    assert result.exit_code == 0, result.output
    assert "completion time (h)" in result.stdout


def test_simulate_out_writes_all_files(tmp_path: Path):
    out = tmp_path / "run"
    result = invoke(
        "simulate", "-t", "spot_us_east.csv", "-p", "greedy", "--notice-s", "30", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    for name in ("summary.json", "events.parquet", "timeline.parquet", "timeline.png"):
        assert (out / name).stat().st_size > 0, name
    events = pd.read_parquet(out / "events.parquet")
    assert list(events.columns) == list(EVENT_COLUMNS)
    assert {"preempt", "scale_up", "checkpoint"} <= set(events["kind"])
    timeline = pd.read_parquet(out / "timeline.parquet")
    assert {"time_s", "spot_available", "nodes_held", "price_per_hour", "progress"} <= set(
        timeline.columns
    )
    assert timeline["progress"].iloc[-1] == pytest.approx(1.0)


def test_same_seed_gives_identical_summary_bytes(tmp_path: Path):
    args = [
        "-t",
        "spot_us_west.csv",
        "-p",
        "hysteresis",
        "--seed",
        "3",
        "--start-offset-s",
        "random",
    ]
    for name in ("a", "b"):
        result = invoke("simulate", *args, "--out", str(tmp_path / name), "--no-plot")
        assert result.exit_code == 0, result.output
    first = (tmp_path / "a" / "summary.json").read_bytes()
    assert first == (tmp_path / "b" / "summary.json").read_bytes()
    result = invoke(
        "simulate",
        *args[:-4],
        "--seed",
        "4",
        "--start-offset-s",
        "random",
        "--out",
        str(tmp_path / "c"),
        "--no-plot",
    )
    assert result.exit_code == 0
    assert first != (tmp_path / "c" / "summary.json").read_bytes()


@pytest.mark.parametrize(
    "policy", ["fixed", "greedy", "hysteresis", "price", "deadline", "goodput", "on_demand"]
)
def test_every_builtin_policy_runs_from_the_cli(policy: str):
    result = invoke(
        "simulate",
        "-t",
        "spot_us_east.csv",
        "-p",
        policy,
        "--deadline-h",
        "30",
        "--json",
        "--no-yardstick",  # the yardstick has its own tests (test_cli_yardstick.py)
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["deadline_met"] in (True, False)


def test_shared_cluster_trace_needs_and_uses_cluster_gpus():
    result = invoke("simulate", "-t", "philly_jobs.csv", "-p", "greedy", "--json")
    assert result.exit_code == 2
    assert "--cluster-gpus" in result.stderr
    result = invoke(
        "simulate", "-t", "philly_jobs.csv", "-p", "greedy", "--cluster-gpus", "64", "--json"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["completed"] is True


def _one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    text = result.stderr.strip()
    assert len(text.splitlines()) == 1, text
    for needle in needles:
        assert needle in text, text


def test_malformed_trace_names_file_line_and_column(tmp_path: Path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,available,price_per_hour\n0,1,0.5\n60,x,0.5\n")
    result = invoke("simulate", "--trace", str(bad), "--policy", "greedy")
    _one_line_error(result, f"{bad}:3:2")
    result = invoke("traces", "validate", str(bad))
    _one_line_error(result, f"{bad}:3:2")


def test_missing_trace_unknown_policy_bad_option_bad_job(tmp_path: Path):
    _one_line_error(invoke("simulate", "-t", "no_such_trace.csv"), "no_such_trace.csv")
    _one_line_error(invoke("simulate", "-t", "spot_us_east.csv", "-p", "nope"), "greedy")
    _one_line_error(
        invoke("simulate", "-t", "spot_us_east.csv", "-p", "greedy", "--set", "bogus=1"), "bogus"
    )
    _one_line_error(
        invoke("simulate", "-t", "spot_us_east.csv", "--checkpoint-interval-s", "soon"),
        "checkpoint-interval-s",
    )
    job = tmp_path / "job.toml"
    job.write_text('name = "x"\n[work]\ntarget_samples = = 3\n')
    _one_line_error(invoke("simulate", "-t", "spot_us_east.csv", "--job", str(job)), f"{job}:3:")


def test_policies_and_jobs_listings():
    result = invoke("policies")
    assert result.exit_code == 0
    for name in ("fixed", "greedy", "hysteresis", "price", "deadline", "goodput"):
        assert name in result.stdout
    result = invoke("jobs")
    assert result.exit_code == 0
    assert "resnet50_v100" in result.stdout


def test_traces_list_show_import(tmp_path: Path, shared_traces: Path):
    result = invoke("traces", "list")
    assert result.exit_code == 0 and "spot_us_east.csv" in result.stdout
    png = tmp_path / "t.png"
    result = invoke("traces", "show", "spot_us_east.csv", "--out", str(png), "--json")
    assert result.exit_code == 0, result.output
    assert png.stat().st_size > 0
    src = shared_traces / "bamboo" / "traces" / "p3-trace.csv"
    out = tmp_path / "p3.csv"
    result = invoke("traces", "import", "--format", "bamboo", str(src), str(out))
    assert result.exit_code == 0, result.output
    assert invoke("traces", "validate", str(out)).exit_code == 0
    # the wrong format for a file is a one-line error too
    _one_line_error(
        invoke("traces", "import", "--format", "skypilot", str(src), str(tmp_path / "x.csv")),
        str(src),
    )


def test_sweep_writes_table_and_pareto_plot(tmp_path: Path):
    out = tmp_path / "sweep"
    result = invoke(
        "sweep",
        "--traces",
        "spot_us_east.csv,spot_p3_bamboo.csv",
        "--policies",
        "greedy,hysteresis",
        "--seeds",
        "0-1",
        "--workers",
        "2",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out / "sweep.parquet")
    assert len(frame) == 2 * 2 * 2
    assert {"trace", "policy", "seed", "completion_time_h", "cost_usd"} <= set(frame.columns)
    assert (out / "pareto.png").stat().st_size > 0


def test_sweep_is_the_same_with_one_or_two_processes():
    from elasim.sweep import SweepSpec, run_sweep

    spec = SweepSpec(traces=("spot_us_east.csv",), policies=("greedy", "price"), seeds=(0, 1, 2))
    one = run_sweep(spec, workers=1)
    two = run_sweep(spec, workers=2)
    pd.testing.assert_frame_equal(one, two)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--trace", "spot_us_east.csv", "--max-steps", "10"],
        ["calibrate", "--out", "p.json"],
        ["compare", "--trace", "spot_us_east.csv", "--profile", "PROFILE"],
    ],
    ids=["run", "calibrate", "compare"],
)
def test_commands_that_need_torch_say_so_in_one_line(args, monkeypatch, tmp_path):
    """Without the executor extra: one line naming the missing extra, exit 2, no traceback."""
    from elasim.examples import sim_vs_real_dir

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    monkeypatch.setitem(sys.modules, "torch.distributed", None)
    monkeypatch.chdir(tmp_path)
    profile = str(sim_vs_real_dir() / "profile.json")
    result = CliRunner().invoke(app, [profile if a == "PROFILE" else a for a in args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "executor extra" in lines[0], result.stderr
    assert "'.[executor]'" in lines[0]  # printed as written, not eaten as markup
    assert "Traceback" not in result.output


# -- one vocabulary across the commands (issue: one job model, two clocks) --------------------

VOCABULARY = (
    "--max-nodes",
    "--start-offset-s",
    "--on-demand-price-per-hour",
    "--checkpoint-interval-s",
    "--notice-s",
    "--set",
)


@pytest.mark.parametrize("command", ["simulate", "run", "compare", "sweep"])
def test_the_commands_share_one_flag_vocabulary(command):
    from typer.main import get_command

    click_app = get_command(app)
    sub = click_app.commands[command]  # type: ignore[attr-defined]
    flags = {opt for param in sub.params for opt in param.opts}
    assert set(VOCABULARY) <= flags, sorted(set(VOCABULARY) - flags)
    hidden = {opt for p in sub.params if getattr(p, "hidden", False) for opt in p.opts}
    assert hidden <= {"--workers-max", "--trace-start-s", "--on-demand-price"}
    help_text = invoke(command, "--help").output
    assert "--workers-max" not in help_text and "--trace-start-s" not in help_text


def test_calibrate_takes_max_nodes_and_its_old_name():
    from typer.main import get_command

    sub = get_command(app).commands["calibrate"]  # type: ignore[attr-defined]
    flags = {opt for param in sub.params for opt in param.opts}
    assert {"--max-nodes", "--workers-max"} <= flags


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--max-nodes", "0"), "--max-nodes must be a whole number >= 1, got 0"),
        (("--min-nodes", "0"), "--min-nodes must be a whole number >= 1, got 0"),
        (("--min-nodes", "40"), "--min-nodes: need min nodes <= max nodes"),
        (("--deadline-h", "-1"), "--deadline-h must be > 0"),
        (("--notice-s", "-3"), "--notice-s must be >= 0"),
        (("--checkpoint-interval-s", "soon"), "--checkpoint-interval-s must be"),
        (("--checkpoint-interval-s", "1e-300"), "--checkpoint-interval-s must be at least 1 s"),
    ],
)
def test_bad_flags_name_the_flag_not_the_job_preset(args, flag):
    result = runner.invoke(app, ["simulate", "-t", "spot_us_east.csv", *args])
    assert result.exit_code == 2
    assert flag in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_policy_that_raises_gets_one_line_naming_the_users_file(tmp_path):
    plugin = tmp_path / "mine.py"
    plugin.write_text(
        "from elasim.policies import PolicyBase\n"
        "class Mine(PolicyBase):\n"
        "    name = 'mine'\n"
        "    def decide(self, obs):\n"
        "        return obs.spot_available / 0\n"
    )
    result = runner.invoke(app, ["simulate", "-t", "spot_us_east.csv", "-p", f"{plugin}:Mine"])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in result.output
    assert f"{plugin}:5" in line.replace("\n", "") and "ZeroDivisionError" in line


def test_old_spellings_still_work_and_must_agree():
    ok = runner.invoke(
        app, ["simulate", "-t", "spot_us_east.csv", "--on-demand-price", "3.0", "--json"]
    )
    assert ok.exit_code == 0, ok.output
    both = runner.invoke(
        app,
        [
            "simulate",
            "-t",
            "spot_us_east.csv",
            "--on-demand-price",
            "3.0",
            "--on-demand-price-per-hour",
            "4.0",
        ],
    )
    assert both.exit_code == 2 and "disagree" in both.stderr


def test_sweep_refuses_backwards_seeds_before_writing_anything(tmp_path):
    out = tmp_path / "sweep"
    result = runner.invoke(
        app, ["sweep", "--traces", "spot_us_east.csv", "--seeds", "4-0", "--out", str(out)]
    )
    assert result.exit_code == 2 and "--seeds" in result.stderr
    assert not (out / "sweep.parquet").exists()


def test_an_unwritable_out_fails_first_in_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for out in (blocker, blocker / "sub"):  # root can write anywhere, but not into a file
        result = runner.invoke(app, ["simulate", "-t", "spot_us_east.csv", "--out", str(out)])
        assert result.exit_code == 2 and "--out" in result.stderr, result.output
        assert len(result.stderr.strip().splitlines()) == 1


def test_a_sweep_whose_policy_raises_is_one_line_and_writes_nothing(tmp_path):
    plugin = tmp_path / "boom.py"
    plugin.write_text(
        "from elasim.policies import PolicyBase\n"
        "class Boom(PolicyBase):\n"
        "    name = 'boom'\n"
        "    def decide(self, obs):\n"
        "        raise RuntimeError('boom')\n"
    )
    out = tmp_path / "sweep"
    result = runner.invoke(
        app,
        ["sweep", "--traces", "spot_us_east.csv", "--policies", f"{plugin}:Boom",
         "--workers", "1", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "boom" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (out / "sweep.parquet").exists()


@pytest.mark.parametrize("command", ["sweep", "compare"])
def test_sweep_and_compare_refuse_an_unwritable_out_first(tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    args = {
        "sweep": ["sweep", "--traces", "spot_us_east.csv", "--out", str(blocker)],
        "compare": ["compare", str(tmp_path), str(tmp_path), "--out", str(blocker)],
    }[command]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "--out" in result.stderr, result.output


def test_the_policy_template_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The quick tour's `elasim policies --template > my_policy.py`, then simulate with it."""
    printed = runner.invoke(app, ["policies", "--template"])
    assert printed.exit_code == 0
    (tmp_path / "my_policy.py").write_text(printed.stdout)
    monkeypatch.chdir(tmp_path)
    args = ["simulate", "-t", "spot_us_east.csv", "-p", "my_policy.py:HalfPolicy"]
    result = runner.invoke(app, [*args, "--set", "fraction=0.25", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["completed"] is True
    bad = runner.invoke(app, [*args, "--set", "fraction=2"])
    assert bad.exit_code == 2 and "fraction must be in (0, 1], got 2" in bad.output


@pytest.mark.parametrize(
    ("error", "code", "line"), [(KeyboardInterrupt, 130, "interrupted"), (ValueError, 2, "boom")]
)
def test_an_interrupted_or_failed_sweep_leaves_no_empty_out_folder(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: type[BaseException],
    code: int,
    line: str,
):
    import elasim.sweep

    def stop(*args, **kwargs):
        raise error("boom")

    monkeypatch.setattr(elasim.sweep, "run_sweep", stop)
    out = tmp_path / "new" / "sweep"
    result = runner.invoke(
        app, ["sweep", "--traces", "spot_us_east.csv", "--policies", "greedy", "--out", str(out)]
    )
    assert result.exit_code == code, result.output
    assert line in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "new").exists()  # both folders it made are taken back
    # a folder that was there before is never removed, even empty
    out.mkdir(parents=True)
    argv = ["sweep", "--traces", "spot_us_east.csv", "--policies", "greedy", "--out", str(out)]
    assert runner.invoke(app, argv).exit_code == code
    assert out.is_dir()


def test_simulate_leaves_without_the_interpreters_teardown(monkeypatch):
    """``simulate`` asks to leave at once, and ``main`` then ends the process itself."""
    import elasim.cli as cli
    from elasim.cli import tools

    monkeypatch.setattr(tools, "_LEAVE_WHEN_DONE", [False])
    assert invoke("simulate", "-t", "spot_p3_bamboo.csv", "--json").exit_code == 0
    assert tools.leaving_when_done()

    left: list[object] = []
    # main leaves at once after torch or never after ray, whatever the command asked:
    # an earlier test in this process may have imported either (restored at teardown)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.setattr(cli, "_leave_now", left.append)
    monkeypatch.setattr(cli, "app", lambda: sys.exit(3))
    monkeypatch.setattr(tools, "_LEAVE_WHEN_DONE", [False])
    with pytest.raises(SystemExit):  # a command that did not ask exits as usual
        cli.main()
    tools.leave_when_done()
    cli.main()
    assert left == [3]


def test_simulate_json_loads_neither_pandas_nor_pyarrow():
    """A summary needs no frames: pandas and pyarrow load only to write files (0.3 s)."""
    import subprocess

    code = (
        "import sys, io, contextlib\n"
        "from elasim.cli import app\n"
        "sys.argv = ['elasim', 'simulate', '-t', 'philly_jobs.csv', '--cluster-gpus', '64',"
        " '--json']\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        app()\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code\n"
        "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
