"""GGUF as a :class:`Source` (through the ``gguf`` package), and its byte-identical restore.

Float and integer tensors (BF16 included) come typed; quantized blocks come as their
bytes split into their fields (:mod:`nncodecs.formats.ggml`: scales apart from quants,
each coded on its own), their GGML type recorded; a type with no known layout as its raw
bytes. Every other byte of the file (header,
key-value metadata, tensor infos, alignment padding) is kept verbatim in the container's
metadata (:mod:`nncodecs.formats.spliced`, which restores the file).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.container import Records
from nncodecs.dtypes import normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.extras import need
from nncodecs.formats.ggml import BLOCK_FIELDS
from nncodecs.formats.ggml_convert import QUANTIZED_SHAPES
from nncodecs.formats.gguf_header import check_gguf_header
from nncodecs.formats.source import FileRows, Source, Tensor
from nncodecs.formats.spliced import spliced_metadata

__all__ = ["GgufSource"]

_GGUF_TYPED = {
    "F32": np.float32,
    "F16": np.float16,
    "F64": np.float64,
    "I8": np.int8,
    "I16": np.int16,
    "I32": np.int32,
    "I64": np.int64,
}


class GgufSource(Source):
    """A GGUF file's tensors in file order, read from the file by byte range."""

    format = "gguf"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.places: list[tuple[str, int, int, str]] = []  # (name, offset, bytes, GGML type)
        self.logical: dict[str, list[int]] = {}  # (a quantized tensor's shape in values)

    def _list(self) -> list[Tensor]:
        GGUFReader = need("gguf", "reading GGUF").GGUFReader  # noqa: N806 (the package's name)

        check_gguf_header(self.path)  # (the package trusts its counts: a forged one hangs it)
        try:
            reader = GGUFReader(self.path)
        except Exception as exc:  # the gguf package raises plain errors for bad files
            raise CorruptDataError(f"{self.path}: not a readable GGUF file ({exc})") from None
        file_size = self.size
        out = []
        for t in sorted(reader.tensors, key=lambda t: t.data_offset):
            kind = t.tensor_type.name
            start, size = int(t.data_offset), int(t.n_bytes)
            if start + size > file_size:
                raise CorruptDataError(
                    f"{self.path}: tensor {t.name!r} runs past the end of the file"
                )
            if kind in _GGUF_TYPED:
                dtype, shape = np.dtype(_GGUF_TYPED[kind]), tuple(t.data.shape)
            elif kind == "BF16":  # (the gguf package reads it as bytes: typed here)
                dtype = normalize_dtype("bfloat16")
                shape = tuple(int(n) for n in reversed(t.shape))
                if math.prod(shape) * 2 != size:
                    raise CorruptDataError(f"{self.path}: tensor {t.name!r} has a wrong size")
            else:
                dtype, shape = np.dtype(np.uint8), (size,)
            rows = FileRows(str(self.path), start, dtype, shape)
            fields = BLOCK_FIELDS.get(kind)
            if fields is not None and size % _block_bytes(fields):
                raise CorruptDataError(
                    f"{self.path}: tensor {t.name!r} is not a whole number of {kind} blocks"
                )
            load = None if fields is None else _records(rows, size, fields)
            logical = tuple(int(n) for n in reversed(t.shape))  # (GGUF lists dims inner first)
            quantized = (kind, logical) if kind not in _GGUF_TYPED and kind != "BF16" else None
            if quantized:
                self.logical[t.name] = list(logical)
            out.append(Tensor(t.name, dtype, shape, load=load, rows=rows, quantized=quantized))
            self.places.append((t.name, start, size, kind))
        return out

    def metadata(self) -> dict[str, str]:
        """Besides the CRC32C: each tensor's place and GGML type, and every byte between
        and around the tensors, so that the file comes back byte for byte."""
        meta = super().metadata()
        tensors = meta.pop("source.tensors")
        meta.update(spliced_metadata(self.path, "gguf", self.places))
        if self.logical:  # (what info shows of a quantized tensor, stored as its bytes)
            meta[QUANTIZED_SHAPES] = json.dumps(self.logical)
        meta["source.tensors"] = tensors
        return meta


def _block_bytes(fields: list[tuple[str, str, int]]) -> int:
    return sum(np.dtype(dtype).itemsize * count for _, dtype, count in fields)


def _records(rows: FileRows, size: int, fields: list[tuple[str, str, int]]) -> Any:
    """A quantized tensor's reader: its bytes with their block's fields (``archive``'s
    tasks read the ``rows`` instead, and store the bytes whole)."""
    return lambda: Records(rows(0, size), fields)
