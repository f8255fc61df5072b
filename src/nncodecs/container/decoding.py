"""Whole arrays of the weights codec read without Zarr's pipeline.

Zarr decodes each chunk into a chunk-sized buffer on a worker thread of its
event loop, then copies it into the output. A Reader instead reads an array's
stored objects in batches (a window of shards or chunks at a time) and decodes
each frame straight into its rows of the output; only the padded last chunk
goes through a buffer of its own. Each frame's C++ decoder spreads the chunk
over the codec's threads.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.codecs.weights import Weights, decode_weights
from nncodecs.container import storage
from nncodecs.errors import CorruptDataError

__all__ = ["read_weights"]

#: Stored objects covering about this many bytes of the array are read at once.
#: (32 MiB before: decompressing the generated 1 GiB model peaked at 154 MiB, now
#: 134, at the same speed; a window decodes as fast as its chunks.)
WINDOW_BYTES = 8 << 20
#: A chunk may be larger than its tensor (Zarr pads it) up to this size.
_PADDED_FREE = 64 << 20


def read_weights(z: Any, strict: bool) -> np.ndarray | None:
    """The whole array ``z``, if its chunks are weights frames laid out as nncodecs
    writes them (else ``None``: read it through Zarr). A chunk never written is
    fill values, or, when ``strict`` (every chunk recorded), a CorruptDataError."""
    codecs = storage.inner_codecs(z)
    if codecs is None or [c["name"] for c in codecs] != [Weights.codec_id]:
        return None
    g = storage.grid(z)
    if g is None:
        return None
    shape = tuple(int(d) for d in z.shape)
    # (memory the decoder's output cache holds where it fits: no page faults while the
    # frames decode into it, which on some machines cost more than the decoding)
    nbytes = math.prod(shape) * z.dtype.itemsize
    out = _core.output_buffer(nbytes).view(z.dtype).reshape(shape)
    if out.size == 0:
        return out
    if not shape:  # one chunk, one element
        flat = out.reshape(1)
        rows, view = 1, flat
    else:
        rows, view = int(z.chunks[0]), out
    per_chunk = rows * math.prod(shape[1:])
    if per_chunk * z.dtype.itemsize > max(nbytes, _PADDED_FREE):  # (never allocated: forged)
        raise CorruptDataError(f"{z.path!r}: chunks of {rows} rows, the tensor has {shape[0]}")
    at = 0
    for window in storage.chunk_windows(z, WINDOW_BYTES, g):
        for frame in window:
            stop = min(at + rows, view.shape[0])
            part = view[at:stop]
            if frame is None:
                if strict:
                    raise CorruptDataError(f"chunk {at // rows} of {z.path!r} is missing")
                part[...] = z.fill_value
            elif stop - at == rows:
                decode_weights(frame, z.dtype, per_chunk, out=part.reshape(-1))
            else:  # the last chunk, padded to full size
                full = decode_weights(frame, z.dtype, per_chunk)
                part[...] = full[: part.size].reshape(part.shape)
            at = stop
    if at != view.shape[0]:
        raise CorruptDataError(f"{z.path!r}: its chunks cover {at} of {view.shape[0]} rows")
    return out
