"""Listings read well at 80 columns: ``elasim jobs`` squeezed its descriptions to 9.

At 80 columns the job table gave the description column nine characters, so each
preset took 15 lines of broken words ending in ``…``.
"""

from __future__ import annotations

from typer.testing import CliRunner

from elasim.cli import app
from elasim.job import job_presets


def test_jobs_fits_80_columns_and_keeps_every_description_whole():
    result = CliRunner().invoke(app, ["jobs"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in result.stdout  # nothing cut off
    flat = " ".join(result.stdout.split())
    for name, description in job_presets().items():
        assert name in flat
        assert " ".join(description.split()) in flat, name
    assert len(lines) < 40  # about four lines a preset, not fifteen
