"""The policy registry: names, files, modules, entry points, options, descriptions."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from elasim.policies import (
    Decision,
    GreedyPolicy,
    HysteresisPolicy,
    Observation,
    PolicyBase,
    PolicyConfigError,
    PolicyLoadError,
    describe_policies,
    get_policy_class,
    make_policy,
    options,
    policy_names,
    register,
    registry,
)

BUILTINS = ["deadline", "fixed", "goodput", "greedy", "hysteresis", "price"]

USER_POLICY = '''
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from elasim.policies import Decision, Observation, PolicyBase


class MyPolicy(PolicyBase):
    """Hold a fixed number of spot nodes (a test policy)."""

    name: ClassVar[str] = "{name}"

    @dataclass(frozen=True)
    class Config:
        """Options.

        Attributes:
            nodes: how many nodes.
            ratio: a float
                that continues on the next line.
            flag: a bool.
            label: an optional string.
            mode: a literal.
            seed: the seed.
        """

        nodes: int = 1
        ratio: float = 0.5
        flag: bool = False
        label: str | None = None
        mode: Literal["a", "b"] = "a"
        seed: int = 0

        def __post_init__(self) -> None:
            if self.nodes < 1:
                raise ValueError(f"nodes must be >= 1, got {{self.nodes}}")

    def decide(self, obs: Observation) -> Decision:
        return Decision(min(self.config.nodes, obs.spot_available))


class NotAPolicy:
    name: ClassVar[str] = "nope"


not_a_class = 3
'''


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[registry._State]:
    """A copy of the registry with the built-ins and no entry points discovered yet."""
    state = registry._State(policies=dict(registry._state.policies))
    monkeypatch.setattr(registry, "_state", state)
    yield state


@pytest.fixture
def no_entry_points(monkeypatch: pytest.MonkeyPatch, isolated_registry: registry._State) -> None:
    monkeypatch.setattr(registry.importlib.metadata, "entry_points", lambda group: [])


def write_policy(path: Path, name: str = "mine") -> Path:
    path.write_text(USER_POLICY.format(name=name), encoding="utf-8")
    return path


def small_obs() -> Observation:
    return Observation(
        now_s=0.0,
        spot_available=3,
        spot_held=0,
        on_demand_held=0,
        spot_price_per_hour=1.0,
        on_demand_price_per_hour=3.0,
        progress=0.0,
        remaining_samples=1.0,
        throughput_samples_per_s=(0.0, 1.0, 2.0, 3.0, 4.0),
        statistical_efficiency=(1.0,) * 5,
        rescale_cost_s=1.0,
        deadline_s=None,
        min_nodes=1,
        max_nodes=4,
    )


# ------------------------------------------------------------------------ register


def test_builtins_are_listed_sorted() -> None:
    assert [n for n in policy_names() if n in BUILTINS] == BUILTINS


def test_duplicate_name_raises(isolated_registry: registry._State) -> None:
    class Impostor(PolicyBase):
        name: ClassVar[str] = "greedy"

        def decide(self, obs: Observation) -> Decision:
            return Decision(0)

    with pytest.raises(ValueError, match="'greedy' is already registered by .*GreedyPolicy"):
        register(Impostor)
    assert get_policy_class("greedy") is GreedyPolicy


def test_registering_the_same_class_twice_is_a_no_op(isolated_registry: registry._State) -> None:
    assert register(GreedyPolicy) is GreedyPolicy
    assert get_policy_class("greedy") is GreedyPolicy


@pytest.mark.parametrize("bad_name", ["", "a:b", "a/b", None, 3])
def test_register_rejects_bad_names(isolated_registry: registry._State, bad_name: object) -> None:
    cls = type("P", (), {"name": bad_name, "decide": lambda self, obs: Decision(0)})
    with pytest.raises(ValueError, match="'name'"):
        register(cls)


def test_register_rejects_classes_without_decide(isolated_registry: registry._State) -> None:
    with pytest.raises(ValueError, match="no decide"):
        register(type("P", (), {"name": "p"}))


def test_unknown_name_lists_known_names(no_entry_points: None) -> None:
    with pytest.raises(PolicyLoadError) as excinfo:
        get_policy_class("greedyy")
    message = str(excinfo.value)
    assert "unknown policy 'greedyy'" in message
    for name in BUILTINS:
        assert name in message
    assert "\n" not in message
    assert isinstance(excinfo.value, ValueError)


# ---------------------------------------------------------------------- from files


def test_load_from_file_without_registering(tmp_path: Path, no_entry_points: None) -> None:
    path = write_policy(tmp_path / "my_policy.py")
    cls = get_policy_class(f"{path}:MyPolicy")
    assert cls.__name__ == "MyPolicy"
    assert "mine" not in policy_names()
    assert "my_policy" not in sys.modules
    # Same file twice -> the same class object (one module).
    assert get_policy_class(f"{path}:MyPolicy") is cls
    policy = make_policy(f"{path}:MyPolicy", {"nodes": "2"})
    assert policy.decide(small_obs()) == Decision(2)


def test_load_from_relative_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_policy(tmp_path / "rel.py")
    monkeypatch.chdir(tmp_path)
    assert get_policy_class("rel.py:MyPolicy").__name__ == "MyPolicy"


def test_file_named_like_a_stdlib_module_does_not_shadow_it(tmp_path: Path) -> None:
    import json

    path = write_policy(tmp_path / "json.py")
    cls = get_policy_class(f"{path}:MyPolicy")
    assert sys.modules["json"] is json
    assert cls.__module__ != "json"
    assert cls.__module__.startswith("_elasim_user_policy_json_")


def test_two_files_with_the_same_name_stay_apart(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = get_policy_class(f"{write_policy(tmp_path / 'a' / 'p.py', 'one')}:MyPolicy")
    second = get_policy_class(f"{write_policy(tmp_path / 'b' / 'p.py', 'two')}:MyPolicy")
    assert (first.name, second.name) == ("one", "two")


@pytest.mark.parametrize(
    ("spec_suffix", "fragment"),
    [
        ("missing.py:MyPolicy", "no such policy file"),
        ("my_policy.py:Absent", "has no attribute 'Absent'"),
        ("my_policy.py:NotAPolicy", "no decide"),
        ("my_policy.py:not_a_class", "not a class"),
        ("my_policy.py", "names a file but no class"),
        ("broken.py:MyPolicy", "broken.py:3:"),
        ("raises.py:MyPolicy", "raises.py:1: error while importing: RuntimeError: boom"),
    ],
)
def test_file_load_errors_are_one_line(tmp_path: Path, spec_suffix: str, fragment: str) -> None:
    write_policy(tmp_path / "my_policy.py")
    (tmp_path / "broken.py").write_text("x = 1\n\ndef f(:\n", encoding="utf-8")
    (tmp_path / "raises.py").write_text("raise RuntimeError('boom')\n", encoding="utf-8")
    modules_before = set(sys.modules)
    with pytest.raises(PolicyLoadError) as excinfo:
        get_policy_class(f"{tmp_path}/{spec_suffix}")
    assert fragment in str(excinfo.value)
    assert "\n" not in str(excinfo.value)
    # A failed import leaves no half-initialised module behind.
    assert not {m for m in set(sys.modules) - modules_before if "broken" in m or "raises" in m}


# -------------------------------------------------------------------- from modules


@pytest.fixture
def user_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    package = tmp_path / "elasim_test_userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    write_policy(package / "mod.py", name="plugged")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "elasim_test_userpkg"
    for name in [m for m in sys.modules if m.startswith("elasim_test_userpkg")]:
        del sys.modules[name]


def test_load_from_module(user_package: str, no_entry_points: None) -> None:
    cls = get_policy_class(f"{user_package}.mod:MyPolicy")
    assert cls.name == "plugged"
    assert "plugged" not in policy_names()


def test_load_from_missing_module() -> None:
    with pytest.raises(PolicyLoadError, match="cannot import module 'no_such_pkg_xyz.mod'"):
        get_policy_class("no_such_pkg_xyz.mod:Policy")


# --------------------------------------------------------------- from entry points


def make_distribution(tmp_path: Path, entry_points: str) -> None:
    dist = tmp_path / "elasim_test_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: elasim-test-plugin\nVersion: 0.1\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        "[elasim.policies]\n" + textwrap.dedent(entry_points), encoding="utf-8"
    )


def test_entry_points_are_loaded_lazily(
    tmp_path: Path, user_package: str, isolated_registry: registry._State
) -> None:
    make_distribution(
        tmp_path,
        f"""\
        plugged = {user_package}.mod:MyPolicy
        missing = {user_package}.nothing_here:Policy
        misnamed = {user_package}.mod:MyPolicy
        """,
    )
    # A built-in name never touches entry points.
    assert get_policy_class("greedy") is GreedyPolicy
    assert not isolated_registry.discovered
    assert f"{user_package}.mod" not in sys.modules

    cls = get_policy_class("plugged")
    assert cls.name == "plugged"
    assert isolated_registry.discovered
    assert "missing" in isolated_registry.pending  # not imported yet
    assert make_policy("plugged", {"nodes": 3}).decide(small_obs()) == Decision(3)

    with pytest.raises(PolicyLoadError, match="entry point 'missing'.*cannot be loaded"):
        get_policy_class("missing")
    with pytest.raises(PolicyLoadError, match="named 'plugged'; the entry point must use"):
        get_policy_class("misnamed")
    # Broken plug-ins do not break listing; they are reported by describe_policies.
    assert "plugged" in policy_names()
    assert "missing" not in policy_names()
    summaries = {info.name: info.summary for info in describe_policies()}
    assert summaries["missing"].startswith("failed to load: entry point 'missing'")
    assert summaries["plugged"] == "Hold a fixed number of spot nodes (a test policy)."


def test_entry_point_discovery_happens_once(
    monkeypatch: pytest.MonkeyPatch, isolated_registry: registry._State
) -> None:
    calls = []

    def fake_entry_points(group: str) -> list[object]:
        calls.append(group)
        return []

    monkeypatch.setattr(registry.importlib.metadata, "entry_points", fake_entry_points)
    policy_names()
    policy_names()
    with pytest.raises(PolicyLoadError):
        get_policy_class("absent")
    assert calls == ["elasim.policies"]


# --------------------------------------------------------------------- make_policy


def test_make_policy_parses_strings_to_field_types(tmp_path: Path) -> None:
    path = write_policy(tmp_path / "typed.py")
    policy = make_policy(
        f"{path}:MyPolicy",
        {"nodes": " 4 ", "ratio": "1e-3", "flag": "Yes", "label": "none", "mode": "b"},
        seed=7,
    )
    config = policy.config  # type: ignore[attr-defined]
    assert (config.nodes, config.ratio, config.flag, config.label, config.mode) == (
        4,
        0.001,
        True,
        None,
        "b",
    )
    assert config.seed == 7
    assert make_policy(f"{path}:MyPolicy", {"label": "x", "seed": "3"}, seed=7).config.seed == 3
    native = make_policy(f"{path}:MyPolicy", {"nodes": 2, "ratio": 1, "flag": False})
    assert native.config.ratio == 1.0 and isinstance(native.config.ratio, float)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"nodez": "1"}, "has no option 'nodez'; its options are: flag, label, mode"),
        ({"nodes": "two"}, "option nodes: expected an integer, got 'two'"),
        ({"nodes": "1.5"}, "option nodes: expected an integer"),
        ({"nodes": True}, "option nodes: expected an integer"),
        ({"ratio": "fast"}, "option ratio: expected a number"),
        ({"flag": "maybe"}, "option flag: expected true or false"),
        ({"mode": "c"}, "option mode: expected one of a, b"),
        ({"nodes": "0"}, "nodes must be >= 1, got 0"),
    ],
)
def test_make_policy_option_errors(tmp_path: Path, options: dict, fragment: str) -> None:
    path = write_policy(tmp_path / "typed.py")
    with pytest.raises(PolicyConfigError) as excinfo:
        make_policy(f"{path}:MyPolicy", options)
    assert fragment in str(excinfo.value)
    assert "\n" not in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)


def test_make_policy_builtin_options() -> None:
    policy = make_policy("hysteresis", {"payback_factor": "2.5"})
    assert isinstance(policy, HysteresisPolicy)
    assert policy.config.payback_factor == 2.5
    assert make_policy("deadline", {"release_lead_s": "None"}).config.release_lead_s is None
    with pytest.raises(PolicyConfigError, match="policy 'price': max_price_per_hour must be > 0"):
        make_policy("price", {"max_price_per_hour": "-1"})
    with pytest.raises(PolicyConfigError, match="payback_factor must be finite"):
        make_policy("hysteresis", {"payback_factor": "nan"})


def test_make_policy_for_a_class_without_config(isolated_registry: registry._State) -> None:
    @register
    class Bare:
        name: ClassVar[str] = "bare"

        def decide(self, obs: Observation) -> Decision:
            return Decision(0)

    assert isinstance(make_policy("bare"), Bare)
    with pytest.raises(PolicyConfigError, match="policy 'bare' takes no options, got x"):
        make_policy("bare", {"x": "1"})


# ------------------------------------------------------------------------ describe


def test_describe_policies_reads_types_defaults_and_docs(
    isolated_registry: registry._State,
) -> None:
    @register
    @dataclass
    class Described(PolicyBase):
        """First line is the summary.

        More text.
        """

        name: ClassVar[str] = "described"

        @dataclass(frozen=True)
        class Config:
            """Options.

            Attributes:
                alpha (float): the first
                    option, on two lines.
                beta: the second.

            Note:
                Not an attribute.
            """

            alpha: float = 0.5
            beta: int | None = None

        def decide(self, obs: Observation) -> Decision:
            return Decision(0)

    infos = {info.name: info for info in describe_policies()}
    info = infos["described"]
    assert info.summary == "First line is the summary."
    assert [(o.name, o.type_name, o.default, o.doc) for o in info.options] == [
        ("alpha", "float", 0.5, "the first option, on two lines."),
        ("beta", "int | None", None, "the second."),
    ]
    goodput = infos["goodput"]
    objective = next(o for o in goodput.options if o.name == "objective")
    assert objective.type_name == "{goodput_per_usd,goodput}"
    assert set(BUILTINS) <= set(infos)


def test_parse_attributes_section_stops_at_next_section() -> None:
    doc = """Summary.

    Attributes:
        a: one.
        b: two
            and more.
    Returns:
        c: not an attribute.
    """
    assert options.parse_attributes_section(doc) == {"a": "one.", "b": "two and more."}
