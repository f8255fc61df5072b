"""DCP's ``Metadata`` as JSON of its dataclasses, never a pickle (what a container of a
torch.distributed.checkpoint holds under :data:`METADATA`), and the names its saved
items take in the container."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from nncodecs.errors import CorruptDataError

if TYPE_CHECKING:
    from torch.distributed.checkpoint import Metadata
    from torch.distributed.checkpoint.metadata import MetadataIndex

__all__ = ["METADATA", "index_key", "metadata_from_json", "metadata_json", "shard_name"]

#: The container's metadata key holding DCP's ``Metadata`` as JSON.
METADATA = "dcp.metadata"


def shard_name(fqn: str, offsets: Any, item: Any = None) -> str:
    """A saved tensor's name in the container: its fully qualified name, and for a shard
    that is not the whole tensor, ``@`` and its global offsets."""
    offsets = [int(o) for o in offsets]
    whole = item is None or (
        not any(offsets) and list(item.tensor_data.chunk.sizes) == list(item.tensor_data.size)
    )
    return fqn if whole else f"{fqn}@{','.join(str(o) for o in offsets)}"


def metadata_json(metadata: Metadata, names: dict[Any, str]) -> str:
    """DCP's ``Metadata`` as JSON: every tensor's dtype, size and chunks (each with its
    stored name), every bytes item's name, the planner's paths of flattened keys."""
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata

    items: dict[str, Any] = {}
    for fqn, m in metadata.state_dict_metadata.items():
        if isinstance(m, BytesStorageMetadata):
            items[fqn] = {"bytes": names[(fqn, None)]}
            continue
        items[fqn] = {
            "dtype": str(m.properties.dtype).removeprefix("torch."),
            "requires_grad": bool(m.properties.requires_grad),
            "size": [int(d) for d in m.size],
            "chunks": [
                {
                    "offsets": [int(o) for o in c.offsets],
                    "sizes": [int(s) for s in c.sizes],
                    "name": names[(fqn, tuple(int(o) for o in c.offsets))],
                }
                for c in m.chunks
            ],
        }
    planner = metadata.planner_data
    if planner is not None and not (
        isinstance(planner, dict)
        and all(
            isinstance(k, str)
            and isinstance(v, tuple | list)
            and all(type(p) in (str, int) for p in v)
            for k, v in planner.items()
        )
    ):
        raise ValueError("the save planner's data is not paths of keys: not stored as JSON")
    out = {
        "version": metadata.version,
        "tensors": items,
        "planner_data": None if planner is None else {k: list(v) for k, v in planner.items()},
    }
    return json.dumps(out)


def metadata_from_json(record: str, r: Any) -> tuple[Metadata, dict[Any, str]]:
    """:func:`metadata_json` back as DCP's dataclasses, every field checked, and the
    stored name of every item."""
    import torch
    from torch.distributed.checkpoint import Metadata
    from torch.distributed.checkpoint.metadata import (
        BytesStorageMetadata,
        ChunkStorageMetadata,
        TensorProperties,
        TensorStorageMetadata,
    )

    bad = CorruptDataError("the container's DCP metadata is damaged")
    try:
        doc = json.loads(record)
        items, planner = doc["tensors"], doc.get("planner_data")
    except (ValueError, KeyError, TypeError):
        raise bad from None
    if not isinstance(items, dict):
        raise bad
    state: dict[str, Any] = {}
    names: dict[Any, str] = {}
    for fqn, m in items.items():
        if not isinstance(m, dict):
            raise bad
        if "bytes" in m:
            names[(fqn, None)] = _stored(m["bytes"], r, bad)
            state[fqn] = BytesStorageMetadata()
            continue
        dtype = getattr(torch, str(m.get("dtype")), None)
        if not isinstance(dtype, torch.dtype) or not _ints(m.get("size")):
            raise bad
        chunks = []
        for c in m.get("chunks", []):
            if not (isinstance(c, dict) and _ints(c.get("offsets")) and _ints(c.get("sizes"))):
                raise bad
            offsets = torch.Size(c["offsets"])
            names[(fqn, tuple(offsets))] = _stored(c.get("name"), r, bad)
            chunks.append(ChunkStorageMetadata(offsets, torch.Size(c["sizes"])))
        props = TensorProperties(dtype=dtype, requires_grad=bool(m.get("requires_grad")))
        state[fqn] = TensorStorageMetadata(props, torch.Size(m["size"]), chunks)
    if planner is not None:
        if not isinstance(planner, dict) or not all(isinstance(v, list) for v in planner.values()):
            raise bad
        planner = {k: tuple(v) for k, v in planner.items()}
    metadata = Metadata(state, planner_data=planner, version=doc.get("version"))
    metadata.storage_data = names
    return metadata, names


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(type(v) is int and v >= 0 for v in value)


def _stored(name: Any, r: Any, bad: Exception) -> str:
    if not isinstance(name, str) or name not in r:
        raise bad
    return name


def index_key(index: MetadataIndex) -> tuple[str, tuple[int, ...] | None]:
    """A ``MetadataIndex`` as a plain key: its fqn and offsets (``None`` for bytes)."""
    offset = None if index.offset is None else tuple(int(o) for o in index.offset)
    return index.fqn, offset
