"""ML float data types for Zarr v3: bfloat16, float8 and float4.

Registered through the ``zarr.data_type`` entry point, so once nncodecs is
installed ``zarr.create_array(..., dtype=ml_dtypes.bfloat16)`` works and reads
come back with that dtype. Names follow the zarr-extensions registry where it
has one (``bfloat16``, ``float8_e5m2``, ``float4_e2m1fn``); float8_e4m3fn has
none there and is named ``nncodecs.float8_e4m3fn``.

Fill values are JSON numbers, ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` or a
hex string of the exact bits (``"0x7fc1"``), as for the core float types.

This module is what zarr loads at start-up (zarr 3.1, through nncodecs'
start-up hook) or on its first data type lookup (zarr >= 3.2), so it imports
nothing of nncodecs and not ml_dtypes either (about a second to import):
NumPy's dtype for each type is made on first use. A NumPy dtype of ml_dtypes
can only exist once ml_dtypes is imported, so until then matching one imports
nothing.

Examples
--------
>>> import ml_dtypes, numpy as np, zarr
>>> a = zarr.create_array({}, shape=(4,), dtype=ml_dtypes.bfloat16, fill_value=1.5)
>>> a.metadata.data_type.to_json(3), a[:].dtype
('bfloat16', dtype(bfloat16))
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

import numpy as np
from zarr.core.dtype.common import HasEndianness, HasItemSize
from zarr.core.dtype.wrapper import ZDType

try:
    from zarr.errors import DataTypeValidationError
except ImportError:  # zarr 3.1
    from zarr.core.dtype.common import DataTypeValidationError

__all__ = [
    "ML_ZARR_DTYPES",
    "BFloat16",
    "Float4E2M1FN",
    "Float8E4M3FN",
    "Float8E5M2",
    "register_data_types",
]

#: Bytes per value of each type (float4 is stored one value per byte), known
#: without ml_dtypes.
_ITEM_SIZES = {"bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "float4_e2m1fn": 1}


@functools.cache
def _native(name: str) -> np.dtype:
    """NumPy's dtype of ml_dtypes' ``name`` (the same object as
    ``nncodecs.dtypes.ML_DTYPES[name]``), importing ml_dtypes on first use."""
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name))


class _NativeClass:
    """``dtype_cls`` of an ML float type, the class zarr matches NumPy dtypes
    against: ml_dtypes' dtype class, resolved when first asked for."""

    def __get__(self, obj: object, owner: type[_MLFloat]) -> type:
        return type(_native(owner._name))  # noqa: SLF001 (its own class's: a descriptor)


@dataclass(frozen=True, kw_only=True)
class _MLFloat(ZDType, HasItemSize):  # type: ignore[type-arg]
    """Shared behaviour of the ML float types: scalars, JSON, native dtype."""

    _name: ClassVar[str]  # ml_dtypes' name, a key of nncodecs.dtypes.ML_DTYPES
    dtype_cls = _NativeClass()  # type: ignore[assignment]

    @property
    def item_size(self) -> int:
        return _ITEM_SIZES[self._name]

    @classmethod
    def _check_native_dtype(cls, dtype: Any) -> bool:
        # No ml_dtypes imported, no dtype of its: say no without importing it.
        return "ml_dtypes" in sys.modules and type(dtype) is cls.dtype_cls

    @classmethod
    def from_native_dtype(cls, dtype: Any) -> Self:
        if cls._check_native_dtype(dtype):
            return cls()
        raise DataTypeValidationError(f"Invalid data type: {dtype}. Expected {cls._name}.")

    def to_native_dtype(self) -> np.dtype:
        return _native(self._name)

    @classmethod
    def _from_json_v2(cls, data: Any) -> Self:
        raise DataTypeValidationError(
            f"{cls._name} is a Zarr v3 data type only; got the Zarr v2 JSON {data!r}"
        )

    @classmethod
    def _from_json_v3(cls, data: Any) -> Self:
        if data == cls._zarr_v3_name:
            return cls()
        raise DataTypeValidationError(
            f"Invalid JSON for {cls.__name__}: got {data!r}, expected {cls._zarr_v3_name!r}"
        )

    def to_json(self, zarr_format: Literal[2, 3]) -> Any:
        if zarr_format == 3:
            return self._zarr_v3_name
        raise ValueError(f"{self._name} exists only in Zarr v3, not in Zarr format {zarr_format}")

    # -- scalars -----------------------------------------------------------
    def _bits_dtype(self) -> np.dtype:
        return np.dtype(f"uint{self.item_size * 8}")

    def _check_scalar(self, data: object) -> bool:
        if isinstance(data, str):
            try:
                float(data)
            except ValueError:
                return False
            return True
        return isinstance(data, int | float | np.generic) and not isinstance(data, complex)

    def cast_scalar(self, data: object) -> Any:
        if not self._check_scalar(data):
            raise TypeError(
                f"Cannot convert {data!r} ({type(data).__name__}) to a {self._name} scalar"
            )
        if isinstance(data, np.generic) and data.dtype == self.to_native_dtype():
            return data
        return self.to_native_dtype().type(float(data))  # type: ignore[arg-type]

    def default_scalar(self) -> Any:
        return self.to_native_dtype().type(0.0)

    def from_json_scalar(self, data: Any, *, zarr_format: Literal[2, 3]) -> Any:
        if isinstance(data, str) and data.startswith("0x"):
            digits = data[2:]
            if len(digits) != 2 * self.item_size:
                raise ValueError(
                    f"hex fill value {data!r} for {self._name} must have "
                    f"{2 * self.item_size} hex digits"
                )
            bits = np.array([int(digits, 16)], dtype=self._bits_dtype())
            return bits.view(self.to_native_dtype())[0]
        if isinstance(data, str):
            specials = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
            if data not in specials:
                raise TypeError(f"invalid fill value {data!r} for {self._name}")
            return self.cast_scalar(specials[data])
        if isinstance(data, int | float) and not isinstance(data, bool):
            return self.cast_scalar(data)
        raise TypeError(f"invalid fill value {data!r} for {self._name}: expected a number")

    def to_json_scalar(self, data: object, *, zarr_format: Literal[2, 3]) -> Any:
        value = self.cast_scalar(data)
        as_float = float(value)
        if math.isnan(as_float):
            canonical = self.to_native_dtype().type(math.nan)
            bits = np.array([value]).view(self._bits_dtype())[0]
            if bits == np.array([canonical]).view(self._bits_dtype())[0]:
                return "NaN"
            return f"0x{int(bits):0{2 * self.item_size}x}"
        if math.isinf(as_float):
            return "Infinity" if as_float > 0 else "-Infinity"
        return as_float


