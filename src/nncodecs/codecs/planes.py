"""``nncodecs.planes``: byte-plane split of fixed-size elements.

Plane ``j`` holds byte ``j`` (little-endian) of every element, planes one
after the other: ``n`` elements of ``k`` bytes become ``k`` planes of ``n``
bytes. After :mod:`nncodecs.codecs.bitreorder`, the last plane of float32,
bfloat16 and float16 is the exponent plane, which compresses far better
than the bytes interleaved. One-byte types are one plane (a copy).

Two shells share one implementation: :class:`Planes` (Zarr v3, array ->
bytes serializer) and :class:`NumcodecsPlanes` (numcodecs), both with id
``nncodecs.planes`` and configuration ``{"elementsize": <int> | None}``.

:func:`split_array` and :func:`merge_array` also run the bit reorder fused
into the same pass (``reorder=True``), which the fused weights codec uses.

Examples
--------
>>> import numpy as np
>>> codec = NumcodecsPlanes(elementsize=2)
>>> codec.encode(np.array([0x0102, 0x0304], dtype="<u2")).tolist()
[2, 4, 1, 3]
>>> codec.decode(bytes([2, 4, 1, 3])).view("<u2").tolist() == [0x0102, 0x0304]
True
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Self

import numpy as np
from numcodecs.abc import Codec
from zarr.abc.codec import ArrayBytesCodec
from zarr.core.array_spec import ArraySpec

from nncodecs import _core
from nncodecs.codecs._shell import NumcodecsShell, ZarrShell
from nncodecs.dtypes import float_layout, native_dtype, normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.frame import get_threads
from nncodecs.frame.buffers import (
    array_module,
    as_byte_view,
    copy_out,
    host_bytes,
    kind_is_bytes,
    little_endian,
)
from nncodecs.frame.params import Param, Schema

__all__ = ["NumcodecsPlanes", "Planes", "merge_array", "merge_bytes", "split_array", "split_bytes"]

CODEC_ID = "nncodecs.planes"


def _check_elementsize(elementsize: Any) -> int | None:
    if elementsize is None:
        return None
    if isinstance(elementsize, bool) or not isinstance(elementsize, int | np.integer):
        raise TypeError(f"planes: elementsize must be an int or None, got {elementsize!r}")
    if not 1 <= elementsize <= 255:
        raise ValueError(f"planes: elementsize must be between 1 and 255, got {elementsize}")
    return int(elementsize)


SCHEMA = Schema((Param("elementsize", None, _check_elementsize),))


def split_bytes(data: Any, elementsize: int, layout: str = "none") -> Any:
    """Split a flat uint8 array of whole elements into planes (a new uint8 array)."""
    if data.nbytes % elementsize:
        raise ValueError(
            f"planes: {data.nbytes} bytes is not a whole number of {elementsize}-byte elements"
        )
    xp = array_module(data)
    if xp is not np:
        return _split_xp(data, elementsize, layout)
    out = np.empty(data.nbytes, dtype=np.uint8)
    _core.planes_split(out, data, elementsize, layout, threads=get_threads())
    return out


def merge_bytes(planes: Any, elementsize: int, layout: str = "none") -> Any:
    """Inverse of :func:`split_bytes`: planes back to element bytes (a new uint8 array)."""
    if planes.nbytes % elementsize:
        raise CorruptDataError(
            f"planes: {planes.nbytes} bytes cannot be {elementsize} equal planes"
        )
    xp = array_module(planes)
    if xp is not np:
        return _merge_xp(planes, elementsize, layout)
    out = np.empty(planes.nbytes, dtype=np.uint8)
    _core.planes_merge(out, planes, elementsize, layout, threads=get_threads())
    return out


def _split_xp(data: Any, elementsize: int, layout: str) -> Any:
    # Array-operation path for CuPy input; same bytes as the C++ kernel.
    from nncodecs.codecs.bitreorder import _reorder_xp

    if layout != "none":
        bits_dtype = np.dtype(f"<u{elementsize}")
        data = _reorder_xp(data.view(bits_dtype), layout, decode=False).view(np.uint8)
    return data.reshape(-1, elementsize).T.copy().reshape(-1)


def _merge_xp(planes: Any, elementsize: int, layout: str) -> Any:
    from nncodecs.codecs.bitreorder import _reorder_xp

    data = planes.reshape(elementsize, -1).T.copy().reshape(-1)
    if layout != "none":
        bits_dtype = np.dtype(f"<u{elementsize}")
        data = _reorder_xp(data.view(bits_dtype), layout, decode=True).view(np.uint8)
    return data


def split_array(arr: Any, *, reorder: bool = False) -> Any:
    """Planes of an array's elements in C order; ``reorder=True`` fuses the bit reorder in."""
    arr = little_endian(arr)
    layout = float_layout(arr.dtype) if reorder else "none"
    return split_bytes(as_byte_view(arr), arr.dtype.itemsize, layout)


