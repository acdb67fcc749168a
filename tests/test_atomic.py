"""Atomic writers: files are whole or absent, and get the permissions the umask allows.

The writers used to create their temporary file with ``tempfile.mkstemp`` (mode
0600), so every summary, parquet file, plot and profile ended up ``-rw-------``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=True)

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from conftest import capacity  # noqa: E402

from elasim.atomic import atomic_write, atomic_write_text  # noqa: E402
from elasim.examples import sim_vs_real_dir  # noqa: E402
from elasim.output import plot_timeline, write_json, write_parquet  # noqa: E402
from elasim.profile import load_profile, save_profile  # noqa: E402
from elasim.traces import plot_trace, write_capacity_trace  # noqa: E402

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Set the process umask for one test (restored afterwards)."""
    old = os.umask(0o022)  # reading the umask means setting it; put it back below

    def set_mask(mask: int) -> None:
        os.umask(mask)

    try:
        yield set_mask
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def no_temp_files(folder: Path) -> bool:
    return not [p.name for p in folder.iterdir() if p.name.startswith(".")]


def writers(folder: Path) -> dict[str, Path]:
    """Every atomic writer of the package, each writing one new file into ``folder``."""
    timeline = pd.DataFrame(
        {"time_s": [0.0, 60.0], "spot_available": [1, 2], "nodes_held": [1, 2], "progress": [0, 1]}
    )
    events = pd.DataFrame({"time_s": [], "kind": [], "nodes_after": []})
    trace = capacity([0.0, 60.0], [1, 2], duration_s=120.0)
    profile = load_profile(sim_vs_real_dir() / "profile.json")
    return {
        "json": write_json(folder / "summary.json", {"a": 1}),
        "parquet": write_parquet(folder / "events.parquet", timeline),
        "timeline png": plot_timeline(folder / "timeline.png", timeline, events),
        "profile": save_profile(profile, folder / "profile.json"),
        "trace csv": write_capacity_trace(trace, folder / "trace.csv"),
        "trace png": plot_trace(trace, folder / "trace.png"),
        "text": atomic_write_text(folder / "notes.txt", "hello\n"),
    }


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_new_files_get_0666_less_the_umask(tmp_path: Path, umask, mask: int, expected: int):
    umask(mask)
    written = writers(tmp_path)
    modes = {name: oct(mode(path)) for name, path in written.items()}
    assert modes == {name: oct(expected) for name in written}
    assert no_temp_files(tmp_path)


def test_a_replaced_file_keeps_its_mode(tmp_path: Path, umask):
    umask(0o022)
    target = tmp_path / "summary.json"
    target.write_text("old")
    target.chmod(0o640)
    write_json(target, {"new": True})
    assert mode(target) == 0o640 and '"new": true' in target.read_text()


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path):
    target = tmp_path / "keep.json"
    target.write_text("precious")

    def fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail)
    assert target.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]


def test_parents_are_created_unless_told_not_to(tmp_path: Path):
    assert atomic_write_text(tmp_path / "a" / "b.txt", "x").read_text() == "x"
    with pytest.raises(FileNotFoundError):
        atomic_write_text(tmp_path / "missing" / "c.txt", "x", make_parents=False)
    assert not (tmp_path / "missing").exists()


def test_an_error_names_the_destination_not_the_temporary_file(tmp_path: Path) -> None:
    """``--out afile/x.png`` under a file used to say ``afile/.x.png.80259299.png: ...``."""
    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "x.png"
    with pytest.raises(OSError) as info:
        atomic_write(target, lambda tmp: tmp.write_bytes(b"png"), make_parents=False)
    assert info.value.filename == str(target)
    assert ".x.png." not in str(info.value)
    assert isinstance(info.value, NotADirectoryError)  # the kind is kept

    def fail(tmp: Path) -> None:
        raise PermissionError(13, "Permission denied", str(tmp))

    with pytest.raises(PermissionError) as info:
        atomic_write(tmp_path / "y.json", fail)
    assert info.value.filename == str(tmp_path / "y.json")
    assert list(tmp_path.iterdir()) == [tmp_path / "afile"]  # no temporary file left


def test_cli_traces_show_under_a_file_names_the_users_path(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from elasim.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    result = CliRunner().invoke(app, ["traces", "show", "spot_us_east.csv", "--out", "afile/x.png"])
    assert result.exit_code == 2, result.output
    assert "afile/x.png" in result.output and ".x.png." not in result.output
