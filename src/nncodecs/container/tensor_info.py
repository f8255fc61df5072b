"""What a Reader tells of one tensor without reading it: :class:`TensorInfo`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from nncodecs.container import records
from nncodecs.container.declared import codec_label, doc_dtype
from nncodecs.container.delta import delta_config
from nncodecs.dtypes import dtype_name
from nncodecs.errors import CorruptDataError

__all__ = ["TensorInfo", "info_from_doc", "info_from_node"]


@dataclass(frozen=True)
class TensorInfo:
    """What the container knows of one tensor."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    layout: str
    stored_bytes: int
    nbytes: int
    codec: str
    #: For a tensor stored against another container's: ``{"container", "tensor",
    #: "transform"}`` (the container as recorded); ``None`` for one stored whole.
    reference: dict[str, str] | None = None
    #: How many differences a read decodes to reach stored values (0: stored whole).
    depth: int = 0


def info_from_doc(name: str, doc: Any, attrs: Any, stored_bytes: int) -> TensorInfo:
    """The info of a dense tensor from its zarr.json (no Zarr array made: a model's
    thousands of tensors are listed at once), checked against its records as a
    first use checks it (CorruptDataError saying ``tensor '<name>': what``)."""
    try:
        shape = tuple(doc["shape"])
        if not all(type(d) is int and d >= 0 for d in shape):
            raise ValueError(f"shape {list(shape)}")
        dtype = doc_dtype(doc)
        kind = dtype_name(dtype)
        codec = codec_label(doc["codecs"])
        config = delta_config(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptDataError(f"tensor {name!r}: unreadable metadata ({exc})") from None
    problem = records.shape_problem(SimpleNamespace(shape=shape, dtype=dtype), attrs)
    if problem is not None:
        raise CorruptDataError(f"tensor {name!r}: {problem}")
    return TensorInfo(
        name=name,
        dtype=kind,
        shape=shape,
        layout="dense",
        stored_bytes=stored_bytes,
        nbytes=math.prod(shape) * dtype.itemsize,
        codec=codec,
        reference=None
        if config is None
        else {
            "container": config["reference"]["container"],
            "tensor": config["reference"]["tensor"],
            "transform": config["transform"],
            "duplicate": isinstance(attrs, dict) and attrs.get("duplicate") is True,
        },
        depth=_depth(attrs) if config is not None else 0,
    )


def _depth(attrs: Any) -> int:
    depth = attrs.get("depth", 1) if isinstance(attrs, dict) else 1
    return depth if type(depth) is int and depth > 0 else 1


def info_from_node(
    name: str, kind: str, node: Any, attrs: dict[str, Any], stored: Callable[[str], int]
) -> TensorInfo:
    """The info of a tensor from its Zarr node: a dense tensor's array, or the sub-group
    of a composite one's parts (``kind``; its dtype and shape those of its values: ``data``
    or ``blocks``, and a records tensor's bytes); ``stored``: an array's stored bytes."""
    if kind == "dense":
        parts = {"": node}
        main, shape = node, node.shape
    else:
        parts = dict(node.arrays())
        if not parts:
            raise CorruptDataError(f"tensor {name!r}: its {kind} group holds no arrays")
        main = parts.get("data", parts.get("blocks", next(iter(parts.values()))))
        shape = attrs.get("shape", list(main.shape))
        if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
            raise CorruptDataError(f"tensor {name!r}: its recorded shape {shape!r} is damaged")
    return TensorInfo(
        name=name,
        dtype="uint8" if kind == "records" else dtype_name(main.dtype),
        shape=tuple(shape),
        layout=kind,
        stored_bytes=sum(stored(a.path) for a in parts.values()),
        nbytes=sum(int(a.nbytes) for a in parts.values()),
        codec=codec_label(main.metadata.codecs),
    )
