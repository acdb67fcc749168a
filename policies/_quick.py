"""A faster ``__init__`` for the frozen dataclasses that the simulator makes by the thousand.

Why: a frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` (its own ``__setattr__`` refuses), about five times slower
than a plain one.  The single-job simulator makes one event record, one observed
event and a pause per event, and an observation and a decision record per decision:
on the full Philly trace as background (82k loop turns) about 170,000 of them, a
tenth of the run.  :func:`quick_init` replaces the generated ``__init__`` with one
that writes the fields straight into the instance's ``__dict__`` (the class stays
frozen: only ``__init__`` writes) and then runs ``__post_init__`` as before: same
signature, same defaults, same checks, same objects.

Standard library only (``policies/`` may import nothing else).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

__all__ = ["quick_init"]

_T = TypeVar("_T")


def quick_init(cls: type[_T]) -> type[_T]:
    """Give the frozen dataclass ``cls`` an ``__init__`` that fills ``__dict__`` directly.

    Only plain fields are supported (no ``default_factory``, ``init=False``,
    ``kw_only`` or ``InitVar``), nor ``__slots__``: a class with any of them is
    refused, so that the fast path never has to guess what dataclasses would do.

    Raises:
        TypeError: ``cls`` is not a frozen dataclass of plain fields.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: quick_init takes a frozen dataclass without slots")
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    plain = all(
        f.init and not f.kw_only and f.default_factory is dataclasses.MISSING for f in fields
    )
    # the generated __init__ takes exactly the fields, in order (an InitVar adds one)
    generated = list(inspect.signature(cls.__init__).parameters)[1:]
    if not plain or generated != names or "_d" in names:
        raise TypeError(f"{cls.__name__}: quick_init takes plain fields only")
    defaults: dict[str, Any] = {}
    params_src = []
    for f in fields:
        if f.default is dataclasses.MISSING:
            params_src.append(f.name)
        else:
            defaults[f"_default_{f.name}"] = f.default
            params_src.append(f"{f.name}=_default_{f.name}")
    body = ["    _d = self.__dict__"] + [f"    _d[{n!r}] = {n}" for n in names]
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(params_src)}):\n" + "\n".join(body) + "\n"
    namespace: dict[str, Any] = {}
    exec(source, defaults, namespace)  # noqa: S102 - built from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[misc]
    return cls
