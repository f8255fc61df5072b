"""A safetensors reader that trusts nothing in the file.

The format: an 8-byte little-endian header length, a JSON header mapping
each tensor name to its dtype, shape and ``data_offsets`` (relative to the
end of the header), then the data. Every length and offset is checked
against the file before any byte is read.

Examples
--------
>>> import json, numpy as np, os, struct, tempfile
>>> header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
>>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
>>> with open(path, "wb") as f:
...     _ = f.write(struct.pack("<Q", len(header)) + header)
...     _ = f.write(np.array([1.5, -2.0], dtype="<f4").tobytes())
>>> read_safetensors(path)["w"]
array([ 1.5, -2. ], dtype=float32)
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

import numpy as np

from nncodecs.dtypes import ML_DTYPES
from nncodecs.errors import CorruptDataError

__all__ = ["SAFETENSORS_DTYPES", "read_safetensors"]

#: safetensors dtype names and their NumPy dtypes (little-endian).
SAFETENSORS_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": ML_DTYPES["bfloat16"],
    "F8_E4M3": ML_DTYPES["float8_e4m3fn"],
    "F8_E5M2": ML_DTYPES["float8_e5m2"],
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}

_MAX_HEADER = 100 << 20  # the reference implementation's own limit


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """All tensors of a safetensors file, in file order, as NumPy arrays.

    Raises :class:`nncodecs.CorruptDataError` for a header or offsets that do
    not fit the file, and ``TypeError`` for a dtype NumPy cannot hold.
    """
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise CorruptDataError(f"{path}: {len(head)} bytes, too short for safetensors")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, _MAX_HEADER):
            raise CorruptDataError(f"{path}: header length {n} does not fit a {size}-byte file")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptDataError(f"{path}: header is not JSON: {exc}") from exc
        if not isinstance(header, dict):
            raise CorruptDataError(f"{path}: header is not a JSON object")
        data_size = size - 8 - n
        tensors: dict[str, np.ndarray] = {}
        entries = [(k, v) for k, v in header.items() if k != "__metadata__"]
        entries.sort(key=lambda kv: _offsets(path, kv[0], kv[1], data_size)[0])
        for name, info in entries:
            begin, end = _offsets(path, name, info, data_size)
            dtype = SAFETENSORS_DTYPES.get(info.get("dtype"))
            if dtype is None:
                raise TypeError(
                    f"{path}: tensor {name!r} has unsupported dtype {info.get('dtype')!r}"
                )
            shape = info.get("shape")
            if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise CorruptDataError(f"{path}: tensor {name!r} has a bad shape {shape!r}")
            if (end - begin) != math.prod(shape) * dtype.itemsize:
                raise CorruptDataError(
                    f"{path}: tensor {name!r}: {end - begin} bytes for shape {shape} of {dtype}"
                )
            f.seek(8 + n + begin)
            raw = f.read(end - begin)
            tensors[name] = np.frombuffer(raw, dtype=dtype).reshape(shape)
    return tensors


def _offsets(path: Path, name: str, info: object, data_size: int) -> tuple[int, int]:
    offsets = info.get("data_offsets") if isinstance(info, dict) else None
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1] <= data_size
    ):
        raise CorruptDataError(
            f"{path}: tensor {name!r} has data_offsets {offsets!r} outside the "
            f"{data_size}-byte data section"
        )
    return offsets[0], offsets[1]
