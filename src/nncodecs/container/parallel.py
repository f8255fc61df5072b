"""Archive many tensors, shards or whole models in parallel, as dask tasks.

:func:`archive` plans every model first, then creates all their Zarr
metadata in one batch (groups, arrays, attributes), then encodes and writes
the data as dask tasks, one per slab of whole shards (or of whole chunks,
for unsharded arrays; small tensors whole, several to a task): no two tasks
write the same object. Last, each
tensor is marked complete and each container's order and metadata written,
so a run that dies leaves no tensor that reads back wrong (a Reader skips
incomplete ones). Tasks run on dask's threaded scheduler by default, on
``"processes"``, or on a ``dask.distributed`` cluster given as a ``Client``
or an address; they carry what they need (the target's URL and storage
options, the array, a loader of the source's rows), not open stores.

Reading back in parallel: :meth:`nncodecs.Reader.to_dask` (a dask array a
tensor, over the Zarr array: chunks read and decoded as tasks).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import os
import shutil
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from nncodecs import _core
from nncodecs.container import layout
from nncodecs.container._store import open_store
from nncodecs.container.names import escape
from nncodecs.dtypes import as_numpy, dtype_name
from nncodecs.outputs import (
    OutputLock,
    check_output,
    is_url,
    publish,
    remove_stale,
    temp_path,
)

__all__ = ["ArchiveResult", "archive"]

#: A task writes at least about this many bytes (whole chunks) of an unsharded tensor.
TASK_BYTES = 16 << 20


@dataclass(frozen=True)
class ArchiveResult:
    """What :func:`archive` wrote: per container, its target and tensor count; the bytes."""

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


class SafetensorsRows:
    """Rows of a tensor in a safetensors file, read from the file by the task
    itself (a byte range: nothing of the model goes through the graph)."""

    def __init__(self, path: str, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.path, self.offset, self.dtype, self.shape = path, offset, dtype, shape

    def __call__(self, start: int, stop: int) -> np.ndarray:
        row = math.prod(self.shape[1:]) * self.dtype.itemsize if self.shape else 0
        if not self.shape:
            start, stop, row = 0, 1, self.dtype.itemsize
        with open(self.path, "rb") as f:
            f.seek(self.offset + start * row)
            raw = f.read((stop - start) * row)
        arr = np.frombuffer(raw, dtype=self.dtype)
        return arr.reshape((stop - start, *self.shape[1:])) if self.shape else arr.reshape(())


@dataclass(frozen=True)
class _Tensor:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    rows: Any  # (start, stop) -> the rows, picklable


@dataclass
class _Model:
    name: str
    target: str
    tensors: list[_Tensor]
    metadata: dict[str, str]


def _is_array(obj: Any) -> bool:
    return hasattr(obj, "shape") and hasattr(obj, "dtype")


def _plan_model(name: str, source: Any, target: str) -> _Model:
    """The tensors of one model: a mapping of arrays, or a model file (its
    tensors read by the tasks themselves where the format allows)."""
    if isinstance(source, Mapping):
        tensors = []
        for tname, value in source.items():
            arr = np.asarray(as_numpy(value), order="C")
            dtype_name(arr.dtype)  # TypeError for an unsupported dtype
            tensors.append(_Tensor(str(tname), arr.dtype, tuple(arr.shape), ArrayRows(arr)))
        return _Model(name, target, tensors, {})
    from nncodecs.formats.convert import (
        _safetensors_files,
        detect_format,
        iter_source,
        source_metadata,
    )
    from nncodecs.formats.safetensors import SafetensorsFile

    path = Path(source)
    fmt = detect_format(path)
    if fmt == "container":
        raise ValueError(f"{path}: already a container")
    meta = source_metadata(path, fmt)  # so that decompress restores it like compress's
    tensors = []
    if fmt.startswith("safetensors"):
        for file in _safetensors_files(path)[0]:
            st = SafetensorsFile(file)
            for tname, dtype, shape, begin, _ in st.entries:
                rows = SafetensorsRows(str(file), st.data_start + begin, dtype, shape)
                tensors.append(_Tensor(tname, dtype, shape, rows))
    else:
        for tname, value in iter_source(path, fmt):
            arr = np.asarray(as_numpy(value), order="C")
            tensors.append(_Tensor(tname, arr.dtype, tuple(arr.shape), ArrayRows(arr)))
    meta["source.tensors"] = str(len(tensors))
    return _Model(name, target, tensors, meta)


def _plan(sources: Any, target: Any) -> list[_Model]:
    """One model into ``target``, or many, each into ``target/<name>``."""
    if str(target).endswith(".zip"):
        raise ValueError("archive writes directory or URL containers, not a zip file")
    target = str(target)
    if isinstance(sources, Mapping) and all(_is_array(v) for v in sources.values()):
        return [_plan_model("model", sources, target)]
    if isinstance(sources, str | os.PathLike):
        return [_plan_model(Path(sources).stem, sources, target)]
    if isinstance(sources, Mapping):
        named = list(sources.items())
    else:
        named = [(Path(s).name.split(".")[0], s) for s in sources]
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise ValueError(f"two models would share a container name: {names}")
    return [_plan_model(n, s, f"{target.rstrip('/')}/{n}") for n, s in named]


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


async def _create(models: list[_Model], options: dict | None, codec: str,
                  chunk_bytes: int) -> list[tuple[Any, Any, list[Any]]]:  # fmt: skip
    """Every container's group and arrays, created together (all at once)."""

    async def one(m: _Model) -> tuple[Any, Any, list[Any]]:
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
    models: list[_Model], made: list[tuple[Any, Any, list[Any]]], crcs: dict[str, int]
) -> None:
    """Mark every tensor complete (with its CRC32C where its codec has no checksum), then
    each container's order and metadata (every container at once, each in that order)."""

    def records(t: _Tensor, z: Any) -> dict[str, Any]:
        out = {"name": t.name, "layout": "dense", "complete": True, "chunks": layout.CHUNKS_ALL,
               "shape": list(t.shape), "dtype": dtype_name(t.dtype)}  # fmt: skip
        if crcs:
            out["crc32c"] = crcs.get(z.path, 0)  # (an empty tensor has no slab: CRC 0)
        return out

    async def one(m: _Model, store: Any, group: Any, arrays: list[Any]) -> None:
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


