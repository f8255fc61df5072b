"""Zarr's partial-encode hook for a serializer that is its array's only codec.

Where a serializer is an array's only codec (``serializer=Weights(),
compressors=None``), Zarr hands it each chunk's part of the user's values with
the chunk's byte getter / setter (``ArrayBytesCodecPartialEncodeMixin``) instead
of merging every chunk itself. Zarr's own merge builds a chunk filled with the
fill value, copies the values into it and compares every element with the fill
value; for bfloat16 and float8 on zarr 3.1 the fill and the comparison run
through ml_dtypes' element loops on Zarr's event loop, which cost more than the
encoding (writing a 256 MiB bfloat16 array: 0.38 s, of which the encoding takes
0.15). Here a chunk the selection covers whole is encoded from the values as
they are; a partial one is read, decoded, merged and encoded, as Zarr does.

Empty chunks follow Zarr's rule (``write_empty_chunks`` false: a chunk equal to
the fill value is deleted, not stored), decided on the bits: a chunk of ``-0.0``
under a fill of ``0.0``, or NaNs of another payload than the fill's, are stored
and read back exactly (zarr 3.1 drops the first for bfloat16, reading back
``+0.0``). The first element decides in the usual case (it differs from the
fill), without a pass over the chunk.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from zarr.abc.codec import ArrayBytesCodecPartialEncodeMixin

__all__ = ["DirectChunks"]

# Unsigned integers of each element size: a chunk's bits compared with the fill's.
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _covers(selection: Any, shape: tuple[int, ...]) -> bool:
    """Whether a chunk selection (Zarr's: slices and integers per axis) is the whole chunk."""
    if not isinstance(selection, tuple) or len(selection) != len(shape):
        return False
    for sel, n in zip(selection, shape, strict=True):
        if isinstance(sel, slice):
            if sel.step not in (None, 1) or (sel.start or 0) != 0:
                return False
            if (n if sel.stop is None else sel.stop) < n:
                return False
        elif not (isinstance(sel, (int, np.integer)) and n == 1 and sel in (0, -1)):
            return False
    return True


def _fitted(value: Any, shape: tuple[int, ...]) -> Any:
    """``value`` with the axes of length 1 that Zarr dropped (integer selections along
    them) put back, so that it has ``shape``; any other shape is left for NumPy's
    assignment rules to take or refuse, as Zarr's own merge does."""
    if value.shape == shape or len(value.shape) >= len(shape):
        return value
    if tuple(n for n in value.shape if n != 1) != tuple(n for n in shape if n != 1):
        return value
    return value.reshape(shape)


def _fill_bits(fill: Any, dtype: np.dtype) -> Any:
    return np.asarray(fill, dtype).reshape(1).view(_BITS[dtype.itemsize])[0]


def _all_fill(chunk: Any, fill: Any) -> bool:
    """Whether every element of ``chunk`` (an NDBuffer) has the fill value's bits."""
    arr = chunk.as_ndarray_like()
    plain = type(arr) is np.ndarray and not arr.dtype.hasobject
    if plain and arr.size and arr.dtype.itemsize in _BITS:
        kind = _BITS[arr.dtype.itemsize]
        want = _fill_bits(fill, arr.dtype)
        if np.asarray(arr[(0,) * arr.ndim]).reshape(1).view(kind)[0] != want:
            return False  # (the usual case: no pass over the chunk)
        return bool((np.ascontiguousarray(arr).reshape(-1).view(kind) == want).all())
    return bool(chunk.all_equal(fill))  # (device buffers, other element sizes: Zarr's)


def _filled(spec: Any, native: np.dtype, fill: Any) -> Any:
    """A chunk of the fill value in the spec's prototype; on the host written as bits
    (ml_dtypes' own fill runs element by element)."""
    proto = spec.prototype.nd_buffer
    if native.itemsize in _BITS and not native.hasobject:
        arr = np.full(spec.shape, _fill_bits(fill, native), _BITS[native.itemsize])
        nd = proto.from_ndarray_like(arr.view(native))
        if type(nd.as_ndarray_like()) is np.ndarray:
            return nd
    return proto.create(shape=spec.shape, dtype=native, order=spec.order, fill_value=fill)


class DirectChunks(ArrayBytesCodecPartialEncodeMixin):
    """Zarr's partial-encode hook over the codec's own ``_encode_sync`` / ``_decode_sync``
    (see the module's docstring)."""

    async def _encode_partial_single(
        self, byte_setter: Any, value: Any, selection: Any, chunk_spec: Any
    ) -> None:
        whole = _covers(selection, tuple(chunk_spec.shape))
        existing = None if whole else await byte_setter.get(prototype=chunk_spec.prototype)
        frame = await asyncio.to_thread(
            self._chunk_frame, existing, value, selection, chunk_spec, whole
        )
        if frame is None:
            await byte_setter.delete()
        else:
            await byte_setter.set(frame)

    def _chunk_frame(
        self, existing: Any, value: Any, selection: Any, spec: Any, whole: bool
    ) -> Any:
        """The chunk's stored bytes, or ``None`` where it is to be deleted (empty)."""
        shape = tuple(spec.shape)
        native = spec.dtype.to_native_dtype()
        fill = spec.fill_value
        if fill is None:  # (Zarr v2 metadata may leave it out)
            fill = spec.dtype.default_scalar()
        chunk = None
        if whole and value.shape != ():
            fitted = _fitted(value, shape)
            chunk = fitted if fitted.shape == shape else None
        if chunk is None:
            if existing is not None:
                chunk = self._decode_sync(existing, spec).copy()  # type: ignore[attr-defined]
            else:
                chunk = _filled(spec, native, fill)
            if value.shape == ():
                chunk[selection] = value
            else:
                chunk[selection] = _fitted(value, chunk[selection].shape)
        if not spec.config.write_empty_chunks and _all_fill(chunk, fill):
            return None
        return self._encode_sync(chunk, spec)  # type: ignore[attr-defined]
