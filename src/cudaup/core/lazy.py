"""A package's public names, loaded when first asked for (PEP 562).

It lives in ``core`` (it is pure: ``importlib`` alone) so that every package, the pure
ones included, can name its public API in one way.

A package whose ``__init__`` imported its public names would make every light
module inside it (``machine.host``, ``resolve.probe``) pay for the heavy ones
(the resolver, doctor) the moment anything imports it; commands that need only
the light module would start tens of milliseconds later.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def exports(package: str, names: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` that imports ``names[name]`` (a module) when ``name`` is
    first asked of ``package``."""

    def attribute(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return attribute
