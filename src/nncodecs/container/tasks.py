"""One container written by many tasks at once: the task API.

A :class:`~nncodecs.Writer` writes a container from one process. Where many
processes write one container together (dask workers, the ranks of a
``torch.distributed`` job), its work comes in three steps:

1. :func:`begin`, once, first: an empty container at the target (an existing
   output refused).
2. Tasks, in any order, in any process, each writing objects no other task
   writes: :func:`write_rows` encodes and writes a slab of rows of one tensor
   (whole shards, or whole chunks: :meth:`TensorPlan.slabs` lists them) and
   returns a :class:`SlabRecord`; :func:`nncodecs.container.series.write_tensor`
   writes one whole tensor, against the container before it in a series, and
   returns a :class:`TensorRecord`. A task holds no open container: it carries
   the target's name (a path or URL) and storage options, and a worker opens
   each store once.
3. :func:`commit`, once, when every task has returned, with all their
   records: it checks that every slab of every planned tensor was written,
   then writes each tensor's document (complete, with its integrity records)
   and last the root document: the order, the metadata and the consolidated
   metadata that make the tensors visible.

Before the commit a Reader of the target sees an empty container: a run that
dies leaves nothing that reads back wrong. Records are plain data (they
pickle, and travel between processes as the tasks' results).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.container import layout
from nncodecs.container.names import check_tensor_name, escape
from nncodecs.dtypes import dtype_name
from nncodecs.outputs import check_output, is_url
from nncodecs.store import documents, encoding, storage

__all__ = [
    "TASK_BYTES",
    "SlabRecord",
    "TensorPlan",
    "TensorRecord",
    "begin",
    "check_begun",
    "commit",
    "commit_objects",
    "little",
    "plan",
    "store_of",
    "write_objects",
    "write_rows",
]

#: A task writes at least about this many bytes (whole chunks) of an unsharded tensor.
TASK_BYTES = 16 << 20


def little(dtype: np.dtype) -> np.dtype:
    """A dtype as a container stores it: little-endian."""
    return dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype


@dataclass(frozen=True)
class TensorPlan:
    """How one tensor is stored: its name, dtype, shape, codec and grid.

    Made by :func:`plan`; the same plan goes to every task writing the tensor
    and to the commit."""

    name: str
    dtype: np.dtype  #: as stored: little-endian
    shape: tuple[int, ...]
    codec: str
    chunk_bytes: int

    @property
    def node(self) -> str:
        """The tensor's array in the group (its escaped name)."""
        return escape(self.name)

    @property
    def grid(self) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
        """(chunks, shards or ``None``), as a Writer chunks the tensor."""
        out = layout.chunking(self.shape, self.dtype.itemsize, self.chunk_bytes, self.codec)
        return tuple(out["chunks"]), out.get("shards")

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def step(self) -> int:
        """The rows of one stored object (a shard, else a chunk)."""
        chunks, shards = self.grid
        return int((shards or chunks)[0]) if self.shape else 1

    def slabs(self, task_bytes: int = TASK_BYTES) -> list[tuple[int, int]]:
        """Row ranges for tasks: each a whole shard, or whole chunks adding up to
        about ``task_bytes``; none for a tensor without elements."""
        if not self.shape:
            return [(0, 1)]
        rows = self.shape[0]
        if math.prod(self.shape) == 0:
            return []
        chunks, shards = self.grid
        if shards:
            step = shards[0]
        else:
            row = max(1, math.prod(self.shape[1:]) * self.dtype.itemsize)
            step = chunks[0] * max(1, task_bytes // max(1, chunks[0] * row))
        return [(s, min(rows, s + step)) for s in range(0, rows, step)]

    def dimension_names(self) -> list[str] | None:
        return [f"{self.node}.{i}" for i in range(len(self.shape))] if self.shape else None

    def template(self) -> documents.Template:
        sharded = self.grid[1] is not None
        return documents.template(self.dtype, len(self.shape), self.codec, sharded)


def plan(
    name: str,
    dtype: Any,
    shape: Iterable[int],
    codec: str = "auto",
    chunk_bytes: int = layout.CHUNK_BYTES,
) -> TensorPlan:
    """The plan of a tensor (``TypeError`` for a dtype a container cannot hold,
    ``ValueError`` for an unknown codec)."""
    check_tensor_name(name)  # (as a Writer: refused here, not by a task after begin)
    dt = little(np.dtype(dtype))
    dtype_name(dt)  # (TypeError: not a dtype a container holds)
    layout.check_codec(codec)
    if int(chunk_bytes) < 1:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes!r}")
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"{name}: a shape has no negative sizes, got {dims}")
    if math.prod(dims) * dt.itemsize >= 1 << 63 or any(d >= 1 << 63 for d in dims):
        raise ValueError(f"{name}: shape {list(dims)} of {dt} is beyond what can be stored")
    return TensorPlan(name, dt, dims, codec, int(chunk_bytes))


@dataclass(frozen=True)
class SlabRecord:
    """What :func:`write_rows` wrote: rows ``start:stop`` of a tensor, with the
    CRC32C and length of their bytes (the commit joins them into the tensor's)."""

    name: str
    start: int
    stop: int
    crc32c: int
    nbytes: int


