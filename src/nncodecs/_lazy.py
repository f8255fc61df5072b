"""Package attributes imported on first use (PEP 562).

``nncodecs`` and ``nncodecs.formats`` name what they export and the module
each name lives in; nothing is imported until a name is asked for, so that
``nncodecs --help``, and zarr's start-up hook, do not pay for every layer.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps each
    public name to the module that defines it; a name, once imported, is kept
    in the package's namespace."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return getattr_, dir_
