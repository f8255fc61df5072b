"""How a model lies in a Zarr group: attribute keys, chunking, codecs by name.

One array per tensor, named by :func:`nncodecs.container.names.escape` of the
tensor's name. The group's attributes hold, under ``"nncodecs"``, the
container format and version, the tensor order and the model's metadata
(strings); each array's attributes hold, under ``"nncodecs"``, the tensor's
name, its layout and ``complete``, set only once all its chunks are written,
so a writer killed mid-tensor never leaves a tensor that reads back wrong.
:func:`open_container` lists the committed tensors of a group.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

from nncodecs import _core
from nncodecs.codecs.weights import Weights
from nncodecs.container.names import escape, unescape
from nncodecs.errors import CorruptDataError, NotAContainerError
from nncodecs.outputs import CONTAINER_FORMAT

__all__ = [
    "ATTRS_KEY",
    "CODECS",
    "FORMAT",
    "VERSION",
    "Member",
    "check_codec",
    "check_container",
    "check_container_attrs",
    "chunking",
    "codec_settings",
    "committed",
    "committed_from_docs",
    "open_container",
    "shape_problem",
    "shape_records",
    "tensor_name",
    "tensor_order",
    "tensor_records",
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


def tensor_records(arr: Any, codec: str) -> dict[str, Any]:
    """A tensor's integrity records: every chunk written, its shape and dtype (a
    Reader compares them with the Zarr metadata), and for codecs without a
    checksum of their own (UNCHECKED_CODECS) the CRC32C of its bytes."""
    out: dict[str, Any] = {"chunks": CHUNKS_ALL, **shape_records(arr)}
    if codec in UNCHECKED_CODECS:
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


def check_codec(codec: Any) -> str:
    """A codec name a Writer accepts (else ValueError listing them)."""
    if codec not in CODECS:
        raise ValueError(f"codec must be one of {', '.join(CODECS)}, got {codec!r}")
    return codec


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
    """``chunks`` (and ``shards`` when there are many) along the first axis: at most
    ``chunk_bytes`` each, as few as that allows, rows shared out evenly.

    A raw tensor is one chunk: its bytes then lie in one piece in the store,
    which a Reader maps into memory instead of reading.
    """
    if not shape:
        return {"chunks": ()}
    if codec == "raw" or math.prod(shape) == 0:  # (no elements: no chunks to iterate over)
        return {"chunks": tuple(max(1, d) for d in shape)}
    row = max(1, math.prod(shape[1:]) * itemsize)
    most = max(1, min(shape[0], chunk_bytes // row))
    # As few chunks as that allows, of equal rows: the last one (padded to full
    # size with zeros, as Zarr stores them) then wastes almost nothing.
    rows = -(-shape[0] // -(-shape[0] // most))
    chunks = (rows, *[max(1, d) for d in shape[1:]])
    out: dict[str, Any] = {"chunks": chunks}
    if shape[0] > rows * CHUNKS_PER_SHARD:
        out["shards"] = (rows * CHUNKS_PER_SHARD, *chunks[1:])
    return out


def check_container(group: Any) -> dict[str, Any]:
    """The container attributes of a group, or NotAContainerError."""
    return check_container_attrs(group.attrs)


def check_container_attrs(group_attrs: Any) -> dict[str, Any]:
    """The container attributes in a group's attributes, or NotAContainerError."""
    attrs = group_attrs.get(ATTRS_KEY)
    if not isinstance(attrs, dict) or attrs.get("format") != FORMAT:
        raise NotAContainerError(
            "this Zarr group is not an nncodecs container (no 'nncodecs' attributes)"
        )
    if attrs.get("version") != VERSION:
        raise NotAContainerError(
            f"nncodecs container version {attrs.get('version')!r}, this build reads {VERSION}"
        )
    tensors, meta = attrs.get("tensors", []), attrs.get("metadata", {})
    if not (isinstance(tensors, list) and all(isinstance(t, str) for t in tensors)):
        raise CorruptDataError("the container's tensor order is damaged (not a list of names)")
    if not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise CorruptDataError("the container's metadata is damaged (not a dict of strings)")
    return attrs


def tensor_name(node: str, attrs: Any) -> str:
    """A member's tensor name: from its attributes, else from its node name."""
    if isinstance(attrs, dict) and isinstance(attrs.get("name"), str):
        return attrs["name"]
    return unescape(node)


