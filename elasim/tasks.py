"""Independent tasks run in order on a process pool or on Ray: the sweeps' backends.

A grid of simulations is embarrassingly parallel, and so is a cluster sweep: each
item is independent and deterministic, so results are placed by index, not by the
order in which they finish, and the list is the same with 1 or N processes and with
either backend.  This module is that machinery once, for :func:`elasim.sweep.run_sweep`
and for :func:`run_tasks` (``elasim cluster sweep``).

Two backends:

* ``"local"``: a :class:`~concurrent.futures.ProcessPoolExecutor` on this machine.
* ``"ray"`` (the ``ray`` extra): Ray tasks on a local Ray instance or on an existing
  cluster.  Ray is what this field's users already run their training and tuning on,
  so a sweep can borrow the same cluster.  ``ray`` is imported only when this
  backend is used; importing this module never imports it.

Which Ray instance a sweep uses:

* ``address=None`` starts a private local Ray instance with ``workers`` CPUs
  (default: every core), without the dashboard and without forwarding worker
  logs, and shuts it down afterwards.  Ray's own servers listen on the machine's
  network address (Ray resolves 127.0.0.1 to it and has no loopback-only
  option); recent Ray versions protect a local instance with token
  authentication.
* ``address="auto"``, ``"HOST:6379"`` or ``"ray://HOST:10001"`` (Ray Client,
  needs ``ray[client]``) connects to an existing cluster, which is left running.
  ``workers``, if given, caps the tasks in flight, so at most that many
  simulations run at once.
* If this process has already called ``ray.init``, that connection is used as
  it is (``address`` is ignored) and left open.

On a real cluster every node must be able to import ``elasim`` (and any policy
plugin or ``file.py:Class`` policy the grid names), at the same version as here:
tasks refer to elasim's functions by name.  Either install it in the
cluster's image, or connect first with a Ray runtime environment and then run the
sweep, which reuses that connection, e.g.::

    ray.init(address="auto", runtime_env={"pip": ["elasim==0.1.0"]})
    frame = run_sweep(spec, backend="ray")

(or ``runtime_env={"py_modules": ["dist/elasim-0.1.0-py3-none-any.whl"]}`` to
upload a wheel built here).  Shipping the source folder with ``py_modules`` does
not work from an editable checkout: ``elasim.policies`` and ``elasim.traces`` live
in separate top-level folders there, not inside ``elasim/``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any

from elasim.ray_connect import connected

__all__ = ["BACKENDS", "run_tasks"]

logger = logging.getLogger(__name__)

#: Names accepted by ``backend=`` (:func:`run_tasks`, :func:`elasim.sweep.run_sweep`).
BACKENDS = ("local", "ray")

RAY_MISSING = "the ray backend needs the 'ray' extra: pip install '.[ray]' in the elasim checkout"

#: Batches per worker slot: enough that the last batches still balance the load.
BATCHES_PER_SLOT = 8
#: Most items in one batch, so that progress stays fine-grained on big grids.
MAX_BATCH = 16


def check_backend(workers: int | None, backend: str, address: str | None) -> None:
    """The backend settings every caller of this module takes, checked before any task runs."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown sweep backend {backend!r} (known: {', '.join(BACKENDS)})")
    if address is not None and backend != "ray":
        raise ValueError(f"a cluster address is only used by the ray backend, not {backend!r}")
    if workers is not None and workers < 0:
        raise ValueError(f"workers must be >= 0 (0: one per core), got {workers}")


