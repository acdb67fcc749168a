"""A job's speed as a cluster policy sees it: the profile's (oracle) or fitted online.

:class:`JobSpeedModel` is the :class:`~elasim.policies.cluster.JobSpeed` a policy
reads in a job's view: progress per second per shape and batch, from an
:class:`~elasim.cluster.application.Application`.  Which application:

* ``oracle`` (the default): the application profile itself, exactly what the
  simulator trains the job with;
* ``fitted``: what Pollux's agent knows, fitted online from what the job measured
  (:class:`SpeedFit`): a throughput model fitted to its step times per (replicas,
  per-GPU batch), and its gradient statistics averaged from its two-batch
  estimates.  The fit (:func:`fit_throughput`, a pure function) and the model
  around it (:class:`FittedApplication`) are one piece of code for both shells:
  real workers feed their step records (``elasim cluster run``), the simulator the
  step time and gradient statistics of each configuration it trains a job with,
  "measured" on the profile.  ``--speed-model oracle|fitted`` on ``cluster
  simulate`` and ``cluster run`` picks one, so the two can be compared.

The throughput model is Pollux's (Qiao et al., OSDI'21, section 4.1) with its
overlap exponent fixed at 1: a step of ``m`` samples per replica on ``r`` replicas
takes ``alpha_c + beta_c m`` of compute plus, when ``r > 1``, ``alpha_r + beta_r (r -
2)`` of synchronisation within one node, or ``alpha_n + beta_n (r - 2)`` across
nodes.  All six are linear, so a least-squares fit needs no optimiser (stdlib only).
Each is held at its prior where the measurements cannot tell it (a ridge towards
the prior): before a job ever ran on two replicas its synchronisation is free, as
optimistic as Pollux's agent, which is what lets a job grow and be measured there;
before it ran two per-GPU batches, its first measured step is split evenly between a
fixed and a per-sample cost (all per-sample would make a larger batch look no
faster per sample, and a job that never tries one never learns otherwise).
Until a job has a step measured, and for its gradient statistics until one is
estimated (two replicas or more), the profile stands in, as the batch and size a
job was submitted with do in Pollux.  The statistics are moving averages of the
estimates (as :mod:`elasim.noise_scale` smooths them), held for every epoch.

Standard library only (the executor imports it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

from .application import Application

__all__ = [
    "ADAPTIVE",
    "SPEED_MODELS",
    "FittedApplication",
    "JobSpeedModel",
    "SpeedFit",
    "StepSample",
    "ThroughputParams",
    "fit_throughput",
]

#: A batch size of 0 in a decision: the job adapts its own batch to its placement at
#: every epoch (what AdaptDL's library does inside a Pollux job).
ADAPTIVE = 0
#: The speed models a run may give its policy (``--speed-model``).
SPEED_MODELS = ("oracle", "fitted")
#: Decay of the gradient statistics' moving averages: ``elasim.noise_scale``'s
#: ``DEFAULT_SMOOTHING`` (which this layer may not import; a test holds them equal).
SMOOTHING = 0.95
#: Relative weight of the prior in the fit: enough to pin what the data cannot tell.
_RIDGE = 1e-6


class JobSpeedModel:
    """The :class:`~elasim.policies.cluster.JobSpeed` of one job in one epoch."""

    __slots__ = ("_app", "_cache", "_epoch", "_gpn")

    def __init__(self, app: Application, epoch: int, gpus_per_node: int) -> None:
        self._app = app
        self._epoch = epoch
        self._gpn = gpus_per_node
        self._cache: dict[tuple[int, int, int | None], float] = {}

    @classmethod
    def of(cls, app: Application, epoch: int, gpus_per_node: int) -> JobSpeedModel:
        """The model of every job of ``app`` in ``epoch``: one, shared, and its cache too.

        Why shared: a speed depends on the application, the epoch and the shape only,
        and a policy that sizes jobs (``srtf``, ``pollux``) asks hundreds of shapes per
        decision; with a model per job and epoch, a quarter of the asks on the Philly
        trace at 1,024 GPUs missed the cache.
        """
        key = (epoch, gpus_per_node)
        model = app.speed_models.get(key)
        if model is None:
            model = app.speed_models[key] = cls(app, epoch, gpus_per_node)
        return model

    def _shape(self, nodes: int, gpus: int) -> tuple[int, ...]:
        nodes = max(1, min(nodes, gpus))
        base, extra = divmod(gpus, nodes)
        return tuple(base + (1 if i < extra else 0) for i in range(nodes))

    def goodput(self, nodes: int, gpus: int, batch_size: int | None = None) -> float:
        """Progress per second (see the protocol)."""
        if gpus <= 0:
            return 0.0
        key = (nodes, gpus, batch_size)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        shape = self._shape(nodes, gpus)
        if batch_size is None or batch_size == ADAPTIVE:
            choice = self._app.best(shape, self._epoch)
            out = choice.goodput if choice is not None else 0.0
        else:
            out = self._app.configure(shape, batch_size, self._epoch).goodput
        self._cache[key] = out
        return out

    def best_batch(self, nodes: int, gpus: int) -> int:
        """The best global batch on that shape (0 when none fits)."""
        if gpus <= 0:
            return 0
        choice = self._app.best(self._shape(nodes, gpus), self._epoch)
        return choice.batch_size if choice is not None else 0


@dataclass(frozen=True)
class StepSample:
    """One measured optimizer step.

    Attributes:
        replicas: workers (GPUs) that took it.
        local_bsz: samples per replica (accumulation steps included).
        step_s: its time.
        nodes: nodes the replicas were on.
    """

    replicas: int
    local_bsz: float
    step_s: float
    nodes: int = 1


@dataclass(frozen=True)
class ThroughputParams:
    """Pollux's throughput model (see the module docstring), in seconds.

    Attributes:
        alpha_c: compute per step.
        beta_c: compute per sample of a replica.
        alpha_r: synchronisation per step on two replicas or more of one node.
        beta_r: the same, per replica beyond two.
        alpha_n: synchronisation per step across nodes.
        beta_n: the same, per replica beyond two.
    """

    alpha_c: float = 0.0
    beta_c: float = 0.0
    alpha_r: float = 0.0
    beta_r: float = 0.0
    alpha_n: float = 0.0
    beta_n: float = 0.0

    def sync_s(self, replicas: int, nodes: int = 1) -> float:
        """Synchronisation time of one step."""
        if replicas <= 1:
            return 0.0
        if nodes > 1:
            return self.alpha_n + self.beta_n * (replicas - 2)
        return self.alpha_r + self.beta_r * (replicas - 2)

    def step_s(self, replicas: int, local_bsz: float, nodes: int = 1) -> float:
        """Time of one step of ``local_bsz`` samples per replica."""
        return self.alpha_c + self.beta_c * local_bsz + self.sync_s(replicas, nodes)


def _features(sample: StepSample) -> list[float]:
    multi = 1.0 if sample.replicas > 1 else 0.0
    inter = multi if sample.nodes > 1 else 0.0
    intra = multi - inter
    extra = sample.replicas - 2
    return [1.0, float(sample.local_bsz), intra, intra * extra, inter, inter * extra]


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """``a x = b`` by Gaussian elimination with partial pivoting (``a`` is regular)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x