class Member:
    """A committed tensor of a container: its Zarr node made on first use."""

    def __init__(
        self, layout: str, attrs: dict[str, Any], load: Callable[[], Any], doc: Any = None
    ) -> None:
        self.layout = layout  # dense, csr, csc, coo, mxfp4 or nvfp4
        self.attrs = attrs  # its attributes under ATTRS_KEY
        self._load = load
        self.doc = doc  # a dense tensor's zarr.json, where it came from consolidated metadata

    @functools.cached_property
    def node(self) -> Any:
        """Its Zarr array (dense) or sub-group."""
        return self._load()

    @functools.cached_property
    def arrays(self) -> list[tuple[Any, Any]]:
        """(array, its attributes under ATTRS_KEY) of each part."""
        if self.layout == "dense":
            return [(self.node, self.attrs)]
        return [(a, a.attrs.get(ATTRS_KEY)) for _, a in self.node.arrays()]


def _claim(members: dict[str, Any], nodes: dict[str, str], node: str, attrs: Any) -> str:
    """The tensor name a complete node claims (CorruptDataError for a name claimed twice,
    or a node not named after its tensor)."""
    name = tensor_name(node, attrs)
    if name in nodes or escape(name) != node:
        other = nodes.get(name, escape(name))
        raise CorruptDataError(f"nodes {other!r} and {node!r} both claim the tensor name {name!r}")
    nodes[name] = node
    return name


def committed(group: Any) -> dict[str, Member]:
    """The complete tensors of a container's group, by name (a member without
    ``complete`` is a tensor a writer did not finish). Two nodes claiming one
    name, or a node whose name is not its tensor's, is a CorruptDataError."""
    members: dict[str, Member] = {}
    nodes: dict[str, str] = {}
    for node, member in group.members():
        attrs = member.attrs.get(ATTRS_KEY)
        if not (isinstance(attrs, dict) and attrs.get("complete")):
            continue
        kind = attrs.get("layout", "dense")
        if (kind == "dense") != isinstance(member, zarr.Array):
            continue
        name = _claim(members, nodes, node, attrs)
        members[name] = Member(kind, attrs, lambda m=member: m)
    return members


def committed_from_docs(store: Any, docs: dict[str, Any]) -> dict[str, Member]:
    """:func:`committed` from a group's consolidated documents: no node is made
    (nor any read) until it is used."""
    members: dict[str, Member] = {}
    nodes: dict[str, str] = {}
    for node, doc in docs.items():
        if "/" in node:
            continue
        if not (isinstance(doc, dict) and isinstance(doc.get("attributes", {}), dict)):
            raise CorruptDataError(f"the consolidated metadata of node {node!r} is damaged")
        attrs = doc.get("attributes", {}).get(ATTRS_KEY)
        if not (isinstance(attrs, dict) and attrs.get("complete")):
            continue
        kind = attrs.get("layout", "dense")
        if (kind == "dense") != (doc.get("node_type") == "array"):
            continue
        name = _claim(members, nodes, node, attrs)
        if kind == "dense":
            load = functools.partial(_array_from_doc, store, node, doc)
        else:
            load = functools.partial(zarr.open_group, store, path=node, mode="r")
        members[name] = Member(kind, attrs, load, doc if kind == "dense" else None)
    return members


def _array_from_doc(store: Any, path: str, doc: dict[str, Any]) -> Any:
    from zarr.core.array import Array, AsyncArray
    from zarr.storage import StorePath

    try:
        return Array(AsyncArray(metadata=_metadata(doc), store_path=StorePath(store, path)))
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # (Zarr's parse)
        raise CorruptDataError(f"tensor node {path!r}: unreadable metadata ({exc})") from None


#: The keys of an array's zarr.json that :func:`_metadata` (and
#: :mod:`nncodecs.container.declared`) take; a document with any other goes through
#: Zarr's own parser (which refuses what it does not know).
DOC_KEYS = frozenset(
    ("zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
     "fill_value", "codecs", "attributes", "dimension_names", "storage_transformers")
)  # fmt: skip


