"""How fast an application trains on a placement, and how much a sample is worth.

Built from a measured profile (:class:`elasim.traces.cluster.ApplicationProfile`),
standard library only (the executor side imports it too).  The model follows the
conventions of Pollux's simulator (facts from its ``applications.py`` and
``simulator.py``, re-implemented here; see ``traces/README.md``):

* **Step time.** A placement measured in ``placements.csv`` (up to four nodes) is
  looked up and interpolated linearly in the per-GPU batch size.  Any other shape
  (more nodes) is interpolated in ``(nodes, GPUs, per-GPU batch)`` over the mean of
  the measured placements of each shape and ``scalability.csv``: linearly in the
  batch on each measured shape, then in the GPU count along each measured node
  count, then between the two nearest measured node counts (Pollux uses a 3-D
  Delaunay interpolation; ours is separable, which needs no SciPy).
* **Batch.** A global batch ``B`` on ``r`` GPUs runs ``ceil(B / r)`` per GPU, split
  into gradient-accumulation steps when it exceeds the largest measured per-GPU
  batch; an accumulation step costs the step time less the synchronisation.
* **Statistical efficiency** at batch ``B`` in epoch ``e``:
  ``(var + sqr) / (var / (B / B0) + sqr)`` with the gradient statistics of that epoch
  interpolated between the validated batch sizes, ``B0`` the smallest validated one.
* **Progress** is counted in steps at ``B0`` (what ``validation-*.csv`` calls
  progress); the job is done at the progress of its last epoch (the epoch limits
  below), taken as the smallest over the validated batch sizes.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from elasim.traces.cluster import ApplicationProfile, StepRow

__all__ = ["EPOCH_LIMITS", "LOCAL_BSZ_CAPS", "Application", "BatchChoice"]

#: Epochs each of Pollux's applications trains for (its ``applications.py``).
EPOCH_LIMITS: dict[str, int] = {
    "bert": 2,
    "cifar10": 100,
    "ncf": 10,
    "imagenet": 90,
    "deepspeech2": 80,
    "yolov3": 50,
}
#: Largest per-GPU batch where Pollux caps it below the largest measured one.
LOCAL_BSZ_CAPS: dict[str, int] = {"yolov3": 8}
#: Accumulation steps a batch-size optimiser may use at most.
MAX_ACCUM_STEPS = 15


def _interp(xs: list[float], ys: list[tuple[float, float]], x: float) -> tuple[float, float]:
    """Linear interpolation of pairs, clamped at both ends."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, x)
    x0, x1 = xs[i - 1], xs[i]
    w = (x - x0) / (x1 - x0)
    (a0, b0), (a1, b1) = ys[i - 1], ys[i]
    return a0 + w * (a1 - a0), b0 + w * (b1 - b0)


def _curve(rows: list[StepRow]) -> tuple[list[float], list[tuple[float, float]]]:
    """Mean (step, sync) per per-GPU batch, sorted by batch."""
    acc: dict[float, list[float]] = {}
    for row in rows:
        cell = acc.setdefault(row.local_bsz, [0.0, 0.0, 0.0])
        cell[0] += row.step_s
        cell[1] += row.sync_s
        cell[2] += 1
    xs = sorted(acc)
    return xs, [(acc[x][0] / acc[x][2], acc[x][1] / acc[x][2]) for x in xs]


@dataclass(frozen=True)
class BatchChoice:
    """A batch configuration on one shape and its speed.

    Attributes:
        batch_size: global batch (GPUs x per-GPU batch x (accumulation + 1)).
        atomic_bsz: per-GPU batch of one forward/backward.
        accum_steps: extra accumulation steps per optimizer step.
        step_s: time of one optimizer step (accumulation included).
        goodput: progress per second (steps at ``B0`` per second, efficiency included).
        throughput: optimizer steps per second times the batch (samples per second).
    """

    batch_size: int
    atomic_bsz: int
    accum_steps: int
    step_s: float
    goodput: float
    throughput: float


