"""The Zarr v3 metadata documents of a container, made without Zarr's round trips.

A Writer does not create its arrays through Zarr (one ``zarr.json`` write,
one read-back and one attribute rewrite per array, each a trip through
Zarr's event loop). Each array's document is the *template* of its kind of
array (element type, rank, codec, sharded or not) with its shape, chunk
shapes, dimension names and attributes put in. The weights codec's templates
are made here, as Zarr makes them (``tests/store/test_documents.py``
compares every kind with Zarr's own, on each Zarr version), so that writing
local files needs no Zarr; Zarr makes the others (zstd, raw) in memory.
Documents are written as compact JSON. A template also holds its chunk
encoder, its settings worked out once.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from nncodecs.dtypes import SUPPORTED_DTYPES, dtype_name
from nncodecs.frame import encode_frame
from nncodecs.frame.buffers import as_byte_view
from nncodecs.frame.params import WEIGHTS, frame_settings, row_length
from nncodecs.frame.weights import CODEC_ID
from nncodecs.output_names import CONTAINER_FORMAT
from nncodecs.store import storage

__all__ = [
    "ARRAY_CONFIG",
    "ATTRS_KEY",
    "CODECS",
    "FORMAT",
    "Template",
    "array_doc",
    "check_codec",
    "codec_settings",
    "dumps",
    "group_doc",
    "template",
    "zarr_doc",
]

#: The group's and each array's attribute key under which nncodecs keeps its records.
ATTRS_KEY = "nncodecs"
FORMAT = CONTAINER_FORMAT  # (outputs.py knows it too: it replaces only containers)
#: Per-tensor codec names a Writer accepts.
CODECS = ("auto", "rans", "huffman", "zstd", "raw")
#: Every chunk is stored, even one of fill values only (so none is ever missing).
ARRAY_CONFIG = {"write_empty_chunks": True}


def check_codec(codec: Any) -> str:
    """A codec name a Writer accepts (else ValueError listing them)."""
    if codec not in CODECS:
        raise ValueError(f"codec must be one of {', '.join(CODECS)}, got {codec!r}")
    return codec


def codec_settings(codec: str, level: int = 3) -> dict[str, Any]:
    """``create_array`` keywords for a codec name."""
    from zarr.codecs import ZstdCodec

    from nncodecs.codecs.weights import Weights

    if codec in ("auto", "rans", "huffman"):
        return {"serializer": Weights(coder=codec, zstd_level=level), "compressors": None}
    if codec == "zstd":
        return {"compressors": [ZstdCodec(level=level)]}
    if codec == "raw":
        return {"compressors": None}
    raise ValueError(f"codec must be one of {', '.join(CODECS)}, got {codec!r}")


def dumps(doc: dict[str, Any]) -> bytes:
    """A document as compact JSON (Zarr indents its own: 2-3 times the bytes)."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True)
class Template:
    """A kind of array, as Zarr describes it."""

    doc: dict[str, Any]  # the zarr.json of an array of this kind
    sharded: bool
    encode: Any  # a chunk (C-contiguous, little-endian) -> its bytes under its codecs


def template(dtype: np.dtype, ndim: int, codec: str, sharded: bool, tuning: tuple = ()) -> Template:
    """The template of arrays of ``dtype``, rank ``ndim``, codec name ``codec``
    (see :func:`codec_settings`) and sharding; ``tuning``:
    the weights codec's settings other than its defaults (``(("min_gain", 0.005),)``)."""
    return _template(np.dtype(dtype), int(ndim), codec, bool(sharded), tuple(tuning))


#: The Zarr v3 names of the data types the weights codec holds (Zarr's own, and
#: nncodecs.codecs.zarr_dtypes' for the ML floats), and their default fill values.
_DATA_TYPES = {n: n for n in SUPPORTED_DTYPES} | {"float8_e4m3fn": "nncodecs.float8_e4m3fn"}


@functools.lru_cache(maxsize=256)
def _template(dtype: np.dtype, ndim: int, codec: str, sharded: bool, tuning: tuple) -> Template:
    if codec not in ("auto", "rans", "huffman"):
        return _zarr_template(dtype, ndim, codec, sharded)
    # The weights codec's arrays, written as Zarr writes them (tests compare the two on
    # every Zarr version): no Zarr imported by a Writer of local files (a fifth of a
    # second and ~25 MiB of every compress).
    name = dtype_name(dtype)
    kind = "b" if name == "bool" else "i" if "int" in name else "f"
    settings = WEIGHTS.check({"coder": codec, "dtype": name, "zstd_level": 3, **dict(tuning)})
    weights = {"name": CODEC_ID, "configuration": settings}
    codecs = [weights]
    if sharded:
        index = storage.SHARD_INDEX
        config = {
            "chunk_shape": [1] * ndim,
            "codecs": [weights],
            "index_codecs": index,
            "index_location": "end",
        }
        codecs = [{"name": "sharding_indexed", "configuration": config}]
    doc = {
        "shape": [2] * ndim,
        "data_type": _DATA_TYPES[name],
        "chunk_grid": {
            "name": "regular",
            "configuration": {"chunk_shape": [2 if sharded else 1] * ndim},
        },
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": {"b": False, "i": 0, "f": 0.0}[kind],
        "codecs": codecs,
        "attributes": {},
        "zarr_format": 3,
        "node_type": "array",
        "storage_transformers": [],
    }
    if ndim:
        doc["dimension_names"] = [f"d{i}" for i in range(ndim)]
    return Template(doc, sharded, _weights_encoder(settings, dtype))


def _weights_encoder(settings: dict[str, Any], dtype: np.dtype) -> Any:
    keywords = frame_settings(settings, dtype)

    def weights(chunk: np.ndarray) -> bytes:
        return encode_frame(as_byte_view(chunk), **keywords, row_length=row_length(chunk.shape))

    return weights


def _zarr_template(dtype: np.dtype, ndim: int, codec: str, sharded: bool) -> Template:
    """The template of another codec's arrays (zstd, raw), as Zarr makes it."""
    doc, codecs = zarr_doc(dtype, ndim, codec, sharded)
    return Template(doc, sharded, _chunk_encoder(codecs))


def zarr_doc(dtype: np.dtype, ndim: int, codec: str, sharded: bool) -> tuple[dict, tuple]:
    """The zarr.json Zarr writes for an array of a kind (shape 2 on each axis, chunks of
    1), and its Zarr codecs of each chunk (inside the shard when sharded)."""
    import zarr
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync
    from zarr.storage import MemoryStore

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
        config=ARRAY_CONFIG,
        **extra,
        **codec_settings(codec),
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
    return doc, codecs


def _chunk_encoder(codecs: tuple[Any, ...]) -> Any:
    """bytes of one chunk under a chain of Zarr's codecs, as Zarr would store them."""
    from numcodecs import Zstd
    from zarr.codecs import BytesCodec, ZstdCodec

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
