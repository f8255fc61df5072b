"""The Writer's composite layouts: a tensor stored as a sub-group of arrays (its parts).

A mixin of :class:`nncodecs.Writer` (which holds the output, the queue and the names it
uses); the parts themselves are made and checked in :mod:`nncodecs.container.composite`.
"""

from __future__ import annotations

from typing import Any

from nncodecs.container import composite, layout
from nncodecs.container.names import escape
from nncodecs.dtypes import dtype_name
from nncodecs.store import documents

__all__ = ["CompositeWrites"]


class CompositeWrites:
    """``add_sparse_csr``, ``add_sparse_coo``, ``add_quantized`` and ``add_records``."""

    codec: str
    _output: Any
    _names: list[str]
    _known: set[str]
    _check_new: Any
    _begin_change: Any
    _write_array: Any
    _queue_doc: Any
    _objects: Any

    def add_sparse_csr(
        self, name: str, data: Any, indices: Any, indptr: Any, shape: Any, codec: str | None = None
    ) -> None:
        """Store a CSR matrix from its arrays; it reads back as ``scipy.sparse.csr_matrix``."""
        self._add_compressed("csr", name, data, indices, indptr, shape, codec)

    def add_sparse_csc(
        self, name: str, data: Any, indices: Any, indptr: Any, shape: Any, codec: str | None = None
    ) -> None:
        """Store a CSC matrix from its arrays; it reads back as ``scipy.sparse.csc_matrix``."""
        self._add_compressed("csc", name, data, indices, indptr, shape, codec)

    def _add_compressed(self, kind: str, name: str, *arrays: Any) -> None:
        self._check_new(name)
        *parts, codec = arrays
        self._add_composite(name, composite.compressed_parts(kind, name, *parts), codec)

    def add_sparse_coo(
        self, name: str, coords: Any, data: Any, shape: Any, codec: str | None = None
    ) -> None:
        """Store a COO tensor: ``coords`` of shape (ndim, nnz) and ``data`` of nnz values."""
        self._check_new(name)
        self._add_composite(name, composite.coo_parts(name, coords, data, shape), codec)

    def add_quantized(
        self, name: str, blocks: Any, scales: Any, scheme: str, codec: str | None = None
    ) -> None:
        """Store an MXFP4 or NVFP4 weight as its pair: packed FP4 nibbles and block scales.

        ``blocks``: uint8 (two FP4 values a byte) or torch ``float4_e2m1fn_x2``;
        ``scales``: E8M0 as uint8 (``mxfp4``, 32 values a block) or float8_e4m3fn
        (``nvfp4``, 16 values a block). It reads back as the same pair.
        """
        self._check_new(name)
        self._add_composite(name, composite.quantized_parts(name, blocks, scales, scheme), codec)

    def add_records(self, name: str, data: Any, fields: Any, codec: str | None = None) -> None:
        """Store bytes made of fixed-size records (a quantized format's blocks) field by
        field: each field's values of every record form one array of its own dtype, coded
        apart (float scales through the float path, packed quants as bytes).

        ``data``: the bytes (bytes-like or 1-D uint8), a whole number of records;
        ``fields``: ``[(field, dtype, count), ...]`` in record order, packed (a GGML
        ``Q4_0`` block: ``[("d", "float16", 1), ("qs", "uint8", 16)]``). The tensor
        reads back as the very bytes (1-D uint8); its layout is ``records``.
        """
        self._check_new(name)
        self._add_composite(name, composite.records_parts(name, data, fields), codec)

    def _add_composite(self, name: str, made: composite.Parts, codec: Any) -> None:
        """A sub-group of arrays; committed by its own flag, in its document written last."""
        kind, parts, extra = made
        for part, arr in parts.items():
            try:
                dtype_name(arr.dtype)
            except TypeError as exc:
                raise TypeError(f"tensor {name!r} ({part}): {exc}") from None
        codec = layout.check_codec(codec or self.codec)
        self._begin_change()
        node = escape(name)
        self._output.discard(node)  # (only ever a leftover of a writer that died)
        tuning = (("min_gain", layout.RECORDS_MIN_GAIN),) if kind == "records" else ()
        for part, arr in parts.items():
            dims = [f"{node}.{part}.{i}" for i in range(arr.ndim)]
            self._write_array(f"{node}/{part}", arr, codec, {}, dims, False, tuning)
        attrs = {"name": name, "layout": kind, "complete": True, **extra}
        self._queue_doc(node, documents.group_doc({layout.ATTRS_KEY: attrs}))
        self._names.append(name)
        self._known.add(name)
        self._objects.drain()
