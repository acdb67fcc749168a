"""What ``elasim run`` shows: labels, progress without a terminal, the files it wrote.

Unit tests of the CLI's pieces (no workers start); the job's one spelling across
``simulate`` and ``sweep``, with old summaries still loading.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from elasim.cli import app


def _summary(**changes):
    base = {
        "completed": True,
        "completion_time_h": 1.5,
        "cost_usd": 2.0,
        "final_accuracy": None,
        "reached_target": None,
        "rescales": 3,
        "wall_time_s": 4.6,
        "command_wall_time_s": 76.0,
    }
    return {**base, **changes}


def test_summary_table_has_labels_dashes_and_yes_no() -> None:
    from elasim.cli.run_display import summary_table

    console = Console(width=80, record=True, color_system=None)
    console.print(summary_table(_summary()))
    text = console.export_text()
    assert "None" not in text and "True" not in text
    assert "completion_time_h" not in text and "wall_time_s" not in text
    assert "finished" in text and "yes" in text
    assert "whole command (real s)" in text and "76" in text
    assert "training loop (real s)" in text
    final = next(line for line in text.splitlines() if "final accuracy" in line)
    assert final.rstrip(" │").endswith("-")


def test_progress_without_a_terminal_is_plain_log_lines() -> None:
    from elasim.cli.run_display import LogProgress

    lines: list[str] = []
    clock = iter([0.0, 1.0, 6.0, 6.5, 20.0])
    progress = LogProgress(max_steps=100, write=lines.append, clock=lambda: next(clock))

    def controller(step: int, spot: int) -> object:
        group = types.SimpleNamespace(
            progress=lambda: types.SimpleNamespace(step=step, loss=0.5),
            held=lambda: (spot, 0),
        )
        return types.SimpleNamespace(group=group, available=4, now_s=lambda: 3600.0 * step)

    for step, spot in ((1, 2), (2, 2), (3, 2), (4, 3), (5, 3)):
        progress(controller(step, spot))
    assert len(lines) == 4  # the first turn, every 5 s, and a change of world size
    assert lines[0].startswith("elasim run: step 1/100")
    assert "world 3" in lines[2]
    assert all("\x1b" not in line for line in lines)  # no terminal codes


def test_wrote_lists_every_file_in_the_folder(tmp_path: Path) -> None:
    from elasim.cli.run_display import written

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "worker-0.log").write_text("x")
    (tmp_path / "logs" / "worker-1.log").write_text("x")
    for name in ("summary.json", "timeline.parquet", "timeline.png", "run.json"):
        (tmp_path / name).write_text("{}")
    text = written(tmp_path)
    for name in ("summary.json", "timeline.parquet", "timeline.png", "run.json"):
        assert name in text
    assert "logs/ (2 files)" in text


def test_the_job_has_one_spelling_and_old_summaries_still_load() -> None:
    from elasim.jobmodel import JobSpec

    result = CliRunner().invoke(app, ["simulate", "-t", "spot_us_east.csv", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["inputs"]["job"] == "resnet50_v100"  # the preset's file name
    assert summary["simulator"]["job_model"] == "resnet50_v100"
    old = JobSpec.from_inputs({"job": "resnet50-v100", "trace": "spot_us_east.csv"})
    assert old.job == "resnet50_v100"
