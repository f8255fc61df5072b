"""NumPy ``.npz`` as a :class:`Source` (``allow_pickle=False``), and written back."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.dtypes import dtype_name
from nncodecs.errors import CorruptDataError
from nncodecs.formats.source import Source, Tensor

__all__ = ["NpzSource", "write_npz"]


class NpzSource(Source):
    """The arrays of an ``.npz``, each header checked against its zip entry's size before
    anything is allocated (a 253-byte file may declare a 373 GiB array)."""

    format = "npz"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._npz: Any = None

    def _list(self) -> list[Tensor]:
        from numpy.lib import format as npy

        path = self.path
        self._npz = npz = np.load(path, allow_pickle=False)
        out = []
        for name in npz.files:
            info = npz.zip.getinfo(name + ".npy")
            with npz.zip.open(info) as f:
                try:
                    version = npy.read_magic(f)
                    read = npy.read_array_header_1_0 if version == (1, 0) else (
                        npy.read_array_header_2_0)  # fmt: skip
                    shape, _, dtype = read(f)
                except ValueError as exc:
                    raise CorruptDataError(f"{path}: array {name!r}: {exc}") from None
                if dtype.hasobject:
                    raise TypeError(f"{path}: array {name!r} holds Python objects")
                declared = math.prod(shape) * dtype.itemsize
                if f.tell() + declared != info.file_size:
                    raise CorruptDataError(
                        f"{path}: array {name!r} declares {declared} bytes, its entry holds "
                        f"{info.file_size - f.tell()}"
                    )
            try:
                dtype_name(dtype)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{path}: array {name!r}: {exc}") from None
            out.append(Tensor(name, dtype, tuple(shape), load=lambda name=name: npz[name]))
        return out

    def close(self) -> None:
        if self._npz is not None:
            self._npz.close()


def write_npz(path: Path, arrays: Iterable[tuple[str, Any]]) -> None:
    """An ``.npz`` of ``(name, array)`` pairs (NumPy writes it from a dict of them all)."""
    with path.open("wb") as f:
        np.savez(f, **dict(arrays))
