"""A whole-tensor task of the task API (:mod:`nncodecs.container.tasks`): one tensor
of a checkpoint in a series, stored against the checkpoint before it.

:func:`write_tensor` stores a tensor as a duplicate where an earlier checkpoint has
a tensor of its hash, dtype and shape under any name (given as ``same``: that one's
record, for where its bits lie and its chain depth); else as a difference where the
previous checkpoint has a tensor of its name, dtype and shape (``previous``: that
one's record, with its values read from the previous checkpoint's source, never from
the container being written); else, and once a chain is ``max_chain`` deep, whole.
Its record carries what the tasks of the next checkpoint need, so no task waits for
any but the one holding its reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nncodecs.container import delta, records
from nncodecs.container.delta_writes import against, delta_objects
from nncodecs.container.references import recorded_location, resolve_reference
from nncodecs.container.tasks import (
    TensorPlan,
    TensorRecord,
    check_begun,
    little,
    write_objects,
)
from nncodecs.dtypes import dtype_name

__all__ = [
    "MAX_CHAIN",
    "Series",
    "check_max_chain",
    "reference_chain",
    "tensor_hash",
    "write_tensor",
]

MAX_CHAIN = delta.MAX_CHAIN
check_max_chain = delta.check_max_chain


def tensor_hash(array: Any) -> str | None:
    """A tensor's SHA-256, as a series records it (``None`` for a dtype that is never
    differenced)."""
    arr = np.asarray(array, order="C")
    return delta.sha256(arr) if delta.bits_dtype(arr.dtype) is not None else None


@dataclass(frozen=True)
class Series:
    """Where a tensor of a series stands: the places this container and the previous
    one end up (what the records name), the previous checkpoint's record of the
    tensor and its values (or a function that reads them, called only where a
    difference is tried), an earlier checkpoint's record of a tensor with its bits
    (``same``), and the longest chain allowed."""

    here: str
    there: str = ""
    previous: TensorRecord | None = None
    previous_values: Any = None
    same: TensorRecord | None = None
    max_chain: int = MAX_CHAIN


def write_tensor(
    target: str,
    p: TensorPlan,
    array: Any,
    series: Series | None = None,
    storage_options: dict[str, Any] | None = None,
    put: Callable[[dict[str, Any]], None] | None = None,
) -> TensorRecord:
    """Store one whole tensor (see the module's docstring); its record for the commit
    and for the later tasks of the series. ``put``: where its objects go instead of the
    target's store (a task gathering many tensors' objects into one write, or into a
    part of a zip: :mod:`nncodecs.container.task_zip`)."""
    arr = np.asarray(array, order="C")
    if arr.shape != p.shape or little(arr.dtype) != p.dtype:
        raise ValueError(
            f"{p.name}: the plan says {p.dtype} {list(p.shape)}, got {arr.dtype} {list(arr.shape)}"
        )
    arr = np.ascontiguousarray(arr.astype(p.dtype, copy=False)).reshape(p.shape)
    check_begun(target, storage_options)
    s = series or Series(target, max_chain=0)
    max_chain = check_max_chain(s.max_chain) if series else 0
    prev = s.previous
    if s.same is not None and s.same.origin[2] < max_chain:  # (found by its hash)
        prev = s.same
    attrs: dict[str, Any] = {"name": p.name, "layout": "dense", "complete": False}
    digest = tensor_hash(arr)
    if digest is not None:
        attrs.update(sha256=digest, depth=0)
    found, depth, where = None, 0, {}
    origin = (s.here, p.name, 0)  # (where its bits are: here, unless it is a duplicate)
    alike = prev is not None and digest is not None and tuple(prev.shape) == arr.shape
    if prev is not None and alike and prev.dtype == dtype_name(arr.dtype):
        if digest == prev.sha256 and prev.origin[2] < max_chain:
            origin = prev.origin
            where = {
                "container": recorded_location(s.here, origin[0]),
                "tensor": origin[1],
                "sha256": digest,
            }
            attrs["duplicate"], depth = True, origin[2] + 1
            found = ("xor", np.zeros(arr.shape, delta.bits_dtype(arr.dtype)))
        elif digest != prev.sha256 and prev.depth < max_chain and s.previous_values is not None:
            where = {
                "container": recorded_location(s.here, s.there),
                "tensor": p.name,
                "sha256": prev.sha256,
            }
            depth = prev.depth + 1
            base = s.previous_values() if callable(s.previous_values) else s.previous_values
            base = np.asarray(base, order="C").reshape(p.shape)
            found = against(arr, base, p.codec)
            origin = (s.here, p.name, depth)
    dims = p.dimension_names()
    if found is not None:
        attrs["depth"] = depth
        objects, doc = delta_objects(
            p.node, arr, found[1], found[0], where, p.codec, p.chunk_bytes, attrs, dims
        )
    else:
        attrs.pop("duplicate", None)
        objects, doc = records.array_objects(p.node, arr, p.codec, p.chunk_bytes, attrs, dims)
    if put is None:
        write_objects(target, storage_options, dict(objects))
    else:
        put(dict(objects))
    return TensorRecord(
        name=p.name,
        doc=doc,
        nbytes=int(arr.nbytes),
        sha256=digest,
        depth=int(attrs.get("depth", 0)),
        origin=origin if found is not None else (s.here, p.name, 0),
        shape=tuple(arr.shape),
        dtype=dtype_name(arr.dtype),
    )


def reference_chain(
    container: str, storage_options: dict[str, Any] | None = None, limit: int = 1024
) -> list[str]:
    """Every container ``container`` reads through, at any depth (where each one's
    references lead, as a Reader follows them): what a save stored against it must not
    replace. At most ``limit`` containers are opened."""
    from nncodecs.container.reader import Reader

    seen: list[str] = []
    todo = [container]
    while todo and len(seen) < limit:
        here = todo.pop()
        with Reader(here, storage_options=storage_options) as r:
            found = {ref["container"] for ref in r.references().values()}
        for recorded in sorted(found):
            there = resolve_reference(here, recorded, {})
            if there not in seen:
                seen.append(there)
                todo.append(there)
    return seen