def fit_throughput(samples: Sequence[StepSample], prior: ThroughputParams) -> ThroughputParams:
    """Least-squares :class:`ThroughputParams` of ``samples``, held at ``prior`` where blind.

    A ridge of relative weight ``_RIDGE`` (of each parameter's own curvature) pulls
    it towards ``prior``: negligible where the samples determine it, decisive where
    they do not (one replica count, one batch).  Negative values are clamped to 0
    (time is not negative), the others refitted once.
    """
    prior_x = [getattr(prior, f.name) for f in fields(prior)]
    n = len(prior_x)
    rows = [(_features(s), s.step_s) for s in samples if s.step_s > 0 and s.replicas > 0]
    if not rows:
        return prior
    free = [True] * n
    x = prior_x
    for _ in range(2):
        ata = [[0.0] * n for _ in range(n)]
        atb = [0.0] * n
        for feats, y in rows:
            y -= sum(f * v for f, v, ok in zip(feats, x, free, strict=True) if not ok)
            for i in range(n):
                atb[i] += feats[i] * y if free[i] else 0.0
                for j in range(n):
                    ata[i][j] += feats[i] * feats[j] if free[i] and free[j] else 0.0
        scale = max(ata[i][i] for i in range(n)) or 1.0
        for i in range(n):
            lam = _RIDGE * (ata[i][i] or scale) if free[i] else 1.0
            ata[i][i] += lam
            atb[i] += lam * prior_x[i] if free[i] else 0.0
        x = [max(v, 0.0) if ok else 0.0 for v, ok in zip(_solve(ata, atb), free, strict=True)]
        if all(v > 0 or not ok for v, ok in zip(x, free, strict=True)):
            break
        free = [ok and v > 0 for v, ok in zip(x, free, strict=True)]
    return ThroughputParams(*x)


