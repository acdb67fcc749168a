"""A policy's options: its ``Config`` fields, typed from strings and described.

``--set key=value`` on the command line and the option columns of a sweep are strings,
while a policy's ``Config`` is a dataclass with annotated fields.  This module knows
how one maps onto the other, apart from any registry: :func:`parse_option` turns one
string into the annotated type (``int``, ``float``, ``bool``, ``str``,
``Literal[...]`` and ``X | None``), and :func:`describe_options` lists the fields with
their readable types, defaults and docstring text, as ``elasim policies`` shows them.

It is split from :mod:`elasim.policies.registry` because typing a value and finding a
class are separate jobs: the registry finds the class and wraps these functions'
``ValueError`` in its own one-line errors; nothing here imports the registry.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "REQUIRED",
    "OptionInfo",
    "config_type_hints",
    "describe_options",
    "parse_attributes_section",
    "parse_option",
    "type_name",
]


class _Required:
    """Type of :data:`REQUIRED`."""

    def __repr__(self) -> str:
        return "<required>"


#: ``OptionInfo.default`` of a ``Config`` field that has no default.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class OptionInfo:
    """One field of a policy's ``Config``, as ``elasim policies`` shows it.

    Attributes:
        name: the field name, used as ``--set name=value``.
        type_name: the annotated type, readable (``int | None``, ``{a,b}``).
        default: the default value, or :data:`REQUIRED`.
        doc: the field's text from the ``Attributes:`` section of the Config docstring.
    """

    name: str
    type_name: str
    default: Any
    doc: str


# --------------------------------------------------------------------- parse values

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_NONE = frozenset({"none", "null"})


def parse_option(raw: object, tp: Any) -> Any:
    """Convert one option to the annotated type ``tp``.

    Strings are parsed; other values are checked.  ``none``/``null`` (any case) mean
    None for an optional field.  A type this module does not know takes any value
    that is not a string, as is.

    Raises:
        ValueError: with a short message (the caller adds the option's name).
    """
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return _parse_union(raw, tp)
    if origin is typing.Literal:
        return _parse_literal(raw, typing.get_args(tp))
    for scalar, parse_scalar in _SCALAR_PARSERS:
        if tp is scalar:
            return parse_scalar(raw)
    if isinstance(raw, str):
        raise ValueError(f"cannot parse a string into type {type_name(tp)}")
    return raw


def _parse_union(raw: object, tp: Any) -> Any:
    """Parse ``raw`` as the first member of the union ``tp`` that accepts it.

    Why its own function: an optional field's ``none`` must be recognised before the
    members are tried, and the error must name the one member's complaint when there
    is one member (``int | None`` says "expected an integer"), else the whole union.
    """
    args = typing.get_args(tp)
    inner = [a for a in args if a is not type(None)]
    if len(inner) < len(args):  # Optional
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in _NONE):
            return None
    errors = []
    for candidate in inner:
        try:
            return parse_option(raw, candidate)
        except ValueError as exc:
            errors.append(str(exc))
    if len(errors) == 1:
        raise ValueError(errors[0])
    raise ValueError(f"cannot parse {raw!r} as {type_name(tp)}")


def _parse_literal(raw: object, choices: tuple[Any, ...]) -> Any:
    """Parse ``raw`` as one of the ``Literal`` ``choices``, each typed as itself.

    Why its own function: a choice is matched after parsing to the choice's own type
    (``Literal[1, 2]`` accepts ``"2"``), and the error lists every choice.
    """
    for choice in choices:
        try:
            value = parse_option(raw, type(choice))
        except ValueError:
            continue
        if value == choice:
            return choice
    listed = ", ".join(str(c) for c in choices)
    raise ValueError(f"expected one of {listed}, got {raw!r}")


def _parse_bool(raw: object) -> bool:
    """A bool, or one of the words in ``_TRUE``/``_FALSE`` (any case)."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError(f"expected true or false, got {raw!r}")


def _parse_int(raw: object) -> int:
    """An int (never a bool), or its base-10 text."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw.strip(), 10)
        except ValueError:
            pass
    raise ValueError(f"expected an integer, got {raw!r}")


def _parse_float(raw: object) -> float:
    """A number (never a bool) as a float, or its text."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise ValueError(f"expected a number, got {raw!r}")


def _parse_str(raw: object) -> str:
    """A string, unchanged."""
    if isinstance(raw, str):
        return raw
    raise ValueError(f"expected a string, got {raw!r}")


#: The plain annotated types an option may have, and how each is read (matched by
#: identity, as an annotation need not be hashable).
_SCALAR_PARSERS: tuple[tuple[type, Callable[[object], Any]], ...] = (
    (bool, _parse_bool),
    (int, _parse_int),
    (float, _parse_float),
    (str, _parse_str),
)


# ------------------------------------------------------------------ describe fields


def config_type_hints(config_cls: type) -> dict[str, Any]:
    """Resolved field annotations; raw annotations if they cannot be resolved."""
    try:
        return typing.get_type_hints(config_cls)
    except Exception:
        return {f.name: f.type for f in dataclasses.fields(config_cls)}


def describe_options(config_cls: type) -> tuple[OptionInfo, ...]:
    """The init fields of a ``Config`` dataclass, in declaration order.

    Each with its readable type, its default (or :data:`REQUIRED`) and its text from
    the ``Attributes:`` section of the class docstring.
    """
    docs = parse_attributes_section(inspect.getdoc(config_cls) or "")
    hints = config_type_hints(config_cls)
    options: list[OptionInfo] = []
    for f in dataclasses.fields(config_cls):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = REQUIRED
        tp = hints.get(f.name, f.type)
        options.append(OptionInfo(f.name, type_name(tp), default, docs.get(f.name, "")))
    return tuple(options)


def type_name(tp: Any) -> str:
    """A short readable name of an annotation: ``int``, ``float | None``, ``{a,b}``."""
    if isinstance(tp, str):
        return tp
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join("None" if a is type(None) else type_name(a) for a in args)
    if origin is typing.Literal:
        return "{" + ",".join(str(a) for a in args) + "}"
    return getattr(tp, "__name__", str(tp))


_SECTION_RE = re.compile(r"^(\s*)([A-Z][A-Za-z ]*):\s*$")
_ENTRY_RE = re.compile(r"^(\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$")


def parse_attributes_section(doc: str) -> dict[str, str]:
    """Field docs from the Google-style ``Attributes:`` section of a docstring.

    Entries are ``name: text`` or ``name (type): text`` at one indentation level;
    deeper-indented lines continue the entry above.  The section ends at a line
    indented no deeper than its header.  Whitespace is collapsed to single spaces.
    """
    lines = inspect.cleandoc(doc).splitlines()
    result: dict[str, list[str]] = {}
    in_section = False
    header_indent = 0
    entry_indent: int | None = None
    current: str | None = None
    for line in lines:
        if not in_section:
            match = _SECTION_RE.match(line)
            if match and match.group(2) == "Attributes":
                in_section = True
                header_indent = len(match.group(1))
            continue
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= header_indent:
            break
        if entry_indent is None:
            entry_indent = indent
        text = line.strip()
        if indent == entry_indent:
            match = _ENTRY_RE.match(text)
            if match:
                current = match.group(1)
                result[current] = [match.group(2)]
                continue
        if current is not None:
            result[current].append(text)
    return {name: " ".join(" ".join(parts).split()) for name, parts in result.items()}
