"""mkdocs hooks of the documentation site (named in mkdocs.yml).

The API reference is read from the source by mkdocstrings (griffe).  The installed
package is one namespace, ``elasim.*``, but three of its packages live in top-level
folders (``policies/``, ``traces/``, ``executor/``) that pyproject.toml maps with
``package-dir``.  Griffe finds submodules on the file system, under ``elasim/``, where
those three are not.  So before the build we lay out the installed shape as a tree
of symbolic links, ``build/api-src/elasim/`` (``elasim/``'s entries plus the three
folders), and mkdocs.yml points mkdocstrings' ``paths`` at ``build/api-src``.
Nothing is copied and nothing is imported: the tree is rebuilt on every build.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "api-src" / "elasim"
MAPPED = {"policies": "policies", "traces": "traces", "executor": "executor"}

#: ``<!-- include: PATH[:LINE] -->`` ... ``<!-- /include -->``: on the site, the file
#: from LINE on; in the repository (GitHub), what is between, a link to it
INCLUDE = re.compile(
    r"<!-- include: (?P<path>[^\s:]+)(?::(?P<line>\d+))? -->.*?<!-- /include -->", re.S
)


def build_api_tree() -> Path:
    """(Re)build ``build/api-src/elasim`` as links to the installed package's folders."""
    if TREE.exists() or TREE.is_symlink():
        shutil.rmtree(TREE)
    TREE.mkdir(parents=True)
    for entry in sorted((ROOT / "elasim").iterdir()):
        if entry.name != "__pycache__" and entry.name not in MAPPED:
            (TREE / entry.name).symlink_to(entry)
    for name, folder in MAPPED.items():
        (TREE / name).symlink_to(ROOT / folder, target_is_directory=True)
    return TREE


@event_priority(100)
def on_config(config, **kwargs):
    """Build the tree before mkdocstrings reads any module."""
    build_api_tree()
    return config


def on_page_markdown(markdown, page, **kwargs):
    """The changelog page is the repository's CHANGELOG.md, its links made relative.

    ``CHANGELOG.md`` sits at the repository root and its links are written from there
    (``docs/results/index.md``) so that they work on GitHub; on the site the page is
    ``docs/changelog.md``, whose own text only names the file it stands for.
    """
    if page.file.src_uri == "changelog.md":
        text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
        return text.replace("](docs/", "](")
    return include_files(markdown)


def include_files(markdown: str) -> str:
    """Each ``<!-- include: PATH[:LINE] -->`` region replaced by the file from LINE on.

    Why not pymdownx.snippets' ``--8<--`` line: on GitHub that line shows as it is,
    and the page says nothing.  Between the markers the page keeps a link to the file,
    which GitHub shows and the site replaces by the file itself.
    """

    def inline(match: re.Match[str]) -> str:
        lines = (ROOT / match["path"]).read_text(encoding="utf-8").splitlines()
        return "\n".join(lines[int(match["line"] or 1) - 1 :])

    return INCLUDE.sub(inline, markdown)
