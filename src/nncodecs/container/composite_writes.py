"""What a Writer writes for a composite tensor (a sub-group of arrays, its parts): the
parts' arrays with their paths and dimension names, and the sub-group's document.

The parts themselves are made and checked in :mod:`nncodecs.container.composite`;
:meth:`nncodecs.Writer.add_sparse_csr` and its siblings write what this returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs.container import composite, layout
from nncodecs.container.names import escape
from nncodecs.dtypes import dtype_name
from nncodecs.store import documents

__all__ = ["composite_arrays"]


def composite_arrays(
    name: str, made: composite.Parts
) -> tuple[list[tuple[str, np.ndarray, list[str], tuple]], dict[str, Any]]:
    """The parts of tensor ``name`` as (path, array, dimension names, the weights
    codec's tuning), and the document that commits them by its ``complete`` flag
    (written last); ``TypeError`` for a part of a dtype a container cannot hold."""
    kind, parts, extra = made
    for part, arr in parts.items():
        try:
            dtype_name(arr.dtype)
        except TypeError as exc:
            raise TypeError(f"tensor {name!r} ({part}): {exc}") from None
    node = escape(name)
    # (records: the packed quants and high bits gain little; a quantized model is
    # stored to be small)
    tuning = (("min_gain", layout.RECORDS_MIN_GAIN),) if kind == "records" else ()
    arrays = [
        (f"{node}/{part}", arr, [f"{node}.{part}.{i}" for i in range(arr.ndim)], tuning)
        for part, arr in parts.items()
    ]
    attrs = {"name": name, "layout": kind, "complete": True, **extra}
    return arrays, documents.group_doc({layout.ATTRS_KEY: attrs})
