"""Connecting to Ray, once for the whole project: sweeps and the executor's Ray launcher.

Why one module: ``elasim sweep --backend ray`` and ``elasim run --launcher ray`` both
start a private local instance or join a cluster, and the rules must not drift
between them: the address checked in one line before anything connects, Ray's own
logging kept to errors, an instance started here stopped here, a connection the
caller made kept, and workers that import the ``elasim`` this process runs.

That last rule needs care.  Ray puts the driver's current folder first on every
worker's ``sys.path`` (``ray._private.worker.connect``: ``_py_driver_sys_path``)
unless the job has a ``working_dir``.  Run from a checkout of elasim, whose
``elasim/`` folder is not the installed package, every task would import the
checkout (or fail to).  So a connection made here gives the job an empty private
``working_dir``: nothing to shadow, and Ray adds no other folder.

And Ray runs its workers at niceness 15: a private instance started here runs them
at this process's niceness instead (see :func:`connected`).

Imports neither simpy nor torch: the simulator and the executor both use it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RayConnection", "check_address", "connected", "ray_module"]

log = logging.getLogger(__name__)

_ADDRESS = re.compile(r"^(auto|ray://[^\s:/]+(:\d{1,5})?|[^\s:/]+:\d{1,5})$")


def ray_module(missing: str) -> Any:
    """``import ray``, or ValueError(``missing``): the one line naming the extra."""
    try:
        import ray
    except ImportError:
        raise ValueError(missing) from None
    return ray


def check_address(address: str | None) -> None:
    """Reject a malformed ``--address`` before anything connects.

    Accepted: ``auto`` (the cluster this host is part of), ``HOST:PORT`` (a Ray
    head's GCS address) and ``ray://HOST[:PORT]`` (Ray Client).

    Raises:
        ValueError: one line naming the flag.
    """
    if address is None:
        return
    if not _ADDRESS.match(address):
        raise ValueError(f"--address must be HOST:PORT, ray://HOST:PORT or auto, got {address!r}")
    port = address.rpartition(":")[2]
    if port.isdigit() and not address.startswith("auto") and not 0 < int(port) < 65536:
        raise ValueError(f"--address port must be 1-65535, got {port}")


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line, when nothing listens at ``address``.

    ``ray.init`` itself retries an unreachable cluster for a long time and then
    raises several screens of text.
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host:  # ray://HOST without a port: Ray Client's default
        host, port = address.removeprefix("ray://"), "10001"
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ValueError(f"--address: no Ray cluster answers at {address}: {reason}") from None


@dataclass(frozen=True)
class RayConnection:
    """The Ray connection of this process, as :func:`connected` made or found it.

    Attributes:
        ray: the ``ray`` module.
        connected_here: whether this connection was made here (it is closed on exit).
        private: whether the instance was started here (it is stopped on exit).
    """

    ray: Any
    connected_here: bool
    private: bool


@contextlib.contextmanager
def connected(
    address: str | None,
    *,
    missing: str,
    flag: str,
    num_cpus: int | None = None,
    resources: Mapping[str, float] | None = None,
    verbose: bool = False,
) -> Iterator[RayConnection]:
    """Ray, connected by the project's rules, for the duration of the block.

    * A process already connected keeps its connection (``address`` is ignored),
      and it is left open.
    * ``address=None`` starts a private local instance (``num_cpus`` CPUs and the
      custom ``resources``, no dashboard), stopped on exit.  ``address="local"``
      always starts a new one, so a ``RAY_ADDRESS`` in the environment cannot send
      a local run to some cluster.
    * An address joins an existing cluster, which is left running.

    Args:
        address: ``None``, ``auto``, ``HOST:PORT`` or ``ray://HOST[:PORT]``.
        missing: the one line to raise when ray is not installed.
        flag: how the user asked for Ray (``--launcher ray``, ``--backend ray``),
            named when a local start fails.
        num_cpus: CPUs of a private instance (None: Ray counts them).
        resources: custom resources of a private instance.
        verbose: Ray's own INFO logs (elasim is being debugged); else errors only.

    Raises:
        ValueError: ray is missing, the address is malformed, or nothing answers
            there, or Ray cannot start or connect (one line).
    """
    check_address(address)
    ray = ray_module(missing)
    if ray.is_initialized():
        log.debug("ray: using this process's existing connection")
        yield RayConnection(ray, connected_here=False, private=False)
        return
    if address is not None and address != "auto":
        _reachable(address)
    empty = tempfile.mkdtemp(prefix="elasim-ray-job-")  # the job's working_dir, see above
    options = _init_options(
        address, working_dir=empty, num_cpus=num_cpus, resources=resources, verbose=verbose
    )
    log.debug("ray: %s", "starting a local instance" if address is None else f"joining {address}")
    try:
        ray.init(**options)
    except Exception as exc:  # noqa: BLE001 - ray.init raises bare Exceptions too
        with contextlib.suppress(Exception):  # what a failed local start left running
            ray.shutdown()
        shutil.rmtree(empty, ignore_errors=True)
        where = address or "a local instance"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        prefix = "--address: " if address is not None else f"{flag}: "
        raise ValueError(f"{prefix}cannot connect to Ray at {where}: {reason}") from None
    try:
        yield RayConnection(ray, connected_here=True, private=address is None)
    finally:
        ray.shutdown()  # stops an instance started here; only disconnects from a cluster
        shutil.rmtree(empty, ignore_errors=True)


def _init_options(
    address: str | None,
    *,
    working_dir: str,
    num_cpus: int | None,
    resources: Mapping[str, float] | None,
    verbose: bool,
) -> dict[str, Any]:
    """The ``ray.init`` arguments of a connection made by :func:`connected`.

    Why apart: these are the project's rules as Ray options (the module docstring
    says why each exists): Ray's logging kept to errors unless ``verbose``, the
    job's empty ``working_dir``, and either a private local instance (``address``
    None) without a dashboard whose workers run at this process's niceness, or the
    given ``address``.
    """
    options: dict[str, Any] = {
        "log_to_driver": False,
        "configure_logging": True,
        "logging_level": logging.INFO if verbose else logging.ERROR,
        "runtime_env": {"working_dir": working_dir},
    }
    if address is None:
        options.update(
            address="local",
            num_cpus=num_cpus,
            resources=dict(resources or {}),
            include_dashboard=False,
            dashboard_host="127.0.0.1",
            # Ray runs its workers at niceness 15 by default; beside other work they
            # then get a few percent of a core (two busy processes on the 2-core
            # machine: no trainer started within 120 s).  A private instance's workers
            # run at this process's niceness, as the local backend's do.
            _system_config={"worker_niceness": max(0, os.getpriority(os.PRIO_PROCESS, 0))},
        )
    else:
        options["address"] = address
    return options
