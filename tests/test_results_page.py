"""scripts/results_page.py: a page from saved output, options as its docstring writes them."""

from __future__ import annotations

from pathlib import Path

from repo_scripts import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "results_page.py"


def _module():
    return load_script(SCRIPT)


def test_a_page_from_saved_output_with_the_option_after_the_name(tmp_path, monkeypatch):
    pages = _module()
    monkeypatch.setattr(pages, "RESULTS", tmp_path)
    monkeypatch.setattr(pages, "ROOT", tmp_path)
    saved = tmp_path / "out.txt"
    saved.write_text("config  avg JCT s\npollux  26.77\n")
    argv = ["bench_x", "--from-output", str(saved), "--", "python", "benchmarks/x.py", "--json"]
    assert pages.main(argv) == 0
    page = (tmp_path / "bench_x.md").read_text()
    assert "python benchmarks/x.py --json" in page  # the command, not the option
    assert "pollux  26.77" in page and "saved output `out.txt`" in page
    assert "--from-output" not in page