@dataclass
class Application:
    """The performance model of one application (caches grow as shapes are asked for)."""

    profile: ApplicationProfile
    max_epochs: int = 0
    _exact: dict[tuple[int, ...], tuple[list[float], list[tuple[float, float]]]] = field(
        default_factory=dict, repr=False
    )
    _shapes: dict[tuple[int, int], tuple[list[float], list[tuple[float, float]]]] = field(
        default_factory=dict, repr=False
    )
    _step_cache: dict[tuple, tuple[float, float]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        prof = self.profile
        by_placement: dict[tuple[int, ...], list[StepRow]] = {}
        by_shape: dict[tuple[int, int], list[StepRow]] = {}
        for row in prof.placements:
            by_placement.setdefault(tuple(sorted(row.placement)), []).append(row)
            by_shape.setdefault((row.num_nodes, row.num_replicas), []).append(row)
        for row in prof.scalability:
            by_shape.setdefault((row.num_nodes, row.num_replicas), []).append(row)
        self._exact = {k: _curve(v) for k, v in by_placement.items()}
        self._shapes = {k: _curve(v) for k, v in by_shape.items()}
        self._lines: dict[int, list[int]] = {}
        for nodes, replicas in self._shapes:
            self._lines.setdefault(nodes, []).append(replicas)
        for reps in self._lines.values():
            reps.sort()
        self._node_counts = sorted(self._lines)
        self.name = prof.name
        self.validated = [b for b, _ in prof.validation]
        self.init_batch = self.validated[0]
        self.max_batch = self.validated[-1]
        local = sorted({row.local_bsz for row in prof.placements})
        self.min_local_bsz = int(local[0])
        self.max_local_bsz = int(min(local[-1], LOCAL_BSZ_CAPS.get(prof.name, math.inf)))
        self.local_sizes = [int(x) for x in local if x <= self.max_local_bsz]
        shortest = min(len(rows) for _, rows in prof.validation)
        if not self.max_epochs:
            self.max_epochs = min(EPOCH_LIMITS.get(prof.name, shortest), shortest)
        self.epoch_progress = [0.0] + [
            min(rows[e].progress for _, rows in prof.validation) for e in range(self.max_epochs)
        ]
        self.target_progress = self.epoch_progress[-1]
        self._stats = {b: rows for b, rows in prof.validation}
        self._choice_cache: dict[tuple, BatchChoice | None] = {}
        self._config_cache: dict[tuple, BatchChoice] = {}
        self._stats_cache: dict[tuple[float, int], tuple[float, float]] = {}
        self._frontiers: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        self._epoch_rows: dict[tuple[tuple[int, ...], int], list[BatchChoice | None]] = {}
        #: (epoch, GPUs per node) -> the jobs' shared speed model (see ``JobSpeedModel.of``)
        self.speed_models: dict[tuple[int, int], object] = {}

    # -- step time ------------------------------------------------------------------------

    def step_time(self, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
        """(step, sync) seconds of one step at ``local_bsz`` per GPU on ``placement``."""
        shape = tuple(sorted(g for g in placement if g))
        key = (shape, local_bsz)
        hit = self._step_cache.get(key)
        if hit is not None:
            return hit
        curve = self._exact.get(shape)
        if curve is not None:
            out = _interp(curve[0], curve[1], local_bsz)
        else:
            out = self._shape_time(len(shape), sum(shape), local_bsz)
        self._step_cache[key] = out
        return out

    def _line_time(self, nodes: int, replicas: int, bsz: float) -> tuple[float, float]:
        reps = self._lines[nodes]
        r = min(max(replicas, reps[0]), reps[-1])
        i = bisect.bisect_left(reps, r)
        if reps[i] == r:
            xs, ys = self._shapes[(nodes, r)]
            return _interp(xs, ys, bsz)
        r0, r1 = reps[i - 1], reps[i]
        lo = _interp(*self._shapes[(nodes, r0)], bsz)
        hi = _interp(*self._shapes[(nodes, r1)], bsz)
        w = (r - r0) / (r1 - r0)
        return lo[0] + w * (hi[0] - lo[0]), lo[1] + w * (hi[1] - lo[1])

    def _shape_time(self, nodes: int, replicas: int, bsz: float) -> tuple[float, float]:
        counts = self._node_counts
        n = min(max(nodes, counts[0]), counts[-1])
        i = bisect.bisect_left(counts, n)
        if counts[i] == n:
            return self._line_time(n, replicas, bsz)
        n0, n1 = counts[i - 1], counts[i]
        lo = self._line_time(n0, replicas, bsz)
        hi = self._line_time(n1, replicas, bsz)
        w = (n - n0) / (n1 - n0)
        return lo[0] + w * (hi[0] - lo[0]), lo[1] + w * (hi[1] - lo[1])

    # -- statistical efficiency -----------------------------------------------------------

    def epoch(self, progress: float) -> int:
        """Epochs completed at ``progress`` (0 .. ``max_epochs``)."""
        return min(bisect.bisect_right(self.epoch_progress, progress) - 1, self.max_epochs)

    def grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        """(grad_sqr, grad_var) in ``epoch`` at ``batch_size`` (interpolated, clamped)."""
        e = min(epoch, self.max_epochs - 1)
        hit = self._stats_cache.get((batch_size, e))
        if hit is not None:
            return hit
        out = self._grad_stats(batch_size, e)
        self._stats_cache[(batch_size, e)] = out
        return out

    def _grad_stats(self, batch_size: float, e: int) -> tuple[float, float]:
        sizes = self.validated
        b = min(max(batch_size, sizes[0]), sizes[-1])
        i = bisect.bisect_left(sizes, b)
        hi_rows = self._stats[sizes[i]]
        if sizes[i] == b:
            row = hi_rows[min(e, len(hi_rows) - 1)]
            return row.grad_sqr, row.grad_var
        lo_rows = self._stats[sizes[i - 1]]
        lo = lo_rows[min(e, len(lo_rows) - 1)]
        hi = hi_rows[min(e, len(hi_rows) - 1)]
        w = (b - sizes[i - 1]) / (sizes[i] - sizes[i - 1])
        return (
            lo.grad_sqr + w * (hi.grad_sqr - lo.grad_sqr),
            lo.grad_var + w * (hi.grad_var - lo.grad_var),
        )

    def gain(self, batch_size: float, epoch: int) -> float:
        """Progress per step at ``batch_size`` relative to a step at ``B0`` (the gain)."""
        sqr, var = self.grad_stats(batch_size, epoch)
        scale = batch_size / self.init_batch
        denom = var / scale + sqr
        return (var + sqr) / denom if denom > 0 else 1.0

    # -- configurations -------------------------------------------------------------------

    def configure(self, placement: tuple[int, ...], batch_size: int, epoch: int) -> BatchChoice:
        """How a job asking for ``batch_size`` runs on ``placement`` (Pollux's rule).

        The per-GPU share is split into accumulation steps above the largest measured
        per-GPU batch; a one-GPU job above ``B0`` accumulates at least once; the batch
        never exceeds the largest validated one.
        """
        key = (tuple(sorted(placement)), batch_size, min(epoch, self.max_epochs - 1))
        hit = self._config_cache.get(key)
        if hit is not None:
            return hit
        replicas = sum(placement)
        local = math.ceil(batch_size / replicas - 1e-8)
        accum = math.ceil(local / self.max_local_bsz - 1e-8) - 1
        if replicas == 1 and batch_size > self.init_batch:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        atomic = max(min(atomic, int(self.max_batch / (replicas * (accum + 1)))), 1)
        out = self._config_cache[key] = self._choice(key[0], atomic, accum, epoch)
        return out

    def _choice(
        self, placement: tuple[int, ...], atomic: int, accum: int, epoch: int
    ) -> BatchChoice:
        replicas = sum(placement)
        batch = replicas * atomic * (accum + 1)
        step, sync = self.step_time(placement, atomic)
        total = step + accum * (step - sync)
        gain = self.gain(batch, epoch)
        return BatchChoice(batch, atomic, accum, total, gain / total, batch / total)

    def choose(self, placement: tuple[int, ...], batch_size: int, epoch: int) -> BatchChoice:
        """:meth:`configure`, where ``batch_size`` 0 is adaptive.

        Adaptive: the best batch (:meth:`best`), or the initial one where none fits.
        """
        if batch_size == 0:
            return self.best(placement, epoch) or self.configure(placement, self.init_batch, epoch)
        return self.configure(placement, batch_size, epoch)

    def epoch_choices(
        self, placement: tuple[int, ...], batch_size: int
    ) -> list[BatchChoice | None]:
        """The row of :meth:`choose` by epoch for one shape and batch (None: not yet asked).

        Shared by the jobs on that shape; a job keeps its row and fills it as it
        goes, so that an epoch (millions of them on a long trace) costs a list index.
        """
        key = (tuple(sorted(placement)), batch_size)
        row = self._epoch_rows.get(key)
        if row is None:
            row = self._epoch_rows[key] = [None] * self.max_epochs
        return row

    def best(self, placement: tuple[int, ...], epoch: int) -> BatchChoice | None:
        """The batch configuration of highest goodput on ``placement`` in ``epoch``.

        Pollux's co-adaptation, by enumeration: every measured per-GPU batch and up to
        ``MAX_ACCUM_STEPS`` accumulation steps whose global batch lies within the
        validated range.  The candidates of a shape are pruned once to those that no
        other beats on both batch (more progress per step) and step time, so each
        epoch evaluates only a handful.  None when even the smallest per-GPU batch on
        this many GPUs exceeds the largest validated batch.
        """
        shape = tuple(sorted(g for g in placement if g))
        key = (shape, min(epoch, self.max_epochs - 1))
        if key in self._choice_cache:
            return self._choice_cache[key]
        best: BatchChoice | None = None
        for atomic, accum in self._frontier(shape):
            choice = self._choice(shape, atomic, accum, epoch)
            if best is None or choice.goodput > best.goodput:
                best = choice
        self._choice_cache[key] = best
        return best

    def _frontier(self, shape: tuple[int, ...]) -> list[tuple[int, int]]:
        """(atomic, accum) candidates of a shape not dominated in (batch, step time)."""
        hit = self._frontiers.get(shape)
        if hit is not None:
            return hit
        replicas = sum(shape)
        cands = []
        for atomic in self.local_sizes:
            step, sync = self.step_time(shape, atomic)
            for accum in range(MAX_ACCUM_STEPS + 1):
                batch = replicas * atomic * (accum + 1)
                if batch > self.max_batch:
                    break
                if batch >= self.init_batch:
                    cands.append((batch, step + accum * (step - sync), atomic, accum))
        if not cands and replicas * self.min_local_bsz <= self.max_batch:
            cands.append((replicas * self.min_local_bsz, 0.0, self.min_local_bsz, 0))
        # keep a candidate only if no other has a batch >= and a step time <=
        cands.sort(key=lambda c: (-c[0], c[1]))
        out, fastest = [], math.inf
        for _batch, total, atomic, accum in cands:
            if total < fastest:
                out.append((atomic, accum))
                fastest = total
        self._frontiers[shape] = out
        return out

    def max_gpus(self) -> int:
        """Most GPUs a job can use (the largest batch at the smallest per-GPU batch)."""
        return max(self.max_batch // self.min_local_bsz, 1)
