"""Building a :class:`ClusterLoop` from names: a workload, a policy, a cluster shape.

Kept apart from the loop so that both shells (the simulator's and the executor's)
and the CLI build loops the same way.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import elasim.policies.cluster  # noqa: F401 - registers the built-in cluster policies
from elasim.job import TrainingJob
from elasim.jobmodel import CHECKPOINT_OFF, RescaleMode
from elasim.policies.cluster import ClusterDecisionRecord, Placement
from elasim.policies.registry import CLUSTER_KIND, make_policy
from elasim.traces.cluster import WorkloadJob, bundled_application_names, load_application
from elasim.traces.workloads import load_workload

from .application import Application
from .loop import ClusterLoop
from .pauses import measured_pause_job
from .speed import SPEED_MODELS, SpeedFit

__all__ = [
    "DEFAULT_PAUSE_JOB",
    "MODEL_PARAMS",
    "ClusterSetup",
    "build_loop",
    "load_applications",
    "pause_jobs",
]

#: The job preset whose ``[rescale]`` and ``[checkpoint]`` figures (rendezvous,
#: storage bandwidth, warm-up; each cited in the preset) give a reallocation's pause.
DEFAULT_PAUSE_JOB = "resnet50_v100"

#: [estimate] Parameters of the model behind each of Pollux's applications (public
#: model sizes: ResNet-18, ResNet-50, BERT-base, DeepSpeech2, YOLOv3, NeuMF); a
#: checkpoint holds 12 bytes per parameter (FP32 weights and two optimizer moments).
#: Only the checkpoint size, hence the restore/write part of a pause, depends on it.
MODEL_PARAMS: dict[str, float] = {
    "cifar10": 11.2e6,
    "imagenet": 25.6e6,
    "bert": 110e6,
    "deepspeech2": 38e6,
    "yolov3": 61.9e6,
    "ncf": 10e6,
}
_BYTES_PER_PARAM = 12.0


@functools.lru_cache(maxsize=32)
def _bundled_application(name: str) -> Application:
    return Application(load_application(name))


def load_applications(
    names: set[str] | list[str], folder: str | Path | None = None
) -> dict[str, Application]:
    """Application models by name: from ``folder/<name>/`` or the bundled profiles.

    Bundled models are cached per process (their speed tables fill as they are used,
    and are the same for every run).

    Raises:
        TraceError: a profile is missing or malformed.
    """
    out = {}
    for name in sorted(names):
        if folder is None:
            out[name] = _bundled_application(name)
        else:
            out[name] = Application(load_application(Path(folder) / name))
    return out


def pause_jobs(
    preset: str | TrainingJob, applications: list[str], folder: str | Path | None = None
) -> dict[str, TrainingJob]:
    """One pause spec per application: the preset with that model's checkpoint size.

    With the applications' ``folder``, the pauses its profiles measured
    (``pauses.json``, :func:`~.pauses.measured_pause_job`) replace the preset's figures
    transition by transition, in every shell alike: a real run's loop, its
    ``--compare`` and ``cluster simulate --applications`` price a pause the same way.

    Raises:
        TrainingJobError: a bad preset.
        ValueError: a ``pauses.json`` that cannot be read (one line, naming it).
    """
    base = measured_pause_job(preset, folder, applications)
    out = {}
    for name in applications:
        params = MODEL_PARAMS.get(name)
        if params is None:
            out[name] = base
            continue
        ckpt = dataclasses.replace(base.checkpoint, size_bytes=params * _BYTES_PER_PARAM)
        out[name] = dataclasses.replace(base, checkpoint=ckpt)
    return out


@dataclass(frozen=True)
class ClusterSetup:
    """Everything one cluster run needs, by name.

    Attributes:
        workload: a bundled workload name (``pollux-workload-6``) or a path.
        policy: a cluster policy name, ``file.py:Class`` or ``module:Class``.
        options: the policy's ``--set`` options.
        num_nodes: nodes.
        gpus_per_node: GPUs per node.
        rescale: how jobs re-form their groups.
        pause_job: the job preset (or TOML path) of the pause figures; where the
            ``applications`` have measured pauses (``pauses.json``), those win.
        applications: a folder of application profiles (None: the bundled ones).
        capacity: a capacity trace (bundled name or path) whose ``available`` is the
            nodes usable over time (None: all, always); each shell reads it with
            :func:`elasim.traces.capacity_rows` (real slots follow it as simulated
            nodes do).
        notice_s: each capacity drop is announced this long before (0: no notice);
            a job warned in time leaves gracefully, by the single job's rule.
        checkpoint_interval_s: every job's periodic checkpoints, as for one job (None:
            Young/Daly ``auto``; ``inf``: off, the default, which keeps cluster mode's
            results as they were: AdaptDL checkpoints only when a job restarts).
        speed_model: what a policy knows of a job's speed: ``oracle`` (its profile)
            or ``fitted`` (fitted to what it measured, :mod:`.speed`).
    """

    workload: str
    policy: str
    options: Mapping[str, str] = field(default_factory=dict)
    num_nodes: int = 16
    gpus_per_node: int = 4
    rescale: RescaleMode = RescaleMode.RESTART
    pause_job: str = DEFAULT_PAUSE_JOB
    applications: str | None = None
    capacity: str | None = None
    notice_s: float = 0.0
    checkpoint_interval_s: float | None = CHECKPOINT_OFF
    speed_model: str = "oracle"

    def __post_init__(self) -> None:
        if not isinstance(self.rescale, RescaleMode):  # "inplace", as on the command line
            object.__setattr__(self, "rescale", RescaleMode(self.rescale))
        if self.speed_model not in SPEED_MODELS:
            raise ValueError(
                f"--speed-model must be one of {', '.join(SPEED_MODELS)}, got {self.speed_model!r}"
            )


def build_loop(
    setup: ClusterSetup,
    *,
    record_timeline: bool = True,
    on_change: Callable[[float, str, Placement, int], None] | None = None,
    capacity: tuple[tuple[float, int], ...] | None = None,
    capacity_period_s: float | None = None,
    job_factory: Any = None,
    keep_decisions: bool = True,
    on_decision: Callable[[ClusterDecisionRecord], None] | None = None,
) -> ClusterLoop:
    """The loop of one run (each keyword: see :class:`ClusterLoop`).

    ``capacity`` is the shell's to read (:func:`elasim.traces.capacity_rows` of
    ``setup.capacity``): the loop's modules import no NumPy.

    Raises:
        TraceError: a bad workload or application profile.
        PolicyLoadError, PolicyConfigError: a bad policy or option.
        TrainingJobError: a bad pause preset.
    """
    known = None if setup.applications else set(bundled_application_names())
    workload: list[WorkloadJob] = load_workload(setup.workload, known)
    names = sorted({job.application for job in workload})
    apps = load_applications(names, setup.applications)
    policy = make_policy(setup.policy, dict(setup.options), kind=CLUSTER_KIND)
    loop = ClusterLoop(
        policy,  # type: ignore[arg-type]
        workload,
        apps,
        pause_jobs(setup.pause_job, names, setup.applications),
        num_nodes=setup.num_nodes,
        gpus_per_node=setup.gpus_per_node,
        mode=setup.rescale,
        record_timeline=record_timeline,
        on_change=on_change,
        capacity=capacity,
        capacity_period_s=capacity_period_s,
        keep_decisions=keep_decisions,
        on_decision=on_decision,
        notice_s=setup.notice_s,
        checkpoint_interval_s=setup.checkpoint_interval_s,
        **({} if job_factory is None else {"job_factory": job_factory}),
    )
    if setup.speed_model == "fitted":
        for job in loop.jobs:
            job.fit = SpeedFit(job.app)
    return loop