class FittedApplication(Application):
    """An application whose step times and gradient statistics are fitted, not profiled.

    It keeps the profile's configuration space (validated batches, measured per-GPU
    batches, epochs), so a policy chooses among the same batches, and replaces the
    two things Pollux's agent measures.  Its caches are its own: a new fit is a new
    object.
    """

    def __init__(
        self, base: Application, params: ThroughputParams, stats: tuple[float, float] | None
    ) -> None:
        self.__dict__.update(base.__dict__)
        self.params = params
        self.stats = stats
        for cache in ("_step_cache", "_choice_cache", "_config_cache", "_stats_cache"):
            setattr(self, cache, {})
        self._frontiers, self._epoch_rows, self.speed_models = {}, {}, {}

    def step_time(self, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
        """(step, sync) of the fitted model."""
        replicas, nodes = sum(placement), sum(1 for g in placement if g)
        params = self.params
        return params.step_s(replicas, local_bsz, nodes), params.sync_s(replicas, nodes)

    def grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        """The measured (|G|^2, noise), or the profile's until one was estimated."""
        return self.stats if self.stats is not None else super().grad_stats(batch_size, epoch)


class SpeedFit:
    """What one job has measured, and the :class:`FittedApplication` it gives.

    Args:
        app: the job's application profile: its configuration space, and its model
            until the job has measured a step.
    """

    def __init__(self, app: Application) -> None:
        self.app = app
        self.samples: dict[tuple[int, float, int], list[float]] = {}
        self._grads = (0.0, 0.0, 0.0)  # moving sums of |G|^2 and noise, and their weight
        self._model: Application = app
        self._stale = False

    def steps(self, samples: Iterable[StepSample]) -> None:
        """Add measured steps (per replicas, per-replica batch and nodes: the last 64)."""
        for s in samples:
            if s.step_s > 0 and math.isfinite(s.step_s):
                cell = self.samples.setdefault((s.replicas, s.local_bsz, s.nodes), [])
                self._stale = self._stale or not cell or cell[-1] != s.step_s
                cell.append(s.step_s)
                del cell[:-64]

    def gradients(self, grad_sq: float, noise: float) -> None:
        """Add one estimate of (|G|^2, noise), as the profile's ``grad_sqr, grad_var``.

        Smoothed as :mod:`elasim.noise_scale` (and Pollux) smooth them: each by its
        own exponential moving average, so the statistics follow the job's epochs.
        """
        if math.isfinite(grad_sq) and math.isfinite(noise):
            a = SMOOTHING
            g, v, w = self._grads
            self._grads = (a * g + (1 - a) * grad_sq, a * v + (1 - a) * noise, a * w + (1 - a))
            self._stale = True

    def model(self) -> Application:
        """The application a policy sees now (a new object after new measurements)."""
        if self._stale and self.samples:  # (a gradient estimate alone waits for a step)
            points = [
                StepSample(r, m, sorted(v)[len(v) // 2], k) for (r, m, k), v in self.samples.items()
            ]
            first = min(points, key=lambda p: (p.replicas, p.local_bsz))
            prior = ThroughputParams(first.step_s / 2, first.step_s / 2 / max(first.local_bsz, 1.0))
            g, v, w = self._grads
            stats = (max(g / w, 0.0), max(v / w, 0.0)) if w > 0 else None
            self._model = FittedApplication(self.app, fit_throughput(points, prior), stats)
            self._stale = False
        return self._model
