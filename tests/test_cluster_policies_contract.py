"""The contract every registered cluster policy keeps, on generated observations.

Parametrized over the cluster registry, so a new cluster policy is covered without
touching this file: ``decide`` returns a :class:`ClusterDecision` that allocates only
to active jobs, never more GPUs on a node than it has, with batch sizes >= 0 and a
positive wake-up or none; it is deterministic and leaves the observation untouched;
its ``Config`` is a frozen dataclass that constructs with defaults.  Rigid policies
give a job the GPUs it asks for, what it already holds, or none.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasim.policies import policy_names
from elasim.policies.cluster import (
    ClusterDecision,
    ClusterJobView,
    ClusterObservation,
    JobSpeed,
    place,
)
from elasim.policies.registry import (
    CLUSTER_KIND,
    PolicyLoadError,
    get_policy_class,
    make_policy,
    register_cluster,
)

CLUSTER_POLICIES = policy_names(kind=CLUSTER_KIND)
RIGID = {"fifo", "tiresias"}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class FakeSpeed:
    """A concave speed model: ``a * n / (1 + b * (n - 1)) * node penalty``."""

    def __init__(self, a: float, b: float, spread: float) -> None:
        self.a, self.b, self.spread = a, b, spread

    def goodput(self, nodes: int, gpus: int, batch_size: int | None = None) -> float:
        if gpus <= 0:
            return 0.0
        return self.a * gpus / (1 + self.b * (gpus - 1)) / (1 + self.spread * (nodes - 1))

    def best_batch(self, nodes: int, gpus: int) -> int:
        return 128 * max(gpus, 1)


@st.composite
def observations(draw: st.DrawFn) -> ClusterObservation:
    num_nodes = draw(st.integers(1, 8))
    gpn = draw(st.integers(1, 4))
    available = draw(st.none() | st.integers(0, num_nodes))
    usable = num_nodes if available is None else available
    total = usable * gpn
    now = draw(st.floats(0.0, 1e5))
    count = draw(st.integers(0, 12))
    raw = []
    for i in range(count):
        raw.append(
            ClusterJobView(
                name=f"job-{i}",
                application=draw(st.sampled_from(["cifar10", "bert"])),
                arrival_s=draw(st.floats(0.0, now)),
                requested_gpus=draw(st.integers(1, max(2 * total, 1))),
                requested_batch_size=draw(st.integers(1, 4096)),
                max_gpus=draw(st.integers(1, 64)),
                placement=(),
                batch_size=128,
                attained_gpu_s=draw(st.floats(0.0, 1e6)),
                running_s=draw(st.floats(0.0, 1e5)),
                progress=draw(st.floats(0.0, 0.99)),
                remaining=draw(st.floats(1e-3, 1e5)),
                epoch=draw(st.integers(0, 50)),
                restarts=draw(st.integers(0, 20)),
                peak_gpus=draw(st.integers(0, 16)),
                speed=FakeSpeed(
                    draw(st.floats(0.1, 100.0)), draw(st.floats(0.0, 1.0)), draw(st.floats(0, 1))
                ),
            )
        )
    # some jobs already hold GPUs: a feasible current allocation
    held: dict[str, int] = {}
    free = total
    for job in raw:
        want = draw(st.integers(0, max(free, 0)))
        if want:
            held[job.name] = want
            free -= want
    placed = place(raw, held, usable, gpn)
    jobs = tuple(
        dataclasses.replace(j, placement=placed.get(j.name, ()))
        for j in sorted(raw, key=lambda j: (j.arrival_s, j.name))
    )
    return ClusterObservation(
        now, num_nodes, gpn, jobs, rescale_cost_s=draw(st.floats(0, 60)), available_nodes=available
    )


def check(decision: object, obs: ClusterObservation) -> None:
    assert isinstance(decision, ClusterDecision)
    active = {j.name for j in obs.jobs}
    used = [0] * obs.num_nodes
    names = [name for name, _ in decision.allocations]
    assert len(names) == len(set(names))
    for name, placement in decision.allocations:
        assert name in active
        for node, gpus in placement:
            assert 0 <= node < obs.usable_nodes and isinstance(gpus, int) and gpus > 0
            used[node] += gpus
    assert all(u <= obs.gpus_per_node for u in used)
    for name, batch in decision.batch_sizes:
        assert name in active and isinstance(batch, int) and batch >= 0
    assert decision.wake_after_s is None or decision.wake_after_s > 0


def test_the_built_ins_are_registered() -> None:
    assert {"fifo", "tiresias", "optimus", "pollux", "srtf"} <= set(CLUSTER_POLICIES)
    # one machinery, separate tables: a cluster name is not a job policy, and back
    assert "pollux" not in policy_names()
    with pytest.raises(PolicyLoadError, match="unknown cluster policy 'greedy'"):
        get_policy_class("greedy", CLUSTER_KIND)


@pytest.mark.parametrize("name", CLUSTER_POLICIES)
@SETTINGS
@given(obs=observations())
def test_contract(name: str, obs: ClusterObservation) -> None:
    before = copy.deepcopy(obs)
    one = make_policy(name, kind=CLUSTER_KIND).decide(obs)
    two = make_policy(name, kind=CLUSTER_KIND).decide(obs)
    check(one, obs)
    assert one == two
    assert obs == before
    if name in RIGID:
        total = obs.total_gpus
        wants = {j.name: min(j.requested_gpus, total) for j in obs.jobs}
        held = {j.name: j.gpus for j in obs.jobs}
        for job, placement in one.allocations:
            # what it asks for, or (a job never moved, such as under fifo) what it holds
            assert sum(g for _, g in placement) in (wants[job], held[job])


@pytest.mark.parametrize("name", CLUSTER_POLICIES)
def test_config_is_a_frozen_documented_dataclass(name: str) -> None:
    cls = get_policy_class(name, CLUSTER_KIND)
    config = cls.Config()
    assert dataclasses.is_dataclass(config)
    fields = dataclasses.fields(config)
    if fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(config, fields[0].name, getattr(config, fields[0].name))
        for f in fields:
            assert f.name in (cls.Config.__doc__ or ""), f"{name}: {f.name} undocumented"


def test_elastic_policies_fill_an_idle_cluster() -> None:
    speed = FakeSpeed(1.0, 0.0, 0.0)  # linear: every GPU pays
    jobs = tuple(
        ClusterJobView(
            f"j{i}", "cifar10", 0.0, 1, 128, 64, (), 128, 0.0, 0.0, 0.0, 10.0, 0, 0, 8, speed
        )
        for i in range(3)
    )
    obs = ClusterObservation(100.0, 4, 4, jobs)
    for name in ("optimus", "pollux", "srtf"):
        decision = make_policy(name, kind=CLUSTER_KIND).decide(obs)
        check(decision, obs)
        used = sum(g for _, p in decision.allocations for _, g in p)
        assert used == 16, name


def test_speed_protocol_is_runtime_checkable() -> None:
    assert isinstance(FakeSpeed(1, 0, 0), JobSpeed)


def test_plugins_from_a_file_and_duplicate_names(tmp_path: Path) -> None:
    plugin = tmp_path / "mine.py"
    plugin.write_text(
        "from elasim.policies.cluster import ClusterDecision\n"
        "class Idle:\n"
        "    name = 'idle'\n"
        "    def decide(self, obs):\n"
        "        return ClusterDecision(wake_after_s=math.inf)\n"
        "import math\n"
    )
    policy = make_policy(f"{plugin}:Idle", kind=CLUSTER_KIND)
    assert policy.decide(ClusterObservation(0.0, 1, 1, ())).wake_after_s == math.inf

    class Fifo2:
        name = "fifo"

        def decide(self, obs):  # pragma: no cover - never called
            return ClusterDecision()

    with pytest.raises(ValueError, match="cluster policy name 'fifo' is already registered"):
        register_cluster(Fifo2)


def test_entry_point_group_of_cluster_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    from elasim.policies import registry

    state = registry._State(policies=dict(registry._cluster_state.policies))
    monkeypatch.setattr(registry, "_cluster_state", state)
    groups: list[str] = []

    class FakeEntryPoint:
        name = "from-ep"
        value = "somewhere:Idle"

        def load(self) -> type:
            class Idle:
                name = "from-ep"

                def decide(self, obs):
                    return ClusterDecision()

            return Idle

    def fake_entry_points(group: str) -> list[object]:
        groups.append(group)
        return [FakeEntryPoint()] if group == "elasim.cluster_policies" else []

    monkeypatch.setattr(registry.importlib.metadata, "entry_points", fake_entry_points)
    policy = make_policy("from-ep", kind=CLUSTER_KIND)
    assert policy.decide(ClusterObservation(0.0, 1, 1, ())) == ClusterDecision()
    assert groups == ["elasim.cluster_policies"]
    assert "from-ep" in policy_names(kind=CLUSTER_KIND)


@SETTINGS
@given(obs=observations(), data=st.data())
def test_place_honours_counts_and_keeps_unchanged_jobs(obs: ClusterObservation, data) -> None:
    total = obs.total_gpus
    counts: dict[str, int] = {}
    free = total
    for job in obs.jobs:
        n = data.draw(st.integers(0, free))
        counts[job.name] = n
        free -= n
    placed = place(obs.jobs, counts, obs.usable_nodes, obs.gpus_per_node)
    used = [0] * obs.num_nodes
    for job in obs.jobs:
        placement = placed.get(job.name, ())
        assert sum(g for _, g in placement) == counts[job.name]
        for node, gpus in placement:
            used[node] += gpus
    assert all(u <= obs.gpus_per_node for u in used)
    # a job whose count is unchanged keeps its placement when nothing forces a move
    kept = [j for j in obs.jobs if j.gpus and counts[j.name] == j.gpus]
    if all(counts[j.name] in (0, j.gpus) for j in obs.jobs):
        for job in kept:
            assert placed[job.name] == job.placement
    with pytest.raises(ValueError):
        place(obs.jobs, {"x": total + 1}, obs.usable_nodes, obs.gpus_per_node)


def test_place_moves_a_job_whose_nodes_are_gone_or_taken() -> None:
    """A placement is kept only where its nodes are usable and have the room left.

    Kept placements never overlap in a loop's own state, so only a helper called on
    odd views (a plugin's) or a lost node meets these cases; each is moved, not kept.
    """

    def view(name: str, placement: tuple) -> ClusterJobView:
        gpus = sum(g for _, g in placement)
        return ClusterJobView(
            name, "app", 0.0, gpus, 64, 8, placement, 64, 0.0, 0.0, 0.0, 1.0, 0, 0
        )

    jobs = [
        view("a", ((0, 4),)),
        view("b", ((0, 4),)),  # node 0 is a's by now
        view("c", ((5, 2),)),  # node 5 is not usable
        view("d", ((0, 2), (1, 2))),  # node 0 is full; two cells take the other path
    ]
    placed = place(jobs, {"a": 4, "b": 4, "c": 2, "d": 4}, 4, 4)
    assert placed == {"a": ((0, 4),), "b": ((1, 4),), "d": ((2, 4),), "c": ((3, 2),)}


class BatchRecordingSpeed(FakeSpeed):
    """:class:`FakeSpeed` that notes the batch every goodput was asked at."""

    def __init__(self) -> None:
        super().__init__(1.0, 0.1, 0.0)
        self.asked: set[int | None] = set()

    def goodput(self, nodes: int, gpus: int, batch_size: int | None = None) -> float:
        self.asked.add(batch_size)
        return super().goodput(nodes, gpus, batch_size)


@pytest.mark.parametrize("adapt", [True, False])
def test_pollux_adapts_batches_unless_told_to_keep_them(adapt: bool) -> None:
    """``adapt_batch=false``: no batch sent (each job keeps its request), goodput at it."""
    speeds = [BatchRecordingSpeed() for _ in range(3)]
    jobs = tuple(
        ClusterJobView(
            f"j{i}", "cifar10", 0.0, 1, 96 + i, 64, (), 96 + i, 0.0, 0.0, 0.0, 10.0, 0, 0, 8, s
        )
        for i, s in enumerate(speeds)
    )
    obs = ClusterObservation(100.0, 2, 4, jobs)
    options = {} if adapt else {"adapt_batch": "false"}
    decision = make_policy("pollux", kind=CLUSTER_KIND, options=options).decide(obs)
    check(decision, obs)
    assert len(decision.allocations) == 3
    if adapt:
        assert decision.batch_map() == {f"j{i}": 0 for i in range(3)}
        assert all(s.asked == {None} for s in speeds)
    else:
        assert decision.batch_sizes == ()
        assert [s.asked for s in speeds] == [{96}, {97}, {98}]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obs=observations())
def test_pollux_fixed_batch_keeps_the_contract(obs: ClusterObservation) -> None:
    policy = make_policy("pollux", kind=CLUSTER_KIND, options={"adapt_batch": "false"})
    decision = policy.decide(obs)
    check(decision, obs)
    assert decision.batch_sizes == ()
