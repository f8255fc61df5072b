"""Data types nncodecs understands, and bit-exact torch <-> NumPy conversion.

NumPy has no bfloat16, float8 or float4; nncodecs uses the ``ml_dtypes``
package for them, so ``numpy.dtype("bfloat16")`` works once nncodecs is
imported. Torch tensors of these types convert without touching a bit.

Examples
--------
>>> import numpy as np
>>> from nncodecs.dtypes import dtype_name, float_layout, reordered_dtype
>>> dtype_name("bfloat16"), float_layout("bfloat16"), reordered_dtype("bfloat16")
('bfloat16', 'bfloat16', dtype('uint16'))
>>> float_layout(np.int32), reordered_dtype(np.int32)
('none', dtype('int32'))
"""

from __future__ import annotations

import functools
from typing import Any

import ml_dtypes
import numpy as np

from nncodecs import _core
from nncodecs.extras import need

__all__ = [
    "MANTISSA_BITS",
    "ML_DTYPES",
    "SUPPORTED_DTYPES",
    "array_kind",
    "as_numpy",
    "dtype_name",
    "float_layout",
    "native_dtype",
    "normalize_dtype",
    "reordered_dtype",
    "to_torch",
]

#: The ML float types nncodecs adds to NumPy and Zarr, by canonical name.
ML_DTYPES: dict[str, np.dtype] = {
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float4_e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn),
}

#: The float layouts of the bit reorder (each named after its dtype), with
#: their mantissa bits, from the C++ table (_core.LAYOUTS). float4_e2m1fn is
#: stored one value per byte and left as it is (layout "none").
MANTISSA_BITS: dict[str, int] = {
    name: mantissa for name, (_, _, mantissa) in _core.LAYOUTS.items() if name != "none"
}

_INTEGERS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")

#: Every dtype the transforms accept, by canonical name.
SUPPORTED_DTYPES: tuple[str, ...] = (*MANTISSA_BITS, "float4_e2m1fn", *_INTEGERS)

_BY_DTYPE: dict[np.dtype, str] = {np.dtype(name): name for name in _INTEGERS}
_BY_DTYPE.update({np.dtype(n): n for n in ("float16", "float32", "float64")})
_BY_DTYPE.update({dt: name for name, dt in ML_DTYPES.items()})


def array_kind(obj: Any) -> str | None:
    """The library an array comes from: ``"numpy"``, ``"cupy"``, ``"torch"`` (CPU
    or CUDA), ``"scipy.sparse"``, or ``None`` (bytes-like and anything else).

    Read from the object's type, so asking imports none of them: the one
    place nncodecs tells these inputs apart.

    >>> array_kind(np.zeros(2)), array_kind(b"ab")
    ('numpy', None)
    """
    if isinstance(obj, np.ndarray):
        return "numpy"
    module = type(obj).__module__
    root = module.partition(".")[0]
    if root in ("cupy", "torch"):
        return root
    return "scipy.sparse" if module.startswith("scipy.sparse") else None


@functools.cache
def _torch_map() -> dict[Any, tuple[np.dtype, Any]]:
    """torch dtype -> (NumPy dtype, torch dtype of the same width to view as). Built once
    (it is asked per tensor: 35 us a time when built afresh); callers only read it."""
    import torch

    table = {
        torch.bool: (np.dtype(bool), torch.bool),
        torch.uint8: (np.dtype("uint8"), torch.uint8),
        torch.int8: (np.dtype("int8"), torch.int8),
        torch.int16: (np.dtype("int16"), torch.int16),
        torch.int32: (np.dtype("int32"), torch.int32),
        torch.int64: (np.dtype("int64"), torch.int64),
        torch.float16: (np.dtype("float16"), torch.float16),
        torch.float32: (np.dtype("float32"), torch.float32),
        torch.float64: (np.dtype("float64"), torch.float64),
        torch.bfloat16: (ML_DTYPES["bfloat16"], torch.int16),
        torch.float8_e4m3fn: (ML_DTYPES["float8_e4m3fn"], torch.uint8),
        torch.float8_e5m2: (ML_DTYPES["float8_e5m2"], torch.uint8),
    }
    for name in ("uint16", "uint32", "uint64"):
        if hasattr(torch, name):
            table[getattr(torch, name)] = (np.dtype(name), getattr(torch, name))
    if hasattr(torch, "float4_e2m1fn_x2"):
        # Two fp4 values packed per byte: kept as its raw bytes.
        table[torch.float4_e2m1fn_x2] = (np.dtype("uint8"), torch.uint8)
    return table


def native_dtype(dtype: np.dtype) -> np.dtype:
    """The same dtype in the host byte order (ML dtypes are always native)."""
    return dtype.newbyteorder("=") if dtype.kind in "biufc" else dtype


