"""The dask side of ``nncodecs.archive(..., delta="previous")``: a checkpoint series, each
container stored against the one before it.

First every tensor's SHA-256, as parallel tasks (one read of each). Then one task a
tensor a checkpoint: it reads its tensor and stores it (:mod:`nncodecs.container.
delta_writes`) as a duplicate where an earlier checkpoint has a tensor of its hash,
dtype and shape under any name (waiting for that one's task, for where its bits lie
and its chain depth); else as a difference where the previous checkpoint has a
tensor of its name, dtype and shape, read from that checkpoint's source, never from
the container being written (waiting for that one's task, for its hash and depth);
else, and once a chain is ``max_chain`` deep, whole. No task waits for any other:
the tensors of a series run in parallel, each down its own chain. Last, each
container's documents are written complete, with its order and consolidated metadata.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.container import delta, layout
from nncodecs.container.delta_writes import against, delta_objects
from nncodecs.container.names import escape
from nncodecs.container.references import recorded_location
from nncodecs.extras import need
from nncodecs.formats.archive_tasks import ArchiveResult, Model, _client, _compute, _store
from nncodecs.outputs import check_output, is_url
from nncodecs.store import documents, encoding, storage

__all__ = ["run_chain"]


def _whole(rows: Any, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(rows(0, shape[0] if shape else 1), order="C").reshape(shape)  # (0-d kept)


def _hash_task(rows: Any, shape: tuple[int, ...]) -> str | None:
    """A tensor's SHA-256 (``None`` for a dtype that is never differenced)."""
    arr = _whole(rows, shape)
    return delta.sha256(arr) if delta.bits_dtype(arr.dtype) is not None else None


