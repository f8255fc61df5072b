"""ztensor ``.zt`` files as a :class:`Source`, through the optional ``ztensor`` package
(dense tensors only)."""

from __future__ import annotations

import numpy as np

from nncodecs.dtypes import normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.formats.source import Source, Tensor

__all__ = ["ZtensorSource"]

_ZT_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
               "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "u64": "uint64",
               "u32": "uint32", "u16": "uint16", "u8": "uint8", "bool": "bool"}  # fmt: skip


class ZtensorSource(Source):
    """Its tensors' names, dtypes and shapes from the file's index; bytes read on demand."""

    format = "ztensor"

    def _list(self) -> list[Tensor]:
        path = self.path
        try:
            import ztensor
        except ImportError:
            raise ValueError(f"{path}: reading ztensor needs the ztensor package") from None
        try:
            items = list(ztensor.open(str(path)).items())
        except Exception as exc:  # the package's own errors for a bad file
            raise CorruptDataError(f"{path}: not a readable ztensor file ({exc})") from None
        out = []
        for name, tensor in items:
            kind = _ZT_DTYPES.get(str(tensor.dtype))
            if kind is None:
                raise TypeError(f"{path}: tensor {name!r} has ztensor dtype {tensor.dtype!r}")
            dtype, shape = normalize_dtype(kind), tuple(tensor.shape)

            def load(tensor=tensor, dtype=dtype, shape=shape) -> np.ndarray:
                return np.frombuffer(tensor.tobytes(), dtype=dtype).reshape(shape)

            out.append(Tensor(name, dtype, shape, load=load))
        return out
