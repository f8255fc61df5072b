"""How a model lies in a Zarr group: attribute keys, chunking, codecs by name.

One array per tensor, named by :func:`nncodecs.container.names.escape` of the
tensor's name. The group's attributes hold, under ``"nncodecs"``, the
container format and version, the tensor order and the model's metadata
(strings); each array's attributes hold, under ``"nncodecs"``, the tensor's
name, its layout and ``complete``, set only once all its chunks are written,
so a writer killed mid-tensor never leaves a tensor that reads back wrong.
"""

from __future__ import annotations

import math
from typing import Any

from zarr.codecs import ZstdCodec

from nncodecs.codecs.weights import Weights
from nncodecs.outputs import CONTAINER_FORMAT

__all__ = [
    "ATTRS_KEY",
    "CODECS",
    "FORMAT",
    "VERSION",
    "chunking",
    "codec_settings",
    "shape_problem",
    "shape_records",
    "single_chunk_key",
]

ATTRS_KEY = "nncodecs"
FORMAT = CONTAINER_FORMAT  # (outputs.py knows it too: it replaces only containers)
VERSION = 1
#: Per-tensor codec names a Writer accepts.
CODECS = ("auto", "rans", "huffman", "zstd", "raw")
#: Chunks of about this many bytes along the first axis (random access).
CHUNK_BYTES = 2 << 20
#: At most this many chunks in one shard (one file in a directory store).
CHUNKS_PER_SHARD = 16


#: The group attribute ``records`` of a container whose every tensor carries
#: its integrity records: ``chunks`` (``"all"``: every chunk of the grid is
#: stored, a missing one is corruption, not fill values) and, for codecs
#: without a checksum of their own, ``crc32c`` of the tensor's bytes.
RECORDS = 1
CHUNKS_ALL = "all"
UNCHECKED_CODECS = ("zstd", "raw")
#: Every chunk is stored, even one of fill values only (so none is ever missing).
ARRAY_CONFIG = {"write_empty_chunks": True}


def shape_records(arr: Any) -> dict[str, Any]:
    """The ``shape`` and ``dtype`` records of an array (what its Zarr metadata must say)."""
    from nncodecs.dtypes import dtype_name

    return {"shape": [int(d) for d in arr.shape], "dtype": dtype_name(arr.dtype)}


def shape_problem(z: Any, attrs: Any) -> str | None:
    """How an array's Zarr metadata contradicts its ``shape`` / ``dtype`` records
    (``None``: it does not, or there are none, as in containers written before them)."""
    from nncodecs.dtypes import dtype_name

    if not isinstance(attrs, dict):
        return None
    shape, dtype = attrs.get("shape"), attrs.get("dtype")
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


def codec_settings(codec: str, level: int = 3) -> dict[str, Any]:
    """``create_array`` keywords for a codec name."""
    if codec in ("auto", "rans", "huffman"):
        return {"serializer": Weights(coder=codec, zstd_level=level), "compressors": None}
    if codec == "zstd":
        return {"compressors": [ZstdCodec(level=level)]}
    if codec == "raw":
        return {"compressors": None}
    raise ValueError(f"codec must be one of {', '.join(CODECS)}, got {codec!r}")


def chunking(
    shape: tuple[int, ...], itemsize: int, chunk_bytes: int = CHUNK_BYTES, codec: str = "auto"
) -> dict:
    """``chunks`` (and ``shards`` when there are many) along the first axis.

    A raw tensor is one chunk: its bytes then lie in one piece in the store,
    which a Reader maps into memory instead of reading.
    """
    if not shape:
        return {"chunks": ()}
    if codec == "raw" or math.prod(shape) == 0:  # (no elements: no chunks to iterate over)
        return {"chunks": tuple(max(1, d) for d in shape)}
    row = max(1, math.prod(shape[1:]) * itemsize)
    rows = max(1, min(shape[0], chunk_bytes // row))
    chunks = (rows, *[max(1, d) for d in shape[1:]])
    out: dict[str, Any] = {"chunks": chunks}
    if shape[0] > rows * CHUNKS_PER_SHARD:
        out["shards"] = (rows * CHUNKS_PER_SHARD, *chunks[1:])
    return out


def single_chunk_key(ndim: int) -> str:
    """The key of chunk (0, ..., 0) under Zarr v3's default chunk key encoding."""
    return "/".join(["c"] + ["0"] * ndim)