def archive(
    sources: Any,
    target: Any,
    scheduler: Any = None,
    *,
    codec: str = "auto",
    chunk_bytes: int = layout.CHUNK_BYTES,
    storage_options: dict[str, Any] | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> ArchiveResult:
    """Compress models into containers with dask: every slab of whole shards a task.

    Parameters
    ----------
    sources
        One model: a mapping of tensor names to arrays (NumPy, torch CPU),
        or a model file or directory (safetensors, GGUF, npz, torch, ONNX,
        ztensor); its container is ``target``. Many models: a list of such
        files, or a mapping of names to models; each goes to
        ``target/<name>``.
    target
        A directory or an fsspec URL (``s3://bucket/prefix``).
    scheduler
        ``None`` (dask's threads), ``"threads"``, ``"processes"``,
        ``"sync"``, a ``dask.distributed.Client``, or a scheduler address
        (``"tcp://host:8786"``).
    codec, chunk_bytes
        As for :class:`nncodecs.Writer`.
    storage_options
        For URL targets: the filesystem's options (s3fs: ``endpoint_url``,
        ``key``, ``secret``). The tasks carry them to the workers.
    progress
        Show dask's progress bar while the tasks run.
    overwrite
        Replace an existing local container (only a container: any other
        existing file or non-empty directory is refused). A local container
        is written under a temporary name and renamed into place when every
        task has finished; a URL target is written in place.
    """
    layout.codec_settings(codec)  # validates the name
    models = _plan(sources, target)
    finals: list[tuple[Path, Path]] = []  # (temporary, named) of local containers
    locks: list[OutputLock] = []  # one writer per local container, as for Writer
    try:
        for m in models:
            if not is_url(m.target):
                named = Path(m.target.removeprefix("file://"))
                check_output(named, overwrite)
                locks.append(OutputLock(named).acquire())
                remove_stale(named)  # (may put back a previous container: checked again)
                check_output(named, overwrite)
                finals.append((temp_path(named), named))
                m.target = str(finals[-1][0])
        result = _archive(models, storage_options, codec, chunk_bytes, scheduler, progress)
        for temp, named in finals:
            publish(temp, named, overwrite)
    except BaseException:
        for temp, _ in finals:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    finally:
        for lock in locks:
            lock.release()
    named_of = {str(temp): str(named) for temp, named in finals}
    targets = {name: named_of.get(t, t) for name, t in result.targets.items()}
    return ArchiveResult(targets, result.tensors, result.nbytes, result.tasks)


def _archive(models: list[_Model], storage_options: dict[str, Any] | None, codec: str,
             chunk_bytes: int, scheduler: Any, progress: bool) -> ArchiveResult:  # fmt: skip
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
    import dask

    return dask.delayed(_write_slabs, pure=False)(target, options, items)


def _client(scheduler: Any) -> Any:
    """The dask.distributed Client of a scheduler argument (``None`` for local ones)."""
    if isinstance(scheduler, str) and "://" in scheduler:
        from distributed import Client

        return Client(scheduler)
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

            show(futures)
        return list(scheduler.gather(futures))
    bar: Any = contextlib.nullcontext()
    if progress:
        from dask.diagnostics import ProgressBar

        bar = ProgressBar()
    with bar:
        return list(dask.compute(*tasks, scheduler=scheduler or "threads"))
