"""``elasim run --out``: a finished run is not silently overwritten; Ctrl-C says how to go on.

A second ``elasim run --out run`` used to overwrite the first run's files without a
word, and Ctrl-C with ``--out`` said only ``interrupted``, though the journal it left
is what ``--resume`` continues.  No worker starts in these tests: the replay is
replaced.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from elasim.cli import app

pytest.importorskip("torch")

runner = CliRunner()


def _args(out: Path, *more: str) -> list[str]:
    return [
        "run",
        "-t",
        "spot_us_east.csv",
        "--max-steps",
        "5",
        "--max-nodes",
        "1",
        "--out",
        str(out),
        *more,
    ]


def _replay_raises(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> list[Path]:
    """Replace the replay; it records where it ran, leaves run.json as a real run does."""
    import elasim.cli.run as run_cli

    seen: list[Path] = []

    def replay(config, out, point, as_json):
        seen.append(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "run.json").write_text(json.dumps({"config": {}}))
        raise error

    monkeypatch.setattr(run_cli, "_replay", replay)
    return seen


def test_a_finished_run_in_out_is_refused_in_one_line(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    seen = _replay_raises(monkeypatch, RuntimeError("must not run"))
    result = runner.invoke(app, _args(out))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert str(out) in lines[0] and "finished run" in lines[0]
    assert "--overwrite" in lines[0] and "--resume" in lines[0]
    assert seen == []  # refused before any work
    assert (out / "summary.json").read_text() == "{}"


def test_overwrite_replaces_a_finished_run(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    (out / "events.partial.jsonl").write_text('{"old": 1}\n')  # a journal from before
    seen = _replay_raises(monkeypatch, RuntimeError("ran"))
    result = runner.invoke(app, _args(out, "--overwrite"))
    assert seen == [out], result.output  # it ran
    assert not (out / "events.partial.jsonl").exists()  # the new run's journal starts empty


def test_ctrl_c_with_out_says_how_to_resume(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _replay_raises(monkeypatch, KeyboardInterrupt())
    result = runner.invoke(app, _args(out))
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.stderr
    assert f"elasim run --resume {out}" in " ".join(result.stderr.split())
