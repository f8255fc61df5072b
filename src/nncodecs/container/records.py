"""A tensor's integrity records (docs/format.md, "The container"): written with it,
and compared with its Zarr metadata when it is read."""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.container import layout

__all__ = ["shape_problem", "shape_records", "tensor_records"]


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
