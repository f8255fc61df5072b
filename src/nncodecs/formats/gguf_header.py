"""A GGUF file's header walked with bounds before the ``gguf`` package reads it.

The package trusts the counts it reads: an array of 2^60 empty strings in a 300-byte
file keeps its reader looping for ever. :func:`check_gguf_header` walks the key-value
section and the tensor infos (GGUF versions 2 and 3, little-endian) and refuses, with a
CorruptDataError, any count, length or type that the bytes left cannot hold, and any
tensor whose offset or element count the file cannot hold (the package's NumPy sums
wrap past 2^64), in time linear in the file's header size. A big-endian file (the
version's bytes swapped) is refused with a TypeError: its tensors would come back with
their bytes swapped.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import Any

from nncodecs.errors import CorruptDataError

__all__ = ["check_gguf_header"]

#: Bytes of each scalar value type (GGUF's type codes); 8 (string) and 9 (array) apart.
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
#: The least bytes one value of a type takes (a string: its length; an array: its type
#: and count).
_LEAST = {**_SCALAR, _STRING: 8, _ARRAY: 12}
#: GGML tensors have at most 4 dimensions (the format allows no more).
_MAX_DIMS = 4
#: No GGML type packs more than 8 elements in a byte (the smallest, IQ1_S, 1.56 bits).
_MAX_PER_BYTE = 8


class _Walk:
    """A cursor over the file's bytes (mapped: nothing is copied but the numbers)."""

    def __init__(self, data: Any, path: Path) -> None:
        self.data, self.at, self.path = data, 0, path

    def fail(self, what: str) -> CorruptDataError:
        return CorruptDataError(f"{self.path}: a damaged GGUF header ({what} at byte {self.at})")

    def take(self, n: int) -> int:
        """Skips n bytes; returns where they start."""
        if n > len(self.data) - self.at:
            raise self.fail(f"{n} bytes wanted, {len(self.data) - self.at} left")
        self.at += n
        return self.at - n

    def u32(self) -> int:
        return int(struct.unpack_from("<I", self.data, self.take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack_from("<Q", self.data, self.take(8))[0])

    def string(self) -> None:
        self.take(self.u64())

    def count(self, n: int, least: int, what: str) -> None:
        if n * least > len(self.data) - self.at:
            raise self.fail(f"{n} {what} cannot fit in the {len(self.data) - self.at} bytes left")

    def value(self, kind: int, depth: int = 0) -> None:
        if kind in _SCALAR:
            self.take(_SCALAR[kind])
        elif kind == _STRING:
            self.string()
        elif kind == _ARRAY:
            item, n = self.u32(), self.u64()
            if item not in _LEAST:
                raise self.fail(f"an array of unknown type {item}")
            if depth > 8:
                raise self.fail("arrays nested too deep")
            self.count(n, _LEAST[item], "array items")
            if item in _SCALAR:
                self.take(n * _SCALAR[item])
            else:
                for _ in range(n):
                    self.value(item, depth + 1)
        else:
            raise self.fail(f"a value of unknown type {kind}")


def check_gguf_header(path: Path) -> None:
    """Refuse a GGUF file whose header its bytes cannot hold (see the module). Versions
    other than 2 and 3 are left to the ``gguf`` package, which refuses them."""
    with path.open("rb") as f:
        if path.stat().st_size < 24:
            raise CorruptDataError(f"{path}: a damaged GGUF header (cut short)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            _walk(_Walk(m, path))


def _walk(w: _Walk) -> None:
    if w.data[:4] != b"GGUF":
        raise w.fail("no GGUF magic")
    w.take(4)
    version = w.u32()
    if version not in (2, 3):
        if version & 0xFFFF == 0:  # (how the gguf package tells a big-endian file)
            raise TypeError(f"{w.path}: a big-endian GGUF file (not supported)")
        return
    tensors, fields = w.u64(), w.u64()
    w.count(fields, 8 + 4 + 1, "key-value fields")  # (a key, a type, the least value)
    for _ in range(fields):
        w.string()
        w.value(w.u32())
    w.count(tensors, 8 + 4 + 4 + 8, "tensor infos")  # (a name, dims, type, offset)
    for _ in range(tensors):
        w.string()
        dims = w.u32()
        if dims > _MAX_DIMS:
            raise w.fail(f"a tensor of {dims} dimensions")
        elements = 1
        for _ in range(dims):
            elements *= w.u64()
        w.take(4)  # (the GGML type: the package checks it)
        offset = w.u64()
        if elements > _MAX_PER_BYTE * len(w.data) or offset > len(w.data):
            raise w.fail(f"a tensor the file cannot hold ({elements} elements at {offset})")
