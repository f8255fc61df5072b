"""ztensor ``.zt`` files as a :class:`Source`, through the optional ``ztensor`` package:
dense tensors, and CSR matrices (layout ``zt.sparse_csr/1``: parts ``values``,
``indices``, ``indptr``), which go in as sparse tensors (read through SciPy); another
layout is refused by name."""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs.dtypes import normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.extras import need
from nncodecs.formats.source import Source, Tensor

__all__ = ["ZtensorSource"]

_ZT_DTYPES = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u64": "uint64",
    "u32": "uint32",
    "u16": "uint16",
    "u8": "uint8",
    "bool": "bool",
}


_CSR = ("zt.sparse_csr/1", "sparse_csr")


class ZtensorSource(Source):
    """Its tensors' names, dtypes and shapes from the file's index; bytes read on demand."""

    format = "ztensor"

    def _list(self) -> list[Tensor]:
        path = self.path
        ztensor = need("ztensor", "reading a ztensor file")
        try:
            items = list(ztensor.open(str(path)).items())
        except Exception as exc:  # the package's own errors for a bad file
            raise CorruptDataError(f"{path}: not a readable ztensor file ({exc})") from None
        out = []
        for name, tensor in items:
            if tensor.layout in _CSR:
                out.append(self._csr(name, tensor))
                continue
            if tensor.layout != "dense":
                raise TypeError(
                    f"{path}: tensor {name!r} has the ztensor layout {tensor.layout!r}, which "
                    "nncodecs does not read; nothing was written"
                )
            kind = _ZT_DTYPES.get(str(tensor.dtype))
            if kind is None:
                raise TypeError(f"{path}: tensor {name!r} has ztensor dtype {tensor.dtype!r}")
            dtype, shape = normalize_dtype(kind), tuple(tensor.shape)

            def load(tensor=tensor, dtype=dtype, shape=shape) -> np.ndarray:
                return np.frombuffer(tensor.tobytes(), dtype=dtype).reshape(shape)

            out.append(Tensor(name, dtype, shape, load=load))
        return out

    def close(self) -> None:
        # (the package's tensors must be dropped on the thread that made them: here, now,
        # never by a garbage collection that happens to run on a writer's thread)
        self._tensors = None

    def _csr(self, name: str, tensor: Any) -> Tensor:
        """A CSR matrix: its dtype from ``values``, its index type from ``indices``."""
        try:
            parts = {p: tensor[p] for p in ("values", "indices", "indptr")}
        except KeyError as exc:
            raise CorruptDataError(f"{self.path}: CSR tensor {name!r}: {exc}") from None
        kind = _ZT_DTYPES.get(str(parts["values"].dtype))
        index = {"u32": np.uint32, "u64": np.uint64}.get(str(parts["indices"].dtype))
        shape = tuple(int(d) for d in tensor.shape)
        if kind is None or index is None or len(shape) != 2:
            raise CorruptDataError(
                f"{self.path}: CSR tensor {name!r}: values {parts['values'].dtype}, indices "
                f"{parts['indices'].dtype}, shape {list(shape)}: not a CSR matrix nncodecs reads"
            )
        # (neither self nor the package's objects held by load: see close, _csr_arrays)
        dtype, path = normalize_dtype(kind), self.path

        def load() -> Any:
            scipy = need("scipy", "reading ztensor's CSR tensors")
            need("scipy.sparse", "reading ztensor's CSR tensors")
            arrays = _csr_arrays(path, name, dtype, index)
            try:
                matrix = scipy.sparse.csr_matrix(tuple(arrays), shape=shape)
                matrix.check_format(full_check=True)  # (indices in range, indptr in order)
                return matrix
            except ValueError as exc:  # (indptr not rows + 1 long, indices out of range ...)
                raise CorruptDataError(f"{path}: CSR tensor {name!r}: {exc}") from None

        return Tensor(name, dtype, shape, load=load)


def _csr_arrays(path: Any, name: str, dtype: np.dtype, index: Any) -> list[np.ndarray]:
    """A CSR tensor's values, indices and indptr as NumPy arrays, read from the file
    here: the package's objects die with this call, on this thread (one dropped by a
    garbage collection on another thread, as an error's traceback can leave them to,
    raises there)."""
    import ztensor

    tensor = ztensor.open(str(path))[name]
    return [np.frombuffer(tensor["values"].tobytes(), dtype)] + [
        np.frombuffer(tensor[p].tobytes(), index).astype(np.int64) for p in ("indices", "indptr")
    ]
