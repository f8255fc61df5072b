"""Sparse and quantized tensors: a sub-group of arrays (its parts) a tensor.

CSR / CSC: ``data``, ``indices``, ``indptr``; COO: ``coords`` (ndim x nnz) and
``data``; MXFP4 / NVFP4: ``blocks`` and ``scales``; records (a quantized format's
fixed-size blocks, GGML's ``Q4_0`` ...): one array per field, the attribute ``fields``
saying how they interleave back into the bytes. The ``*_parts`` functions
check what a Writer is given and return the parts and the extra attributes
(``shape`` for sparse tensors); :func:`assemble` makes the tensor a Reader
returns from the parts it read.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import numpy as np

from nncodecs import _core
from nncodecs.container.arrays import convert, to_host_array
from nncodecs.dtypes import dtype_name, normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.extras import need

__all__ = [
    "Records",
    "assemble",
    "compressed_parts",
    "coo_parts",
    "quantized_parts",
    "records_parts",
    "scipy_parts",
]

Parts = tuple[str, dict[str, np.ndarray], dict[str, Any]]  # (layout, parts, extra attributes)


def _shape(shape: Any) -> list[int]:
    out = [int(d) for d in shape]
    if any(d < 0 for d in out):
        raise ValueError(f"a shape has no negative sizes, got {shape}")
    return out


def coo_parts(name: str, coords: Any, data: Any, shape: Any) -> Parts:
    """A COO tensor: ``coords`` of shape (ndim, nnz) and ``data`` of nnz values."""
    coords = np.asarray(to_host_array(coords))
    data = np.asarray(to_host_array(data))
    shape = _shape(shape)
    if coords.ndim != 2 or coords.shape != (len(shape), data.size) or data.ndim != 1:
        raise ValueError(
            f"tensor {name!r}: COO coords must be (ndim={len(shape)}, nnz={data.size}), "
            f"got {coords.shape} with data {data.shape}"
        )
    if coords.size and (coords.min() < 0 or (coords.max(axis=1) >= np.array(shape)).any()):
        raise ValueError(f"tensor {name!r}: COO coordinates outside the shape {shape}")
    return "coo", {"coords": coords, "data": data}, {"shape": shape}


def compressed_parts(
    fmt: str, name: str, data: Any, indices: Any, indptr: Any, shape: Any
) -> Parts:
    """A CSR or CSC matrix (``fmt``) from its arrays."""
    data, indices, indptr = (np.asarray(to_host_array(a)) for a in (data, indices, indptr))
    shape = _shape(shape)
    if len(shape) != 2:
        raise ValueError(f"tensor {name!r}: a {fmt.upper()} matrix has 2 dimensions, not {shape}")
    major = shape[0] if fmt == "csr" else shape[1]
    minor = shape[1] if fmt == "csr" else shape[0]
    if indptr.shape != (major + 1,) or data.shape != indices.shape:
        raise ValueError(
            f"tensor {name!r}: {fmt.upper()} of shape {shape} needs indptr of {major + 1} "
            f"and data / indices of one length, got {indptr.shape}, {data.shape}, "
            f"{indices.shape}"
        )
    if indptr.size and (indptr[0] != 0 or indptr[-1] != data.size or (np.diff(indptr) < 0).any()):
        raise ValueError(f"tensor {name!r}: indptr must rise from 0 to nnz={data.size}")
    if indices.size and (indices.min() < 0 or indices.max() >= minor):
        raise ValueError(f"tensor {name!r}: indices outside 0..{minor - 1}")
    return fmt, {"data": data, "indices": indices, "indptr": indptr}, {"shape": shape}


def scipy_parts(name: str, matrix: Any) -> Parts:
    """A SciPy sparse matrix: CSR, CSC and COO as they are, other formats as CSR."""
    fmt = matrix.format
    if fmt in ("csr", "csc"):
        return compressed_parts(fmt, name, matrix.data, matrix.indices, matrix.indptr, matrix.shape)
    if fmt == "coo":
        return coo_parts(name, np.vstack([matrix.row, matrix.col]), matrix.data, matrix.shape)
    return scipy_parts(name, matrix.tocsr())


def quantized_parts(name: str, blocks: Any, scales: Any, scheme: str) -> Parts:
    """An MXFP4 or NVFP4 weight as its pair (see :meth:`nncodecs.Writer.add_quantized`)."""
    block = {"mxfp4": 32, "nvfp4": 16}.get(scheme)
    if block is None:
        raise ValueError(f"scheme must be 'mxfp4' or 'nvfp4', got {scheme!r}")
    blocks = np.asarray(to_host_array(blocks))
    scales = np.asarray(to_host_array(scales))
    want = "uint8" if scheme == "mxfp4" else "float8_e4m3fn"
    if blocks.dtype != np.uint8 or dtype_name(scales.dtype) != want:
        raise TypeError(
            f"tensor {name!r}: {scheme} needs uint8 blocks and {want} scales, "
            f"got {blocks.dtype} and {scales.dtype}"
        )
    if (
        blocks.ndim < 1
        or scales.shape[:-1] != blocks.shape[:-1]
        or scales.shape[-1] * block != blocks.shape[-1] * 2
    ):
        raise ValueError(
            f"tensor {name!r}: {scheme} scales {scales.shape} do not cover blocks "
            f"{blocks.shape} ({block} values a scale, 2 a byte)"
        )
    return scheme, {"blocks": blocks, "scales": scales}, {}


class Records(NamedTuple):
    """Bytes of fixed-size records and their fields, for :meth:`nncodecs.Writer.add_tensor`
    (as :meth:`nncodecs.Writer.add_records`)."""

    data: Any
    fields: Any

    # (elsewhere, as any reader of a model's tensors sees it: its bytes, 1-D uint8)
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = np.asarray(self.data).reshape(-1)
        return np.array(arr, dtype=dtype, copy=True) if copy else np.asarray(arr, dtype=dtype)

    @property
    def nbytes(self) -> int:
        return int(np.asarray(self.data).nbytes)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.uint8)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.nbytes,)


_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _fields(fields: Any, error: type[Exception]) -> list[tuple[str, np.dtype, int]]:
    """``[(field, dtype, count), ...]`` checked: names unique, dtypes supported, counts
    of at least one."""
    out: list[tuple[str, np.dtype, int]] = []
    try:
        for field, dtype, count in fields:
            dt = normalize_dtype(dtype)
            dtype_name(dt)
            if dt.byteorder == ">":
                raise ValueError(f"field {field!r}: {dt} is big-endian (records are little-endian)")
            if not (isinstance(field, str) and _FIELD.fullmatch(field)):
                raise ValueError(f"field name {field!r} (letters, digits, _)")
            if type(count) is not int or not 1 <= count <= 1 << 20:
                raise ValueError(f"field {field!r}: count {count!r}")
            out.append((field, dt, count))
    except (TypeError, ValueError) as exc:
        raise error(f"fields must be [(name, dtype, count), ...]: {exc}") from None
    if not out or len({f for f, _, _ in out}) != len(out):
        raise error(f"fields must be named apart, at least one: {fields!r}")
    return out


def records_parts(name: str, data: Any, fields: Any) -> Parts:
    """Fixed-size records (``fields`` in record order) split into one array per field."""
    checked = _fields(fields, ValueError)
    if not isinstance(data, np.ndarray) and not hasattr(data, "__dlpack__"):
        data = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    data = np.asarray(to_host_array(data))
    if data.dtype != np.uint8:
        raise TypeError(f"tensor {name!r}: records are bytes (uint8), got {data.dtype}")
    record = sum(dt.itemsize * count for _, dt, count in checked)
    if data.size % record:
        raise ValueError(
            f"tensor {name!r}: {data.size} bytes are not a whole number of {record}-byte records"
        )
    rows, parts, at = data.reshape(-1, record), {}, 0
    for field, dt, count in checked:
        width = dt.itemsize * count
        part = np.ascontiguousarray(rows[:, at : at + width]).view(dt)
        parts[field] = part.reshape(-1, count) if count > 1 else part.reshape(-1)
        at += width
    info = [[f, dtype_name(dt), c] for f, dt, c in checked]
    crc = int(_core.crc32c(np.ascontiguousarray(data).reshape(-1)))  # (fields put back right)
    return "records", parts, {"fields": info, "shape": [int(data.size)], "crc32c": crc}


def _interleave(name: str, parts: dict[str, np.ndarray], attrs: dict) -> np.ndarray:
    """The bytes of records from their fields' arrays (as :func:`records_parts` split them)."""
    checked = _fields(attrs.get("fields"), CorruptDataError)
    shape = attrs.get("shape")
    record = sum(dt.itemsize * count for _, dt, count in checked)
    if not (
        isinstance(shape, list)
        and len(shape) == 1
        and type(shape[0]) is int
        and shape[0] >= 0
        and shape[0] % record == 0
    ):
        raise CorruptDataError(f"tensor {name!r}: its records' size {shape!r} is damaged")
    n = shape[0] // record
    for field, dt, count in checked:  # (every part checked before memory is taken)
        part = parts.get(field)
        want = (n, count) if count > 1 else (n,)
        if part is None or part.dtype != dt or part.shape != want:
            found = "none" if part is None else f"{part.dtype} {part.shape}"
            raise CorruptDataError(
                f"tensor {name!r}: field {field!r} should be {dtype_name(dt)} {want}, found {found}"
            )
    if set(parts) != {f for f, _, _ in checked}:
        raise CorruptDataError(f"tensor {name!r}: parts {sorted(parts)} are not its fields")
    out, at = np.empty((n, record), np.uint8), 0
    for field, dt, count in checked:
        width = dt.itemsize * count
        out[:, at : at + width] = (
            np.ascontiguousarray(parts[field]).view(np.uint8).reshape(n, width)
        )
        at += width
    if int(_core.crc32c(out.reshape(-1))) != attrs.get("crc32c"):
        raise CorruptDataError(
            f"tensor {name!r}: its bytes put back from their fields differ from those written "
            "(crc32c)"
        )
    return out.reshape(-1)


