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
    "in_memory_order",
    "kind_is_bytes",
    "little_endian",
    "on_cuda",
    "typed_input",
    "writable_bytes",
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


def in_memory_order(arr: Any) -> Any:
    """A C-contiguous array over the same memory as ``arr`` (no copy where
    ``arr`` is C- or F-contiguous: an F-ordered array comes back transposed,
    its axes reversed), else a C-ordered copy. Its C order is the order in
    which ``arr``'s elements lie in memory: numcodecs' contract is that
    ``decode(encode(x))`` gives back ``x``'s bytes as they lie there."""
    if arr.flags.c_contiguous:
        return arr
    if arr.flags.f_contiguous:
        return arr.T
    return array_module(arr).ascontiguousarray(arr)


def host_bytes(buf: Any) -> np.ndarray:
    """Any host buffer's bytes, as they lie in memory, as a flat uint8 array.

    Bytes-like objects, ``array.array``, NumPy arrays of any fixed-size dtype
    (strings, void and structured ones too) and CPU torch tensors; an F-ordered
    array gives its bytes in F order, a strided one a C-ordered copy.
    Object arrays are a ``TypeError`` (they hold pointers, not values).
    """
    if type(buf) is bytes:  # the common case, without the checks below
        return np.frombuffer(buf, dtype=np.uint8)
    kind = array_kind(buf)
    if kind == "numpy":
        arr = buf
    elif kind is None and not hasattr(buf, "__array__"):
        try:
            view = memoryview(buf)
        except TypeError:
            raise TypeError(f"expected a buffer or an array, got {type(buf).__name__}") from None
        if not view.contiguous:
            view = memoryview(view.tobytes())
        return np.frombuffer(
            view.cast("B") if view.ndim != 1 or view.format != "B" else view, dtype=np.uint8
        )
    else:
        arr = as_numpy(buf)
    if arr.dtype.hasobject:
        raise TypeError(f"unsupported dtype {arr.dtype}: object arrays hold pointers, not bytes")
    return in_memory_order(arr).reshape(-1).view(np.uint8)


#: Element types a codec configured for a dtype reads as raw bytes (numcodecs' way:
#: ``bytes``, ``bytearray``, ``array.array("b")`` and byte arrays all hold bytes).
_RAW = (np.dtype(np.uint8), np.dtype(np.int8))


def typed_input(buf: Any, dtype: Any, codec_id: str) -> Any:
    """The array a dtype-aware codec encodes: ``buf`` checked against ``dtype``.

    Raw bytes (bytes-like, ``array.array``, a uint8 or int8 array) are read
    as ``dtype``, in the order they lie in memory; an array of another dtype
    is a ``ValueError``; with no ``dtype`` the array's own must be supported
    (``TypeError`` otherwise). ``dtype`` is a name (either byte order
    matches) or a NumPy dtype of a stated byte order (``>f4``: only that).
    """
    arr = host_bytes(buf) if kind_is_bytes(buf) else as_array(buf)
    if dtype is None:
        dtype_name(arr.dtype)
        return arr
    want = normalize_dtype(dtype)
    if dtype_name(arr.dtype) == dtype_name(want) and (
        (isinstance(dtype, str) and not dtype.startswith((">", "<"))) or arr.dtype == want
    ):
        return arr
    if arr.dtype in _RAW and arr.dtype != want:
        raw = host_bytes(arr)
        if raw.nbytes % want.itemsize:
            raise ValueError(
                f"{codec_id}: {raw.nbytes} bytes is not a whole number of "
                f"{dtype} elements ({want.itemsize} bytes each)"
            )
        return raw.view(want)
    got = arr.dtype.str if dtype_name(arr.dtype) == dtype_name(want) else arr.dtype
    raise ValueError(f"{codec_id}: configured for {dtype}, got {got} data")


def kind_is_bytes(buf: Any) -> bool:
    """Whether ``buf`` is a plain buffer (bytes-like, ``array.array``), not a library's array."""
    return array_kind(buf) is None and not hasattr(buf, "__array__")


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


def writable_bytes(out: Any) -> np.ndarray | None:
    """A flat writable uint8 view of a host ``out`` buffer's memory (in its memory
    order), or ``None`` where it has none (strided, read-only): then decode to a
    new array and :func:`copy_out`."""
    if kind_is_bytes(out):
        try:
            arr = np.frombuffer(out, dtype=np.uint8)
        except (TypeError, ValueError):
            return None
    else:
        arr = as_numpy(out)
    if arr.dtype.hasobject:
        raise TypeError(f"out of dtype {arr.dtype}: object arrays hold pointers, not bytes")
    if not arr.flags.writeable:
        return None
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        return None
    return in_memory_order(arr).reshape(-1).view(np.uint8)


def copy_out(decoded: np.ndarray, out: np.ndarray) -> None:
    """Copy decoded bytes into an ``out`` that could not be decoded into directly, in
    ``out``'s memory order (numcodecs' rule: an F-ordered ``out`` is filled in F order)."""
    from numcodecs.compat import ndarray_copy  # (imported here: a fifth of what a read loads)

    ndarray_copy(decoded, out)
