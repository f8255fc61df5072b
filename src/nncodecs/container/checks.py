"""What a Reader checks around a whole-tensor read, and the chunk frames that
it (and a device read) takes straight from storage instead of through Zarr.

The checks of every key a Reader reads are :class:`nncodecs.store.files.ContainerFiles`'.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.container import layout, records
from nncodecs.errors import CorruptDataError
from nncodecs.frame.weights import CODEC_ID
from nncodecs.store import storage

__all__ = ["check_crc", "check_size", "chunk_frames", "member_problems", "named_error"]

#: Tensors up to this size are read without checking their declared size first.
_SIZE_CHECK_FROM = 64 << 20
#: A tensor that declares more than this many times its stored bytes has its
#: frames' own sizes checked before its output is allocated.
_RATIO_CHECK = 64
#: A tensor may declare up to this many chunks whatever it stores. Past it: a tensor
#: recorded as fully written no more than its stored objects hold (a shard's chunks
#: each), nor than its stored bytes (a stored chunk has at least one); one written
#: before that record (Zarr left out shards of zeros) no more than _MISSING_AT_MOST
#: times them; a sharded one no more inner chunks than its shards' indexes (16 bytes
#: a chunk) fit in its stored bytes. Zarr looks up every chunk of the grid: a forged
#: chunk shape of [1, 1] on a 1024 x 1024 tensor took 34 s of lookups before the
#: first error, and a forged run of 65,536 left Zarr's pending lookups slowing the exit.
_FREE_CHUNKS = 1 << 12
_MISSING_AT_MOST = 1024


#: (with other keys than nncodecs writes, the checks could not see chunks Zarr misses)
_KEYS = "its chunk key encoding is not Zarr's default, which nncodecs writes"
_UNRECORDED = "no record of its chunks, which every tensor of this container has"


def member_problems(
    name: str, kind: str, arrays: list[tuple[Any, Any]], every_recorded: bool
) -> tuple[str | None, dict[str, Any]]:
    """How a tensor's arrays (``(array, its nncodecs attributes)``) contradict their
    records (the first problem; ``every_recorded``: the container says every tensor has
    them), and the store's checks of those whose every chunk is recorded (by path)."""
    from nncodecs.store.files import Strict

    found, strict = None, {}
    for z, zattrs in arrays:
        every = isinstance(zattrs, dict) and zattrs.get("chunks") == layout.CHUNKS_ALL
        problem = (
            records.shape_problem(z, zattrs)
            or storage.other_index(z)
            or (_UNRECORDED if every_recorded and not every else None)
            or (_KEYS if every and not storage.default_keys(z) else None)
        )
        if problem is not None and found is None:
            part = "" if kind == "dense" else f" ({z.basename})"
            found = f"tensor {name!r}{part}: {problem}"
        grid = storage.grid(z) if every else None
        if grid is not None:
            strict[z.path] = Strict(name, grid)
    return found, strict


def named_error(where: str, name: Any, exc: Exception) -> CorruptDataError:
    """``exc`` as a CorruptDataError saying ``<container>: tensor '<name>': what`` (or
    ``kept file '<name>'`` for a kept file's key)."""
    msg = str(exc).removeprefix(f"{where}: ")
    what = f"tensor {name!r}" if isinstance(name, str) else f"kept file {name[1]!r}"
    if not msg.startswith(("tensor ", "kept file ")):
        msg = f"{what}: {msg}"
    msg = msg.replace(f"tensor {name!r}", what)
    return CorruptDataError(f"{where}: {msg}")


def check_crc(name: str, z: Any, value: Any, part: str | None = None) -> None:
    """A whole array's bytes against the CRC32C recorded at write (raw, zstd)."""
    attrs = z.attrs.get(layout.ATTRS_KEY)
    want = attrs.get("crc32c") if isinstance(attrs, dict) else None
    if want is None:
        return
    if not isinstance(want, int):
        raise CorruptDataError(f"tensor {name!r}: its crc32c record {want!r:.40} is damaged")
    got = _core.crc32c(np.ascontiguousarray(value).reshape(-1).view(np.uint8))
    if got != want:
        what = f"tensor {name!r}" + (f" ({part})" if part else "")
        raise CorruptDataError(f"{what}: CRC32C {got:#010x}, recorded {want:#010x}")


