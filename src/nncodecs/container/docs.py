"""The Zarr v3 metadata documents of a container, made without Zarr's round trips.

A Writer does not create its arrays through Zarr (one ``zarr.json`` write,
one read-back and one attribute rewrite per array, each a trip through
Zarr's event loop). Zarr makes one *template* per kind of array (element
type, rank, codec, sharded or not), in memory, and every array's document is
that template with its shape, chunk shapes, dimension names and attributes
put in: the codecs' JSON, the fill value's encoding and the data type's name
are Zarr's own, on every Zarr version. Documents are written as compact JSON.
A template also holds its chunk encoder, its settings worked out once.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import zarr
from numcodecs import Zstd
from zarr.codecs import BytesCodec, ZstdCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import MemoryStore

from nncodecs.codecs.weights import Weights
from nncodecs.container import layout
from nncodecs.frame import encode_frame
from nncodecs.frame.buffers import as_byte_view
from nncodecs.frame.params import frame_settings, row_length

__all__ = ["Template", "array_doc", "dumps", "group_doc", "template"]


def dumps(doc: dict[str, Any]) -> bytes:
    """A document as compact JSON (Zarr indents its own: 2-3 times the bytes)."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True)
class Template:
    """A kind of array, as Zarr describes it."""

    doc: dict[str, Any]  # the zarr.json of an array of this kind
    codecs: tuple[Any, ...]  # the codecs of each chunk (inside the shard when sharded)
    sharded: bool
    encode: Any  # a chunk (C-contiguous, little-endian) -> its bytes under ``codecs``


def template(dtype: np.dtype, ndim: int, codec: str, sharded: bool) -> Template:
    """The template of arrays of ``dtype``, rank ``ndim``, codec name ``codec``
    (see :func:`nncodecs.container.layout.codec_settings`) and sharding."""
    return _template(np.dtype(dtype), int(ndim), codec, bool(sharded))


@functools.lru_cache(maxsize=256)
def _template(dtype: np.dtype, ndim: int, codec: str, sharded: bool) -> Template:
    store = MemoryStore()
    extra: dict[str, Any] = {}
    if ndim:
        extra["dimension_names"] = [f"d{i}" for i in range(ndim)]
    if sharded:
        extra["shards"] = (2,) * ndim
    z = zarr.create_array(
        store,
        shape=(2,) * ndim,
        dtype=dtype,
        chunks=(1,) * ndim,
        config=layout.ARRAY_CONFIG,
        **extra,
        **layout.codec_settings(codec),
    )
    raw = sync(store.get("zarr.json", prototype=default_buffer_prototype()))
    doc = json.loads(raw.to_bytes())
    codecs = tuple(z.metadata.codecs)
    if sharded:
        (shard,) = codecs
        config = doc["codecs"][0]["configuration"]
        index = [c["name"] for c in config["index_codecs"]]
        if config["index_location"] != "end" or index != ["bytes", "crc32c"]:
            # (storage.py reads and writes only this index layout)
            raise NotImplementedError(f"this Zarr lays out shard indexes otherwise: {config}")
        codecs = tuple(shard.codecs)
    return Template(doc, codecs, sharded, _chunk_encoder(codecs, dtype))


def _chunk_encoder(codecs: tuple[Any, ...], dtype: np.dtype) -> Any:
    """bytes of one chunk under a chain of codecs, as Zarr would store them."""
    if len(codecs) == 1 and isinstance(codecs[0], Weights):
        settings = frame_settings(codecs[0]._settings(), dtype)

        def weights(chunk: np.ndarray) -> bytes:
            return encode_frame(as_byte_view(chunk), **settings, row_length=row_length(chunk.shape))

        return weights
    if isinstance(codecs[0], BytesCodec) and len(codecs) == 1:
        return lambda chunk: chunk.tobytes()
    if isinstance(codecs[0], BytesCodec) and len(codecs) == 2 and isinstance(codecs[1], ZstdCodec):
        zstd = Zstd(level=codecs[1].level, checksum=codecs[1].checksum)
        return lambda chunk: bytes(zstd.encode(chunk.tobytes()))
    raise NotImplementedError(f"no direct encoder for the codecs {codecs}")


def array_doc(
    tmpl: Template,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    shards: tuple[int, ...] | None,
    dimension_names: list[str] | None,
    attributes: dict[str, Any],
) -> dict[str, Any]:
    """The zarr.json of one array of a template's kind."""
    doc = dict(tmpl.doc)  # (shallow: every part that differs is replaced, not changed)
    doc["shape"] = [int(d) for d in shape]
    doc["chunk_grid"] = _with_chunk_shape(doc["chunk_grid"], shards or chunks)
    if tmpl.sharded:
        doc["codecs"] = [_with_chunk_shape(doc["codecs"][0], chunks), *doc["codecs"][1:]]
    doc.pop("dimension_names", None)
    if dimension_names is not None:
        doc["dimension_names"] = list(dimension_names)
    doc["attributes"] = attributes
    return doc


def _with_chunk_shape(node: dict[str, Any], shape: tuple[int, ...]) -> dict[str, Any]:
    """A copy of a ``{"name", "configuration"}`` node with its ``chunk_shape`` replaced."""
    return {**node, "configuration": {**node["configuration"], "chunk_shape": [*map(int, shape)]}}


def group_doc(
    attributes: dict[str, Any], consolidated: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A group's zarr.json; with ``consolidated``, the documents of every node under it
    (by path), inline, as ``zarr.consolidate_metadata`` writes them."""
    doc: dict[str, Any] = {"zarr_format": 3, "node_type": "group", "attributes": attributes}
    if consolidated is not None:
        doc["consolidated_metadata"] = {
            "kind": "inline",
            "must_understand": False,
            "metadata": dict(sorted(consolidated.items())),
        }
    return doc