@dataclass(frozen=True)
class TensorRecord:
    """What a whole-tensor task wrote: the tensor's document (complete once
    committed), and for the tasks after it in a series its hash, chain depth
    and origin (the container and tensor holding its bits)."""

    name: str
    doc: dict[str, Any]
    nbytes: int
    sha256: str | None
    depth: int
    origin: tuple[str, str, int]
    shape: tuple[int, ...]
    dtype: str  #: its name, as a container records it (``nncodecs.dtypes.dtype_name``)


@functools.lru_cache(maxsize=16)
def _store(target: str, options: str) -> Any:
    from nncodecs.store.opening import open_store

    return open_store(target, "a" if "://" in target else "w", json.loads(options) or None)[0]


def store_of(target: str, storage_options: dict[str, Any] | None = None) -> Any:
    """The store of a target in this process (opened once: a worker running a
    task per slab reopens nothing)."""
    return _store(str(target), json.dumps(storage_options or {}, sort_keys=True))


def write_objects(
    target: str, storage_options: dict[str, Any] | None, objects: dict[str, Any]
) -> None:
    """Write objects (key relative to the container: bytes) to a target's store."""
    from zarr.core.sync import sync

    sync(storage.set_many(store_of(target, storage_options), objects))


def begin(
    target: str,
    metadata: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> None:
    """An empty container at ``target``, a directory or URL, marked as being written by
    tasks until its commit (an existing file, a directory that is not empty, or a URL
    that holds data, is refused: nothing is written over; so is a zip, which is
    written in one piece: use a Writer)."""
    from zarr.core.sync import sync

    target = str(target)
    if target.endswith(".zip"):
        raise ValueError(f"{target}: tasks write directory or URL containers, not a zip file")
    if not is_url(target):  # (checked before a store is opened there)
        check_output(Path(target.removeprefix("file://")))
    elif not sync(store_of(target, storage_options).is_empty("")):
        raise FileExistsError(f"{target}: holds data already")
    root = documents.group_doc(layout.root_attrs([], metadata or {}, records=False))
    root["attributes"][layout.ATTRS_KEY][layout.WRITING] = "tasks"
    write_objects(target, storage_options, {"zarr.json": documents.dumps(root)})


def check_begun(target: str, storage_options: dict[str, Any] | None = None) -> None:
    """That ``target`` holds a container :func:`begin` made and no commit has closed
    (a task after the commit would change what it committed); else ``ValueError``."""
    found = storage.read_many(store_of(target, storage_options), ["zarr.json"])[0]
    try:
        attrs = json.loads(found.to_bytes()).get("attributes", {}).get(layout.ATTRS_KEY, {})
    except (AttributeError, ValueError):  # (none there, or not a document)
        attrs = None
    if not isinstance(attrs, dict) or attrs.get("format") != layout.FORMAT:
        raise ValueError(f"{target}: no container begun here (tasks.begin comes first)")
    if attrs.get(layout.WRITING) != "tasks":
        raise ValueError(f"{target}: committed already: no task writes to it after its commit")


def _slab_data(p: TensorPlan, start: int, stop: int, rows: Any) -> np.ndarray:
    """``rows`` checked against the plan's slab ``start:stop``, little-endian, C order."""
    want = (stop - start, *p.shape[1:]) if p.shape else ()
    data = np.asarray(rows)
    if not p.shape and data.shape == (1,):  # (a 0-d tensor's one slab, taken as rows 0:1)
        data = data.reshape(())
    if data.shape != want:
        raise ValueError(f"{p.name}: rows {start}:{stop} have shape {want}, got {data.shape}")
    if little(data.dtype) != p.dtype:
        raise TypeError(f"{p.name}: the plan says dtype {p.dtype}, the rows are {data.dtype}")
    return np.ascontiguousarray(data.astype(p.dtype, copy=False)).reshape(want)


def _check_slab(p: TensorPlan, start: int, stop: int) -> None:
    rows = p.shape[0] if p.shape else 1
    step = p.step()
    whole = start % step == 0 and (stop == rows or (stop - start) % step == 0)
    if not (0 <= start < stop <= rows and whole):
        raise ValueError(
            f"{p.name}: rows {start}:{stop} are not whole stored objects of {step} rows "
            f"within its {rows} (see TensorPlan.slabs)"
        )


def write_rows(
    target: str,
    p: TensorPlan,
    start: int,
    stop: int,
    rows: Any,
    storage_options: dict[str, Any] | None = None,
    *,
    check: bool = True,
) -> SlabRecord:
    """Encode and write rows ``start:stop`` of a planned tensor (whole stored
    objects: a slab of :meth:`TensorPlan.slabs`, or several in a row);
    ``rows``: their values, any array-like of the plan's dtype. ``check=False``: the
    caller has just called :func:`check_begun` (a task writing many small slabs)."""
    objects, record = encode_rows(p, start, stop, rows)
    if check:
        check_begun(target, storage_options)
    write_objects(target, storage_options, objects)
    return record


def encode_rows(
    p: TensorPlan, start: int, stop: int, rows: Any
) -> tuple[dict[str, Any], SlabRecord]:
    """:func:`write_rows` without the write: the slab's objects (key relative to the
    container: bytes) and its record. A task of many small slabs gathers their objects
    and writes them at once (:func:`write_objects`), after :func:`check_begun`."""
    _check_slab(p, int(start), int(stop))
    data = _slab_data(p, int(start), int(stop), rows)
    chunks, shards = p.grid
    first = int(start) // p.step()
    objects = encoding.objects(data, p.template(), chunks, shards, first)
    raw = data.reshape(-1).view(np.uint8)
    record = SlabRecord(p.name, int(start), int(stop), int(_core.crc32c(raw)), int(data.nbytes))
    return {f"{p.node}/{k}": v for k, v in objects}, record


def _joined(p: TensorPlan, slabs: list[SlabRecord]) -> int:
    """The tensor's CRC32C from its slabs' (which must cover its rows once, in order)."""
    rows = p.shape[0] if p.shape else 1
    crc, at = 0, 0
    for s in sorted(set(slabs), key=lambda s: s.start):
        if s.start != at:
            why = "overlap" if s.start < at else f"rows {at}:{s.start} were never written"
            raise ValueError(f"{p.name}: its slabs {why}")
        crc, at = _core.crc32c_combine(crc, s.crc32c, s.nbytes), s.stop
    if at != (rows if p.nbytes else 0):
        raise ValueError(f"{p.name}: rows {at}:{rows} were never written")
    return int(crc)


def _slab_doc(p: TensorPlan, slabs: list[SlabRecord]) -> dict[str, Any]:
    crc = _joined(p, slabs)
    chunks, shards = p.grid
    attrs: dict[str, Any] = {
        "name": p.name,
        "layout": "dense",
        "complete": True,
        "chunks": layout.CHUNKS_ALL,
        "shape": list(p.shape),
        "dtype": dtype_name(p.dtype),
    }
    if p.codec in layout.UNCHECKED_CODECS:
        attrs["crc32c"] = crc
    return documents.array_doc(
        p.template(), p.shape, chunks, shards, p.dimension_names(), {layout.ATTRS_KEY: attrs}
    )


def commit(
    target: str,
    plans: list[TensorPlan],
    records: Iterable[SlabRecord | TensorRecord],
    metadata: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> None:
    """Commit a container begun with :func:`begin`: ``plans`` in the tensors' order,
    ``records`` the results of every task. Refused (nothing committed) where the
    records leave a tensor's rows unwritten or written twice over, give a tensor
    two whole records, or name a tensor no plan names. (The records are the tasks'
    word for what they wrote; a forged one makes a tensor that a read refuses.)"""
    check_begun(target, storage_options)
    objects = commit_objects(plans, records, metadata, target)
    root = objects.pop("zarr.json")
    write_objects(target, storage_options, objects)
    write_objects(target, storage_options, {"zarr.json": root})


def commit_objects(
    plans: list[TensorPlan],
    records: Iterable[SlabRecord | TensorRecord],
    metadata: dict[str, str] | None = None,
    target: str = "tasks",
) -> dict[str, bytes]:
    """What :func:`commit` writes, checked as it checks the records (``target``: for
    messages): each tensor's document, then the root document (``"zarr.json"``, last)."""
    names = [p.name for p in plans]
    if len(set(names)) != len(names):
        raise ValueError(f"{target}: two plans share a tensor name")
    slabs: dict[str, list[SlabRecord]] = {n: [] for n in names}
    whole: dict[str, TensorRecord] = {}
    for r in records:
        if r.name not in slabs:
            raise ValueError(f"{target}: a task wrote {r.name!r}, which no plan names")
        if isinstance(r, TensorRecord):
            if whole.get(r.name, r) != r or slabs[r.name]:
                raise ValueError(f"{target}: tensor {r.name!r} was written by two tasks")
            whole[r.name] = r
        elif r.name in whole:
            raise ValueError(f"{target}: tensor {r.name!r} was written by two tasks")
        else:
            slabs[r.name].append(r)
    docs: dict[str, dict[str, Any]] = {}
    for p in plans:
        if p.name in whole:
            r = whole[p.name]
            if (tuple(r.shape), r.dtype) != (p.shape, dtype_name(p.dtype)):
                raise ValueError(
                    f"{p.name}: its task wrote {r.dtype} {list(r.shape)}, "
                    f"the plan says {dtype_name(p.dtype)} {list(p.shape)}"
                )
            attrs = {**r.doc["attributes"][layout.ATTRS_KEY], "complete": True}
            doc = {**r.doc, "attributes": {**r.doc["attributes"], layout.ATTRS_KEY: attrs}}
        else:
            doc = _slab_doc(p, slabs[p.name])
        docs[p.node] = doc
    root = documents.group_doc(layout.root_attrs(names, metadata or {}), docs)
    objects = {f"{n}/zarr.json": documents.dumps(d) for n, d in docs.items()}
    return {**objects, "zarr.json": documents.dumps(root)}
