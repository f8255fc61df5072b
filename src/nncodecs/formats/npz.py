"""NumPy ``.npz`` as a :class:`Source` (``allow_pickle=False``), and written back."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from tokenize import TokenError
from typing import Any

import numpy as np

from nncodecs.dtypes import dtype_name
from nncodecs.errors import CorruptDataError
from nncodecs.formats.source import Source, Tensor

__all__ = ["NpzSource", "write_npz"]


#: Bytes read at a time from an entry (an array grows only as its bytes arrive).
_STEP = 1 << 24


class NpzSource(Source):
    """The arrays of an ``.npz``, each header checked against its zip entry's size before
    anything is allocated (a 253-byte file may declare a 373 GiB array), and each array
    read in steps, its memory growing only as its entry's bytes arrive (the entry's size
    in the zip directory may be forged too)."""

    format = "npz"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._npz: Any = None

    def _list(self) -> list[Tensor]:
        self._npz = npz = np.load(self.path, allow_pickle=False)
        out = []
        for name in npz.files:
            with npz.zip.open(name + ".npy") as f:
                shape, _, dtype, _ = self._header(name, f)
            try:
                dtype_name(dtype)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{self.path}: array {name!r}: {exc}") from None
            out.append(Tensor(name, dtype, shape, load=lambda name=name: self._load(name)))
        return out

    def _header(self, name: str, f: Any) -> tuple[tuple[int, ...], bool, np.dtype, int]:
        """(shape, Fortran order, dtype, bytes of data) of an entry's array, checked."""
        from numpy.lib import format as npy

        try:
            version = npy.read_magic(f)
            if version not in ((1, 0), (2, 0), (3, 0)):  # (NumPy's load refuses the others)
                raise ValueError(f"a .npy file of format version {version}")
            read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, fortran, dtype = read(f)
        except (ValueError, SyntaxError, TokenError, RecursionError) as exc:
            # (NumPy parses the header as a Python literal: an unbalanced one is tokenize's
            # TokenError, a deep one a SyntaxError or RecursionError)
            raise CorruptDataError(f"{self.path}: array {name!r}: header {exc!r}") from None
        if dtype.hasobject:
            raise TypeError(f"{self.path}: array {name!r} holds Python objects")
        declared = math.prod(shape) * dtype.itemsize
        size = self._npz.zip.getinfo(name + ".npy").file_size
        if f.tell() + declared != size:
            raise CorruptDataError(
                f"{self.path}: array {name!r} declares {declared} bytes, its entry holds "
                f"{size - f.tell()}"
            )
        return tuple(shape), bool(fortran), dtype, declared

    def _load(self, name: str) -> np.ndarray:
        with self._npz.zip.open(name + ".npy") as f:
            shape, fortran, dtype, declared = self._header(name, f)
            data = bytearray()
            while len(data) < declared:
                step = f.read(min(_STEP, declared - len(data)))
                if not step:
                    raise CorruptDataError(f"{self.path}: array {name!r} ends short")
                data += step
            f.read()  # (to the entry's end, where zipfile checks its CRC-32)
        arr = np.frombuffer(data, dtype)
        return arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)

    def close(self) -> None:
        if self._npz is not None:
            self._npz.close()


def _entry_name(name: str) -> str:
    """A tensor's name as an npz entry (``NAME.npy``): refused where a zip tool would
    write it elsewhere than inside its folder (``../x``, ``/abs``, a backslash, NUL)."""
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or "\0" in name
        or any(p in ("", ".", "..") for p in parts)
        or parts[0].endswith(":")  # (a drive, "C:", to an unzip on Windows)
    ):
        raise ValueError(
            f"tensor {name!r}: not a safe npz entry name (an unzip would write it outside "
            "its folder); write safetensors instead"
        )
    return name


def write_npz(path: Path, arrays: Iterable[tuple[str, Any]]) -> None:
    """An ``.npz`` of ``(name, array)`` pairs (NumPy writes it from a dict of them all);
    every name a safe entry name (:func:`_entry_name`), checked before a byte is written."""
    named = {_entry_name(name): arr for name, arr in arrays}
    with path.open("wb") as f:
        np.savez(f, **named)