def _is_torch_dtype(obj: object) -> bool:
    import torch  # loaded already: obj is torch's

    return isinstance(obj, torch.dtype)


def normalize_dtype(dtype: Any) -> np.dtype:
    """Return the NumPy dtype for a NumPy dtype, a name or a torch dtype.

    Raises ``TypeError`` for anything that is not a data type nncodecs knows.

    >>> normalize_dtype("float8_e4m3fn")
    dtype(float8_e4m3fn)
    """
    if isinstance(dtype, np.dtype):
        return dtype
    if array_kind(dtype) == "torch" and _is_torch_dtype(dtype):
        table = _torch_map()
        if dtype not in table:
            raise TypeError(f"unsupported torch dtype {dtype}; expected one of {list(table)}")
        return table[dtype][0]
    if isinstance(dtype, str) and dtype in ML_DTYPES:
        return ML_DTYPES[dtype]
    try:
        return np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"not a data type: {dtype!r}") from exc


def dtype_name(dtype: Any) -> str:
    """Canonical name of a supported dtype (byte order ignored).

    Raises ``TypeError`` naming the supported types otherwise.
    """
    dt = normalize_dtype(dtype)
    name = _BY_DTYPE.get(native_dtype(dt))
    if name is None:
        raise TypeError(f"unsupported dtype {dt!s}: expected one of {', '.join(SUPPORTED_DTYPES)}")
    return name


def float_layout(dtype: Any) -> str:
    """Kernel layout of a dtype: its float name, or ``'none'`` where the reorder is the identity."""
    name = dtype_name(dtype)
    return name if name in MANTISSA_BITS else "none"


def reordered_dtype(dtype: Any) -> np.dtype:
    """Dtype after the bit reorder: unsigned integer of the same width for floats."""
    dt = normalize_dtype(dtype)
    name = dtype_name(dt)
    if name in MANTISSA_BITS or name == "float4_e2m1fn":
        return np.dtype(f"uint{dt.itemsize * 8}")
    return native_dtype(dt)


def as_numpy(obj: Any) -> np.ndarray:
    """View a NumPy array, a buffer or a CPU torch tensor as a NumPy array.

    Torch tensors are converted bit-exactly (bfloat16 to ``ml_dtypes.bfloat16``
    and so on) without a copy where the tensor is contiguous.
    """
    if isinstance(obj, np.ndarray):
        return obj
    if array_kind(obj) == "torch" and hasattr(obj, "dtype"):
        table = _torch_map()
        if obj.dtype not in table:
            raise TypeError(f"unsupported torch dtype {obj.dtype}")
        np_dtype, view_as = table[obj.dtype]
        if obj.device.type != "cpu":
            raise TypeError(f"torch tensor on {obj.device}: move it to the CPU first")
        t = obj.detach().contiguous()
        return t.view(view_as).numpy().view(np_dtype)
    return np.asarray(memoryview(obj)) if not hasattr(obj, "__array__") else np.asarray(obj)


def torch_dtype(dtype: Any) -> Any:
    """The torch dtype of a NumPy (or ML) dtype; ``TypeError`` where torch has none."""
    native = native_dtype(normalize_dtype(dtype))
    for tdtype, (np_dtype, _) in _torch_map().items():
        if np_dtype == native:
            return tdtype
    raise TypeError(f"no torch dtype for {native}")


@functools.cache
def _torch_reverse() -> dict[np.dtype, tuple[Any, np.dtype]]:
    """NumPy dtype -> (torch dtype, NumPy dtype of the torch dtype it is viewed as)."""
    import torch

    reverse: dict[np.dtype, tuple[Any, np.dtype]] = {}
    for tdtype, (np_dtype, view_as) in _torch_map().items():
        if np_dtype not in reverse:  # (uint8 stays torch.uint8)
            reverse[np_dtype] = (tdtype, torch.empty(0, dtype=view_as).numpy().dtype)
    return reverse


def to_torch(array: np.ndarray, copy: bool = True) -> Any:
    """Torch tensor with the same bits as a NumPy array (bfloat16, float8 included).

    ``copy=False``: the tensor shares the array's memory where the array is writable
    (an array the caller made and hands over: a decoded tensor), else it is a copy.
    float4_e2m1fn (one value per byte in NumPy) has no unpacked torch type and
    raises ``TypeError``.
    """
    torch = need("torch", "a torch tensor (to='torch')")
    arr = np.asarray(array, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    reverse = _torch_reverse()
    native = native_dtype(arr.dtype)
    if native not in reverse:
        raise TypeError(f"no torch dtype for {arr.dtype}")
    tdtype, raw_dtype = reverse[native]
    raw = arr.astype(native, copy=False).view(raw_dtype)
    if copy or not raw.flags.writeable:
        raw = raw.copy()
    return torch.from_numpy(raw).view(tdtype)
