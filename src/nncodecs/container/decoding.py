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
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError
from nncodecs.frame.weights import CODEC_ID, decode_weights
from nncodecs.store import storage

__all__ = ["read_weights", "tensor_pieces", "weights_pieces"]

#: Stored objects covering about this many bytes of the array are read at once.
#: (32 MiB, then 8: decompressing the generated 1 GiB model peaked at 154, then 134
#: MiB. At 2 MiB a decoded window is still in cache when the writing thread copies it
#: into the page cache: decompressing the 24-copy model 1.41-1.61 -> 1.31-1.42 s and
#: gen1g 0.95-1.92 -> 0.80-0.90 s, peak RSS 20 MiB lower; loads into torch unchanged,
#: interleaved whole-process runs on the 2-core AMD EPYC.)
WINDOW_BYTES = 2 << 20
#: A chunk may be larger than its tensor (Zarr pads it) up to this size.
_PADDED_FREE = 64 << 20


def read_weights(z: Any, strict: bool, each: Any = None) -> np.ndarray | None:
    """The whole array ``z``, if its chunks are weights frames laid out as nncodecs
    writes them (else ``None``: read it through Zarr). A chunk never written is
    fill values, or, when ``strict`` (every chunk recorded), a CorruptDataError.
    ``each(rows, first)``: called on each window of rows as it is decoded, while it is
    in cache (a delta's transform undone there)."""
    plan = _plan(z)
    if plan is None:
        return None
    g, shape, nbytes = plan
    # (memory the decoder's output cache holds where it fits: no page faults while the
    # frames decode into it, which on some machines cost more than the decoding)
    out = _core.output_buffer(nbytes).view(z.dtype).reshape(shape)
    if out.size:
        view = out.reshape(1) if not shape else out
        at = 0
        for rows in _windows(z, strict, g, view.shape, lambda at, stop: view[at:stop]):
            if each is not None:
                each(rows, at)
            at += len(rows)
    return out


def weights_pieces(z: Any, strict: bool) -> Iterator[np.ndarray]:
    """:func:`read_weights` a window of stored objects at a time: the array's bytes in
    order, each piece a uint8 array of its own (about WINDOW_BYTES of the array), so
    that a caller writing them out never holds the whole array. ``z`` must be laid out
    as nncodecs writes the weights codec's arrays (a ``Declared`` is)."""
    plan = _plan(z)
    if plan is None:
        raise CorruptDataError(f"{z.path!r} is not laid out as the weights codec's arrays")
    g, shape, nbytes = plan
    rows_shape = shape or (1,)
    row = math.prod(rows_shape[1:]) * z.dtype.itemsize

    def piece(at: int, stop: int) -> np.ndarray:
        buf = _core.output_buffer((stop - at) * row)
        return buf.view(z.dtype).reshape((stop - at, *rows_shape[1:]))

    pieces = _windows(z, strict, g, rows_shape, piece) if nbytes else iter(())
    return (p.reshape(-1).view(np.uint8) for p in pieces)


def _plan(z: Any) -> tuple[storage.Grid, tuple[int, ...], int] | None:
    """(grid, shape, bytes) of a weights array laid out as nncodecs writes them."""
    codecs = storage.inner_codecs(z)
    if codecs is None or [c["name"] for c in codecs] != [CODEC_ID]:
        return None
    g = storage.grid(z)
    if g is None:
        return None
    shape = tuple(int(d) for d in z.shape)
    return g, shape, math.prod(shape) * z.dtype.itemsize


def _windows(
    z: Any,
    strict: bool,
    g: storage.Grid,
    view_shape: tuple[int, ...],
    dest: Callable[[int, int], np.ndarray],
) -> Iterator[np.ndarray]:
    """Decode the chunks of ``z`` (rows of ``view_shape``) into ``dest(first row, stop
    row)`` about WINDOW_BYTES at a time (a shard's chunks too), yielding each filled
    destination."""
    total = view_shape[0]
    rows = int(z.chunks[0]) if len(z.shape) else 1
    per_chunk = rows * math.prod(view_shape[1:])
    nbytes = math.prod(view_shape) * z.dtype.itemsize
    if per_chunk * z.dtype.itemsize > max(nbytes, _PADDED_FREE):  # (never allocated: forged)
        raise CorruptDataError(f"{z.path!r}: chunks of {rows} rows, the tensor has {total}")
    at = 0
    step = max(1, WINDOW_BYTES // (per_chunk * z.dtype.itemsize))  # (chunks a destination)
    windows = storage.chunk_windows(z, WINDOW_BYTES, g)
    for group in (w[i : i + step] for w in windows for i in range(0, len(w), step)):
        first = at
        buf = dest(first, min(at + rows * len(group), total))
        for frame in group:
            end = min(at + rows, total)
            part = buf[at - first : end - first]
            if frame is None:
                if strict:
                    raise CorruptDataError(f"chunk {at // rows} of {z.path!r} is missing")
                part[...] = z.fill_value
            elif end - at == rows:
                decode_weights(frame, z.dtype, per_chunk, out=part.reshape(-1))
            else:  # the last chunk, padded to full size
                full = decode_weights(frame, z.dtype, per_chunk)
                part[...] = full[: part.size].reshape(part.shape)
            at = end
        yield buf
    if at != total:
        raise CorruptDataError(f"{z.path!r}: its chunks cover {at} of {total} rows")


def read_on_device(r: Any, name: str, z: Any, to: str, device: str) -> Any:
    """A dense tensor (its Zarr array ``z``, of the Reader ``r``) decoded on a GPU:
    the frames of all its chunks in one batch; other codecs decoded on the host,
    checked, then copied (``Reader.read_tensor(name, device=...)``)."""
    from nncodecs.codecs.placement import decode_chunks_on_device, host_to_device
    from nncodecs.container.checks import check_size, chunk_frames

    try:
        check_size(z, r.chunk_reads)  # (before any chunk is looked up)
    except CorruptDataError as exc:
        raise r.corrupt(name, exc) from None
    frames = chunk_frames(z)
    if frames is None:  # not the weights codec: decoded on the host, then one copy
        return host_to_device(device, r.read_tensor(name, check=True), tuple(z.shape), to)
    chunk_nbytes = math.prod(z.chunks) * z.dtype.itemsize
    try:
        return decode_chunks_on_device(device, frames, z.dtype, chunk_nbytes, tuple(z.shape), to)
    except CorruptDataError as exc:
        raise CorruptDataError(f"tensor {name!r}: {exc}") from exc


def tensor_pieces(r: Any, name: str, own: Any) -> Iterator[np.ndarray]:
    """Reader ``r``'s dense tensor ``name`` as :meth:`nncodecs.Reader.read_pieces` gives
    it (``own``: its array as its document declares it, ``None`` where Zarr's serves)."""
    from nncodecs.container import layout
    from nncodecs.container.checks import check_size

    record = own.attrs.get(layout.ATTRS_KEY) if own is not None else None
    if own is None or not isinstance(record, dict) or "crc32c" in record:
        whole = r.read_tensor(name, check=True)
        return iter([np.ascontiguousarray(whole).reshape(-1).view(np.uint8)])

    def pieces() -> Iterator[np.ndarray]:
        with r.as_corrupt(name):
            if math.prod(own.shape):
                check_size(own, r.chunk_reads)
            yield from weights_pieces(own, r.is_strict(own.path))

    return pieces()
