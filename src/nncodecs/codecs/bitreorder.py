"""``nncodecs.bitreorder``: exponent-first bit reorder of floats.

Rotates the sign+exponent field of each float left by one bit, so the
exponent moves to the top bits and the sign sits just below it: the
exponent of float32 and bfloat16 then fills its own byte (see
``docs/format.md``). Floats come out as unsigned integers of the same width;
integers, bool and float4_e2m1fn pass through unchanged. Every bit pattern
survives (NaN payloads, -0.0, infinities, subnormals).

Two shells share one implementation: :class:`BitReorder` (Zarr v3,
array -> array) and :class:`NumcodecsBitReorder` (numcodecs), both with id
``nncodecs.bitreorder`` and configuration ``{"dtype": <name> | None}``.

Examples
--------
>>> import numpy as np
>>> codec = NumcodecsBitReorder(dtype="float32")
>>> bits = codec.encode(np.array([1.0, -2.0], dtype=np.float32))
>>> bits.dtype, [hex(b) for b in bits]
(dtype('uint32'), ['0x7f000000', '0x80800000'])
>>> codec.decode(bits)
array([ 1., -2.], dtype=float32)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec
from zarr.abc.codec import ArrayArrayCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.dtype import parse_data_type

from nncodecs import _core
from nncodecs.codecs._shell import DtypeFromArray, NumcodecsShell, ZarrShell
from nncodecs.dtypes import (
    MANTISSA_BITS,
    dtype_name,
    float_layout,
    native_dtype,
    normalize_dtype,
    reordered_dtype,
)
from nncodecs.frame import get_threads
from nncodecs.frame.buffers import (
    array_module,
    as_array,
    copy_out,
    host_bytes,
    kind_is_bytes,
    little_endian,
    typed_input,
)
from nncodecs.frame.params import Param, Schema

__all__ = ["BitReorder", "NumcodecsBitReorder", "decode_array", "encode_array"]

CODEC_ID = "nncodecs.bitreorder"


def _ordered_dtype(value: Any) -> str | None:
    """The ``dtype`` setting: a supported type's name (little-endian), or NumPy's
    string of a big-endian one (``">f4"``), whose order the codec then keeps."""
    if value is None:
        return None
    dt = normalize_dtype(value)
    name = dtype_name(dt)
    return dt.str if dt.byteorder == ">" and dt.itemsize > 1 else name


SCHEMA = Schema((Param("dtype", None, _ordered_dtype),))


def _reorder_xp(bits: Any, layout: str, decode: bool) -> Any:
    """The reorder as array operations, for arrays the C++ kernel cannot reach (CuPy)."""
    xp = array_module(bits)
    width = bits.dtype.itemsize * 8
    m = MANTISSA_BITS[layout]
    t = bits.dtype.type
    mant = t((1 << m) - 1)
    one = t(1)
    if not decode:
        exp_hi = t(((1 << width) - 1) & ~((1 << (m + 1)) - 1))
        return (bits & mant) | ((bits << one) & exp_hi) | ((bits >> t(width - 1)) << t(m))
    exp_lo = t(((1 << (width - 1)) - 1) & ~((1 << m) - 1))
    sign = ((bits >> t(m)) & one) << t(width - 1)
    return xp.asarray((bits & mant) | ((bits >> one) & exp_lo) | sign, dtype=bits.dtype)


def _elementwise(src: Any, out_dtype: np.dtype, layout: str, decode: bool) -> Any:
    """Apply the reorder to every element of ``src``, keeping shape and memory order."""
    if array_module(src) is not np:
        bits = src.view(reordered_dtype(src.dtype))
        return _reorder_xp(bits, layout, decode).view(out_dtype)
    if not (src.flags.c_contiguous or src.flags.f_contiguous):
        src = np.ascontiguousarray(src)
    out = np.empty_like(src, dtype=out_dtype)  # same order (C or F) as src
    kernel = _core.reorder_decode if decode else _core.reorder_encode
    kernel(
        out.ravel(order="K").view(np.uint8),
        src.ravel(order="K").view(np.uint8),
        layout,
        threads=get_threads(),
    )
    return out


def encode_array(arr: Any) -> Any:
    """Reorder the bits of a float array; integers and bool come back unchanged.

    Raises ``TypeError`` for dtypes outside :data:`nncodecs.dtypes.SUPPORTED_DTYPES`.
    """
    layout = float_layout(arr.dtype)
    out_dtype = reordered_dtype(arr.dtype)
    arr = little_endian(arr)
    if layout == "none":
        return arr.view(out_dtype)
    return _elementwise(arr, out_dtype, layout, decode=False)


def decode_array(bits: Any, dtype: Any) -> Any:
    """Inverse of :func:`encode_array`: ``bits`` (any dtype of the right width) to ``dtype``."""
    target = normalize_dtype(dtype)
    layout = float_layout(target)
    bits_dtype = reordered_dtype(target)
    if bits.dtype.itemsize != bits_dtype.itemsize:
        raise ValueError(
            f"bitreorder: decoding {dtype_name(target)} needs {bits_dtype.itemsize}-byte "
            f"elements, got {bits.dtype} ({bits.dtype.itemsize} bytes)"
        )
    bits = little_endian(bits).view(bits_dtype)
    native = native_dtype(target)
    out = bits.view(native) if layout == "none" else _elementwise(bits, native, layout, True)
    return out if native == target else out.astype(target)


class NumcodecsBitReorder(NumcodecsShell, Codec):
    """numcodecs codec ``nncodecs.bitreorder``.

    Parameters
    ----------
    dtype : str or dtype
        Element type, and its byte order: a name (``"float32"``) for
        little-endian data, NumPy's string (``">f4"``) for big-endian data,
        whose bit-reordered words then stay big-endian. Decoding cannot work
        without it, so encoding refuses to run without it too; big-endian
        input under a little-endian setting is refused.
    """

    codec_id = CODEC_ID
    schema = SCHEMA
    dtype: str | None

    def _dtype(self, doing: str) -> np.dtype:
        if self.dtype is None:
            raise ValueError(
                f"bitreorder: {doing} needs dtype= in the codec (the element type, "
                "'>f4' for big-endian data): the reordered words do not record it"
            )
        return normalize_dtype(self.dtype)

    def encode(self, buf: Any) -> Any:
        want = self._dtype("encoding")
        arr = typed_input(buf, self.dtype, CODEC_ID)
        if arr.dtype.byteorder == ">" and want.byteorder != ">":
            raise ValueError(
                f"bitreorder: big-endian input ({arr.dtype.str}) with dtype={self.dtype!r}: "
                f"set dtype={arr.dtype.str!r} to keep its byte order"
            )
        bits = encode_array(arr)
        if want.byteorder == ">":
            return bits.astype(bits.dtype.newbyteorder(">"))
        return bits

    def decode(self, buf: Any, out: Any = None) -> Any:
        if self.dtype is None and out is not None:
            target = as_array(out).dtype  # (a codec that encoded nothing yet)
        else:
            target = self._dtype("decoding")
        words = reordered_dtype(target).newbyteorder(">" if target.byteorder == ">" else "<")
        arr = host_bytes(buf).view(np.uint8) if kind_is_bytes(buf) else as_array(buf)
        if arr.dtype.itemsize != target.itemsize:
            raw = host_bytes(arr)
            if raw.nbytes % target.itemsize:
                raise ValueError(
                    f"bitreorder: {raw.nbytes} bytes is not a whole number of "
                    f"{dtype_name(target)} elements ({target.itemsize} bytes each)"
                )
            arr = raw.view(words)
        dec = decode_array(arr, target)
        if out is None:
            return dec
        copy_out(dec, out)
        return out


class ReorderedSpec(ArraySpec):
    """The chunk spec after the reorder (unsigned integers), remembering the
    array's own dtype: zarr >= 3.2 evolves the codecs after a filter from the
    spec it resolves, and the coders of the chain record the array's dtype in
    their frames (docs/format.md, "Element types"), as the fused codec does."""

    reordered_from: str

    def __init__(self, *, reordered_from: str, **spec: Any) -> None:
        super().__init__(**spec)
        object.__setattr__(self, "reordered_from", reordered_from)


class BitReorder(ZarrShell, DtypeFromArray, ArrayArrayCodec):  # type: ignore[misc]
    """Zarr v3 codec ``nncodecs.bitreorder`` (array -> array).

    Parameters
    ----------
    dtype : str or dtype, optional
        Element type; filled in from the array when the codec joins one.

    Examples
    --------
    >>> import ml_dtypes, numpy as np, zarr
    >>> from nncodecs import BitReorder, Planes
    >>> a = zarr.create_array({}, shape=(64,), dtype=ml_dtypes.bfloat16,
    ...                       filters=[BitReorder()], serializer=Planes())
    >>> a[:] = np.linspace(-1, 1, 64).astype(ml_dtypes.bfloat16)
    >>> bool((a[:] == np.linspace(-1, 1, 64).astype(ml_dtypes.bfloat16)).all())
    True
    """

    codec_id = CODEC_ID
    is_fixed_size = True
    schema = SCHEMA

    def resolve_metadata(self, chunk_spec: ArraySpec) -> ArraySpec:
        native = chunk_spec.dtype.to_native_dtype()
        fill = encode_array(np.asarray(chunk_spec.fill_value, dtype=native))
        return ReorderedSpec(
            shape=chunk_spec.shape,
            dtype=parse_data_type(reordered_dtype(native).newbyteorder("<"), zarr_format=3),
            fill_value=fill[()],
            config=chunk_spec.config,
            prototype=chunk_spec.prototype,
            reordered_from=dtype_name(native),
        )

    def _encode_sync(self, chunk_array: Any, chunk_spec: ArraySpec) -> Any:
        out = encode_array(chunk_array.as_ndarray_like())
        return chunk_spec.prototype.nd_buffer.from_ndarray_like(out)

    def _decode_sync(self, chunk_array: Any, chunk_spec: ArraySpec) -> Any:
        out = decode_array(chunk_array.as_ndarray_like(), chunk_spec.dtype.to_native_dtype())
        return chunk_spec.prototype.nd_buffer.from_ndarray_like(out)
