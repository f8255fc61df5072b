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

import contextlib
import json
import math
import os
import struct
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.dtypes import ML_DTYPES
from nncodecs.errors import CorruptDataError
from nncodecs.outputs import final_mode, open_new
from nncodecs.writeback import Writeback

__all__ = [
    "SAFETENSORS_DTYPES",
    "SafetensorsFile",
    "raw_bytes",
    "read_safetensors",
    "safetensors_header",
    "write_safetensors",
]

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


class SafetensorsFile:
    """One safetensors file, its header checked against the file, its tensors read one by one.

    ``header_bytes`` is the header exactly as stored (so that a writer can
    restore the file byte for byte); ``entries`` lists ``(name, dtype, shape,
    begin, end)`` in data order; ``metadata`` is the ``__metadata__`` map.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        size = self.path.stat().st_size
        with self.path.open("rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise CorruptDataError(f"{self.path}: {len(head)} bytes, too short for safetensors")
            (n,) = struct.unpack("<Q", head)
            if n > min(size - 8, _MAX_HEADER):
                raise CorruptDataError(
                    f"{self.path}: header length {n} does not fit a {size}-byte file"
                )
            self.header_bytes = f.read(n)
        try:
            header = json.loads(self.header_bytes)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise CorruptDataError(f"{self.path}: header is not JSON: {exc}") from exc
        if not isinstance(header, dict):
            raise CorruptDataError(f"{self.path}: header is not a JSON object")
        meta = header.get("__metadata__", {})
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise CorruptDataError(f"{self.path}: __metadata__ must map strings to strings")
        self.metadata: dict[str, str] = dict(meta)
        self.data_start = 8 + n
        self.data_size = size - self.data_start
        entries = []
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = _offsets(self.path, name, info, self.data_size)
            dtype = SAFETENSORS_DTYPES.get(info.get("dtype"))
            if dtype is None:
                raise TypeError(
                    f"{self.path}: tensor {name!r} has unsupported dtype {info.get('dtype')!r}"
                )
            shape = info.get("shape")
            if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise CorruptDataError(f"{self.path}: tensor {name!r} has a bad shape {shape!r}")
            if end - begin != math.prod(shape) * dtype.itemsize:
                raise CorruptDataError(
                    f"{self.path}: tensor {name!r}: {end - begin} bytes "
                    f"for shape {shape} of {dtype}"
                )
            entries.append((name, dtype, tuple(shape), begin, end))
        entries.sort(key=lambda e: (e[3], e[4]))
        self.entries = entries

    def tiles_exactly(self) -> bool:
        """True when the tensors fill the data section back to back, as the format's writers do."""
        at = 0
        for _, _, _, begin, end in self.entries:
            if begin != at:
                return False
            at = end
        return at == self.data_size

    def read(self, index: int) -> np.ndarray:
        """The tensor of ``entries[index]``."""
        _, dtype, shape, begin, end = self.entries[index]
        with self.path.open("rb") as f:
            f.seek(self.data_start + begin)
            raw = f.read(end - begin)
        return np.frombuffer(raw, dtype=dtype).reshape(shape)

    def __iter__(self) -> Any:
        for i, entry in enumerate(self.entries):
            yield entry[0], self.read(i)


def safetensors_header(entries: Any, metadata: dict[str, str] | None = None) -> bytes:
    """The header of a file holding ``(name, dtype, shape)`` entries back to back, in order
    (the reference writer's layout: compact JSON, padded with spaces to 8 bytes)."""
    names = {np.dtype(v): k for k, v in SAFETENSORS_DTYPES.items()}
    header_obj: dict[str, Any] = {}
    if metadata:
        header_obj["__metadata__"] = dict(metadata)
    at = 0
    for name, dtype, shape in entries:
        dtype = np.dtype(dtype)
        if dtype not in names:
            raise TypeError(f"tensor {name!r}: safetensors has no dtype {dtype}")
        nbytes = math.prod(shape) * dtype.itemsize
        header_obj[name] = {
            "dtype": names[dtype],
            "shape": list(shape),
            "data_offsets": [at, at + nbytes],
        }
        at += nbytes
    raw = json.dumps(header_obj, separators=(",", ":")).encode()
    return raw + b" " * (-len(raw) % 8)


def raw_bytes(arr: np.ndarray) -> memoryview:
    """A tensor's bytes without a copy (a copy only for a non-contiguous view)."""
    return memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))


