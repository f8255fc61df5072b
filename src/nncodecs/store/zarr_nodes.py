"""Zarr's objects for a container's nodes, from their consolidated documents.

A Reader makes a tensor's Zarr array (or a sparse or quantized tensor's
group) only where it needs one: a slice, a dask array, a codec it does not
read itself. Data types and codec lists are parsed once per distinct JSON
(a model's thousands of tensors share a few). Zarr is imported here on first
use, never at import: a process that only reads whole tensors never loads it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from nncodecs.errors import CorruptDataError

__all__ = [
    "DOC_KEYS",
    "array_from_doc",
    "data_type",
    "doc_dtype",
    "open_group_node",
    "zarr_with_types",
]


def zarr_with_types() -> Any:
    """``zarr``, with nncodecs' data types in its registry: zarr 3.1 does not load them
    by itself, and nncodecs' start-up hook misses a process whose zarr came in past
    it (pytest imports zarr's own plugin through its assertion rewriter). Every use
    of Zarr here and in ``_store.py`` comes through this."""
    import zarr

    import nncodecs.codecs.zarr_dtypes  # noqa: F401  (registers them, once)

    return zarr


def open_group_node(store: Callable[[], Any], path: str) -> Any:
    zarr = zarr_with_types()

    return zarr.open_group(store(), path=path, mode="r")


def array_from_doc(store: Callable[[], Any], path: str, doc: dict[str, Any]) -> Any:
    zarr_with_types()
    from zarr.core.array import Array, AsyncArray
    from zarr.storage import StorePath

    try:
        metadata = _metadata(doc)
        return Array(AsyncArray(metadata=metadata, store_path=StorePath(store(), path)))
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # (Zarr's parse)
        raise CorruptDataError(f"tensor node {path!r}: unreadable metadata ({exc})") from None


#: The keys of an array's zarr.json that :func:`_metadata` (and
#: :mod:`nncodecs.container.declared`) take; a document with any other goes through
#: Zarr's own parser (which refuses what it does not know).
DOC_KEYS = frozenset(
    (
        "zarr_format",
        "node_type",
        "shape",
        "data_type",
        "chunk_grid",
        "chunk_key_encoding",
        "fill_value",
        "codecs",
        "attributes",
        "dimension_names",
        "storage_transformers",
    )
)


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
    """The NumPy dtype of an array document, by Zarr's parser (``ValueError`` and kin
    where it names none; :func:`nncodecs.container.declared.doc_dtype` reads the types
    nncodecs writes without Zarr)."""
    text = json.dumps(doc["data_type"], sort_keys=True)
    if len(text) > _CACHED_CHARS:
        raise ValueError(f"a data type of {len(text)} characters")
    return data_type(text).to_native_dtype()


#: JSON of data types and codec lists up to this size is parsed once and kept.
_CACHED_CHARS = 4096


@functools.lru_cache(maxsize=256)
def data_type(text: str) -> Any:
    """Zarr's data type of its JSON (``text``: sorted-key ``json.dumps``)."""
    zarr_with_types()
    from zarr.core.dtype import get_data_type_from_json

    return get_data_type_from_json(json.loads(text), zarr_format=3)


@functools.lru_cache(maxsize=256)
def _codecs(text: str) -> Any:
    zarr_with_types()
    from zarr.core.metadata.v3 import parse_codecs

    return parse_codecs(json.loads(text))
