"""Frames of the ``nncodecs.weights`` codec from and to arrays of their element type.

What the codec's shells (:mod:`nncodecs.codecs.weights`) and a Reader's whole
reads (:mod:`nncodecs.container.decoding`) share; none of it needs Zarr or
numcodecs, so a process that only reads a container never imports them.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.dtypes import dtype_name, float_layout, native_dtype, normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.frame.buffers import as_byte_view, little_endian
from nncodecs.frame.decode import decode_frame
from nncodecs.frame.encode import encode_frame
from nncodecs.frame.info import big_endian_frame, frame_decoded_len, frame_element
from nncodecs.frame.params import frame_settings, row_length

__all__ = ["CODEC_ID", "decode_weights", "encode_weights", "stated_dtype"]

CODEC_ID = "nncodecs.weights"
_NO_DTYPE = "the frame states no element type (a version 1 or 2 frame, or a byte coder's)"


def encode_weights(arr: Any, settings: dict[str, Any], threads: int | None = None) -> bytes:
    """Frame of an array's elements (C order): reorder + split + coder, fused.

    Big-endian elements are coded little-endian and the frame (version 4)
    records their order, so that decoding gives back the bytes that came in.
    """
    big = arr.dtype.byteorder == ">" and arr.dtype.itemsize > 1
    arr = little_endian(arr)
    return encode_frame(
        as_byte_view(arr),
        **frame_settings(settings, arr.dtype),
        threads=threads,
        row_length=row_length(arr.shape),
        big_endian=big,
    )


def _element_types(dtype: Any) -> tuple[np.dtype, np.dtype, str, str]:
    """(dtype, its native-order twin, kernel layout, name): looked up once per dtype."""
    try:
        return _element_types_cached(dtype)
    except TypeError:  # unhashable, or not a dtype: the uncached call says which
        target = normalize_dtype(dtype)
        return target, native_dtype(target), float_layout(target), dtype_name(target)


@functools.lru_cache(maxsize=64)
def _element_types_cached(dtype: Any) -> tuple[np.dtype, np.dtype, str, str]:
    target = normalize_dtype(dtype)
    return target, native_dtype(target), float_layout(target), dtype_name(target)


def stated_dtype(buf: Any) -> str | None:
    """The element type a frame records, or ``None`` where it states none
    (frames of versions 1 and 2, and of byte coders given no dtype)."""
    name = frame_element(buf)
    return None if name == "bytes" else name


def decode_weights(
    buf: Any,
    dtype: Any,
    count: int | None,
    out: Any = None,
    threads: int | None = None,
    as_stored: bool = False,
) -> Any:
    """Elements of ``dtype`` (a flat array, or ``out``) from a frame of ``count`` elements
    (``None``: as many as the frame holds). A frame that records another
    element type raises :class:`nncodecs.CorruptDataError`; ``dtype=None``
    takes the frame's own (``ValueError`` where it states none).

    ``as_stored``: the elements in the byte order the frame records (big-endian
    for a version 4 frame: numcodecs' rule, the bytes back as they came in);
    otherwise in ``dtype``'s order. ``out`` receives the bytes of the array
    returned so.
    """
    if dtype is None:
        dtype = stated_dtype(buf)
        if dtype is None:
            raise ValueError(f"{CODEC_ID}: {_NO_DTYPE}; decoding needs a dtype")
    target, native, layout, name = _element_types(dtype)
    coded = native  # what the decoder writes: the frame's byte order
    if big_endian_frame(buf):
        if native.kind not in "biufc":
            raise CorruptDataError(f"{CODEC_ID}: a frame of big-endian {name} elements")
        coded = native.newbyteorder(">")
        if as_stored:
            target = coded
    settings = {
        "elements": True,
        "layout": layout,
        "planes": target.itemsize,
        "threads": threads,
        "dtype": name,
    }
    if count is None:
        if out is None and coded == target:
            # One pass over the frame's header: decode_frame sizes the output.
            raw = decode_frame(buf, **settings)
            if raw.nbytes % target.itemsize:
                raise CorruptDataError(
                    f"{CODEC_ID}: {raw.nbytes} decoded bytes are not whole {target}"
                )
            return raw.view(target)
        count = frame_decoded_len(buf) // target.itemsize
    dest = out
    if out is None or coded != target:
        # (memory the output cache holds, already mapped: a fresh array per chunk
        # page-faulted through every megabyte of it again)
        dest = _core.output_buffer(count * coded.itemsize).view(coded)
    decode_frame(buf, out=dest, max_decoded=count * target.itemsize, **settings)
    if coded != target:
        dest = dest.astype(target)
        if out is None:
            return dest
        from numcodecs.compat import ndarray_copy  # (other byte orders only)

        return ndarray_copy(dest, out)
    return dest
