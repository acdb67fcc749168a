"""The documentation site: every page its navigation names exists, and the guides' commands run.

A fenced ``bash`` block preceded by the line ``<!-- run -->`` in a page under ``docs/``
is a command a reader will paste.  Each such block runs here in a fresh temporary
folder, under ``bash -euo pipefail``, with this install's ``elasim`` first on the
PATH, and must exit 0 without a traceback.  Such blocks use the bundled data only and
take seconds (see docs/development.md).  The site itself is built by ``.ci/run``
(``mkdocs build --strict``), which needs the docs extra; these tests do not.

A fenced ``text`` block preceded by ``<!-- output -->`` is a transcript: each ``$ ``
line is a command, the lines after it what it prints (stdout and stderr, any exit
code).  The commands run in order in one fresh folder, and what they print must match,
whitespace aside (the page may wrap a long line) and with ``...`` matching anything (a
temporary path).  So an error message quoted in the docs is the real one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKER = "<!-- run -->"
OUTPUT_MARKER = "<!-- output -->"
BLOCK_TIMEOUT_S = 120


@dataclass(frozen=True)
class Block:
    """One marked command block: where it is, and its text."""

    page: str
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def marked_blocks(text: str, page: str) -> list[Block]:
    """The ``bash`` blocks of ``text`` that follow a ``<!-- run -->`` line."""
    lines = text.splitlines()
    blocks: list[Block] = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if fence != "```bash":
            raise ValueError(f"{page}:{i + 1}: {MARKER} must be followed by a ```bash fence")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{page}:{i + 2}: unclosed ```bash fence")
        blocks.append(Block(page, i + 3, "\n".join(lines[i + 2 : end])))
    return blocks


def transcripts(text: str, page: str) -> list[Block]:
    """The ``text`` blocks of ``text`` that follow an ``<!-- output -->`` line."""
    lines = text.splitlines()
    blocks: list[Block] = []
    for i, line in enumerate(lines):
        if line.strip() != OUTPUT_MARKER:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```text":
            raise ValueError(f"{page}:{i + 1}: {OUTPUT_MARKER} must be followed by a ```text fence")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{page}:{i + 2}: unclosed ```text fence")
        blocks.append(Block(page, i + 3, "\n".join(lines[i + 2 : end])))
    return blocks


def all_transcripts() -> list[Block]:
    return [
        block
        for path in sorted(DOCS.rglob("*.md"))
        for block in transcripts(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]


def transcript_steps(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a transcript's ``$ `` lines."""
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        else:
            raise ValueError(f"a transcript starts with a '$ ' line, not {line!r}")
    return [(command, "\n".join(out)) for command, out in steps]


def output_matches(expected: str, actual: str) -> bool:
    """``actual`` is ``expected``, whitespace aside, with ``...`` matching anything."""
    pattern = r"\s+".join(
        ".*?".join(re.escape(part) for part in word.split("...")) for word in expected.split()
    )
    return re.fullmatch(pattern, " ".join(actual.split()), re.S) is not None


def all_blocks() -> list[Block]:
    return [
        block
        for path in sorted(DOCS.rglob("*.md"))
        for block in marked_blocks(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]


def run_block(block: Block, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run ``block`` in ``folder`` with this interpreter's ``elasim`` first on the PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )


def nav_pages() -> list[str]:
    """Every ``.md`` or ``.ipynb`` path that mkdocs.yml's nav names (read without YAML)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:") :]
    return re.findall(r"^\s*-\s+(?:[^\n]*?:\s+)?([\w./-]+\.(?:md|ipynb))\s*$", nav, re.M)


def test_the_nav_names_pages_that_exist():
    pages = nav_pages()
    assert len(pages) >= 30, pages
    missing = [page for page in pages if not (DOCS / page).is_file()]
    assert not missing, f"mkdocs.yml names pages that do not exist: {missing}"


def test_every_page_is_in_the_nav():
    named = set(nav_pages())
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert not pages - named, f"pages not in mkdocs.yml's nav: {sorted(pages - named)}"


def test_marked_blocks_are_found_in_the_guides():
    pages = {block.page for block in all_blocks()}
    for page in ("docs/getting-started.md", "docs/guide/simulate.md", "docs/guide/cluster.md"):
        assert page in pages


def test_a_failing_command_fails_the_block(tmp_path):
    """The runner is not blind: a broken command (a trace that does not exist) fails."""
    block = Block("x.md", 1, "elasim simulate -t no_such_trace.csv -p greedy")
    done = run_block(block, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    block = Block("x.md", 1, "elasim traces list\nfalse\necho never")
    done = run_block(block, tmp_path)
    assert done.returncode != 0 and "never" not in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("block", all_blocks(), ids=lambda block: block.id)
def test_the_guides_commands_run(block, tmp_path):
    done = run_block(block, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{output[-3000:]}"
    assert "Traceback (most recent call last)" not in output, f"{block.id}:\n{output[-3000:]}"


def test_a_transcript_checks_what_a_command_prints(tmp_path):
    """The transcript check is not blind: a wrong quoted message fails."""
    steps = transcript_steps("$ printf 'a\\n'\na\n$ echo no such message\nother message")
    assert [run_block(Block("x.md", 1, c), tmp_path).stdout for c, _ in steps] == [
        "a\n",
        "no such message\n",
    ]
    assert output_matches(steps[0][1], "a\n")
    assert not output_matches(steps[1][1], "no such message\n")
    assert output_matches("error: at .../mine.py:8: boom", "error: at /tmp/x/mine.py:8:\n boom")


@pytest.mark.parametrize("block", all_transcripts(), ids=lambda block: block.id)
def test_the_docs_quote_real_output(block, tmp_path):
    for command, expected in transcript_steps(block.text):
        done = run_block(Block(block.page, block.line, command), tmp_path)
        output = done.stdout + done.stderr
        assert output_matches(expected, output), (
            f"{block.id}: `{command}` printed (exit {done.returncode}):\n{output}\n"
            f"but the page says:\n{expected}"
        )


INCLUDE = re.compile(
    r"<!-- include: (?P<path>[^\s:]+)(?::\d+)? -->(?P<body>.*?)<!-- /include -->", re.S
)


def test_included_files_read_on_github_too():
    """No raw ``--8<--`` line (GitHub shows it as is); an include region links its file.

    ``scripts/mkdocs_hooks.py`` replaces each region by the file on the site.
    """
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        page = path.relative_to(ROOT)
        assert not re.search(r"^\s*--8<--", text, re.M), f"{page}: a raw --8<-- include line"
        for match in INCLUDE.finditer(text):
            included = ROOT / match["path"]
            assert included.is_file(), f"{page}: includes {match['path']}, which is not there"
            links = re.findall(r"\]\(([^)]+)\)", match["body"])
            assert any((path.parent / link).resolve() == included for link in links), (
                f"{page}: the region for {match['path']} does not link it"
            )
