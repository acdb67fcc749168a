"""The shared vocabulary of elasim: what a policy sees, what it answers, what happened.

Everything in this module is imported by *both* environments, the SimPy simulator
(``elasim.sim``) and the real ``torch.distributed`` executor (``elasim.executor``).
That is the point of the project: a policy is a pure decision object, so the same
object can be driven by a discrete-event model or by a controller that spawns and
kills real worker processes, and comparing the two runs is a join on shared column
names rather than a translation.

This module depends on the standard library only (checked by ``tests/test_layering.py``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

from ._quick import quick_init
from .checkpoints import CheckpointSchedule

__all__ = [
    "Decision",
    "DecisionRecord",
    "EVENT_COLUMNS",
    "EventRecord",
    "EventKind",
    "JobState",
    "Observation",
    "ObservedEvent",
    "PAUSE_COMPONENTS",
    "PauseComponents",
    "Policy",
    "PolicyBase",
    "ZoneView",
    "clamp",
]


class EventKind(str, enum.Enum):
    """What happened to the job; the ``kind`` column of every ``events.parquet``.

    The simulator and the executor log exactly these values, so their event tables
    can be joined.  The job-level transitions they mark (see :class:`JobState`):

    * ``PREEMPT_NOTICE``: the provider announced that nodes will go (RUNNING stays
      RUNNING; a graceful policy may checkpoint / scale down before the deadline).
    * ``PREEMPT``: nodes were taken away.  RUNNING -> RESCALING (survivors remain),
      or RUNNING -> WAITING (no survivors; the next start restores a checkpoint).
    * ``SCALE_UP`` / ``SCALE_DOWN``: a membership change that the policy asked for,
      or the recovery after a preemption.  RESCALING -> RUNNING.
    * ``CHECKPOINT``: a checkpoint was written.  RUNNING -> CHECKPOINTING -> RUNNING.
    * ``RESTORE``: state was loaded from a checkpoint.  WAITING -> RESCALING.
    * ``PAUSE``: the job holds no nodes.  RUNNING/RESCALING -> WAITING.
    * ``RESUME``: the job gets nodes again after a pause.  WAITING -> RESCALING.
    * ``DONE``: the target was reached.  RUNNING -> DONE (terminal).
    """

    PREEMPT_NOTICE = "preempt_notice"
    PREEMPT = "preempt"
    SCALE_UP = "scale_up"
    SCALE_DOWN = "scale_down"
    CHECKPOINT = "checkpoint"
    RESTORE = "restore"
    PAUSE = "pause"
    RESUME = "resume"
    DONE = "done"


class JobState(str, enum.Enum):
    """Life cycle of one elastic job, in the simulator and in the executor.

    Legal transitions (anything else is a bug and raises in the drivers)::

        WAITING       -> RESCALING            (nodes granted; acquire + rendezvous + state)
        RESCALING     -> RUNNING              (first step after the pause)
        RESCALING     -> WAITING              (all nodes lost while forming the group)
        RUNNING       -> RESCALING            (membership change: policy or preemption)
        RUNNING       -> CHECKPOINTING -> RUNNING
        RUNNING       -> WAITING              (every node lost or released)
        CHECKPOINTING -> RESCALING | WAITING  (preempted while checkpointing)
        RUNNING       -> DONE                 (terminal)

    Mirrors the naming of ``torch.distributed.elastic.agent.server.WorkerState``,
    at the level of the job rather than of one worker group.
    """

    WAITING = "waiting"
    RESCALING = "rescaling"
    RUNNING = "running"
    CHECKPOINTING = "checkpointing"
    DONE = "done"

    def can_become(self, other: JobState) -> bool:
        """Whether ``self -> other`` is a legal transition (see the class docstring)."""
        return other in _LEGAL_TRANSITIONS[self]


_LEGAL_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.WAITING: frozenset({JobState.RESCALING}),
    JobState.RESCALING: frozenset({JobState.RUNNING, JobState.WAITING, JobState.RESCALING}),
    JobState.RUNNING: frozenset(
        {JobState.RESCALING, JobState.CHECKPOINTING, JobState.WAITING, JobState.DONE}
    ),
    JobState.CHECKPOINTING: frozenset({JobState.RUNNING, JobState.RESCALING, JobState.WAITING}),
    JobState.DONE: frozenset(),
}

#: Names of the components of a rescale pause, identical in the simulator's cost
#: model, the executor's measurements and the columns of ``events.parquet``.
PAUSE_COMPONENTS: tuple[str, ...] = ("detect_s", "acquire_s", "rendezvous_s", "state_s", "warmup_s")


@quick_init
@dataclass(frozen=True)
class PauseComponents:
    """The pause that survivors see during one membership change, split by cause.

    Attributes:
        detect_s: failure -> survivors notice it; zero for a planned change.
        acquire_s: getting a node (boot); in the executor, spawning and importing
            torch before joining.  Survivors only wait for it when nobody survives.
        rendezvous_s: forming the new process group.
        state_s: broadcasting the state to newcomers or loading a checkpoint.
        warmup_s: extra time of the first step after the change.
    """

    detect_s: float = 0.0
    acquire_s: float = 0.0
    rendezvous_s: float = 0.0
    state_s: float = 0.0
    warmup_s: float = 0.0

    def __post_init__(self) -> None:
        # one chained test first (one per event in a simulation), the loop to word it
        inf = math.inf
        if (
            0.0 <= self.detect_s < inf
            and 0.0 <= self.acquire_s < inf
            and 0.0 <= self.rendezvous_s < inf
            and 0.0 <= self.state_s < inf
            and 0.0 <= self.warmup_s < inf
        ):
            return
        for name in PAUSE_COMPONENTS:
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    @property
    def pause_s(self) -> float:
        """Total pause: the sum of the components."""
        return self.detect_s + self.acquire_s + self.rendezvous_s + self.state_s + self.warmup_s

    def as_dict(self) -> dict[str, float]:
        """The components as a plain ``{column: seconds}`` dict."""
        return {name: float(getattr(self, name)) for name in PAUSE_COMPONENTS}


@quick_init
@dataclass(frozen=True)
class ObservedEvent:
    """An event as a policy sees it in :attr:`Observation.recent_events`.

    Attributes:
        time_s: when it happened (environment time).
        kind: what happened.
        nodes_before: nodes held (spot + on-demand) before.
        nodes_after: nodes held after.
        deadline_s: for ``PREEMPT_NOTICE``, when the nodes will be taken.
    """

    time_s: float
    kind: EventKind
    nodes_before: int
    nodes_after: int
    deadline_s: float | None = None


@quick_init
@dataclass(frozen=True)
class ZoneView:
    """One zone as a policy sees it in :attr:`Observation.zones`.

    Attributes:
        name: the zone's name (its trace's name, or the trace's ``zone`` column).
        spot_available: spot nodes obtainable there now, capped at ``max_nodes``.
        spot_price_per_hour: spot price there now, USD per node-hour.
    """

    name: str
    spot_available: int
    spot_price_per_hour: float


@quick_init
@dataclass(frozen=True)
class Observation:
    """An immutable snapshot of the world, built by the driver before each decision.

    A policy must treat this as read-only (it is frozen; its tuples are immutable).
    All per-node-count tables are tuples indexed by the node count ``n`` for
    ``0 <= n <= max_nodes``; entry 0 is always 0.0 throughput.

    Attributes:
        now_s: environment time in seconds since the start of the run.
        spot_available: spot nodes obtainable now (including those already held),
            capped at ``max_nodes``: both drivers report only capacity the job can use.
        spot_held: spot nodes the job holds now.
        on_demand_held: on-demand nodes the job holds now.
        spot_price_per_hour: current spot price, USD per node-hour.
        on_demand_price_per_hour: on-demand price, USD per node-hour; ``math.inf``
            when the environment offers no on-demand nodes (the drivers then clamp any
            on-demand request to zero).
        progress: effective samples done / target, in [0, 1].
        remaining_samples: effective samples still to do.
        throughput_samples_per_s: raw samples/s by node count (estimated or measured).
        statistical_efficiency: effective samples per raw sample by node count
            (1.0 everywhere under ``fixed`` global-batch semantics).
        rescale_cost_s: estimated pause of one planned membership change.
        resume_cost_s: estimated pause of a start from no nodes (boot, group formation,
            checkpoint load, warm-up), or None when it equals ``rescale_cost_s``.
        deadline_s: the job's deadline, or None.
        min_nodes: the job cannot run on fewer nodes than this.
        max_nodes: nor on more.
        recent_events: events since the previous decision, oldest first.
        spent_usd: money spent on nodes so far (spot and on-demand, booting nodes
            included), as the job's books have it when the policy is asked.  A policy
            that must stay within a budget (``deadline`` keeps its cost below the
            cheapest on-demand plan) needs it and cannot see it otherwise.
        on_demand_spent_usd: the part of ``spent_usd`` paid for on-demand nodes
            (``deadline`` credits the plan's start only as far as it is paid).
        checkpoint_interval_s: running time between periodic checkpoints now (the
            ``auto`` schedule's current value; ``inf``: none).
        checkpoint_write_s: what one checkpoint write takes (estimated or measured).
            With the interval it gives :attr:`training_share`, which a policy that
            plans to the minute (``deadline``) must not leave out.
        checkpoint_schedule: the rule the interval follows (None: the environment
            gives none, and the interval stays as it is): with ``preemptions``, how
            the interval will grow on nodes that are never preempted
            (:meth:`~elasim.policies.checkpoints.CheckpointSchedule.run_time_s`).
        preemptions: preemptions seen not warned in time (the schedule's failures).
        zones: every zone the job may run in, in the run's order; empty for a run in
            one zone.  The job runs in one zone at a time (as SkyPilot's managed jobs
            do): ``spot_available`` and ``spot_price_per_hour`` are always the current
            zone's, so a policy that knows nothing of zones reads the zone it is in.
        zone: index of the current zone in ``zones`` (during a move: the zone the
            job is moving to).
        zone_move_s: what moving the checkpoint to another zone takes (its size over
            the transfer bandwidth); a move pauses this long with no nodes, and then
            starts from nothing (``resume_cost_s``) in the new zone.
    """

    now_s: float
    spot_available: int
    spot_held: int
    on_demand_held: int
    spot_price_per_hour: float
    on_demand_price_per_hour: float
    progress: float
    remaining_samples: float
    throughput_samples_per_s: tuple[float, ...]
    statistical_efficiency: tuple[float, ...]
    rescale_cost_s: float
    deadline_s: float | None
    min_nodes: int
    max_nodes: int
    recent_events: tuple[ObservedEvent, ...] = ()
    resume_cost_s: float | None = None
    spent_usd: float = 0.0
    on_demand_spent_usd: float = 0.0
    checkpoint_interval_s: float = math.inf
    checkpoint_write_s: float = 0.0
    checkpoint_schedule: CheckpointSchedule | None = None
    preemptions: int = 0
    zones: tuple[ZoneView, ...] = ()
    zone: int = 0
    zone_move_s: float = 0.0

    def __post_init__(self) -> None:
        # every check in one chained test first (one observation per decision), the
        # checks one by one only to word what failed
        inf, n = math.inf, self.max_nodes
        if (
            1 <= self.min_nodes <= n
            and len(self.throughput_samples_per_s) == n + 1 == len(self.statistical_efficiency)
            and self.spot_available >= 0
            and self.spot_held >= 0
            and self.on_demand_held >= 0
            and 0.0 <= self.progress <= 1.0
            and 0.0 <= self.spot_price_per_hour < inf
            and self.on_demand_price_per_hour >= 0
            and 0.0 <= self.rescale_cost_s < inf
            and (self.resume_cost_s is None or 0.0 <= self.resume_cost_s < inf)
            and 0.0 <= self.spent_usd < inf
            and 0.0 <= self.on_demand_spent_usd <= self.spent_usd
            and self.checkpoint_interval_s > 0
            and 0.0 <= self.checkpoint_write_s < inf
            and (not self.zones or 0 <= self.zone < len(self.zones))
            and 0.0 <= self.zone_move_s < inf
        ):
            return
        self._check_one_by_one()

    def _check_one_by_one(self) -> None:
        """Each rule in turn, raising the first one broken in its own words."""
        if self.min_nodes < 1 or self.max_nodes < self.min_nodes:
            raise ValueError(
                f"need 1 <= min_nodes <= max_nodes, got {self.min_nodes}, {self.max_nodes}"
            )
        if len(self.throughput_samples_per_s) != self.max_nodes + 1:
            raise ValueError("throughput_samples_per_s must have max_nodes + 1 entries")
        if len(self.statistical_efficiency) != self.max_nodes + 1:
            raise ValueError("statistical_efficiency must have max_nodes + 1 entries")
        for name in ("spot_available", "spot_held", "on_demand_held"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0.0 <= self.progress <= 1.0:
            raise ValueError(f"progress must be within [0, 1], got {self.progress!r}")
        if not (math.isfinite(self.spot_price_per_hour) and self.spot_price_per_hour >= 0):
            raise ValueError("spot_price_per_hour must be a finite number >= 0")
        if not self.on_demand_price_per_hour >= 0:  # inf allowed: not offered
            raise ValueError("on_demand_price_per_hour must be >= 0 (inf: not offered)")
        if not (math.isfinite(self.rescale_cost_s) and self.rescale_cost_s >= 0):
            raise ValueError("rescale_cost_s must be a finite number >= 0")
        if self.resume_cost_s is not None and not (
            math.isfinite(self.resume_cost_s) and self.resume_cost_s >= 0
        ):
            raise ValueError("resume_cost_s must be a finite number >= 0 or None")
        if not (math.isfinite(self.spent_usd) and self.spent_usd >= 0):
            raise ValueError("spent_usd must be a finite number >= 0")
        if not 0.0 <= self.on_demand_spent_usd <= self.spent_usd:
            raise ValueError("on_demand_spent_usd must be within [0, spent_usd]")
        if not self.checkpoint_interval_s > 0:
            raise ValueError("checkpoint_interval_s must be > 0 (inf: no checkpoints)")
        if not (math.isfinite(self.checkpoint_write_s) and self.checkpoint_write_s >= 0):
            raise ValueError("checkpoint_write_s must be a finite number >= 0")
        if self.zones and not 0 <= self.zone < len(self.zones):
            raise ValueError(f"zone must index zones (0 to {len(self.zones) - 1}): {self.zone}")
        if not (math.isfinite(self.zone_move_s) and self.zone_move_s >= 0):
            raise ValueError("zone_move_s must be a finite number >= 0")

    @property
    def nodes_held(self) -> int:
        """Spot plus on-demand nodes held now."""
        return self.spot_held + self.on_demand_held

    @property
    def time_left_s(self) -> float | None:
        """Seconds to the deadline (may be negative), or None without a deadline."""
        return None if self.deadline_s is None else self.deadline_s - self.now_s

    @property
    def training_share(self) -> float:
        """Share of running time that trains: the rest writes periodic checkpoints."""
        interval = self.checkpoint_interval_s
        if math.isinf(interval):
            return 1.0
        return interval / (interval + self.checkpoint_write_s)

    @property
    def worst_pause_s(self) -> float:
        """The larger of the planned-rescale and resume-from-nothing estimates."""
        if self.resume_cost_s is None:
            return self.rescale_cost_s
        return max(self.rescale_cost_s, self.resume_cost_s)

    def goodput(self, nodes: int) -> float:
        """Effective samples per second on ``nodes`` nodes (0 outside the legal range)."""
        if nodes < self.min_nodes or nodes > self.max_nodes:
            return 0.0
        return self.throughput_samples_per_s[nodes] * self.statistical_efficiency[nodes]


@quick_init
@dataclass(frozen=True)
class Decision:
    """What a policy wants: node counts to hold, and when to be asked again.

    Attributes:
        spot_nodes: spot nodes to hold (the driver never grants more than available).
        on_demand_nodes: on-demand nodes to hold (always obtainable, at a higher price).
        wake_after_s: ask again after this many seconds even if nothing changes;
            None means "only when something changes" (capacity, price, an event).
        zone: the zone to hold the nodes in (an index into
            :attr:`Observation.zones`); None: the current one.  Another zone is a
            move: every node is released, the checkpoint moves for
            ``zone_move_s`` with no nodes held, and the job starts again there.
    """

    spot_nodes: int
    on_demand_nodes: int = 0
    wake_after_s: float | None = None
    zone: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.spot_nodes, int) or not isinstance(self.on_demand_nodes, int):
            raise TypeError("node counts must be ints")
        if self.spot_nodes < 0 or self.on_demand_nodes < 0:
            raise ValueError("node counts must be >= 0")
        if self.wake_after_s is not None and not (
            math.isfinite(self.wake_after_s) and self.wake_after_s > 0
        ):
            raise ValueError("wake_after_s must be a finite number > 0 or None")
        if self.zone is not None and (not isinstance(self.zone, int) or self.zone < 0):
            raise ValueError(f"zone must be an index >= 0 or None, got {self.zone!r}")

    def __repr__(self) -> str:
        # without a zone, the repr from before zones existed: decision logs pinned by
        # their repr (tests/test_pinned_results.py) stay byte for byte
        zone = "" if self.zone is None else f", zone={self.zone!r}"
        return (
            f"Decision(spot_nodes={self.spot_nodes!r}, on_demand_nodes="
            f"{self.on_demand_nodes!r}, wake_after_s={self.wake_after_s!r}{zone})"
        )

    @property
    def total_nodes(self) -> int:
        """Spot plus on-demand nodes asked for."""
        return self.spot_nodes + self.on_demand_nodes


def clamp(decision: Decision, obs: Observation) -> Decision:
    """The one validation both drivers apply to every decision.

    Spot nodes are capped at what is available and at ``max_nodes``; on-demand nodes
    fill at most the rest up to ``max_nodes``.  A total below ``min_nodes`` cannot run,
    so it is turned into "hold nothing" rather than paying for idle nodes.  A zone
    caps spot nodes at that zone's availability; the current zone, or one the run
    does not have, is None (stay).
    """
    zone = decision.zone
    available = obs.spot_available
    if zone is not None:
        if zone == obs.zone or zone >= len(obs.zones):
            zone = None
        else:
            available = obs.zones[zone].spot_available
    spot = min(decision.spot_nodes, available, obs.max_nodes)
    on_demand = min(decision.on_demand_nodes, obs.max_nodes - spot)
    if spot + on_demand < obs.min_nodes:
        spot, on_demand = 0, 0
    if (
        spot == decision.spot_nodes
        and on_demand == decision.on_demand_nodes
        and zone == decision.zone
    ):
        return decision
    return Decision(spot, on_demand, decision.wake_after_s, zone)


@runtime_checkable
class Policy(Protocol):
    """A scaling policy: a pure function of the observations so far and its config.

    A policy does no I/O, holds no handle to its environment and never learns whether
    it is simulated.  It may keep internal state (say, when extra capacity was first
    seen); two fresh instances with equal configs fed equal observations must return
    equal decisions.
    """

    name: ClassVar[str]

    def decide(self, obs: Observation) -> Decision:
        """Return the node counts to hold from now on."""
        ...


@dataclass(frozen=True)
class _EmptyConfig:
    """Placeholder config for policies without options."""


class ConfiguredPolicy:
    """What every policy base shares, job or cluster: a validated ``Config`` and ``name``.

    Subclasses define ``name: ClassVar[str]`` and a nested frozen dataclass ``Config``
    (validating itself in ``__post_init__``); one place for both kinds, so that their
    construction and ``repr`` cannot drift apart.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type] = _EmptyConfig

    def __init__(self, config: object | None = None) -> None:
        if config is None:
            config = self.Config()
        if not isinstance(config, self.Config):
            raise TypeError(f"{type(self).__name__} needs a {self.Config.__name__}, got {config!r}")
        self.config = config

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


class PolicyBase(ConfiguredPolicy):
    """Convenience base class of job policies: a validated ``Config``, ``name``, ``decide``.

    Subclasses define ``name: ClassVar[str]``, a nested frozen dataclass ``Config``
    (validating itself in ``__post_init__``) and ``decide``.

    Attributes:
        plans_for_deadline: the policy spends a deadline's slack (and without one holds
            every usable spot node, as ``greedy``): the CLI says so when none is given.
        moves_between_zones: the policy may move; the CLI warns when one that does
            not is given several zones.
    """

    plans_for_deadline: ClassVar[bool] = False
    moves_between_zones: ClassVar[bool] = False

    def decide(self, obs: Observation) -> Decision:  # pragma: no cover - abstract
        """Return the node counts to hold from now on."""
        raise NotImplementedError


@quick_init
@dataclass(frozen=True)
class DecisionRecord:
    """One turn of the observe -> decide -> apply loop, as both drivers log it.

    The simulator's driver and the executor's controller each keep a tuple of these;
    the parity test compares the two logs for the same trace and policy.

    Attributes:
        time_s: environment (trace) time of the decision.
        spot_available: spot nodes available when deciding.
        spot_held: spot nodes held when deciding.
        on_demand_held: on-demand nodes held when deciding.
        decision: the clamped decision that was applied.
    """

    time_s: float
    spot_available: int
    spot_held: int
    on_demand_held: int
    decision: Decision


@quick_init
@dataclass(frozen=True)
class EventRecord:
    """One row of ``events.parquet``: the record both environments write.

    Attributes:
        time_s: when it happened (simulator: trace seconds; executor: trace seconds too,
            i.e. real seconds times the time scale).
        kind: what happened.
        nodes_before: nodes held before.
        nodes_after: nodes held after.
        pause: the pause the survivors saw, split into components.
        lost_samples: samples of work thrown away (rolled back or in flight).
        lost_work_h: the lost samples expressed as job wall-clock hours.
        lost_steps: optimizer steps thrown away (the executor logs it; the simulator
            derives it from the step size).
    """

    time_s: float
    kind: EventKind
    nodes_before: int
    nodes_after: int
    pause: PauseComponents = PauseComponents()
    lost_samples: float = 0.0
    lost_work_h: float = 0.0
    lost_steps: int = 0

    @property
    def pause_s(self) -> float:
        """Total pause of this event."""
        return self.pause.pause_s

    def as_row(self) -> dict[str, object]:
        """Flat ``{column: value}`` for a table with the shared column names."""
        row: dict[str, object] = {
            "time_s": float(self.time_s),
            "kind": self.kind.value,
            "nodes_before": int(self.nodes_before),
            "nodes_after": int(self.nodes_after),
            "pause_s": float(self.pause_s),
            "lost_work_h": float(self.lost_work_h),
            "lost_samples": float(self.lost_samples),
            "lost_steps": int(self.lost_steps),
        }
        row.update(self.pause.as_dict())
        return row


#: Column order of ``events.parquet`` in both environments.
EVENT_COLUMNS: tuple[str, ...] = (
    "time_s",
    "kind",
    "nodes_before",
    "nodes_after",
    "pause_s",
    "lost_work_h",
    "lost_samples",
    "lost_steps",
    *PAUSE_COMPONENTS,
)
