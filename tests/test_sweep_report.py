"""``sweep`` and ``cluster sweep`` as a user on an 80-column terminal meets them.

The tables fit (no cut header, no ``…``), whole counts print whole, a plugin shows
by its name, the answers end the output, and ``--out`` holds a ``report.html`` that
is self-contained, the same bytes for the same sweep, and renders in headless
Chromium without a console message.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = "elasim/examples/my_policy.py:HalfPolicy"
REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def elasim(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """The real command, in a real process, on a terminal ``columns`` wide."""
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "elasim.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
        check=False,
    )


def sweep(out: Path) -> subprocess.CompletedProcess[str]:
    policies = f"greedy,price,hysteresis,{PLUGIN}"
    args = ["sweep", "--traces", "spot_us_east.csv", "--policies", policies, "--seeds", "0"]
    return elasim(*args, "--workers", "1", "--out", str(out))


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("sweep") / "out"
    done = sweep(out)
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows by policy (the lines that start with a policy's label)."""
    rows = {}
    for line in stdout.splitlines():
        cells = line.split()
        if cells and cells[0] in {"greedy", "price", "hysteresis", "half"} and len(cells) == 6:
            rows[cells[0]] = cells
    return rows


def test_the_sweep_table_fits_80_columns_whole(swept):
    _, stdout = swept
    assert "…" not in stdout and max(len(line) for line in stdout.splitlines()) <= 80
    for header in ("time", "(h)", "cost", "(USD)", "lost", "work (h)", "rescales", "done"):
        assert header in stdout
    rows = table_rows(stdout)
    assert set(rows) == {"greedy", "price", "hysteresis", "half"}, stdout  # not my_policy.p…
    assert all(re.fullmatch(r"\d+", cells[4]) for cells in rows.values())  # not 9.000
    assert "my_policy" not in stdout


def test_the_sweep_ends_with_its_answers(swept):
    _, stdout = swept
    tail = stdout[stdout.index("answers") :].splitlines()
    assert tail[1].strip() == "spot_us_east.csv"
    assert tail[2].strip().startswith("cheapest: ")
    assert tail[3].strip().startswith("fastest: ")
    assert "greedy = price (identical runs)" in stdout


def test_the_report_is_self_contained_and_the_same_bytes_again(swept, tmp_path):
    out, stdout = swept
    page = (out / "report.html").read_text(encoding="utf-8")
    for line in (line.strip() for line in stdout[stdout.index("answers") :].splitlines()[2:]):
        assert line in page.replace("&#x27;", "'")
    assert page.count('src="data:image/png;base64,') == 1
    # nothing outside the page: data: URLs, and in-page anchors (the link to the plots)
    assert not re.search(r"(src|href)=\"(?!data:|#)", page) and "http" not in page
    again = tmp_path / "again"
    assert sweep(again).returncode == 0
    assert (again / "report.html").read_bytes() == (out / "report.html").read_bytes()


def test_sweep_has_no_short_w_and_its_help_reads_at_80_columns(tmp_path):
    out = str(tmp_path / "never")
    refused = elasim("sweep", "-w", "2", "--traces", "spot_us_east.csv", "--out", out)
    assert refused.returncode == 2 and "-w" in refused.stderr
    for command in (["sweep"], ["cluster", "sweep"]):
        text = elasim(*command, "--help").stdout
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= 80
        description = text[: text.index("╭─")].splitlines()
        lonely = [line for line in description if len(line.strip().split()) == 1]
        assert not lonely, f"a word wrapped onto a line of its own: {lonely}"


