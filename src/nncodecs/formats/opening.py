"""The model file at a path, as the :class:`Source` of its format."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nncodecs.container import Reader
from nncodecs.formats.dcp import DcpSource
from nncodecs.formats.detect import detect_format
from nncodecs.formats.gguf import GgufSource
from nncodecs.formats.npz import NpzSource
from nncodecs.formats.onnx import OnnxSource
from nncodecs.formats.safetensors_source import SafetensorsSource
from nncodecs.formats.source import Source
from nncodecs.formats.torch import TorchSource
from nncodecs.formats.ztensor import ZtensorSource

__all__ = ["iter_source", "open_source"]

_SOURCES: dict[str, type[Source]] = {
    "dcp": DcpSource,
    "gguf": GgufSource,
    "npz": NpzSource,
    "torch": TorchSource,
    "onnx": OnnxSource,
    "ztensor": ZtensorSource,
}


def open_source(path: str | Path, fmt: str | None = None) -> Source:
    """The model file (or safetensors directory) at ``path``; ``fmt`` as
    :func:`detect_format` names it, else detected. A container is ``ValueError``."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt == "container":
        raise ValueError(f"{path}: already a container")
    if fmt in ("safetensors", "safetensors-dir"):
        return SafetensorsSource(path, directory=fmt == "safetensors-dir")
    if fmt not in _SOURCES:
        raise ValueError(f"{path}: reading {fmt} is not supported yet")
    return _SOURCES[fmt](path)


def iter_source(path: str | Path, fmt: str | None = None) -> Iterator[tuple[str, Any]]:
    """``(name, array)`` of every tensor of a model file or a container, one at a time."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt == "container":
        with Reader(path) as r:
            for name in r:
                yield name, r.read_tensor(name, check=True)
        return
    source = open_source(path, fmt)
    try:
        yield from source.arrays()
    finally:
        source.close()
