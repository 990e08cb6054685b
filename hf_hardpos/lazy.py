"""Lazy package exports: a package `__init__` names what it exports and where it lives, and the
module holding it is imported on first access (PEP 562 module `__getattr__`).

Packages use this so that importing them (and `hardpos --help`) does not pull in torch,
transformers or datasets until one of those names is used.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: str, names: dict[str, str]) -> tuple[Callable[[str], Any], list[str]]:
    """`(__getattr__, __all__)` for `package`, whose `names` map each exported name to its module.

    A module path may be absolute (`"hf_hardpos.metrics"`) or relative to `package` (`".cache"`).
    Usage in a package `__init__`: `__getattr__, __all__ = lazy_exports(__name__, {...})`.
    """

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(import_module(names[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__, sorted(names)
