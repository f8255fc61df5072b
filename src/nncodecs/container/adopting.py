"""A Writer in mode ``"a"``: what an existing container holds, taken as it is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nncodecs.container import kept, layout
from nncodecs.container.names import escape
from nncodecs.errors import CorruptDataError
from nncodecs.store import storage

__all__ = ["Adopted", "adopted"]


@dataclass
class Adopted:
    """A container's tensor order, metadata, ``records`` flag, kept files' nodes (by
    name), every node's document (by path), and the nodes a new writer must keep."""

    names: list[str]
    metadata: dict[str, str]
    records: bool
    kept: dict[str, str]
    docs: dict[str, dict[str, Any]]
    nodes: set[str]


def adopted(store: Any) -> Adopted:
    """Read what the container in ``store`` holds (its members' documents checked)."""
    from nncodecs.store.opening import CheckedStore, describe_target

    where = describe_target(store)
    _, attrs, members = layout.open_container(CheckedStore(store), where)
    if attrs.get(layout.WRITING):
        raise ValueError(
            f"{where}: being written by tasks (nncodecs.container.tasks) and not committed: "
            "nothing appends to it (a run that died: remove it, or write anew, overwrite=True)"
        )
    names = layout.tensor_order(attrs, members)
    files = {k[1]: m.path for k, m in members.items() if not isinstance(k, str)}
    paths = [kept.FILES_NODE, *files.values()] if files else []
    for name, member in ((n, m) for n, m in members.items() if isinstance(n, str)):
        node = escape(name)
        paths.append(node)
        if member.layout != "dense":
            paths += [f"{node}/{a.basename}" for a, _ in member.arrays]
    docs = {}
    for path, buf in zip(
        paths, storage.read_many(store, [f"{p}/zarr.json" for p in paths]), strict=True
    ):
        if buf is None:
            raise CorruptDataError(f"{where}: {path}/zarr.json is missing")
        docs[path] = json.loads(buf.to_bytes())
    nodes = {escape(n) for n in names} | ({kept.FILES_NODE} & set(paths))
    return Adopted(
        names,
        dict(attrs.get("metadata", {})),
        attrs.get("records") == layout.RECORDS,
        files,
        docs,
        nodes,
    )