#: The parts of each composite kind but records (whose fields its attributes list).
_PARTS = {
    "mxfp4": {"blocks", "scales"},
    "nvfp4": {"blocks", "scales"},
    "coo": {"coords", "data"},
    "csr": {"data", "indices", "indptr"},
    "csc": {"data", "indices", "indptr"},
}


def assemble(name: str, kind: str, parts: dict[str, np.ndarray], attrs: dict, to: str) -> Any:
    """The tensor a Reader returns from its parts: an MXFP4 / NVFP4 pair
    (``to``: its arrays' kind), a SciPy matrix (``to="scipy"``) or a dict of
    the NumPy parts and ``shape``."""
    if kind == "records":
        return convert(_interleave(name, parts, attrs), to, owned=True)
    want = _PARTS.get(kind)
    if want is not None and set(parts) != want:
        raise CorruptDataError(
            f"tensor {name!r}: a {kind} tensor of parts {sorted(parts)}, not {sorted(want)}"
        )
    if kind in ("mxfp4", "nvfp4"):
        pair = (parts["blocks"], parts["scales"])
        return tuple(convert(a, to) for a in pair) if to != "numpy" else pair
    try:  # (the writer's own checks: a forged shape or part is damage here)
        if kind == "coo":
            coo_parts(name, parts["coords"], parts["data"], attrs["shape"])
        else:
            compressed_parts(
                kind, name, parts["data"], parts["indices"], parts["indptr"], attrs["shape"]
            )
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptDataError(f"{exc} (its parts contradict its records)") from None
    shape = tuple(attrs["shape"])
    if to == "scipy":
        need("scipy.sparse", "to='scipy'")
        import scipy.sparse

        if kind == "coo":
            return scipy.sparse.coo_matrix((parts["data"], tuple(parts["coords"])), shape=shape)
        make = scipy.sparse.csr_matrix if kind == "csr" else scipy.sparse.csc_matrix
        return make((parts["data"], parts["indices"], parts["indptr"]), shape=shape)
    if to == "numpy":
        return {**parts, "shape": shape}
    raise ValueError(f"tensor {name!r} is {kind}: read it with to='scipy' or to='numpy'")
