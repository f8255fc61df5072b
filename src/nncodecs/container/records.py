"""A tensor's integrity records (docs/format.md, "The container"): written with it,
and compared with its Zarr metadata when it is read; and a dense array's stored
objects with the document that carries them (a Writer's, a task's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.container import layout
from nncodecs.store import documents, encoding

__all__ = ["array_objects", "shape_problem", "shape_records", "tensor_records"]


def shape_records(arr: Any) -> dict[str, Any]:
    """The ``shape`` and ``dtype`` records of an array (what its Zarr metadata must say)."""
    from nncodecs.dtypes import dtype_name

    return {"shape": [int(d) for d in arr.shape], "dtype": dtype_name(arr.dtype)}


def tensor_records(arr: Any, codec: str) -> dict[str, Any]:
    """A tensor's integrity records: every chunk written, its shape and dtype (a
    Reader compares them with the Zarr metadata), and for codecs without a
    checksum of their own (layout.UNCHECKED_CODECS) the CRC32C of its bytes."""
    out: dict[str, Any] = {"chunks": layout.CHUNKS_ALL, **shape_records(arr)}
    if codec in layout.UNCHECKED_CODECS:
        out["crc32c"] = int(_core.crc32c(np.ascontiguousarray(arr).reshape(-1).view(np.uint8)))
    return out


def shape_problem(z: Any, attrs: Any) -> str | None:
    """How an array's Zarr metadata contradicts its ``shape`` / ``dtype`` records
    (``None``: it does not, or there are none, as in containers written before them)."""
    from nncodecs.dtypes import dtype_name

    if not isinstance(attrs, dict):
        return None
    shape, dtype = attrs.get("shape"), attrs.get("dtype")
    if shape is not None and not isinstance(shape, list):
        return f"its shape record {shape!r} is damaged"
    if shape is not None and list(shape) != [int(d) for d in z.shape]:
        return f"its zarr.json says shape {list(z.shape)}, its records {list(shape)}"
    if dtype is not None:
        try:
            found = dtype_name(z.dtype)
        except TypeError:
            found = str(z.dtype)
        if found != dtype:
            return f"its zarr.json says dtype {found}, its records {dtype}"
    return None


def array_objects(
    path: str,
    arr: np.ndarray,
    codec: str,
    chunk_bytes: int,
    attrs: dict[str, Any],
    dims: list[str] | None,
    raw_one_chunk: bool = True,
    tuning: tuple = (),
) -> tuple[Iterator[tuple[str, Any]], dict[str, Any]]:
    """An array's stored objects ((key under the group, bytes), encoded one at a time as
    they are taken) and its document, with ``attrs`` and its integrity records.
    ``arr``: C order; stored little-endian. ``raw_one_chunk``: a raw array is one chunk
    (a tensor, mapped into memory on read). ``tuning``: the weights codec's settings
    other than its defaults (``documents.template``)."""
    arr = np.asarray(arr, order="C")  # (ascontiguousarray makes 0-d 1-d)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    grid = layout.chunking(
        arr.shape, arr.dtype.itemsize, chunk_bytes, codec if raw_one_chunk else "auto"
    )
    chunks, shards = tuple(grid["chunks"]), grid.get("shards")
    tmpl = documents.template(arr.dtype, arr.ndim, codec, shards is not None, tuning)
    recorded = {**attrs, **tensor_records(arr, codec)}
    doc = documents.array_doc(tmpl, arr.shape, chunks, shards, dims, {layout.ATTRS_KEY: recorded})
    objects = ((f"{path}/{k}", v) for k, v in encoding.objects(arr, tmpl, chunks, shards))
    return objects, doc
