"""Backends: what the GPU path needs of a device, and which backend serves an object.

:func:`backend_for` says whether an object lives on a device, and which
backend works on it: CuPy arrays and torch CUDA tensors (through DLPack,
without a copy) get :class:`nncodecs.gpu.cupy_backend.CupyBackend`; other
backends can be registered (the tests register the SIMT emulator for an
array type of their own).
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

import numpy as np

from nncodecs.frame import on_cuda

__all__ = [
    "Backend",
    "backend_for",
    "backend_for_device",
    "register_backend",
    "unregister_backend",
]


class Backend(Protocol):
    """Device arrays and kernel launches (CuPy, or the tests' emulator)."""

    def to_device(self, host: np.ndarray) -> Any: ...
    def empty(self, nbytes: int) -> Any: ...
    def zeros_int32(self, count: int) -> Any: ...
    def to_host(self, arr: Any) -> np.ndarray: ...
    def launch(self, name: str, grid: int, block: int, args: tuple) -> None: ...
    def concat(self, arrays: list[Any]) -> Any: ...


_registered: list[Any] = []


def register_backend(backend: Any) -> None:
    """Add a backend: it serves the objects its ``owns(obj)`` accepts, and the
    device named by its ``name`` attribute."""
    _registered.append(backend)


def unregister_backend(backend: Any) -> None:
    _registered.remove(backend)


@functools.cache
def _cupy_backend() -> Any:
    from nncodecs.gpu.cupy_backend import CupyBackend

    return CupyBackend()


def backend_for(obj: Any) -> Any | None:
    """The backend for an object on a device (``None``: it is host memory).

    Never imports CuPy for host objects."""
    for backend in reversed(_registered):
        if backend.owns(obj):
            return backend
    return _cupy_backend() if on_cuda(obj) else None


def backend_for_device(device: str) -> Any:
    """The backend of a device name: ``"cuda"`` (CuPy's current device) or
    ``"cuda:N"`` (see the backend's ``device_context``), or a registered name."""
    for backend in reversed(_registered):
        if getattr(backend, "name", None) == device:
            return backend
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        return _cupy_backend()
    raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
