"""A tensor's stored objects (chunks, or shards of chunks), encoded without Zarr's pipeline.

Zarr's codec pipeline gives each chunk to a codec through its event loop and a
worker thread; a model of thousands of tensors pays that per chunk and per
array. Here a tensor's chunks go straight to the codec (whose C++ encoder
spreads each chunk over its own threads) and come out as the bytes Zarr would
store under the same metadata: chunks along the first axis, the last one
padded to full size with the fill value (zero), and shards as
``sharding_indexed`` lays them out with its index at the end (an (offset,
length) pair of little-endian uint64 a chunk, then their CRC32C). A test reads
every kind back through plain Zarr.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np

from nncodecs import _core
from nncodecs.store.documents import Template
from nncodecs.store.storage import EMPTY

__all__ = ["objects"]


def _chunk(arr: np.ndarray, start: int, rows: int) -> np.ndarray:
    """Rows ``start:start+rows`` of ``arr``, zero-padded to ``rows`` past its end."""
    part = arr[start : start + rows]
    if part.shape[0] == rows:
        return np.ascontiguousarray(part)
    full = np.zeros((rows, *arr.shape[1:]), arr.dtype)
    full[: part.shape[0]] = part
    return full


def shard(chunks: Iterable[bytes], per: int) -> bytearray:
    """A shard of ``per`` chunks holding ``chunks`` (the first ones; the rest are absent).

    Each chunk is appended as it comes and dropped: a shard's chunks and a copy
    of them never sit in memory together (joined at the end, they had raised
    compressing MiniLM float32 to 155 MiB, its 32 MiB shard held twice)."""
    index = np.full((per, 2), EMPTY, "<u8")
    out = bytearray()
    for i, data in enumerate(chunks):
        index[i] = (len(out), len(data))
        out += data
        del data
    tail = index.tobytes()
    out += tail
    out += int(_core.crc32c(np.frombuffer(tail, np.uint8))).to_bytes(4, "little")
    return out


def objects(
    arr: np.ndarray,
    tmpl: Template,
    chunks: tuple[int, ...],
    shards: tuple[int, ...] | None,
    first: int = 0,
) -> Iterator[tuple[str, bytes | bytearray]]:
    """(key relative to the array, bytes) of each stored object of ``arr`` (C-contiguous,
    little-endian), in grid order: one at a time, so a large tensor never has its
    whole compressed copy in memory. ``first``: the grid index of ``arr``'s first
    object, where ``arr`` is a slab of whole objects (shards, or chunks) of a larger
    array that starts there; its last object is padded as the array's last."""
    encode = tmpl.encode
    if arr.size == 0:
        return
    if arr.ndim == 0:
        yield "c", encode(arr)
        return
    tail = "/0" * (arr.ndim - 1)
    rows = int(chunks[0])
    count = math.ceil(arr.shape[0] / rows)
    if shards is None:
        for i in range(count):
            yield f"c/{first + i}{tail}", encode(_chunk(arr, i * rows, rows))
        return
    per = int(shards[0]) // rows
    for s in range(math.ceil(count / per)):
        inner = range(s * per, min(count, (s + 1) * per))
        yield (
            f"c/{first + s}{tail}",
            shard((encode(_chunk(arr, i * rows, rows)) for i in inner), per),
        )
