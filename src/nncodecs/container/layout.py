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

import contextlib
import functools
import json
import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from nncodecs.container.kept import kept_entries
from nncodecs.container.names import escape, legacy_escape, unescape
from nncodecs.errors import CorruptDataError, NNCodecsError, NotAContainerError
from nncodecs.store import zarr_nodes
from nncodecs.store.documents import (
    ARRAY_CONFIG,
    ATTRS_KEY,
    CODECS,
    FORMAT,
    check_codec,
    codec_settings,
)

__all__ = [
    "ARRAY_CONFIG",
    "ATTRS_KEY",
    "CODECS",
    "FORMAT",
    "KEPT_TUNED_BYTES",
    "KEPT_TUNING",
    "RECORDS_MIN_GAIN",
    "VERSION",
    "Member",
    "check_codec",
    "check_container",
    "check_container_attrs",
    "check_metadata",
    "chunking",
    "codec_settings",
    "committed",
    "committed_from_docs",
    "open_container",
    "root_attrs",
    "tensor_name",
    "tensor_order",
]

VERSION = 1
#: Chunks of about this many bytes along the first axis (random access).
CHUNK_BYTES = 2 << 20
#: At most this many chunks in one shard (one file in a directory store).
CHUNKS_PER_SHARD = 16


#: The group attribute ``records`` of a container whose every tensor carries
#: its integrity records: ``chunks`` (``"all"``: every chunk of the grid is
#: stored, a missing one is corruption, not fill values) and, for codecs
#: without a checksum of their own, ``crc32c`` of the tensor's bytes.
RECORDS = 1
#: The root attribute of a container being written by tasks (``nncodecs.container.tasks``)
#: until its commit: ``"tasks"``. Its tensors are not committed; a Writer does not append.
WRITING = "writing"
CHUNKS_ALL = "all"
UNCHECKED_CODECS = ("zstd", "raw")
#: The weights codec's ``min_gain`` for the fields of records (quantized blocks): their
#: packed quants and high bits save 0.5-5% coded, under the default's 5%, and a
#: quantized model is stored to be small (raw bytes would decode faster, at up to 5%
#: more of them).
RECORDS_MIN_GAIN = 0.005
#: The weights codec's settings for kept files of up to KEPT_TUNED_BYTES (a GGUF's
#: vocabulary and header, a tokenizer: text, where zstd 19 stores a fifth less than 3,
#: at a few MB/s: a fraction of a second for files this size).
KEPT_TUNING, KEPT_TUNED_BYTES = (("zstd_level", 19),), 8 << 20


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


def check_metadata(metadata: dict[Any, Any]) -> None:
    """A model's metadata: strings to strings (else ``TypeError`` naming the others)."""
    bad = {k: v for k, v in metadata.items() if not (isinstance(k, str) and isinstance(v, str))}
    if bad:
        raise TypeError(f"metadata keys and values must be strings, got {bad!r}")


def root_attrs(
    order: list[str], metadata: dict[str, str], records: bool = True, files: Any = None
) -> dict[str, Any]:
    """The group's attributes: the format, the tensor order, the metadata, the
    ``records`` flag where every tensor carries its records, the kept files' nodes."""
    check_metadata(metadata)
    attrs: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "tensors": list(order),
        "metadata": dict(metadata),
    }
    if records:
        attrs["records"] = RECORDS
    if files:
        attrs["files"] = dict(files)
    return {ATTRS_KEY: attrs}


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
        self,
        layout: str,
        attrs: dict[str, Any],
        load: Callable[[], Any],
        doc: Any = None,
        path: str = "",
    ) -> None:
        self.layout = layout  # dense, csr, csc, coo, mxfp4, nvfp4 or records
        self.path = path  # its node (escape(name), or legacy_escape(name) in older containers)
        self.attrs = attrs  # its attributes under ATTRS_KEY
        self._load = load
        self.doc = doc  # a dense tensor's zarr.json, where it came from consolidated metadata

    @functools.cached_property
    def node(self) -> Any:
        """Its Zarr array (dense) or sub-group."""
        with self._readable():
            return self._load()

    @functools.cached_property
    def arrays(self) -> list[tuple[Any, Any]]:
        """(array, its attributes under ATTRS_KEY) of each part."""
        if self.layout == "dense":
            return [(self.node, self.attrs)]
        with self._readable():
            return [(a, a.attrs.get(ATTRS_KEY)) for _, a in self.node.arrays()]

    @contextlib.contextmanager
    def _readable(self) -> Iterator[None]:
        """What Zarr raises on a node's damaged documents (JSON that does not parse, a
        field of the wrong kind, a part's document missing): a CorruptDataError."""
        try:
            yield
        except (
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
            RecursionError,
            FileNotFoundError,
        ) as exc:
            if isinstance(exc, NNCodecsError):
                raise
            raise CorruptDataError(
                f"tensor node {self.path!r}: unreadable metadata ({type(exc).__name__}: {exc})"
            ) from None


