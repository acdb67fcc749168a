"""Find scaling policies by name, by file, by module or through entry points.

``--policy`` on the command line and the ``policy`` column of a sweep are strings; this
module turns such a string into a policy object, in one of four ways:

* a registered name (``greedy``): the built-ins register themselves on import with the
  :func:`register` decorator;
* ``path/to/file.py:ClassName``: a user's file, loaded without being registered.  It is
  imported under a private module name derived from its resolved path
  (``_elasim_user_policy_<stem>_<hash>``), so a file called ``json.py`` or
  ``policies.py`` never shadows a real module in ``sys.modules``.  The file's folder is
  *not* put on ``sys.path``: a policy that needs helpers should be a module or a package;
* ``package.module:ClassName``: an importable module;
* an entry point of the group ``elasim.policies`` (``name = "package.module:Class"``)
  declared by any installed distribution.  Entry points are discovered once, on the
  first look-up of a name that is not registered, and each is imported only when it is
  asked for (or when all names are listed), so a broken plug-in cannot break
  ``--policy greedy``.

:func:`make_policy` then builds the policy's ``Config`` from string options, as typed
after ``--set key=value``: each string is parsed to the type annotated on the dataclass
field (``int``, ``float``, ``bool``, ``str``, ``Literal[...]`` and ``X | None``) by
:mod:`elasim.policies.options`, which also describes the fields for ``elasim policies``
(:data:`REQUIRED` and :class:`OptionInfo` come from there and stay part of this
module's API, as :func:`describe_policies` returns them).

All errors are :class:`PolicyLoadError` or :class:`PolicyConfigError`, both
``ValueError`` subclasses with a one-line message, which the CLI prints as is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import re
import sys
import traceback
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .base import Policy
from .options import (
    REQUIRED,
    OptionInfo,
    config_type_hints,
    describe_options,
    parse_option,
)

__all__ = [
    "CLUSTER_ENTRY_POINT_GROUP",
    "CLUSTER_KIND",
    "ENTRY_POINT_GROUP",
    "POLICY_KIND",
    "RegistryKind",
    "REQUIRED",
    "OptionInfo",
    "PolicyConfigError",
    "PolicyInfo",
    "PolicyLoadError",
    "describe_policies",
    "get_policy_class",
    "is_oracle",
    "make_policy",
    "oracle_names",
    "policy_names",
    "register",
    "register_cluster",
]

logger = logging.getLogger(__name__)

#: The entry-point group through which installed distributions contribute policies.
ENTRY_POINT_GROUP = "elasim.policies"
#: The entry-point group through which installed distributions contribute cluster policies.
CLUSTER_ENTRY_POINT_GROUP = "elasim.cluster_policies"

#: Policy names are what users type; ``:`` and ``/`` would make them look like a path.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

#: Prefix of the private ``sys.modules`` names of policies loaded from files.
_FILE_MODULE_PREFIX = "_elasim_user_policy_"

_T = TypeVar("_T", bound=type)


class PolicyLoadError(ValueError):
    """A policy spec names nothing loadable: unknown name, bad file, bad class."""


class PolicyConfigError(ValueError):
    """A policy option is unknown, cannot be parsed, or its ``Config`` rejects it."""


@dataclass(frozen=True)
class PolicyInfo:
    """A registered policy, as ``elasim policies`` lists it.

    Attributes:
        name: the registered name.
        summary: the first line of the class docstring (or the load error of a
            plug-in that could not be imported).
        options: the fields of its ``Config``, in declaration order.
    """

    name: str
    summary: str
    options: tuple[OptionInfo, ...]


@dataclass
class _State:
    """Everything the registry knows; one module-level instance (tests swap it).

    Attributes:
        policies: registered name -> class.
        discovered: whether entry points have been enumerated.
        pending: entry points found but not imported yet, by name.
        errors: one-line load errors of entry points, by name.
    """

    policies: dict[str, type] = field(default_factory=dict)
    discovered: bool = False
    pending: dict[str, importlib.metadata.EntryPoint] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


_state = _State()
_cluster_state = _State()


@dataclass(frozen=True)
class RegistryKind:
    """One kind of policy: its own registry and entry-point group, the same machinery.

    Job scaling policies (``decide(Observation) -> Decision``) and cluster policies
    (``decide(ClusterObservation) -> ClusterDecision``) are looked up, configured with
    ``--set`` and loaded from files or entry points in exactly the same way; only the
    table of names and the entry-point group differ, so a name means one thing per kind.

    Attributes:
        label: what error messages call it (``policy``, ``cluster policy``).
        group: the entry-point group of installed plug-ins.
        state_attr: the module global holding its :class:`_State` (looked up at each
            call, so tests can swap it).
    """

    label: str
    group: str
    state_attr: str

    @property
    def state(self) -> _State:
        """The registry of this kind (looked up now, so a swapped one is seen)."""
        return globals()[self.state_attr]


#: Job scaling policies (``elasim simulate --policy``).
POLICY_KIND = RegistryKind("policy", ENTRY_POINT_GROUP, "_state")
#: Cluster policies (``elasim cluster simulate --policy``).
CLUSTER_KIND = RegistryKind("cluster policy", CLUSTER_ENTRY_POINT_GROUP, "_cluster_state")


# ------------------------------------------------------------------------ register


def _check_policy_class(cls: object, what: str) -> str:
    """Return the policy name of ``cls``, or explain in one line why it is not a policy.

    Raises:
        PolicyLoadError: ``cls`` is not a class, has no callable ``decide`` or no
            valid ``name``.
    """
    if not isinstance(cls, type):
        raise PolicyLoadError(f"{what} is not a class but {type(cls).__name__}")
    if not callable(getattr(cls, "decide", None)):
        raise PolicyLoadError(
            f"{what} is not a policy: it has no decide(obs) method (see elasim.policies.Policy)"
        )
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise PolicyLoadError(
            f"{what} is not a policy: its class attribute 'name' must be a non-empty string "
            f"of letters, digits, '_', '.', '-', got {name!r}"
        )
    return name


def register(cls: _T, *, kind: RegistryKind | None = None) -> _T:
    """Class decorator: make a policy findable by its ``name``.

    Registering the same class twice is a no-op (a module may be imported through two
    routes); a *different* class under a taken name is a mistake that would make
    results depend on import order, so it raises.

    Raises:
        ValueError: the name is taken by another class, or ``cls`` is not a policy.
    """
    try:
        name = _check_policy_class(cls, f"{getattr(cls, '__qualname__', cls)!r}")
    except PolicyLoadError as exc:
        raise ValueError(str(exc)) from None
    kind = kind or POLICY_KIND
    state = kind.state
    existing = state.policies.get(name)
    if existing is not None and existing is not cls:
        raise ValueError(
            f"{kind.label} name {name!r} is already registered by "
            f"{existing.__module__}.{existing.__qualname__}; "
            f"cannot register {cls.__module__}.{cls.__qualname__} under it"
        )
    state.policies[name] = cls
    return cls


def register_cluster(cls: _T) -> _T:
    """Class decorator: make a cluster policy findable by its ``name`` (see :func:`register`)."""
    return register(cls, kind=CLUSTER_KIND)


# -------------------------------------------------------------------- entry points


def _discover_entry_points(kind: RegistryKind) -> None:
    """Enumerate the ``elasim.policies`` entry points once, without importing them."""
    _state = kind.state
    if _state.discovered:
        return
    _state.discovered = True
    try:
        found = importlib.metadata.entry_points(group=kind.group)
    except Exception as exc:  # a corrupt installation must not break built-ins
        logger.warning("cannot list %s entry points: %s", kind.group, exc)
        return
    # Sorted, so a conflict is reported the same way whatever the sys.path order.
    for ep in sorted(found, key=lambda e: (e.name, e.value)):
        if ep.name in _state.policies:
            logger.debug("entry point %s = %s: name already registered", ep.name, ep.value)
            continue
        other = _state.pending.get(ep.name)
        if other is not None and other.value != ep.value:
            _state.errors[ep.name] = (
                f"entry point {ep.name!r} of group {kind.group} is declared twice, "
                f"as {other.value} and {ep.value}"
            )
            continue
        _state.pending[ep.name] = ep


def _load_entry_point(name: str, kind: RegistryKind) -> type:
    """Import the pending entry point ``name`` and register its class.

    Raises:
        PolicyLoadError: the import failed or the object is not a policy called ``name``.
    """
    _state = kind.state
    ep = _state.pending.pop(name)
    what = f"entry point {name!r} ({ep.value})"
    try:
        try:
            obj = ep.load()
        except Exception as exc:
            raise PolicyLoadError(f"{what} cannot be loaded: {_describe_exception(exc)}") from None
        policy_name = _check_policy_class(obj, what)
        if policy_name != name:
            raise PolicyLoadError(
                f"{what} is a policy named {policy_name!r}; the entry point must use that name"
            )
        try:
            register(obj, kind=kind)
        except ValueError as exc:
            raise PolicyLoadError(f"{what}: {exc}") from None
    except PolicyLoadError as exc:
        _state.errors[name] = str(exc)
        raise
    return obj


def _load_all_entry_points(kind: RegistryKind) -> None:
    """Import every pending entry point; failures are logged and remembered."""
    _discover_entry_points(kind)
    for name in sorted(kind.state.pending):
        try:
            _load_entry_point(name, kind)
        except PolicyLoadError as exc:
            logger.warning("%s", exc)


# ------------------------------------------------------------------------ look-ups


def is_oracle(policy: object) -> bool:
    """Whether a policy (class or instance) is an oracle: it needs the whole trace in advance.

    An oracle (``oracle = True`` on the class, like ``optimal``) is a yardstick, not a
    policy anyone can run live: sweeps and reports run it, live runs refuse it.
    """
    return bool(getattr(policy, "oracle", False))


def policy_names(*, include_oracles: bool = False, kind: RegistryKind | None = None) -> list[str]:
    """Sorted names of the registered policies, including loadable entry points.

    Args:
        include_oracles: also list oracles (see :func:`is_oracle`).  Off by default:
            "every policy" means every policy a user can run, live or simulated.
        kind: which registry (default: job scaling policies).
    """
    kind = kind or POLICY_KIND
    _load_all_entry_points(kind)
    return sorted(
        name for name, cls in kind.state.policies.items() if include_oracles or not is_oracle(cls)
    )


def oracle_names() -> list[str]:
    """Sorted names of the registered oracles (``optimal``)."""
    _load_all_entry_points(POLICY_KIND)
    return sorted(name for name, cls in _state.policies.items() if is_oracle(cls))


def get_policy_class(spec: str, kind: RegistryKind | None = None) -> type:
    """The policy class named by ``spec``.

    Args:
        spec: a registered or entry-point name (``greedy``),
            ``path/to/file.py:ClassName`` or ``package.module:ClassName``.
        kind: which registry (default: job scaling policies).

    Raises:
        PolicyLoadError: nothing loadable by that spec; the message lists the known
            names when ``spec`` is a plain name.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise PolicyLoadError(f"policy spec must be a non-empty string, got {spec!r}")
    spec = spec.strip()
    if ":" in spec:
        return _load_from_path_spec(spec)
    if spec.endswith(".py") or "/" in spec or "\\" in spec:
        raise PolicyLoadError(
            f"policy spec {spec!r} names a file but no class; use {spec}:ClassName"
        )
    kind = kind or POLICY_KIND
    _state = kind.state
    cls = _state.policies.get(spec)
    if cls is not None:
        return cls
    _discover_entry_points(kind)
    if spec in _state.pending:
        return _load_entry_point(spec, kind)
    if spec in _state.errors:
        raise PolicyLoadError(_state.errors[spec])
    known = ", ".join(sorted(set(_state.policies) | set(_state.pending))) or "(none)"
    raise PolicyLoadError(
        f"unknown {kind.label} {spec!r}; known {kind.label.replace('policy', 'policies')}: "
        f"{known}; "
        "or give path/to/file.py:ClassName or package.module:ClassName"
    )