def test_cluster_sweep_headers_break_between_words(tmp_path):
    out = tmp_path / "cluster"
    args = ["--workloads", "pollux-workload-1", "--policies", "fifo,srtf", "--out", str(out)]
    done = elasim("cluster", "sweep", *args)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in done.stdout
    assert "pollux-workload-1" in lines[1]  # the table's title, whole
    head = next(i for i, line in enumerate(lines) if line.split()[:1] == ["policy"])
    assert lines[head - 1].split() == ["avg", "JCT", "vs", "p99", "JCT", "GPU"]  # whole words
    assert lines[head].split() == [
        "policy",
        "(s)",
        "best",
        "(s)",
        "GPU-h",
        "util",
        "rescales",
        "done",
    ]
    assert "fastest: srtf" in done.stdout and "cheapest: " in done.stdout
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "fastest: srtf" in page and 'src="data:image/png;base64,' in page


# -- headless Chromium --------------------------------------------------------------------

#: Added to a test copy of the page: uncaught errors and undecoded images, recorded
#: where --dump-dom shows them.
PROBE = """<script>
window.__errors = [];
window.onerror = (message) => { window.__errors.push(String(message)); };
window.addEventListener("load", () => {
  const images = [...document.images];
  document.body.dataset.images = images.filter((i) => i.complete && i.naturalWidth > 0).length;
  document.body.dataset.errors = window.__errors.length;
});
</script>"""


def chromium(page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr"]
    args += ["--v=0", "--virtual-time-budget=3000", *extra, page.as_uri()]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line]


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt install chromium)")
def test_the_report_renders_in_chromium_with_no_console_message(swept, tmp_path):
    out, _ = swept
    copy = tmp_path / "report.html"
    copy.write_text(
        (out / "report.html").read_text(encoding="utf-8").replace("</head>", PROBE + "</head>"),
        encoding="utf-8",
    )
    # the capture works: a page that logs an error is caught
    control = tmp_path / "control.html"
    control.write_text("<!DOCTYPE html><script>console.error('probe')</script>", encoding="utf-8")
    assert console_lines(chromium(control, "--dump-dom").stderr), "console capture is blind"

    shown = chromium(copy, "--dump-dom")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert console_lines(shown.stderr) == []
    assert 'data-images="1"' in shown.stdout and 'data-errors="0"' in shown.stdout
    assert "cheapest: " in shown.stdout
    shot = tmp_path / "report.png"
    chromium(out / "report.html", f"--screenshot={shot}", "--window-size=1200,1800")
    assert shot.stat().st_size > 10_000  # a page was drawn, not a blank


def test_pareto_is_per_trace_and_shows_identical_policies_as_one_marker():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.colors import to_rgb

    from elasim.analysis.plots import pareto_figure, policy_colors

    base = {"seed": 0, "notice_s": 0.0, "rescale": "inplace", "completed": True, "rescales": 1}
    rows = [
        {**base, "trace": trace, "policy": policy, "completion_time_h": h, "cost_usd": c}
        for trace in ("a.csv", "b.csv")
        for policy, h, c in (("greedy", 9.0, 100.0), ("price", 9.0, 100.0), ("fixed", 20, 50))
    ]
    fig = pareto_figure(pd.DataFrame(rows))
    try:
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in panels] == ["a.csv", "b.csv"]  # not pooled
        labels = [text.get_text() for text in panels[0].get_legend().get_texts()]
        assert "greedy = price (identical)" in labels and "fixed" in labels
        assert "price" not in labels  # no marker hidden under greedy's
    finally:
        plt.close(fig)
    grey = to_rgb("tab:gray")
    assert all(to_rgb(color) != grey for color in policy_colors().values())


def test_a_json_sweep_writes_its_report_too(tmp_path: Path):
    """Issue 24: ``--json`` with ``--out`` wrote pareto.png but no report.html."""
    import json

    from typer.testing import CliRunner

    from elasim.cli import app

    out = tmp_path / "out"
    args = ["sweep", "--traces", "spot_us_east.csv", "--policies", "greedy,price"]
    result = CliRunner().invoke(
        app, [*args, "--seeds", "0", "--workers", "1", "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert {row["policy"] for row in rows} == {"greedy", "price"}  # stdout: JSON lines only
    assert (out / "pareto.png").is_file()
    page = (out / "report.html").read_text()
    assert "cheapest" in page and "greedy = price" in page and "data:image/png" in page
