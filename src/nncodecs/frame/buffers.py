"""Buffers the codecs take: the one place that tells NumPy, CuPy, torch and bytes apart.

:func:`nncodecs.dtypes.array_kind` names an object's library (it lives in
``dtypes``, below this layer, which needs it too); the helpers here turn
any accepted buffer into the array or bytes the kernels read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs.dtypes import array_kind, as_numpy, dtype_name, native_dtype, normalize_dtype

__all__ = [
    "array_kind",
    "array_module",
    "as_array",
    "as_byte_view",
    "copy_out",
    "host_bytes",
    "little_endian",
    "on_cuda",
    "typed_input",
]


def on_cuda(obj: Any) -> bool:
    """Whether an object is a CUDA array: CuPy, or a torch tensor with ``is_cuda``."""
    kind = array_kind(obj)
    return kind == "cupy" or (kind == "torch" and bool(getattr(obj, "is_cuda", False)))


def array_module(arr: Any) -> Any:
    """``numpy`` for NumPy arrays, ``cupy`` for CuPy arrays (output stays where input is)."""
    if array_kind(arr) == "cupy":
        import cupy

        return cupy
    return np


def as_array(buf: Any) -> Any:
    """An array for any buffer the codecs accept: NumPy, CuPy, torch (CPU) or bytes-like."""
    kind = array_kind(buf)
    if kind == "cupy":
        return buf
    if kind == "numpy":
        arr = buf
    elif isinstance(buf, bytes | bytearray | memoryview):
        arr = np.frombuffer(buf, dtype=np.uint8)
    else:
        arr = as_numpy(buf)
    # ML dtypes (bfloat16, float8) are kind "V" too, but their type is not np.void.
    if arr.dtype.kind in "OUS" or arr.dtype.type is np.void:
        raise TypeError(f"unsupported dtype {arr.dtype}: object, string and structured arrays")
    return arr


def host_bytes(buf: Any) -> np.ndarray:
    """A host buffer's bytes as a flat uint8 array (a copy only when not C-contiguous)."""
    if type(buf) is bytes:  # the common case, without as_array's checks
        return np.frombuffer(buf, dtype=np.uint8)
    arr = as_array(buf)
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def typed_input(buf: Any, dtype: str | None, codec_id: str) -> Any:
    """The array a dtype-aware codec encodes: ``buf`` checked against ``dtype``.

    Raw bytes (bytes-like, or a uint8 array) are read as ``dtype``; an array
    of another dtype is a ``ValueError``; with no ``dtype`` the array's own
    must be supported (``TypeError`` otherwise).
    """
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


def copy_out(decoded: np.ndarray, out: np.ndarray) -> None:
    """Copy decoded bytes (C order) into an ``out`` that could not be decoded into directly."""
    if out.ndim > 1 and out.dtype.itemsize and decoded.nbytes == out.nbytes:
        # An F-ordered or strided array: element by element, in logical order.
        np.copyto(out, decoded.view(out.dtype).reshape(out.shape))
    else:
        from numcodecs.compat import ndarray_copy  # (imported here: a fifth of what a read loads)

        ndarray_copy(decoded, out)