def merge_array(planes: Any, dtype: Any, shape: Any, *, reorder: bool = False) -> Any:
    """Inverse of :func:`split_array`: an array of ``dtype`` and ``shape`` from its planes."""
    target = normalize_dtype(dtype)
    count = math.prod(shape)
    if planes.nbytes != count * target.itemsize:
        raise CorruptDataError(
            f"planes: expected {count * target.itemsize} bytes for {count} elements of "
            f"{target}, got {planes.nbytes}"
        )
    layout = float_layout(target) if reorder else "none"
    raw = merge_bytes(planes, target.itemsize, layout)
    native = native_dtype(target).newbyteorder("<") if target.kind in "biufc" else target
    out = raw.view(native).reshape(shape)
    return out if native == target else out.astype(target)


class NumcodecsPlanes(NumcodecsShell, Codec):
    """numcodecs codec ``nncodecs.planes``.

    Works on the bytes as they lie in memory (numcodecs' rule): an F-ordered
    array's elements in F order, a big-endian array's bytes in its order
    (plane 0 then holds each element's first byte in memory), never swapped.

    Parameters
    ----------
    elementsize : int
        Bytes per element. Decoding cannot work without it, so encoding
        refuses to run without it too (a filter that writes what no read
        can undo loses the data).
    """

    codec_id = CODEC_ID
    schema = SCHEMA
    elementsize: int | None

    def _size(self, doing: str) -> int:
        if self.elementsize is None:
            raise ValueError(
                f"planes: {doing} needs elementsize= in the codec (bytes an element): "
                "a frame of planes does not record it"
            )
        return self.elementsize

    def encode(self, buf: Any) -> Any:
        size = self._size("encoding")
        if not kind_is_bytes(buf):
            dtype = np.asarray(buf).dtype if array_module(buf) is np else np.dtype(np.uint8)
            if dtype.itemsize not in (1, size):
                raise ValueError(
                    f"planes: configured for {size}-byte elements, got {dtype} "
                    f"({dtype.itemsize}-byte) data"
                )
        return split_bytes(host_bytes(buf), size)

    def decode(self, buf: Any, out: Any = None) -> Any:
        if self.elementsize is None and out is not None:
            size = np.asarray(out).dtype.itemsize  # (a codec that encoded nothing yet)
        else:
            size = self._size("decoding")
        merged = merge_bytes(host_bytes(buf), size)
        if out is None:
            return merged
        copy_out(merged, out)
        return out


class Planes(ZarrShell, ArrayBytesCodec):  # type: ignore[misc]
    """Zarr v3 codec ``nncodecs.planes`` (array -> bytes serializer).

    Parameters
    ----------
    elementsize : int, optional
        Bytes per element; filled in from the array's dtype when the codec
        joins an array.
    """

    codec_id = CODEC_ID
    is_fixed_size = True
    schema = SCHEMA

    def _array_elementsize(self, zdtype: Any) -> int:
        native = zdtype.to_native_dtype()
        if native.kind in "OUS" or native.type is np.void or native.itemsize == 0:
            raise TypeError(f"planes: unsupported data type {native}: fixed-size numbers only")
        size = native.itemsize
        if self.elementsize is not None and self.elementsize != size:
            raise ValueError(
                f"planes: configured for {self.elementsize}-byte elements, the array holds "
                f"{native} ({size} bytes)"
            )
        return size

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        size = self._array_elementsize(array_spec.dtype)
        return self if self.elementsize == size else replace(self, elementsize=size)

    def validate(self, *, shape: Any, dtype: Any, chunk_grid: Any) -> None:
        self._array_elementsize(dtype)

    def _encode_sync(self, chunk_array: Any, chunk_spec: ArraySpec) -> Any:
        planes = split_array(chunk_array.as_ndarray_like())
        return chunk_spec.prototype.buffer.from_array_like(planes)

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: ArraySpec) -> Any:
        planes = chunk_bytes.as_array_like()
        out = merge_array(planes, chunk_spec.dtype.to_native_dtype(), chunk_spec.shape)
        return chunk_spec.prototype.nd_buffer.from_ndarray_like(out)