def batches(points: list[Any], slots: int) -> list[tuple[int, ...]]:
    """Group grid indices into batches of consecutive points on the same trace.

    A bundled-trace simulation takes a few milliseconds, about what it costs to hand a
    task to a pool process or a Ray worker, so one task per point spends much of the
    sweep on dispatch.  A batch is one task.  Batches stay small enough (``slots *
    BATCHES_PER_SLOT`` of them, at most ``MAX_BATCH`` points each) that the workers
    finish together, and never span two traces, so a Ray task needs one trace only.
    """
    size = max(1, min(MAX_BATCH, len(points) // (max(slots, 1) * BATCHES_PER_SLOT)))
    found: list[tuple[int, ...]] = []
    current: list[int] = []
    for i, point in enumerate(points):
        trace = getattr(point, "trace", None)
        if current and (
            len(current) == size or getattr(points[current[0]], "trace", None) != trace
        ):
            found.append(tuple(current))
            current = []
        current.append(i)
    if current:
        found.append(tuple(current))
    return found


def run_batch(points: list[Any], task: Callable[[Any], Any]) -> list[Any]:
    """One pool task: several points (or items of :func:`run_tasks`), in order."""
    return [task(point) for point in points]


def run_local(
    points: list[Any],
    *,
    workers: int,
    on_done: Callable[[], None] | None,
    task: Callable[[Any], Any],
) -> list[Any]:
    """Run the points in this process (1 worker) or in a process pool.

    ``task`` runs one point; it must be a module-level function (pool processes
    import it by name).  Points without a ``trace`` batch as if on one trace.
    """
    rows: list[Any] = [None] * len(points)
    if workers <= 1 or len(points) <= 1:
        for i, point in enumerate(points):
            rows[i] = task(point)
            if on_done:
                on_done()
        return complete(rows)
    workers = min(workers, len(points))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures: dict[Future[list[Any]], tuple[int, ...]] = {
            pool.submit(run_batch, [points[i] for i in batch], task): batch
            for batch in batches(points, workers)
        }
        try:
            for future in as_completed(futures):
                _store(rows, futures[future], future.result(), on_done)
        except BaseException:
            # don't run the rest of a grid that has already failed (or was interrupted)
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return complete(rows)


def _store(
    rows: list[dict[str, Any] | None],
    batch: tuple[int, ...],
    results: list[dict[str, Any]],
    on_done: Callable[[], None] | None,
) -> None:
    """Put a finished batch's rows at their grid indices; one progress tick per point."""
    for i, row in zip(batch, results, strict=True):
        rows[i] = row
        if on_done:
            on_done()


@contextlib.contextmanager
def ray_connection(
    workers: int | None, address: str | None
) -> Iterator[tuple[Any, int, int | None]]:
    """Ray connected by :func:`elasim.sweep.run_sweep`'s rules: (ray, task slots, cap).

    Shared by the policy grid and :func:`run_tasks`; the connection rules are
    :func:`elasim.ray_connect.connected`'s (shared with ``elasim run --launcher ray``).
    """
    with connected(
        address,
        missing=RAY_MISSING,
        flag="--backend ray",
        num_cpus=workers or os.cpu_count() or 1,
        # Ray logs through its own "ray" logger; keep it to errors unless elasim is
        # being debugged, so a sweep prints nothing but the caller's progress.
        verbose=logger.isEnabledFor(logging.DEBUG),
    ) as connection:
        ray = connection.ray
        # a private instance already has exactly `workers` CPUs; on a shared cluster
        # (or a connection the caller made), `workers` caps the tasks in flight
        cap = None if connection.private else workers
        yield ray, cap or int(ray.cluster_resources().get("CPU", 1)), cap


def ray_in_flight(
    ray: Any,
    points: list[Any],
    launch: Callable[[tuple[int, ...]], Any],
    slots: int,
    max_in_flight: int | None,
    on_done: Callable[[], None] | None,
) -> list[Any]:
    """Launch batches as Ray tasks, at most ``max_in_flight`` at once; rows by index."""
    planned = batches(points, slots)
    limit = max_in_flight or len(planned)
    rows: list[Any] = [None] * len(points)
    in_flight: dict[Any, tuple[int, ...]] = {}
    todo = iter(planned)

    def submit(count: int) -> None:
        for batch in itertools.islice(todo, count):
            in_flight[launch(batch)] = batch

    submit(limit)
    try:
        while in_flight:
            refs = list(in_flight)
            ray.wait(refs, num_returns=1)  # block until one is done...
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)  # ...take all done
            for ref in ready:
                _store(rows, in_flight.pop(ref), ray.get(ref), on_done)
            submit(limit - len(in_flight))
    except ray.exceptions.RayTaskError as error:
        _cancel(ray, in_flight)
        logger.debug("a sweep task failed on a Ray worker:\n%s", error)
        cause = getattr(error, "cause", None)
        if isinstance(cause, Exception):
            # the simulation's own error (e.g. a bad policy option), as the local backend raises it
            raise cause from None
        raise
    except BaseException:
        _cancel(ray, in_flight)
        raise
    return complete(rows)


def run_tasks(
    task: Callable[[Any], Any],
    items: list[Any],
    *,
    workers: int | None = None,
    on_done: Callable[[], None] | None = None,
    backend: str = "local",
    address: str | None = None,
) -> list[Any]:
    """``[task(item) for item in items]`` on a sweep backend, results in item order.

    The machinery of :func:`elasim.sweep.run_sweep` (batches, process pool or Ray, progress, the
    first failure re-raised as it is) for grids that are not policy x trace x seed
    ones, such as ``elasim cluster sweep``.  ``task`` must be a module-level function
    and ``items`` picklable: pool processes and Ray workers import the one and
    receive the other.

    Raises:
        ValueError: as :func:`elasim.sweep.run_sweep`; a failing item's own exception as it is.
    """
    check_backend(workers, backend, address)
    if backend == "local":
        return run_local(items, workers=workers or os.cpu_count() or 1, on_done=on_done, task=task)
    with ray_connection(workers or None, address) as (ray, slots, cap):
        remote = _ray_batch_task(ray)

        def launch(batch: tuple[int, ...]) -> Any:
            return remote.remote([items[i] for i in batch], task)

        return ray_in_flight(ray, items, launch, slots, cap, on_done)


@functools.lru_cache(maxsize=1)
def _ray_batch_task(ray: Any) -> Any:
    """The Ray remote version of :func:`run_batch` (see :func:`_ray_task`)."""
    return ray.remote(num_cpus=1)(run_batch)


def _cancel(ray: Any, pending: dict[Any, tuple[int, ...]]) -> None:
    for ref in pending:
        ray.cancel(ref)


def complete(rows: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    missing = [i for i, row in enumerate(rows) if row is None]
    if missing:  # pragma: no cover - every path above fills every row or raises
        raise RuntimeError(f"a sweep lost {len(missing)} of its points")
    return [row for row in rows if row is not None]
