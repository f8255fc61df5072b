"""``safe_open`` over an nncodecs container, as ``safetensors.safe_open`` over a file.

>>> import numpy as np, tempfile, os, nncodecs
>>> path = os.path.join(tempfile.mkdtemp(), "m.zarr")
>>> with nncodecs.Writer(path) as w:
...     w.add_tensor("w", np.arange(6, dtype=np.float32).reshape(2, 3))
>>> with safe_open(path, framework="np") as f:
...     f.keys(), f.get_slice("w")[1:, :2].tolist()
(['w'], [[3.0, 4.0]])
"""

from __future__ import annotations

import json
from typing import Any, Self

from nncodecs.container import Reader
from nncodecs.dtypes import dtype_name, to_torch

__all__ = ["safe_open"]

_ST_DTYPES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint64": "U64",
    "uint32": "U32",
    "uint16": "U16",
    "uint8": "U8",
    "bool": "BOOL",
}


class _Slice:
    """``get_slice``'s result: indexing reads only the chunks it touches."""

    def __init__(self, owner: safe_open, name: str) -> None:
        self._owner = owner
        # (a slice of its safe_open: one object in two classes, as in safetensors itself)
        self._array = owner._reader[name]  # noqa: SLF001

    def get_shape(self) -> list[int]:
        return list(self._array.shape)

    def get_dtype(self) -> str:
        return _ST_DTYPES.get(dtype_name(self._array.dtype), dtype_name(self._array.dtype))

    def __getitem__(self, index: Any) -> Any:
        return self._owner._convert(self._array[index])  # noqa: SLF001 (its safe_open's)


class safe_open:
    """Open a container like a safetensors file.

    Parameters
    ----------
    path : path, URL or Zarr store
    framework : {"pt", "np"}
        Tensors come back as torch tensors or NumPy arrays.
    device : str
        torch device for ``framework="pt"``.
    """

    def __init__(self, path: Any, framework: str = "pt", device: str = "cpu") -> None:
        if framework not in ("pt", "np", "numpy"):
            raise ValueError(f"framework must be 'pt' or 'np', got {framework!r}")
        self._framework = "np" if framework == "numpy" else framework
        self._device = device
        self._reader = Reader(path)

    def keys(self) -> list[str]:
        return self._reader.keys()

    def metadata(self) -> dict[str, str] | None:
        """The source file's ``__metadata__`` (for a compressed safetensors file), else the
        container's metadata."""
        files = self._reader.metadata.get("source.files")
        if files:
            meta: dict[str, str] = {}
            for record in json.loads(files):
                meta.update(json.loads(record["header"]).get("__metadata__", {}))
            return meta or None
        return dict(self._reader.metadata) or None

    def get_tensor(self, name: str) -> Any:
        return self._convert(self._reader.read_tensor(name, check=True))

    def get_slice(self, name: str) -> _Slice:
        return _Slice(self, name)

    def _convert(self, arr: Any) -> Any:
        if self._framework == "np":
            return arr
        tensor = to_torch(arr, copy=False)  # (read_tensor's own array, or a read-only map)
        return tensor if self._device == "cpu" else tensor.to(self._device)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._reader.close()