def _claim(members: dict[str, Any], nodes: dict[str, str], node: str, attrs: Any) -> str:
    """The tensor name a complete node claims (CorruptDataError for a name claimed twice,
    or a node not named after its tensor)."""
    name = tensor_name(node, attrs)
    if name in nodes or node not in (escape(name), legacy_escape(name)):
        other = nodes.get(name, escape(name))
        raise CorruptDataError(f"nodes {other!r} and {node!r} both claim the tensor name {name!r}")
    nodes[name] = node
    return name


def committed(group: Any) -> dict[str, Member]:
    """The complete tensors of a container's group, by name (a member without
    ``complete`` is a tensor a writer did not finish). Two nodes claiming one
    name, or a node whose name is not its tensor's, is a CorruptDataError."""
    import zarr

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
        members[name] = Member(kind, attrs, lambda m=member: m, path=node)
    return members


def committed_from_docs(store: Callable[[], Any], docs: dict[str, Any]) -> dict[str, Member]:
    """:func:`committed` from a group's consolidated documents: no node is made
    (nor any read, nor ``store()`` called) until it is used."""
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
            load = functools.partial(zarr_nodes.array_from_doc, store, node, doc)
        else:
            load = functools.partial(zarr_nodes.open_group_node, store, node)
        members[name] = Member(kind, attrs, load, doc if kind == "dense" else None, node)
    return members


def _kept(store: Any, attrs: dict[str, Any], docs: Any, group: Any) -> dict[Any, Member]:
    entries = kept_entries(store, attrs, docs, group, ATTRS_KEY)
    return {k: Member("dense", a, load, doc, node) for k, (a, load, doc, node) in entries.items()}


def tensor_order(attrs: dict[str, Any], members: dict[str, Member]) -> list[str]:
    """The recorded order first, then complete tensors written after the last
    time the order was saved (a writer that did not close)."""
    order = [n for n in attrs.get("tensors", []) if n in members]
    return order + sorted({n for n in members if isinstance(n, str)} - set(order))


def _consolidated(raw: bytes | None) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(container attributes, documents by path) from the root zarr.json's inline
    consolidated metadata (``raw``), parsed here (Zarr would make every node of a
    model's thousands at once); ``None`` where there is none (Zarr lists them)."""
    if raw is None:
        return None
    doc = json.loads(raw)
    if not isinstance(doc, dict) or doc.get("zarr_format") != 3:
        return None
    meta, attrs = doc.get("consolidated_metadata"), doc.get("attributes")
    if doc.get("node_type") != "group" or not isinstance(meta, dict):
        return None
    if meta.get("kind") != "inline" or not isinstance(meta.get("metadata"), dict):
        return None
    attrs = check_container_attrs(attrs if isinstance(attrs, dict) else {})
    return attrs, meta["metadata"]


def read_root(store: Any) -> bytes | None:
    """The root ``zarr.json`` of a Zarr store, read through Zarr."""
    from nncodecs.store.storage import read_many

    (raw,) = read_many(store, ["zarr.json"])
    return None if raw is None else raw.to_bytes()


def open_container(
    store: Any, where: str, root: Callable[[], bytes | None] | None = None
) -> tuple[Any, dict[str, Any], dict[str, Member]]:
    """(group, container attributes, committed tensors and kept files, these by
    ``kept.kept_key``) of the container in a store, read through its consolidated
    metadata where it has one. ``store``: a Zarr store, or a function that makes one
    (called only where a Zarr object is needed); ``root``: reads the root ``zarr.json``
    (default: through the store). Errors are NotAContainerError or CorruptDataError,
    one line starting with ``where``."""
    get_store = store if callable(store) else lambda: store
    try:
        consolidated = _consolidated(root() if root is not None else read_root(get_store()))
        if consolidated is not None:
            attrs, docs = consolidated
            members = committed_from_docs(get_store, docs)
            # (the order lists the tensors committed with this very document)
            lost = [n for n in attrs.get("tensors", []) if n not in members]
            if lost:
                raise CorruptDataError(
                    f"tensor {lost[0]!r} is listed, but the consolidated metadata holds "
                    "no complete node of it"
                )
            return None, attrs, {**members, **_kept(get_store, attrs, docs, None)}
        import zarr

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # consolidated metadata for Zarr v3
            group = zarr.open_group(get_store(), mode="r")
            attrs = check_container(group)
            # (no warning for a dead writer's leftovers: they are not members)
            return group, attrs, {**committed(group), **_kept(None, attrs, None, group)}
    except (NotAContainerError, CorruptDataError) as exc:
        msg = str(exc)
        raise type(exc)(msg if msg.startswith(where) else f"{where}: {msg}") from None
    except (
        FileNotFoundError,
        KeyError,
        ValueError,
        TypeError,
        AttributeError,
        RecursionError,
    ) as exc:
        if "zarr" in type(exc).__module__ or "group" in str(exc).lower():
            raise NotAContainerError(
                f"{where}: not an nncodecs container (no Zarr group)"
            ) from None
        raise CorruptDataError(f"{where}: unreadable metadata ({exc})") from None
