"""nncodecs' optional packages, each behind an extra of its own: a missing one is one
line naming what needs it and the ``pip install`` that brings it.

>>> EXTRAS["gguf"], EXTRAS["s3fs"]
('gguf', 's3')
>>> missing_message("s3fs")
"this needs the optional package 's3fs': pip install 'nncodecs[s3]'"
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "MissingExtraError", "missing_message", "need", "need_for_url"]

#: The extra of ``pyproject.toml`` that installs each optional package (by its import name).
EXTRAS = {
    "torch": "torch",
    "onnx": "onnx",
    "gguf": "gguf",
    "transformers": "transformers",
    "xarray": "xarray",
    "dask": "dask",
    "distributed": "dask",
    "fsspec": "s3",
    "s3fs": "s3",
    "ztensor": "ztensor",
    "scipy": "ztensor",
}


class MissingExtraError(ModuleNotFoundError):
    """An optional package is not installed (a ``ModuleNotFoundError``, so that what
    catches ``ImportError`` still does); the message names its extra."""


def missing_message(package: str, what: str = "this") -> str:
    """What to tell a user who lacks ``package`` (an import name of :data:`EXTRAS`)."""
    torch = (
        " (for the CPU build, first: pip install torch --index-url "
        "https://download.pytorch.org/whl/cpu)"
        if package == "torch"
        else ""
    )
    extra = EXTRAS.get(package, package)
    return f"{what} needs the optional package {package!r}: pip install 'nncodecs[{extra}]'{torch}"


def need(module: str, what: str) -> ModuleType:
    """``module`` imported, or :class:`MissingExtraError` saying ``what`` needs it. A
    module that is there but fails to import for another reason raises as it does."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        root = module.partition(".")[0]
        if exc.name is not None and exc.name.partition(".")[0] != root:
            raise  # (the package is there; one of its own dependencies is not)
        raise MissingExtraError(missing_message(root, what), name=root) from None


#: The fsspec file systems of an extra, by URL scheme.
_SCHEMES = {"s3": "s3fs", "s3a": "s3fs"}


def need_for_url(url: str) -> None:
    """fsspec, and the file system of ``url``'s scheme where an extra brings it (s3fs):
    :class:`MissingExtraError` naming the extra where one is missing."""
    need("fsspec", f"the URL {url}")
    scheme = url.partition("://")[0].lower()
    if scheme in _SCHEMES:
        need(_SCHEMES[scheme], f"the URL {url}")
