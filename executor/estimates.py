"""What the executor's job loop estimates from measurements: :class:`MeasuredEstimates`.

The policy's observation and the loop's rules (the graceful-leave lead, Young/Daly's
interval) need throughput, pauses, step and checkpoint-write times in trace seconds.
The simulator takes them from its model of the job; here they come from what the
worker group measured, with the controller's priors standing in until it has.  This is
the :class:`~elasim.jobmodel.actuator.Estimates` role of the real job, apart from the
commands (:class:`~.actuator.GroupActuator`), which feed it the events it learns from.
"""

from __future__ import annotations

import statistics

from elasim.jobmodel.accounting import RESCALE_KINDS
from elasim.policies import EventKind, EventRecord

from .controls import ControllerConfig, WorkerGroup

__all__ = ["MeasuredEstimates"]


class MeasuredEstimates:
    """The job's estimates in trace seconds, from the group's measurements and priors.

    Args:
        group: the worker group (its step times and global batch).
        config: the controller's settings (time scale, priors, given tables).
    """

    def __init__(self, group: WorkerGroup, config: ControllerConfig) -> None:
        self.group = group
        self.config = config
        self.scale = config.time_scale
        self.leave_margin_s = config.graceful_margin_real_s * self.scale
        self._pauses_real_s: list[float] = []
        self._resumes_real_s: list[float] = []
        self._writes_real_s: list[float] = []

    def learn(self, record: EventRecord) -> None:
        """Keep what an event measured: a checkpoint write, a planned pause, a resume."""
        pause = record.pause.pause_s
        if record.kind is EventKind.CHECKPOINT:
            self._writes_real_s.append(record.pause.state_s)
        elif pause > 0 and record.kind in RESCALE_KINDS | {EventKind.PREEMPT}:
            if record.kind is EventKind.RESUME or record.nodes_before == 0:
                self._resumes_real_s.append(pause)
            elif record.kind in (EventKind.SCALE_UP, EventKind.SCALE_DOWN):
                self._pauses_real_s.append(pause)

    def throughput_table(self) -> tuple[float, ...]:
        """Given, or measured: ``global_batch / step time`` per world size.

        Sizes not measured yet are extrapolated linearly from the nearest measured size
        (``thr(n) = thr(m) * n / m``); before any measurement ``prior_step_real_s``
        stands in.
        """
        cfg = self.config
        if cfg.throughput_samples_per_s is not None:
            return tuple(cfg.throughput_samples_per_s)
        batch = self.group.global_batch or cfg.global_batch
        measured = self.group.step_time_by_world()
        table = [0.0]
        for n in range(1, cfg.max_nodes + 1):
            if n in measured and measured[n] > 0:
                real = batch / measured[n]
            elif measured:
                m = min(measured, key=lambda k: (abs(k - n), k))
                real = batch / measured[m] * n / m
            else:
                real = batch / cfg.prior_step_real_s * n
            table.append(real / cfg.time_scale)
        return tuple(table)

    def efficiency_table(self) -> tuple[float, ...]:
        """Given, or 1.0 everywhere (the executor keeps the global batch fixed)."""
        cfg = self.config
        return cfg.statistical_efficiency or (1.0,) * (cfg.max_nodes + 1)

    def rescale_cost_s(self) -> float:
        """Given, or the median measured planned pause (prior before any)."""
        cfg = self.config
        if cfg.rescale_cost_trace_s is not None:
            return cfg.rescale_cost_trace_s
        pauses = self._pauses_real_s
        real = statistics.median(pauses) if pauses else cfg.rescale_cost_prior_real_s
        return real * self.scale

    def resume_cost_s(self) -> float | None:
        """The median measured start from no nodes (None before one was measured)."""
        if self.config.rescale_cost_trace_s is not None:
            return None
        resumes = self._resumes_real_s
        return statistics.median(resumes) * self.scale if resumes else None

    def step_s(self) -> float:
        """The typical measured step now (prior before any)."""
        real = self.group.typical_step_s() or self.config.prior_step_real_s
        return real * self.scale

    def checkpoint_write_s(self) -> float:
        """The median measured checkpoint write (prior before any)."""
        writes = self._writes_real_s
        real = statistics.median(writes) if writes else self.config.checkpoint_write_prior_real_s
        return real * self.scale