def _load_from_path_spec(spec: str) -> type:
    """Load ``file.py:Class`` or ``module:Class`` (``Class`` may be dotted)."""
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise PolicyLoadError(
            f"policy spec {spec!r} must look like path/to/file.py:ClassName "
            "or package.module:ClassName"
        )
    is_file = where.endswith(".py") or "/" in where or "\\" in where
    module = _import_file(where) if is_file else _import_module(where)
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PolicyLoadError(f"{where} has no attribute {attr!r}") from None
    _check_policy_class(obj, spec)
    assert isinstance(obj, type)
    return obj


def _import_module(dotted: str) -> types.ModuleType:
    """Import ``dotted`` or raise a one-line :class:`PolicyLoadError`."""
    try:
        return importlib.import_module(dotted)
    except Exception as exc:
        raise PolicyLoadError(
            f"cannot import module {dotted!r}: {_describe_exception(exc)}"
        ) from None


def _import_file(path_text: str) -> types.ModuleType:
    """Import a Python file under a private, collision-free module name.

    The module must sit in ``sys.modules`` while it executes (dataclasses and
    ``typing.get_type_hints`` look their module up there), so it gets a name derived
    from the resolved path that no real module has.  Loading the same file twice
    returns the same module, hence the same class objects.
    """
    path = Path(path_text).expanduser()
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise PolicyLoadError(f"{path_text}: no such policy file") from None
    if not resolved.is_file():
        raise PolicyLoadError(f"{path_text}: not a file")
    digest = hashlib.sha256(str(resolved).encode("utf-8")).hexdigest()[:16]
    stem = re.sub(r"\W", "_", resolved.stem)
    module_name = f"{_FILE_MODULE_PREFIX}{stem}_{digest}"
    cached = sys.modules.get(module_name)
    if cached is not None:
        return cached
    module_spec = importlib.util.spec_from_file_location(module_name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise PolicyLoadError(f"{path_text}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[module_name]
        line = f":{exc.lineno}" if exc.lineno else ""
        column = f":{exc.offset}" if exc.lineno and exc.offset else ""
        raise PolicyLoadError(f"{path_text}{line}{column}: syntax error: {exc.msg}") from None
    except Exception as exc:
        del sys.modules[module_name]
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(resolved)]
        line = f":{frames[-1].lineno}" if frames and frames[-1].lineno else ""
        raise PolicyLoadError(
            f"{path_text}{line}: error while importing: {_describe_exception(exc)}"
        ) from None
    return module


# --------------------------------------------------------------------- make_policy


def make_policy(
    spec: str,
    options: Mapping[str, str | int | float | bool] | None = None,
    seed: int = 0,
    kind: RegistryKind | None = None,
) -> Policy:
    """Build a policy from a spec and ``key=value`` options.

    Args:
        spec: see :func:`get_policy_class`.
        options: ``Config`` field values; strings are parsed to the field's type,
            other values must already have it.
        seed: fills the ``Config``'s ``seed`` field, if it has one and ``options``
            does not set it; ignored otherwise (deterministic policies need none).
        kind: which registry (default: job scaling policies).

    Raises:
        PolicyLoadError: see :func:`get_policy_class`.
        PolicyConfigError: an unknown option, an unparsable value, or a value that the
            ``Config`` rejects.
    """
    cls = get_policy_class(spec, kind)
    name = getattr(cls, "name", spec)
    options = dict(options or {})
    config_cls = getattr(cls, "Config", None)
    if config_cls is None or not dataclasses.is_dataclass(config_cls):
        if options:
            raise PolicyConfigError(
                f"policy {name!r} takes no options, got {', '.join(sorted(options))}"
            )
        return _instantiate(cls, name, None)
    fields = {f.name: f for f in dataclasses.fields(config_cls) if f.init}
    unknown = sorted(set(options) - set(fields))
    if unknown:
        valid = ", ".join(sorted(fields)) or "(none)"
        raise PolicyConfigError(
            f"policy {name!r} has no option {unknown[0]!r}; its options are: {valid}"
        )
    hints = config_type_hints(config_cls)
    kwargs: dict[str, Any] = {}
    for key, raw in options.items():
        try:
            kwargs[key] = parse_option(raw, hints.get(key, fields[key].type))
        except ValueError as exc:
            raise PolicyConfigError(f"policy {name!r}: option {key}: {exc}") from None
    if "seed" in fields and "seed" not in kwargs:
        kwargs["seed"] = seed
    try:
        config = config_cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise PolicyConfigError(f"policy {name!r}: {_one_line(exc)}") from None
    return _instantiate(cls, name, config)


def _instantiate(cls: type, name: str, config: object | None) -> Policy:
    """Call the policy class, turning a constructor's ValueError into a config error."""
    try:
        policy = cls() if config is None else cls(config)
    except (ValueError, TypeError) as exc:
        raise PolicyConfigError(f"policy {name!r}: {_one_line(exc)}") from None
    return typing.cast(Policy, policy)


# ------------------------------------------------------------------------ describe


def describe_policies(kind: RegistryKind | None = None) -> list[PolicyInfo]:
    """Every registered policy with its summary and options, sorted by name.

    Entry points that fail to load are listed too, with the error as their summary,
    so ``elasim policies`` tells the user why a plug-in is missing.
    """
    kind = kind or POLICY_KIND
    _load_all_entry_points(kind)
    _state = kind.state
    infos = [_describe(name, cls) for name, cls in _state.policies.items()]
    infos += [
        PolicyInfo(name, f"failed to load: {message}", ())
        for name, message in _state.errors.items()
        if name not in _state.policies
    ]
    return sorted(infos, key=lambda info: info.name)


def _describe(name: str, cls: type) -> PolicyInfo:
    """Build the :class:`PolicyInfo` of one class."""
    doc = inspect.getdoc(cls) or ""
    summary = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    if is_oracle(cls) and not summary.startswith("Offline"):
        summary = f"(oracle, not live) {summary}"
    config_cls = getattr(cls, "Config", None)
    options: tuple[OptionInfo, ...] = ()
    if config_cls is not None and dataclasses.is_dataclass(config_cls):
        options = describe_options(config_cls)
    return PolicyInfo(name, summary, options)


def _one_line(exc: BaseException) -> str:
    """``str(exc)`` on one line (the CLI prints library errors as one line)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _describe_exception(exc: BaseException) -> str:
    """``Type: message`` on one line, for errors raised by a user's code."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
