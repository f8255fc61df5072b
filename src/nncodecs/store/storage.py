"""Where a container's chunks lie in a Zarr store: the one module that knows.

Chunk keys (Zarr v3's default encoding, ``<array>/c/<i>/<j>...``), the chunk
grid nncodecs writes (chunks along the first axis only, in shards or not),
the index at the end of a shard, and batched reads and writes of many
chunks, of many arrays, in one call on Zarr's event loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError

__all__ = [
    "EMPTY",
    "SHARD_INDEX",
    "Grid",
    "ShardIndex",
    "chunk_bytes",
    "chunk_windows",
    "codec_dicts",
    "exist_many",
    "get_many",
    "grid",
    "index_nbytes",
    "inner_codecs",
    "other_index",
    "parse_chunk_key",
    "read_many",
    "set_many",
    "shard_index",
    "single_chunk_key",
    "store_of",
    "stored_nbytes",
    "stored_sizes",
]

#: A shard-index entry (offset and length) of a chunk never written.
EMPTY = 2**64 - 1


def single_chunk_key(ndim: int) -> str:
    """The key of chunk (0, ..., 0), relative to its array, under Zarr v3's
    default chunk key encoding."""
    return "/".join(["c"] + ["0"] * ndim)


def parse_chunk_key(key: str, arrays: Mapping[str, Any]) -> tuple[Any, tuple[int, ...]] | None:
    """(``arrays[path]``, chunk coordinates) of a chunk key of one of ``arrays``
    (keyed by array path); ``None`` for any other key."""
    parts = key.split("/")
    for j in range(len(parts) - 1, 0, -1):
        if parts[j] == "c":
            node = arrays.get("/".join(parts[:j]))
            if node is not None:
                try:
                    return node, tuple(int(p) for p in parts[j + 1 :])
                except ValueError:
                    return None
    return None


def stored_nbytes(store: Any, path: str) -> int:
    """The bytes of an array's chunks in a store."""
    return stored_chunks(store, path)[1]


def stored_chunks(store: Any, path: str) -> tuple[int, int]:
    """How many objects hold an array's chunks in a store, and their bytes: from a
    zip's directory or a folder's entries where the store is local (see
    :meth:`ContainerFiles.stored_chunks`; a CheckedStore's ``files``), else from
    Zarr's listing and its throttled sizes."""
    files = getattr(store, "files", store)
    local = files.stored_chunks(path) if hasattr(files, "stored_chunks") else None
    if local is not None:
        return local
    from zarr.core.sync import sync

    head = f"{path}/c"  # (a 0-d array's one chunk is "c" itself)

    async def listed() -> int:
        return len([k async for k in store.list_prefix(head) if k == head or k[len(head)] == "/"])

    return sync(listed()), int(sync(store.getsize_prefix(head)))


def stored_sizes(store: Any) -> dict[str, int]:
    """The bytes of every node in a store (its chunks and its ``zarr.json``; in a
    zip, as stored: metadata deflated), by path, from one listing (of the local
    files where ``store`` is a ContainerFiles, else Zarr's).

    Asking array by array lists the store once per array (a zip's whole directory
    each time): quadratic in the tensors of a model.
    """

    async def sizes() -> list[tuple[str, int]]:
        import asyncio

        keys = [key async for key in store.list()]
        got = await asyncio.gather(*(store.getsize(key) for key in keys))
        return list(zip(keys, got, strict=True))

    found = store.stored_keys() if hasattr(store, "stored_keys") else None
    if found is None:
        from zarr.core.sync import sync

        found = sync(sizes())
    out: dict[str, int] = {}
    for key, n in found:
        path = _array_of(key)
        if path is not None:
            out[path] = out.get(path, 0) + int(n)
    return out


def _array_of(key: str) -> str | None:
    """The node a key belongs to: ``<node>/zarr.json``, ``<node>/c``, ``<node>/c/<i>/...``."""
    for tail in ("/zarr.json", "/c"):
        if key.endswith(tail):
            return key[: -len(tail)]
    path, sep, index = key.rpartition("/c/")
    return path if sep and index.replace("/", "").isdigit() else None


# -- the grid and the shard index -------------------------------------------------------


