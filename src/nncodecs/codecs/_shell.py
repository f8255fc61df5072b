"""What every nncodecs codec shares: buffer normalisation, threads, the zarr shell.

A codec module holds the transform itself once (functions on arrays) and two
thin shells around it: a numcodecs ``Codec`` and a Zarr v3 codec with the
same id and configuration. This module holds the parts those shells share.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
from typing import Any, ClassVar

import numpy as np
from zarr.core.common import parse_named_configuration

from nncodecs.dtypes import as_numpy, native_dtype

__all__ = [
    "DtypeFromArray",
    "NumcodecsParams",
    "ZarrShell",
    "array_module",
    "as_array",
    "as_byte_view",
    "get_threads",
    "little_endian",
    "set_threads",
    "typed_input",
]

_threads = 0  # 0: every hardware thread


def set_threads(threads: int | None) -> None:
    """Set the threads the kernels use on large buffers (``None`` or 0: all cores).

    >>> set_threads(1); get_threads()
    1
    >>> set_threads(None)
    """
    global _threads
    if threads is None:
        threads = 0
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError(f"threads must be a non-negative integer or None, got {threads!r}")
    _threads = threads


def get_threads() -> int:
    """Threads the kernels use on large buffers: the setting, or every core."""
    return _threads or _cores()


@functools.cache
def _cores() -> int:
    # Asked once: os.cpu_count() reads sysfs (5 us, as long as decoding a bias).
    return os.cpu_count() or 1


def array_module(arr: Any) -> Any:
    """``numpy`` for NumPy arrays, ``cupy`` for CuPy arrays (output stays where input is)."""
    module = type(arr).__module__.split(".")[0]
    if module == "cupy":
        import cupy

        return cupy
    return np


def as_array(buf: Any) -> Any:
    """An array for any buffer the codecs accept: NumPy, CuPy, torch (CPU) or bytes-like."""
    if array_module(buf) is not np:
        return buf
    if isinstance(buf, np.ndarray):
        arr = buf
    elif isinstance(buf, bytes | bytearray | memoryview):
        arr = np.frombuffer(buf, dtype=np.uint8)
    else:
        arr = as_numpy(buf)
    # ML dtypes (bfloat16, float8) are kind "V" too, but their type is not np.void.
    if arr.dtype.kind in "OUS" or arr.dtype.type is np.void:
        raise TypeError(f"unsupported dtype {arr.dtype}: object, string and structured arrays")
    return arr


def typed_input(buf: Any, dtype: str | None, codec_id: str) -> Any:
    """The array a dtype-aware codec encodes: ``buf`` checked against ``dtype``.

    Raw bytes (bytes-like, or a uint8 array) are read as ``dtype``; an array
    of another dtype is a ``ValueError``; with no ``dtype`` the array's own
    must be supported (``TypeError`` otherwise).
    """
    from nncodecs.dtypes import dtype_name, normalize_dtype

    arr = as_array(buf)
    if dtype is None:
        dtype_name(arr.dtype)
        return arr
    if dtype_name(arr.dtype) == dtype:
        return arr
    want = normalize_dtype(dtype)
    if arr.dtype == np.uint8:
        if arr.nbytes % want.itemsize:
            raise ValueError(
                f"{codec_id}: {arr.nbytes} bytes is not a whole number of "
                f"{dtype} elements ({want.itemsize} bytes each)"
            )
        return np.ascontiguousarray(arr).reshape(-1).view(want)
    raise ValueError(f"{codec_id}: configured for {dtype}, got {arr.dtype} data")


def little_endian(arr: Any) -> Any:
    """The array in little-endian byte order (a copy only when it was big-endian)."""
    if arr.dtype.byteorder == ">":
        return arr.astype(native_dtype(arr.dtype).newbyteorder("<"))
    return arr


def as_byte_view(arr: Any) -> Any:
    """C-order bytes of an array as a flat uint8 view (a copy only when not C-contiguous)."""
    xp = array_module(arr)
    flat = xp.ascontiguousarray(arr).reshape(-1)
    return flat.view(xp.uint8)


class DtypeFromArray:
    """Mixin of Zarr codecs whose ``dtype`` setting the array fills in (and must match)."""

    codec_id: ClassVar[str]
    dtype: str | None

    def _array_dtype(self, zdtype: Any) -> str:
        from nncodecs.dtypes import dtype_name

        name = dtype_name(zdtype.to_native_dtype())
        if self.dtype is not None and self.dtype != name:
            raise ValueError(
                f"{self.codec_id}: configured for {self.dtype}, the array holds {name}"
            )
        return name

    def evolve_from_array_spec(self, array_spec: Any) -> Any:
        name = self._array_dtype(array_spec.dtype)
        return self if self.dtype == name else dataclasses.replace(self, dtype=name)  # type: ignore[type-var]

    def validate(self, *, shape: Any, dtype: Any, chunk_grid: Any) -> None:
        self._array_dtype(dtype)


class NumcodecsParams:
    """Mixin of numcodecs codecs: config and repr from the ``_params`` attributes.

    ``threads`` is a run-time setting: shown by repr when set, never in the config.
    """

    codec_id: ClassVar[str]
    _params: ClassVar[tuple[str, ...]]
    threads: int | None = None

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, **{p: getattr(self, p) for p in self._params}}

    def __repr__(self) -> str:
        args = [f"{p}={getattr(self, p)!r}" for p in self._params]
        if self.threads is not None:
            args.append(f"threads={self.threads!r}")
        return f"{type(self).__name__}({', '.join(args)})"


class ZarrShell:
    """Mixin of the nncodecs Zarr v3 codecs: JSON form and the async shell.

    A subclass sets ``codec_id`` and implements ``_encode_sync`` /
    ``_decode_sync``; its dataclass fields are its configuration.
    """

    codec_id: ClassVar[str]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        _, config = parse_named_configuration(data, cls.codec_id, require_configuration=False)
        return cls(**(config or {}))

    def to_dict(self) -> dict[str, Any]:
        config = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return {"name": self.codec_id, "configuration": config}

    async def _encode_single(self, chunk: Any, chunk_spec: Any) -> Any:
        return await asyncio.to_thread(self._encode_sync, chunk, chunk_spec)  # type: ignore[attr-defined]

    async def _decode_single(self, chunk: Any, chunk_spec: Any) -> Any:
        return await asyncio.to_thread(self._decode_sync, chunk, chunk_spec)  # type: ignore[attr-defined]

    def compute_encoded_size(self, input_byte_length: int, _chunk_spec: Any) -> int:
        return input_byte_length
