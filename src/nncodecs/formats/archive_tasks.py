"""The dask side of :func:`nncodecs.archive`: the containers' metadata created in one batch,
the slab-writing tasks, and each tensor marked complete once every task has run."""

from __future__ import annotations

import asyncio
import functools
import json
import math
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from nncodecs import _core
from nncodecs.container import layout
from nncodecs.container.names import escape
from nncodecs.dtypes import dtype_name
from nncodecs.extras import need
from nncodecs.formats.source import Tensor
from nncodecs.outputs import check_output, is_url
from nncodecs.store.opening import open_store

__all__ = ["ArchiveResult", "ArrayRows", "Model", "run"]

#: A task writes at least about this many bytes (whole chunks) of an unsharded tensor.
TASK_BYTES = 16 << 20


@dataclass(frozen=True)
class ArchiveResult:
    """What :func:`nncodecs.archive` wrote: each container's target; tensors, bytes, tasks."""

    targets: dict[str, str]
    tensors: int
    nbytes: int
    tasks: int


class ArrayRows:
    """Rows of an array in memory (pickled into the task graph)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __call__(self, start: int, stop: int) -> np.ndarray:
        return self.array[start:stop] if self.array.ndim else self.array


@dataclass
class Model:
    """One container to write: its tensors (each with a picklable ``rows``) and metadata."""

    name: str
    target: str
    tensors: list[Tensor]
    metadata: dict[str, str]
    #: A snapshot directory's other files ((name, path)), and the bytes of a GGUF, ONNX or
    #: zip checkpoint around its tensors: kept once the tensors are written.
    kept: list[tuple[str, Path]] = field(default_factory=list)
    gaps: dict[str, Any] = field(default_factory=dict)


def _slabs(z: Any, nbytes_row: int) -> list[tuple[int, int]]:
    """Row ranges of whole shards (or of whole chunks adding up to TASK_BYTES)."""
    if not z.shape:
        return [(0, 1)]
    rows = z.shape[0]
    if rows == 0 or math.prod(z.shape) == 0:
        return []
    if z.shards:
        step = z.shards[0]
    else:
        per = max(1, TASK_BYTES // max(1, z.chunks[0] * nbytes_row))
        step = z.chunks[0] * per
    return [(s, min(rows, s + step)) for s in range(0, rows, step)]


@functools.lru_cache(maxsize=16)
def _store(target: str, options: str) -> Any:
    """The store of a target in this worker (kept: a task per slab reopens nothing)."""
    return open_store(target, "a" if "://" in target else "w", json.loads(options) or None)[0]


def _write_slab(
    target: str, options: str, node: str, start: int, stop: int, rows: Any
) -> tuple[str, int, int, int]:
    """Read a source's rows, encode and write them (whole shards or chunks).
    ``rows``: a loader, or the whole array (scattered to a cluster once).
    Returns (node, start, CRC32C of the rows' bytes, their length): a tensor
    stored raw or with zstd records the CRC of its slabs joined in order."""
    z = zarr.open_array(_store(target, options), path=node, mode="r+")
    z = z.with_config(layout.ARRAY_CONFIG)  # every chunk stored: the "chunks" record
    if isinstance(rows, np.ndarray):
        data = rows[start:stop] if rows.ndim else rows
    else:
        data = rows(start, stop)
    if z.shape:
        z[start:stop] = data
    else:
        z[...] = data
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return node, start, int(_core.crc32c(raw)), int(data.nbytes)  # (CRC32C: ~10 GB/s)


def _write_slabs(
    target: str, options: str, items: list[tuple[Any, ...]]
) -> list[tuple[str, int, int, int]]:
    """One task: its slabs, one after another (a slab of a large tensor, or
    several small tensors whole)."""
    return [_write_slab(target, options, *item) for item in items]


def _joined_crcs(written: list[list[tuple[str, int, int, int]]]) -> dict[str, int]:
    """Per array, the CRC32C of its bytes from its slabs' (joined in row order)."""
    slabs: dict[str, list[tuple[int, int, int]]] = {}
    for task in written:
        for node, start, crc, length in task:
            slabs.setdefault(node, []).append((start, crc, length))
    out = {}
    for node, parts in slabs.items():
        crc = 0
        for _, part, length in sorted(parts):
            crc = _core.crc32c_combine(crc, part, length)
        out[node] = int(crc)
    return out


async def _create(models: list[Model], options: dict | None, codec: str,
                  chunk_bytes: int) -> list[tuple[Any, Any, list[Any]]]:  # fmt: skip
    """Every container's group and arrays, created together (all at once)."""

    async def one(m: Model) -> tuple[Any, Any, list[Any]]:
        store, _ = open_store(m.target, "w", options)
        # Mode "w" would empty what is there: an existing output is refused instead.
        if not is_url(m.target):
            check_output(Path(m.target))
        elif not await store.is_empty(""):
            raise FileExistsError(f"{m.target}: holds data already")
        group = await zarr.api.asynchronous.open_group(store=store, mode="w")
        await group.update_attributes({layout.ATTRS_KEY: {
            "format": layout.FORMAT, "version": layout.VERSION, "tensors": [],
            "metadata": m.metadata}})  # fmt: skip
        arrays = await asyncio.gather(*(
            group.create_array(
                escape(t.name), shape=t.shape, dtype=t.dtype,
                dimension_names=[f"{escape(t.name)}.{i}" for i in range(len(t.shape))]
                if t.shape else None,
                attributes={layout.ATTRS_KEY: {"name": t.name, "layout": "dense",
                                               "complete": False}},
                overwrite=True,  # a new group: nothing to check for
                config=layout.ARRAY_CONFIG,
                **layout.chunking(t.shape, t.dtype.itemsize, chunk_bytes, codec),
                **layout.codec_settings(codec),
            )
            for t in m.tensors
        ))  # fmt: skip
        return store, group, list(arrays)

    return list(await asyncio.gather(*(one(m) for m in models)))


async def _finish(
    models: list[Model], made: list[tuple[Any, Any, list[Any]]], crcs: dict[str, int]
) -> None:
    """Mark every tensor complete (with its CRC32C where its codec has no checksum), then
    each container's order and metadata (every container at once, each in that order)."""

    def records(t: Tensor, z: Any) -> dict[str, Any]:
        out = {"name": t.name, "layout": "dense", "complete": True, "chunks": layout.CHUNKS_ALL,
               "shape": list(t.shape), "dtype": dtype_name(t.dtype)}  # fmt: skip
        if crcs:
            out["crc32c"] = crcs.get(z.path, 0)  # (an empty tensor has no slab: CRC 0)
        return out

    async def one(m: Model, store: Any, group: Any, arrays: list[Any]) -> None:
        await asyncio.gather(*(
            z.update_attributes({layout.ATTRS_KEY: records(t, z)})
            for t, z in zip(m.tensors, arrays, strict=True)
        ))  # fmt: skip
        await group.update_attributes({layout.ATTRS_KEY: {
            "format": layout.FORMAT, "version": layout.VERSION,
            "tensors": [t.name for t in m.tensors], "metadata": m.metadata}})  # fmt: skip
        await zarr.api.asynchronous.consolidate_metadata(store)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # consolidated metadata "not yet part of" Zarr v3
        await asyncio.gather(*(one(m, *mk) for m, mk in zip(models, made, strict=True)))


def run(models: list[Model], storage_options: dict[str, Any] | None, codec: str,
        chunk_bytes: int, scheduler: Any, progress: bool) -> ArchiveResult:  # fmt: skip
    """Create the containers, write every slab as a dask task, then finish them."""
    from zarr.core.sync import sync

    made = sync(_create(models, storage_options, codec, int(chunk_bytes)))
    options = json.dumps(storage_options or {}, sort_keys=True)
    client = _client(scheduler)
    try:
        tasks = []
        for m, (_, _, arrays) in zip(models, made, strict=True):
            small: list[tuple[Any, ...]] = []  # small tensors, grouped up to TASK_BYTES
            small_bytes = 0
            for t, z in zip(m.tensors, arrays, strict=True):
                row = math.prod(t.shape[1:]) * t.dtype.itemsize if t.shape else 0
                slabs = _slabs(z, row)
                rows = t.rows
                if client is not None and isinstance(rows, ArrayRows) and slabs:
                    # in memory: sent to the cluster once, not with every task
                    rows = client.scatter(rows.array)
                nbytes = math.prod(t.shape) * t.dtype.itemsize
                if len(slabs) == 1 and nbytes < TASK_BYTES:
                    small.append((z.path, *slabs[0], rows))
                    small_bytes += nbytes
                    if small_bytes >= TASK_BYTES:
                        tasks.append(_task(m.target, options, small))
                        small, small_bytes = [], 0
                    continue
                for start, stop in slabs:
                    tasks.append(_task(m.target, options, [(z.path, start, stop, rows)]))
            if small:
                tasks.append(_task(m.target, options, small))
        written = _compute(tasks, client or scheduler, progress)
    finally:
        if client is not None and client is not scheduler:
            client.close()
    crcs = _joined_crcs(written) if codec in layout.UNCHECKED_CODECS else {}
    sync(_finish(models, made, crcs))
    return ArchiveResult(
        targets={m.name: m.target for m in models},
        tensors=sum(len(m.tensors) for m in models),
        nbytes=int(sum(length for task in written for *_, length in task)),
        tasks=len(tasks),
    )


def _task(target: str, options: str, items: list[tuple[Any, ...]]) -> Any:
    dask = need("dask", "archive")

    return dask.delayed(_write_slabs, pure=False)(target, options, items)


def _client(scheduler: Any) -> Any:
    """The dask.distributed Client of a scheduler argument (``None`` for local ones)."""
    if isinstance(scheduler, str) and "://" in scheduler:
        return need("distributed", "a dask.distributed scheduler").Client(scheduler)
    return scheduler if type(scheduler).__name__ == "Client" else None


def _compute(tasks: list[Any], scheduler: Any, progress: bool) -> list[int]:
    import contextlib

    import dask

    if not tasks:
        return []
    if type(scheduler).__name__ == "Client":
        futures = scheduler.compute(tasks)
        if progress:
            from distributed import progress as show

            with contextlib.redirect_stdout(sys.stderr):  # (stdout is a command's --json)
                show(futures)
        return list(scheduler.gather(futures))
    bar: Any = contextlib.nullcontext()
    if progress:
        from dask.diagnostics import ProgressBar

        bar = ProgressBar(out=sys.stderr)  # (stdout is a command's --json)
    with bar:
        return list(dask.compute(*tasks, scheduler=scheduler or "threads"))