@dataclass(frozen=True, kw_only=True)
class BFloat16(_MLFloat, HasEndianness):
    """Zarr v3 data type ``bfloat16`` (ml_dtypes.bfloat16), little-endian in memory."""

    _name = "bfloat16"
    _zarr_v3_name = "bfloat16"
    endianness: Literal["little", "big"] = "little"

    def to_native_dtype(self) -> np.dtype:
        if self.endianness != "little":
            raise ValueError(
                "bfloat16 in big-endian byte order has no NumPy type; store it with the "
                "bytes codec's endian='little' or with nncodecs.Planes"
            )
        return _native("bfloat16")


@dataclass(frozen=True, kw_only=True)
class Float8E4M3FN(_MLFloat):
    """Data type ``nncodecs.float8_e4m3fn`` (ml_dtypes.float8_e4m3fn): no infinities."""

    _name = "float8_e4m3fn"
    _zarr_v3_name = "nncodecs.float8_e4m3fn"

    @classmethod
    def _from_json_v3(cls, data: Any) -> Self:
        # ml_dtypes' name too: zarr reads ``dtype="float8_e4m3fn"`` as JSON
        # before asking NumPy, which knows that name only once ml_dtypes is
        # imported. Written back, the name is always ``nncodecs.float8_e4m3fn``.
        return super()._from_json_v3(cls._zarr_v3_name if data == cls._name else data)


@dataclass(frozen=True, kw_only=True)
class Float8E5M2(_MLFloat):
    """Zarr v3 data type ``float8_e5m2`` (ml_dtypes.float8_e5m2)."""

    _name = "float8_e5m2"
    _zarr_v3_name = "float8_e5m2"


@dataclass(frozen=True, kw_only=True)
class Float4E2M1FN(_MLFloat):
    """Zarr v3 data type ``float4_e2m1fn`` (ml_dtypes.float4_e2m1fn), one value per byte."""

    _name = "float4_e2m1fn"
    _zarr_v3_name = "float4_e2m1fn"


ML_ZARR_DTYPES = (BFloat16, Float8E4M3FN, Float8E5M2, Float4E2M1FN)


def register_data_types() -> None:
    """Add the ML float types to Zarr's data type registry (idempotent).

    zarr >= 3.2 loads them from the ``zarr.data_type`` entry point by itself;
    zarr 3.1 collects that entry point but never loads it, so nncodecs also
    registers them on import.
    """
    from zarr.core.dtype import data_type_registry

    for cls in ML_ZARR_DTYPES:
        data_type_registry.register(cls._zarr_v3_name, cls)
    _exact_empty_chunks()


def _is_ml_float(dtype: Any) -> bool:
    return "ml_dtypes" in sys.modules and any(type(dtype) is c.dtype_cls for c in ML_ZARR_DTYPES)


def _exact_empty_chunks() -> None:
    """Make zarr's empty-chunk test bit-exact for the ML float types (idempotent).

    With ``write_empty_chunks=False`` (zarr's default) a chunk equal to the fill value
    is not stored. zarr compares bit patterns for NumPy's floats (a chunk of -0.0 against
    a fill of 0.0 is kept), but ml_dtypes' types are not floats to it (dtype kind 'V'):
    it compared values, so a bfloat16 or float8 chunk of -0.0 read back as +0.0, and one
    of NaNs of another payload as the fill's NaN. Here such a chunk counts as empty only
    where its bits are the fill value's.
    """
    import importlib

    for module in ("zarr.core.buffer.core", "zarr.core.buffer.cpu"):
        try:  # (each class that defines its own test: zarr >= 3.2's CPU buffer does)
            cls = importlib.import_module(module).NDBuffer
        except (ImportError, AttributeError):  # (another layout of zarr: nothing to patch)
            continue
        original = cls.__dict__.get("all_equal")
        if original is not None and not getattr(original, "nncodecs_exact", False):
            cls.all_equal = _bit_exact(original)


def _bit_exact(original: Any) -> Any:
    """``NDBuffer.all_equal`` comparing the ML float types' bit patterns."""

    def all_equal(self: Any, other: Any, equal_nan: bool = True) -> bool:
        data = self._data
        if other is None or not _is_ml_float(data.dtype):
            return bool(original(self, other, equal_nan))
        bits = np.dtype(f"u{data.dtype.itemsize}")
        fill = np.asarray(other, dtype=data.dtype).reshape(1).view(bits)[0]
        return bool((data.view(bits) == fill).all())

    all_equal.nncodecs_exact = True  # type: ignore[attr-defined]  # (patched once only)
    all_equal.__doc__ = original.__doc__
    return all_equal


register_data_types()
