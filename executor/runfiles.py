"""A run's private files: its secret and the worker settings, in a ``0700`` folder.

Why files: what a worker imports and runs (the job's import spec, its options) must
come from the user, never from a connection.  The controller writes the settings it
got from its own command line into ``worker-settings.json`` (``0600``), and every
worker is started with that path on its command line; the run's secret
(:mod:`.auth`) sits beside it.  A worker refuses a settings or secret file that
another user could read or write.  For workers on other hosts (agents), the user
copies both files there and names them on the agent's command line.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .auth import AuthError, check_private_file, generate_secret, read_secret, write_private
from .protocol import WorkerSettings

__all__ = ["RunFiles", "private_temp_dir", "read_worker_settings", "remove_stale_folders"]

log = logging.getLogger(__name__)

SECRET_NAME = "secret"
SETTINGS_NAME = "worker-settings.json"
#: In a temporary folder: the process that made it (``pid start-ticks``), so a later
#: run can tell a dead run's folder from a live one's.
OWNER_NAME = "owner"
#: Prefixes of the temporary folders that hold a run's secret.
RUN_PREFIX = "elasim-run-"


def _start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot, Linux), or None if gone.

    Why the start time and not only the pid: pids are reused, and a folder whose
    owner's pid now belongs to another process is a dead run's folder all the same.
    Elsewhere than Linux, only whether the pid exists is known (the ticks are "").
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None  # Linux, and no such process
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""
        return ""
    except OSError:
        return ""
    # the command name (field 2) may hold spaces and parentheses: split after it
    return stat.rpartition(")")[2].split()[19]


def _owner_alive(folder: Path) -> bool:
    """Whether the process named in ``folder/owner`` still runs (True if unreadable)."""
    try:
        pid_text, _, ticks = (folder / OWNER_NAME).read_text().strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return True  # no marker (an older elasim, or being written): leave it alone
    now = _start_ticks(pid)
    return now is not None and (now == ticks or "" in (now, ticks))


def remove_stale_folders(prefix: str = RUN_PREFIX, root: str | Path | None = None) -> list[Path]:
    """Remove this user's temporary folders of dead runs; returns what was removed.

    A controller killed with SIGKILL cannot remove its folder, which holds the run's
    secret.  Every new run calls this first, so a dead run's secret does not outlive
    the next run.  A folder is removed only when it belongs to this user and the
    process named in its ``owner`` file is gone.
    """
    removed = []
    base = Path(root if root is not None else tempfile.gettempdir())
    uid = os.getuid()
    for folder in base.glob(f"{prefix}*"):
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != uid:
                continue
        except OSError:
            continue
        if not _owner_alive(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        log.info("removed %d folder(s) of dead runs (%s...)", len(removed), prefix)
    return removed


def private_temp_dir(prefix: str = RUN_PREFIX) -> Path:
    """A new ``0700`` temporary folder marked with this process as its owner.

    Folders of dead runs with the same prefix are removed first
    (:func:`remove_stale_folders`).
    """
    remove_stale_folders(prefix)
    folder = Path(tempfile.mkdtemp(prefix=prefix))  # 0700 by construction
    ticks = _start_ticks(os.getpid()) or ""
    write_private(folder / OWNER_NAME, f"{os.getpid()} {ticks}\n".encode())
    return folder


@dataclass(frozen=True)
class RunFiles:
    """Where a run's private files are.

    Attributes:
        run_dir: the ``0700`` folder holding them.
        secret_path: the run secret (hex, ``0600``).
        settings_path: the worker settings (JSON, ``0600``).
        owned: the folder was made for this run (removed by :meth:`cleanup`).
    """

    run_dir: Path
    secret_path: Path
    settings_path: Path
    owned: bool = False

    @classmethod
    def create(
        cls,
        settings: WorkerSettings,
        *,
        run_dir: str | Path | None = None,
        secret_file: str | Path | None = None,
    ) -> RunFiles:
        """Write a new run's files.

        Args:
            settings: what every worker of the run gets.
            run_dir: a folder to create (``0700``; it must not exist or be empty);
                None: a fresh temporary folder, removed at :meth:`cleanup`.
            secret_file: use this secret (a private file the user made, e.g. one that
                is already on the agents' hosts) instead of a fresh one.

        Raises:
            AuthError: ``secret_file`` is missing or not private.
            OSError: the folder cannot be made.
        """
        secret = read_secret(secret_file) if secret_file is not None else generate_secret()
        if run_dir is None:
            folder = private_temp_dir(RUN_PREFIX)
            owned = True
        else:
            folder = Path(run_dir)
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
            if any(folder.iterdir()):
                raise OSError(f"run folder {folder} is not empty")
            owned = False
        secret_path = write_private(folder / SECRET_NAME, secret.hex().encode() + b"\n")
        settings_path = write_private(folder / SETTINGS_NAME, settings.to_bytes())
        return cls(folder, secret_path, settings_path, owned)

    def secret(self) -> bytes:
        """The run secret."""
        return read_secret(self.secret_path)

    def cleanup(self) -> None:
        """Remove the folder if this run made it (a temporary one)."""
        if self.owned:
            shutil.rmtree(self.run_dir, ignore_errors=True)


def read_worker_settings(path: str | Path) -> WorkerSettings:
    """The worker settings in ``path``, a private file.

    Raises:
        AuthError: not private, unreadable, or not worker settings (one line).
    """
    path = check_private_file(path, "settings file")
    try:
        return WorkerSettings.from_bytes(path.read_bytes())
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise AuthError(f"settings file {path}: {exc}") from None