@dataclass(frozen=True)
class Grid:
    """The chunk grid of an array laid out as nncodecs writes them."""

    count: int  # chunks along the first (only chunked) axis
    per: int  # chunks per shard, 0 when unsharded

    @property
    def objects(self) -> int:
        """The stored objects: shards, or chunks when unsharded."""
        return -(-self.count // self.per) if self.per else self.count

    def inner(self, shard: int) -> int:
        """Chunks in shard ``shard`` (the last one may hold fewer)."""
        return min(self.per, self.count - shard * self.per)


def grid(z: Any) -> Grid | None:
    """The grid of an array chunked along its first axis only, in shards or
    not; ``None`` for any other layout."""
    shape, chunks = tuple(z.shape), tuple(z.chunks)
    if not all(c > 0 for c in chunks):
        raise CorruptDataError(f"{z.path!r}: its chunk shape {list(chunks)} has an empty side")
    if shape and tuple(chunks[1:]) != tuple(max(1, d) for d in shape[1:]):
        return None
    count = -(-shape[0] // chunks[0]) if shape else 1
    if math.prod(shape) == 0:
        count = 0
    per = 0
    if z.shards is not None:
        if tuple(z.shards[1:]) != tuple(chunks[1:]):
            return None
        per = z.shards[0] // chunks[0]
    return Grid(count, per)


def index_nbytes(per: int) -> int:
    """The bytes of a shard's index: an (offset, length) pair of uint64 a chunk, then a CRC32C."""
    return 16 * per + 4


@dataclass(frozen=True)
class ShardIndex:
    """The index at the end of a shard (or the index alone, read as a suffix)."""

    spans: np.ndarray  # (per, 2) uint64: offset and length of each chunk, EMPTY if absent
    crc_ok: bool  # the index matches its CRC32C
    body: int  # the bytes before the index (where the chunks must lie)

    def in_order(self, count: int) -> bool:
        """Whether the first ``count`` chunks lie in order, none over another (as Zarr and
        nncodecs write them): entries swapped or repeated under a recomputed CRC32C would
        otherwise decode, each frame intact, into the wrong rows."""
        end = 0
        for offset, length in self.spans[:count].tolist():
            if offset == length == EMPTY:
                continue
            if offset < end:
                return False
            end = offset + length
        return True


def shard_index(tail: np.ndarray, per: int) -> ShardIndex | None:
    """The index of a shard (``tail``: the shard, or its last bytes); ``None``
    when ``tail`` is too short to hold one."""
    size = index_nbytes(per)
    if tail.size < size:
        return None
    index = tail[tail.size - size :]
    crc_ok = _core.crc32c(index[:-4]) == int.from_bytes(index[-4:].tobytes(), "little")
    spans = index[:-4].view("<u8").reshape(per, 2)
    return ShardIndex(spans, crc_ok, int(tail.size - size))


#: The codecs of the index at the end of a shard, as Zarr and nncodecs write them.
SHARD_INDEX = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]


def other_index(z: Any) -> str | None:
    """How a sharded array's index is declared otherwise than :data:`SHARD_INDEX` at the
    end (forged: nncodecs reads an index as written, Zarr as declared), or ``None``."""
    codecs = codec_dicts(z)
    if not (len(codecs) == 1 and codecs[0]["name"] == "sharding_indexed"):
        return None
    config = codecs[0]["configuration"]
    index = list(config["index_codecs"])  # (a tuple from a Zarr array's own to_dict)
    if config.get("index_location", "end") == "end" and index == SHARD_INDEX:
        return None
    found = {k: config.get(k) for k in ("index_codecs", "index_location")}
    return f"its shards' index is declared as {found}, not as nncodecs writes it"


def inner_codecs(z: Any) -> list[dict] | None:
    """The codecs of each chunk (inside its shard, if sharded); ``None`` for
    shards whose index is laid out otherwise than at the end, CRC32C-checked."""
    codecs = codec_dicts(z)
    if not (len(codecs) == 1 and codecs[0]["name"] == "sharding_indexed"):
        return codecs
    if other_index(z) is not None:
        return None
    return list(codecs[0]["configuration"]["codecs"])


def codec_dicts(z: Any) -> list[dict]:
    """The JSON of an array's codecs. ``z``: a Zarr array, or an array as its document
    declares it (:class:`nncodecs.container.declared.Declared`: no ``store_path``)."""
    if not hasattr(z, "store_path"):
        return z.codec_dicts
    return [c.to_dict() for c in z.metadata.codecs]  # (not the whole metadata's: slow)


def store_of(z: Any) -> Any:
    """The store an array's chunks are read from (``z`` as for :func:`codec_dicts`)."""
    return z.store_path.store if hasattr(z, "store_path") else z.store


def default_keys(z: Any) -> bool:
    """Whether an array's chunk keys are Zarr v3's default (``<array>/c/<i>/<j>``), the
    keys :func:`parse_chunk_key` knows (``z`` as for :func:`codec_dicts`)."""
    if not hasattr(z, "store_path"):
        return True  # (a Declared is only made of such documents)
    return z.metadata.chunk_key_encoding.to_dict() == {
        "name": "default",
        "configuration": {"separator": "/"},
    }


# -- batched reads and writes -----------------------------------------------------------


async def get_many(store: Any, keys: list[str]) -> list[Any]:
    """The buffers of many keys (``None`` where absent), read concurrently."""
    import asyncio

    from zarr.core.buffer import default_buffer_prototype

    proto = default_buffer_prototype()
    return list(await asyncio.gather(*(store.get(k, prototype=proto) for k in keys)))


def read_many(store: Any, keys: list[str]) -> list[Any]:
    """:func:`get_many` from synchronous code: one call on Zarr's event loop."""
    from zarr.core.sync import sync

    return sync(get_many(store, keys))


async def exist_many(store: Any, keys: list[str]) -> list[bool]:
    """Whether each key is in the store."""
    import asyncio

    return list(await asyncio.gather(*(store.exists(k) for k in keys)))


async def set_many(store: Any, items: Mapping[str, bytes]) -> None:
    """Store many values, concurrently."""
    import asyncio

    from zarr.core.buffer import default_buffer_prototype

    buffer = default_buffer_prototype().buffer
    await asyncio.gather(*(store.set(k, buffer.from_bytes(v)) for k, v in items.items()))


def chunk_bytes(arrays: list[Any]) -> list[list[np.ndarray | None] | None]:
    """The stored bytes of every chunk of each array (arrays of one store), in
    grid order (``None`` for a chunk never written), every shard of every
    array read in one batch.

    An array not laid out as nncodecs writes them (see :func:`grid`,
    :func:`inner_codecs`) gets ``None``. A shard whose index fails its
    CRC32C, or points past the shard's chunks, is a CorruptDataError."""
    plans: list[tuple[Any, Grid] | None] = []
    keys: list[str] = []
    for z in arrays:
        g = grid(z)
        if g is None or inner_codecs(z) is None:
            plans.append(None)
            continue
        plans.append((z, g))
        ndim = len(z.shape)
        keys += [_chunk_key(z, (i, *[0] * (ndim - 1)) if ndim else ()) for i in range(g.objects)]
    buffers = iter(_read(store_of(arrays[0]), keys) if keys else [])
    out: list[list[np.ndarray | None] | None] = []
    for plan in plans:
        if plan is None:
            out.append(None)
            continue
        z, g = plan
        if not g.per:
            out.append([next(buffers) for _ in range(g.count)])
            continue
        chunks: list[np.ndarray | None] = []
        for s in range(g.objects):
            chunks += _shard_chunks(z, s, g, next(buffers))
        out.append(chunks)
    return out


def chunk_windows(
    z: Any, max_bytes: int, g: Grid | None = None
) -> Iterator[list[np.ndarray | None]]:
    """The stored bytes of an array's chunks (laid out as :func:`chunk_bytes` reads
    them), in grid order, a window of stored objects at a time: objects covering
    about ``max_bytes`` of the array are read in one batch, so a large array
    never has its whole stored copy in memory. ``g``: its :func:`grid`, when the
    caller has it already (and has checked :func:`inner_codecs`)."""
    if g is None:
        g = grid(z)
        if g is None or inner_codecs(z) is None:
            raise ValueError(f"{z.path!r} is not laid out as nncodecs writes arrays")
    ndim = len(z.shape)
    covers = math.prod(z.shards or z.chunks) * z.dtype.itemsize
    step = max(1, max_bytes // max(1, covers))
    store = store_of(z)
    for first in range(0, g.objects, step):
        objects = range(first, min(g.objects, first + step))
        keys = [_chunk_key(z, (i, *[0] * (ndim - 1)) if ndim else ()) for i in objects]
        got = _read(store, keys)
        if not g.per:
            yield got
            continue
        chunks: list[np.ndarray | None] = []
        for s, raw in zip(objects, got, strict=True):
            chunks += _shard_chunks(z, s, g, raw)
        yield chunks


def _read(store: Any, keys: list[str]) -> list[np.ndarray | None]:
    """The values of ``keys`` as uint8 arrays (``None`` where absent): read here and now
    where the store can, else in one batch on Zarr's event loop."""
    now = getattr(store, "read_now", None)
    got = now(keys) if now is not None else None
    return got if got is not None else [_bytes_of(b) for b in read_many(store, keys)]


def _chunk_key(z: Any, coords: tuple[int, ...]) -> str:
    if not hasattr(z, "store_path"):
        return z.chunk_key(coords)
    prefix, key = z.store_path.path, z.metadata.encode_chunk_key(coords)
    return f"{prefix}/{key}" if prefix else key


def _bytes_of(buf: Any) -> np.ndarray | None:
    return None if buf is None else np.frombuffer(buf.to_bytes(), np.uint8)


def _shard_chunks(z: Any, s: int, g: Grid, raw: np.ndarray | None) -> list[np.ndarray | None]:
    inner = g.inner(s)
    if raw is None:
        return [None] * inner
    index = shard_index(raw, g.per)
    if index is None or not index.crc_ok:
        raise CorruptDataError(f"shard {s} of {z.path!r}: its chunk index fails its CRC32C")
    if not index.in_order(inner):
        raise CorruptDataError(f"shard {s} of {z.path!r}: its chunk index is out of order")
    chunks: list[np.ndarray | None] = []
    for offset, length in index.spans[:inner].tolist():
        if offset == length == EMPTY:
            chunks.append(None)
        elif offset + length > index.body:
            raise CorruptDataError(f"shard {s} of {z.path!r}: a chunk passes its end")
        else:
            chunks.append(raw[offset : offset + length])
    return chunks
