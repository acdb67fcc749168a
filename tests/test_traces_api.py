"""The package's public names: the lazy list, the type checker's imports and __all__ agree.

``elasim.traces`` imports its importers on first use (PEP 562), so their names are
written three times: in ``_LAZY``, in the ``TYPE_CHECKING`` block and in ``__all__``.
These tests make the three one list in effect: a name added to one and not the
others fails here rather than as an ``AttributeError`` in a user's session.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys

import elasim.traces as traces


def _type_checking_names() -> dict[str, str]:
    """Names imported under ``if TYPE_CHECKING:``, each with its relative module."""
    tree = ast.parse(inspect.getsource(traces))
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                for alias in imp.names:
                    names[alias.asname or alias.name] = "." * imp.level + (imp.module or "")
    return names


def test_lazy_names_match_the_type_checkers_imports() -> None:
    assert _type_checking_names() == traces._LAZY


def test_every_lazy_name_is_public_and_resolves_to_its_module() -> None:
    for name, module in traces._LAZY.items():
        assert name in traces.__all__, name
        owner = importlib.import_module(module, traces.__name__)
        assert name in getattr(owner, "__all__", ()), f"{name} not in {module}.__all__"
        assert getattr(traces, name) is getattr(owner, name)


def test_every_public_name_resolves_and_is_listed_once() -> None:
    assert len(set(traces.__all__)) == len(traces.__all__)
    for name in traces.__all__:
        assert getattr(traces, name) is not None, name
    assert set(traces.__all__) <= set(dir(traces))


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        traces.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:  # pragma: no cover - the assertion is the test
        raise AssertionError("an unknown name resolved")


def test_loading_a_trace_does_not_import_the_importers() -> None:
    code = (
        "import sys, elasim.traces as t; t.load_trace('spot_us_east.csv');"
        "print('elasim.traces.importers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