def _metadata(doc: dict[str, Any]) -> Any:
    """Zarr's metadata of an array document, its data type and codecs parsed once per
    distinct JSON (a model's thousands of tensors share a few): Zarr's parser finds a
    data type by trying every registered one, which cost more than the rest."""
    from zarr.core.metadata.v3 import ArrayV3Metadata

    if doc.keys() - DOC_KEYS or doc.get("zarr_format") != 3 or doc.get("node_type") != "array":
        return ArrayV3Metadata.from_dict(dict(doc))
    dtype, codecs = (json.dumps(doc[key], sort_keys=True) for key in ("data_type", "codecs"))
    if len(dtype) + len(codecs) > _CACHED_CHARS:  # (nothing big stays cached)
        return ArrayV3Metadata.from_dict(dict(doc))
    return ArrayV3Metadata(
        shape=doc["shape"],
        data_type=data_type(dtype),
        chunk_grid=doc["chunk_grid"],
        chunk_key_encoding=doc["chunk_key_encoding"],
        fill_value=doc["fill_value"],
        codecs=_codecs(codecs),
        attributes=doc.get("attributes", {}),
        dimension_names=doc.get("dimension_names"),
        storage_transformers=doc.get("storage_transformers"),
    )


def doc_dtype(doc: dict[str, Any]) -> np.dtype:
    """The NumPy dtype of an array document (``ValueError`` and kin where it names none)."""
    text = json.dumps(doc["data_type"], sort_keys=True)
    if len(text) > _CACHED_CHARS:
        raise ValueError(f"a data type of {len(text)} characters")
    return data_type(text).to_native_dtype()


#: JSON of data types and codec lists up to this size is parsed once and kept.
_CACHED_CHARS = 4096


@functools.lru_cache(maxsize=256)
def data_type(text: str) -> Any:
    """Zarr's data type of its JSON (``text``: sorted-key ``json.dumps``)."""
    from zarr.core.dtype import get_data_type_from_json

    return get_data_type_from_json(json.loads(text), zarr_format=3)


@functools.lru_cache(maxsize=256)
def _codecs(text: str) -> Any:
    from zarr.core.metadata.v3 import parse_codecs

    return parse_codecs(json.loads(text))


def tensor_order(attrs: dict[str, Any], members: dict[str, Member]) -> list[str]:
    """The recorded order first, then complete tensors written after the last
    time the order was saved (a writer that did not close)."""
    order = [n for n in attrs.get("tensors", []) if n in members]
    return order + sorted(set(members) - set(order))


def _consolidated(store: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(container attributes, documents by path) from the root zarr.json's inline
    consolidated metadata, read and parsed here (Zarr would make every node of a
    model's thousands at once); ``None`` where there is none (Zarr lists them)."""
    from nncodecs.container.storage import read_many

    (raw,) = read_many(store, ["zarr.json"])
    if raw is None:
        return None
    doc = json.loads(raw.to_bytes())
    if not isinstance(doc, dict) or doc.get("zarr_format") != 3:
        return None
    meta, attrs = doc.get("consolidated_metadata"), doc.get("attributes")
    if doc.get("node_type") != "group" or not isinstance(meta, dict):
        return None
    if meta.get("kind") != "inline" or not isinstance(meta.get("metadata"), dict):
        return None
    attrs = check_container_attrs(attrs if isinstance(attrs, dict) else {})
    return attrs, meta["metadata"]


def open_container(store: Any, where: str) -> tuple[Any, dict[str, Any], dict[str, Member]]:
    """(group, container attributes, committed tensors) of the container in a
    store, read through its consolidated metadata where it has one. Errors are
    NotAContainerError or CorruptDataError, one line starting with ``where``."""
    try:
        consolidated = _consolidated(store)
        if consolidated is not None:
            attrs, docs = consolidated
            members = committed_from_docs(store, docs)
            # (the order lists the tensors committed with this very document)
            lost = [n for n in attrs.get("tensors", []) if n not in members]
            if lost:
                raise CorruptDataError(
                    f"tensor {lost[0]!r} is listed, but the consolidated metadata holds "
                    "no complete node of it"
                )
            return None, attrs, members
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # consolidated metadata for Zarr v3
            group = zarr.open_group(store, mode="r")
            attrs = check_container(group)
            # (no warning for a dead writer's leftovers: they are not members)
            return group, attrs, committed(group)
    except (NotAContainerError, CorruptDataError) as exc:
        msg = str(exc)
        raise type(exc)(msg if msg.startswith(where) else f"{where}: {msg}") from None
    except (FileNotFoundError, KeyError, ValueError, TypeError) as exc:
        if "zarr" in type(exc).__module__ or "group" in str(exc).lower():
            raise NotAContainerError(
                f"{where}: not an nncodecs container (no Zarr group)"
            ) from None
        raise CorruptDataError(f"{where}: unreadable metadata ({exc})") from None