def write_safetensors(
    path: str | os.PathLike[str] | Any,
    tensors: Any,
    header_bytes: bytes | None = None,
    metadata: dict[str, str] | None = None,
    digest: Any = None,
) -> None:
    """Write ``(name, array)`` pairs as a safetensors file (every byte also fed to
    ``digest``, a ``hashlib`` object, when given: no second read to check it). An
    ``array`` may also be an object with ``nbytes`` and ``pieces()``, an iterator of
    its bytes in order (:class:`nncodecs.formats.source.Pieces`), with ``header_bytes``.

    With ``header_bytes`` (a header read by :class:`SafetensorsFile`, or made
    by :func:`safetensors_header`) the tensors stream into the file one by
    one, in the header's data order and back to back (anything else raises
    ``ValueError``): a whole model never sits in memory. Otherwise
    a header is built, tensors in the order given (all are held until then).
    """
    if header_bytes is None:
        items = [(name, np.asarray(arr, order="C")) for name, arr in tensors]  # keeps 0-d
        header_bytes = safetensors_header(
            ((name, arr.dtype, arr.shape) for name, arr in items), metadata
        )
        tensors = items
    header = json.loads(header_bytes)
    # (a file object, standard output say, is written as it is and left open)
    writable = hasattr(path, "write")
    # (a file made under created_mode gets its mode from its first byte: a private
    # model's folder of shards stays private too)
    with contextlib.nullcontext(path) if writable else open_new(Path(path)) as f:
        out = _Behind(f, digest)
        try:
            out.write(struct.pack("<Q", len(header_bytes)) + header_bytes)
            at = 0  # bytes of tensor data written
            for name, arr in tensors:
                info = header.get(name)
                if not isinstance(info, dict):
                    raise ValueError(f"{path}: tensor {name!r} is not in the header")
                begin, end = info["data_offsets"]
                parts = getattr(arr, "pieces", None)  # (pieces of it, read as written)
                parts = parts() if parts is not None else [raw_bytes(arr)]
                nbytes = int(arr.nbytes)
                if nbytes != end - begin:
                    raise ValueError(
                        f"{path}: tensor {name!r} has {nbytes} bytes, not {end - begin}"
                    )
                if begin != at:  # written in order, no holes: no sparse giant file
                    raise ValueError(
                        f"{path}: tensor {name!r} at offset {begin}, expected {at} "
                        "(tensors are written back to back, in the header's order)"
                    )
                for data in parts:
                    out.write(data)
                    at += memoryview(data).nbytes
                    del data  # (the next piece may be read before the loop's name rebinds)
                if at != end:
                    raise ValueError(
                        f"{path}: tensor {name!r} gave {at - begin} bytes, not {nbytes}"
                    )
                del parts, arr  # the next tensor may be read before this loop's names rebind
        finally:
            out.close()
        ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
        if at != max(ends, default=0):
            raise ValueError(f"{path}: the header names tensors that were not written")
    if not writable:
        final_mode(Path(path))  # (a read-only mode, once written)


#: Pieces up to this size are written (and hashed) behind the caller, on a thread.
_BEHIND_BYTES = 64 << 20
#: Bytes a write call hands the kernel.
_PIECE = 1 << 20


class _Behind:
    """Writes a file's pieces (and feeds them to a hash) on a thread of its own, one
    piece behind the caller, so the next tensor decodes meanwhile; a piece over
    _BEHIND_BYTES is written at once (never two large tensors in memory)."""

    def __init__(self, f: Any, digest: Any) -> None:
        self.f, self.digest = f, digest
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="nncodecs-write")
        self.pending: Future[None] | None = None
        # (a pipe has no position, and no page cache to write back)
        self.writeback = Writeback(f) if f.seekable() else None

    def _write(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        for at in range(0, len(view), _PIECE):  # (one large write is slower: measured 2-3x)
            self.f.write(view[at : at + _PIECE])
        if self.digest is not None:
            self.digest.update(view)
        if self.writeback is not None:
            self.writeback.written(self.f.tell())

    def write(self, data: Any) -> None:
        self.wait()
        if memoryview(data).nbytes <= _BEHIND_BYTES:
            self.pending = self.pool.submit(self._write, data)
        else:
            self._write(data)

    def wait(self) -> None:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.pool.shutdown()


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """All tensors of a safetensors file, in file order, as NumPy arrays.

    Raises :class:`nncodecs.CorruptDataError` for a header or offsets that do
    not fit the file, and ``TypeError`` for a dtype NumPy cannot hold.
    """
    return dict(SafetensorsFile(path))


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