def check_size(z: Any, store: Any) -> None:
    """Before an array is read: its declared chunk count, and for a large one its
    declared size, against its stored chunks (a forged shape or chunk shape in
    zarr.json must not allocate gigabytes, nor look up a million chunks).

    A declared size past _RATIO_CHECK times the stored bytes has the chunks'
    own decoded sizes read from their frames (those bytes are small, by that
    very ratio); an array recorded as fully written must have every chunk.
    """
    chunks = [int(c) for c in z.chunks]
    count = math.prod(-(-int(d) // max(c, 1)) for d, c in zip(z.shape, chunks, strict=True))
    stored = None
    if count > _FREE_CHUNKS:
        objects, stored = storage.stored_chunks(store, z.path)
        per = 1
        if z.shards is not None:
            per = math.prod(int(s) // max(c, 1) for s, c in zip(z.shards, chunks, strict=True))
        held = objects * per
        bad = (per > 1 and held * 16 > stored) or (
            count > min(stored, held) if z.path in store.strict else count > held * _MISSING_AT_MOST
        )
        if bad:
            raise CorruptDataError(
                f"declares {count} chunks of {chunks} in {objects} stored objects ({stored} bytes)"
            )
    nbytes = int(z.nbytes)
    if nbytes <= _SIZE_CHECK_FROM:
        return
    if stored is None:
        stored = storage.stored_nbytes(store, z.path)
    if nbytes <= stored * _RATIO_CHECK:
        return
    grid = storage.grid(z)
    if grid is not None and grid.objects > max(stored, 1):  # (each stored object has a byte)
        raise CorruptDataError(f"declares {grid.objects} chunks in {stored} stored bytes")
    names = [c["name"] for c in storage.codec_dicts(z)]
    chunk_nbytes = math.prod(z.chunks) * z.dtype.itemsize
    frames = chunk_frames(z, fill=False)
    if frames is None:
        raise CorruptDataError(
            f"declares {nbytes} bytes ({'+'.join(names)}) in {stored} stored bytes"
        )
    present = [f for f in frames if f is not None]
    if z.path in store.strict and len(present) != len(frames):
        raise CorruptDataError(f"{len(frames) - len(present)} of {len(frames)} chunks are missing")
    for frame in present:
        got = _decoded_len(frame, chunk_nbytes)
        if got != chunk_nbytes:
            raise CorruptDataError(
                f"declares chunks of {chunk_nbytes} bytes; a stored one decodes to {got}"
            )


def _decoded_len(frame: np.ndarray, limit: int) -> int:
    """The size a weights or zstd frame says it decodes to (-1: it does not say)."""
    if frame[:4].tobytes() == b"\x28\xb5\x2f\xfd":
        import zstandard

        try:
            return int(zstandard.frame_content_size(frame.tobytes()))
        except zstandard.ZstdError:
            return -1
    try:
        info = _core.frame_index(frame, max(limit, 1), int(frame.size))
    except (ValueError, RuntimeError):
        return -1
    return int(info["decoded_len"]) if info else -1


def chunk_frames(z: Any, fill: bool = True) -> list[Any] | None:
    """The ``weights`` (or, without ``fill``, ``zstd``) frames of an array's chunks,
    in order, as the Writer lays them out (see :func:`storage.grid`); ``None``
    for any other codec or layout. A chunk never written (all fill value) gets
    a frame of fill values, encoded here (without ``fill``: ``None``)."""
    codecs = storage.inner_codecs(z)
    if codecs is None:
        return None
    names = [c["name"] for c in codecs]
    if names != [CODEC_ID] and (fill or names != ["bytes", "zstd"]):
        return None
    chunks = storage.chunk_bytes([z])[0]
    if chunks is None or not fill or all(c is not None for c in chunks):
        return chunks
    from nncodecs.codecs.weights import NumcodecsWeights

    data = np.full(z.chunks, z.fill_value, dtype=z.dtype)
    filler = np.frombuffer(NumcodecsWeights(**codecs[0]["configuration"]).encode(data), np.uint8)
    return [filler if c is None else c for c in chunks]
