"""Atomic file writes that honour the umask: the one writer every result goes through.

A result file is either the old one or the complete new one, never half written:
the content goes to a temporary file in the same directory (the same filesystem, so
the rename is atomic), is fsynced, and is renamed over the target; the directory is
then fsynced (best effort) so the rename survives a crash.

Permissions are those of any file ``open()`` creates: ``0o666`` less the umask (a
typical umask of ``0o022`` gives ``-rw-r--r--``), or the permission bits of the file
being replaced.  :func:`tempfile.mkstemp` is not used because it creates ``0o600``
files, which left results unreadable to the rest of a team, and reading the umask
needs two ``os.umask`` calls that race with threads creating files meanwhile.  The
temporary file is instead created with mode ``0o666`` and the kernel applies the
umask (and a directory's default ACL) itself.

Standard library only, so the trace package uses it too.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_text", "check_writable_dir"]

#: Mode asked for when creating a file; the kernel clears the umask's bits from it.
NEW_FILE_MODE = 0o666

_NAME_TRIES = 100


def _create_temp(target: Path, suffix: str) -> tuple[int, Path]:
    """Create an unused temporary file next to ``target``; returns its fd and path."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_NAME_TRIES):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}{suffix}")
        try:
            return os.open(tmp, flags, NEW_FILE_MODE), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(target.parent))


def _replaced_mode(target: Path) -> int | None:
    """Permission bits of the file ``target`` replaces (``None``: a new file)."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        return None


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable; best effort (not every platform can)."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def atomic_write(
    path: str | Path,
    write: Callable[[Path], None],
    *,
    make_parents: bool = True,
    suffix: str = ".tmp",
) -> Path:
    """Write ``path`` via ``write(tmp_path)``, then fsync and rename over the target.

    Args:
        path: final location.
        write: callback that writes the complete file to the temporary path it gets
            (the file exists, empty, with its final permissions; open it for writing).
        make_parents: create missing parent directories (otherwise a missing one is
            the callback's ``OSError``).
        suffix: end of the temporary file's name, for writers that pick the format
            from it (matplotlib's ``savefig``).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: anything the filesystem refuses; the target is then unchanged and
            the temporary file removed.
    """
    target = Path(path)
    if make_parents:
        target.parent.mkdir(parents=True, exist_ok=True)
    mode = _replaced_mode(target)
    try:
        fd, tmp = _create_temp(target, suffix)
    except OSError as exc:
        raise _naming(exc, target) from None
    try:
        try:
            if mode is not None and hasattr(os, "fchmod"):  # POSIX; Windows keeps its ACL
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        write(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _naming(exc, target) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def _naming(exc: OSError, target: Path) -> OSError:
    """``exc`` about ``target`` where it names the temporary file (or ``target``'s folder).

    Why: the temporary name (``afile/.x.png.80259299.png``) is ours, not the user's;
    an error must name the destination the user gave.  The error's kind (errno, and so
    its class) is kept.
    """
    temp_prefix = str(target.with_name(f".{target.name}."))
    names = [os.fspath(n) for n in (exc.filename, exc.filename2) if isinstance(n, (str, Path))]
    if exc.errno is None or not any(n.startswith(temp_prefix) for n in names):
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), str(target))


def atomic_write_text(path: str | Path, text: str, *, make_parents: bool = True) -> Path:
    """Atomically write ``text`` as UTF-8 with LF line endings (stable bytes)."""
    return atomic_write(
        path,
        lambda tmp: tmp.write_text(text, encoding="utf-8", newline="\n"),
        make_parents=make_parents,
    )


def check_writable_dir(path: str | Path, flag: str = "--out") -> None:
    """Fail before any work when ``path`` cannot be made or written (nothing is lost).

    Raises:
        ValueError: one line naming ``flag`` and the folder.
    """
    import tempfile

    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{flag} {folder}: exists and is not a directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".elasim-probe-"):
            pass
    except OSError as exc:
        raise ValueError(f"{flag} {folder}: not writable ({exc.strerror or exc})") from None
