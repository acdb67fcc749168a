"""Bundled traces: they load, say where they come from, and equal a fresh build."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from repo_scripts import load_script

from elasim.traces import (
    CapacityTrace,
    JobTrace,
    bundled_trace_names,
    bundled_traces,
    load_trace,
    plot_trace,
    resolve_trace,
    summarize,
)

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "traces-real"
EXPECTED = {"philly_jobs.csv", "spot_p3_bamboo.csv", "spot_us_east.csv", "spot_us_west.csv"}


def build_script() -> ModuleType:
    return load_script(REPO / "scripts" / "build_bundled_traces.py")


def test_bundled_names_and_info() -> None:
    assert set(bundled_trace_names()) == EXPECTED
    infos = {info.name: info for info in bundled_traces()}
    assert set(infos) == EXPECTED
    east = infos["spot_us_east.csv"]
    assert (east.kind, east.rows, east.max_available, east.max_value) == ("capacity", 310, 16, 16)
    assert east.duration_h == pytest.approx(3247 * 300 / 3600)
    assert infos["spot_p3_bamboo.csv"].max_available == 32
    jobs = infos["philly_jobs.csv"]
    assert (jobs.kind, jobs.num_jobs, jobs.max_available) == ("jobs", 3370, None)
    for info in infos.values():
        assert info.source and info.path.is_file()
        assert info.path.stat().st_size < 1_000_000


def test_spot_us_east_contents() -> None:
    trace = load_trace("spot_us_east.csv")
    assert isinstance(trace, CapacityTrace)
    meta = trace.metadata
    assert (meta.instance_type, meta.region, meta.gpus_per_node) == ("p3.2xlarge", "us-east-2", 1)
    assert meta.on_demand_price_per_hour == 3.06
    assert meta.synthetic is False
    assert meta.source is not None and meta.source.startswith("SPLICED")
    assert "different years" in meta.source and "list price" in meta.source
    assert trace.price_per_hour is not None
    assert 0.9 < trace.price_per_hour.min() <= trace.price_per_hour.max() < 1.0
    assert meta.get("price_zone") == "us-east-2b"


def test_philly_cut_contents() -> None:
    trace = load_trace("philly_jobs")
    assert isinstance(trace, JobTrace)
    assert trace.metadata.get("cluster") == "6214e9"
    assert summarize(trace)["size_histogram"] == {1: 3286, 2: 1, 4: 26, 8: 57}


def test_bundled_files_equal_a_fresh_build(tmp_path: Path) -> None:
    if not REAL.is_dir():
        pytest.skip("../shared/traces-real is not beside the checkout")
    written = build_script().build(REAL, tmp_path)
    assert {p.name for p in written} == EXPECTED
    for path in written:
        bundled = resolve_trace(path.name)
        assert path.read_bytes() == bundled.read_bytes(), path.name


def test_build_script_main_reports_bad_source(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    script = build_script()
    assert script.main([str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
    (tmp_path / "empty").mkdir()
    assert script.main([str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "not a directory" in err and "no such file" in err


@pytest.mark.parametrize("name", ["spot_us_east.csv", "philly_jobs.csv", "spot_p3_bamboo.csv"])
def test_plot_writes_png(tmp_path: Path, name: str) -> None:
    out = plot_trace(load_trace(name), tmp_path / "plot.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_traces_list_fits_80_columns_without_cutting_words() -> None:
    """The table wraps at 80 columns at word boundaries: no "availabil…" or "(os…"."""
    from rich.console import Console

    from elasim.cli.traces import traces_table
    from elasim.traces import bundled_traces

    console = Console(width=80, record=True, color_system=None)
    console.print(traces_table(bundled_traces()))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    for line in lines:
        for word in line.replace("│", " ").split():
            assert not word.endswith("…") or word == "…", line  # never a word cut short
    text = " ".join(lines)
    assert "SPLICED" in text and "petuum/adaptdl@de25dcc" in text