def _tensor_task(
    target: str, options: str, name: str, rows: Any, shape: tuple[int, ...], codec: str,
    chunk_bytes: int, prev: dict[str, Any] | None, prev_rows: Any, places: tuple[str, str],
    max_chain: int, same: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Store one tensor of a checkpoint (see the module's docstring; ``places``: where this
    container and the previous one end up; ``same``: the result of an earlier
    checkpoint's task whose tensor has this one's hash, dtype and shape, under any
    name); returns its node, document, hash, depth and origin (the tensor holding its
    bits) for later tasks."""
    from zarr.core.sync import sync

    if same is not None and same["origin"][2] < max_chain:  # (found by its hash)
        prev = same
    arr = _whole(rows, shape)
    node = escape(name)
    attrs: dict[str, Any] = {"name": name, "layout": "dense", "complete": False}
    dims = [f"{node}.{i}" for i in range(arr.ndim)] if arr.ndim else None
    digest = delta.sha256(arr) if delta.bits_dtype(arr.dtype) is not None else None
    if digest is not None:
        attrs.update(sha256=digest, depth=0)
    found, depth = None, 0
    here, there = places
    origin = (here, name, 0)  # (where its bits are: here, unless it is a duplicate)
    same = prev is not None and digest is not None and prev["shape"] == list(arr.shape)
    if same and prev["dtype"] == arr.dtype.str:  # type: ignore[index]
        if digest == prev["sha256"] and prev["origin"][2] < max_chain:  # type: ignore[index]
            origin = prev["origin"]  # type: ignore[index]
            where = {"container": recorded_location(here, origin[0]), "tensor": origin[1],
                     "sha256": digest}  # fmt: skip
            attrs["duplicate"], depth = True, origin[2] + 1
            found = ("xor", np.zeros(arr.shape, delta.bits_dtype(arr.dtype)))
        elif digest != prev["sha256"] and prev["depth"] < max_chain:  # type: ignore[index]
            where = {"container": recorded_location(here, there), "tensor": name,
                     "sha256": prev["sha256"]}  # fmt: skip
            depth = prev["depth"] + 1  # type: ignore[index]
            found = against(arr, _whole(prev_rows, shape), codec)
            origin = (here, name, depth)
    if found is not None:
        attrs["depth"] = depth
        objects, doc = delta_objects(node, arr, found[1], found[0], where, codec, chunk_bytes,
                                     attrs, dims)  # fmt: skip
    else:
        attrs.pop("duplicate", None)
        grid = layout.chunking(arr.shape, arr.dtype.itemsize, chunk_bytes, codec)
        chunks, shards = tuple(grid["chunks"]), grid.get("shards")
        tmpl = documents.template(arr.dtype, arr.ndim, codec, shards is not None)
        records = {**attrs, **layout.tensor_records(arr, codec)}
        doc = documents.array_doc(
            tmpl, arr.shape, chunks, shards, dims, {layout.ATTRS_KEY: records}
        )
        objects = ((f"{node}/{k}", v) for k, v in encoding.objects(arr, tmpl, chunks, shards))
    sync(storage.set_many(_store(target, options), dict(objects)))
    return {"node": node, "doc": doc, "sha256": digest, "depth": attrs.get("depth", 0),
            "origin": origin if found is not None else (here, name, 0),
            "shape": list(arr.shape), "dtype": arr.dtype.str,
            "nbytes": int(arr.nbytes)}  # fmt: skip


def _begin(m: Model, options: dict | None) -> None:
    """An empty container at a model's target (an existing output refused)."""
    from zarr.core.sync import sync

    from nncodecs.store.opening import open_store

    store, _ = open_store(m.target, "w", options)
    if not is_url(m.target):
        check_output(Path(m.target))
    elif not sync(store.is_empty("")):
        raise FileExistsError(f"{m.target}: holds data already")
    attrs = {"format": layout.FORMAT, "version": layout.VERSION, "tensors": [],
             "metadata": m.metadata}  # fmt: skip
    sync(
        storage.set_many(
            store, {"zarr.json": documents.dumps(documents.group_doc({layout.ATTRS_KEY: attrs}))}
        )
    )


def _finish(m: Model, results: list[dict[str, Any]], options: str) -> None:
    """Every tensor's document, complete; then the order, metadata and consolidated
    metadata that commit them."""
    from zarr.core.sync import sync

    found = {}
    for r in results:
        doc = r["doc"]
        doc["attributes"][layout.ATTRS_KEY]["complete"] = True
        found[r["node"]] = doc
    store = _store(m.target, options)
    sync(storage.set_many(store, {f"{n}/zarr.json": documents.dumps(d) for n, d in found.items()}))
    attrs = {"format": layout.FORMAT, "version": layout.VERSION,
             "tensors": [t.name for t in m.tensors], "metadata": m.metadata,
             "records": layout.RECORDS}  # fmt: skip
    root = documents.group_doc({layout.ATTRS_KEY: attrs}, found)
    sync(storage.set_many(store, {"zarr.json": documents.dumps(root)}))


def run_chain(models: list[Model], finals: list[str], storage_options: dict[str, Any] | None,
              codec: str, chunk_bytes: int, scheduler: Any, progress: bool,
              max_chain: int) -> ArchiveResult:  # fmt: skip
    """Write ``models`` (a series, in order; ``finals``: the places each container ends
    up, which the next records as its reference) as described above."""
    dask = need("dask", "archive")

    if codec not in ("auto", "rans", "huffman"):
        raise ValueError(
            f"delta archives need the weights codec (auto, rans, huffman), not {codec!r}"
        )
    max_chain = delta.check_max_chain(max_chain)
    for m in models:
        _begin(m, storage_options)
    options = json.dumps(storage_options or {}, sort_keys=True)
    client = _client(scheduler)
    task = dask.delayed(_tensor_task, pure=False)
    per_model: list[list[Any]] = []
    try:
        # Every tensor's hash first (one pass, in parallel): a tensor with the bits of an
        # earlier checkpoint's, under any name, then waits for that one's task alone.
        hashed = dask.delayed(_hash_task, pure=False)
        flat_t = [t for m in models for t in m.tensors]
        digests = iter(_compute([hashed(t.rows, tuple(t.shape)) for t in flat_t],
                                client or scheduler, progress))  # fmt: skip
        prev: dict[str, tuple[Any, Any]] = {}
        seen: dict[tuple[str, str, tuple[int, ...]], Any] = {}  # (hash, dtype, shape) -> task
        for i, m in enumerate(models):
            places = (finals[i], finals[i - 1] if i else "")
            tasks, mine, found = [], {}, {}
            for t in m.tensors:
                before = prev.get(t.name)
                digest = next(digests)
                key = (digest, np.dtype(t.dtype).str, tuple(t.shape)) if digest else None
                tasks.append(task(
                    m.target, options, t.name, t.rows, tuple(t.shape), codec, int(chunk_bytes),
                    before[0] if before else None, before[1] if before else None, places,
                    int(max_chain), seen.get(key) if key else None,
                ))  # fmt: skip
                mine[t.name] = (tasks[-1], t.rows)
                if key and key not in seen:
                    found.setdefault(key, tasks[-1])
            per_model.append(tasks)
            prev = mine
            seen.update({k: v for k, v in found.items() if k not in seen})  # (after: across
            # checkpoints only; a container never refers to itself)
        flat = [t for tasks in per_model for t in tasks]
        written = _compute(flat, client or scheduler, progress)
    finally:
        if client is not None and client is not scheduler:
            client.close()
    at = 0
    for m, tasks in zip(models, per_model, strict=True):
        _finish(m, list(written[at : at + len(tasks)]), options)
        at += len(tasks)
    return ArchiveResult(
        targets={m.name: m.target for m in models},
        tensors=sum(len(m.tensors) for m in models),
        nbytes=int(sum(r["nbytes"] for r in written)),
        tasks=len(flat),
    )
