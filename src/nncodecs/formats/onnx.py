"""ONNX models as a :class:`Source`, read by the wire walk alone
(:mod:`nncodecs.formats.onnx_graph`): initializers and ``Constant`` nodes' values, in
the main graph and in every subgraph (``If`` / ``Loop`` bodies), never the model parsed
into objects, so a model of millions of nodes lists in the memory of its tensors. A
``Constant``'s value under 1 KiB in the file (shapes, scalars) stays in the graph's bytes
(:data:`~nncodecs.formats.onnx_graph.SMALL_CONSTANT`); every other is a tensor. A tensor
of a dtype the codecs do not model (complex, int4, float4 ...) is stored as its
``raw_data`` bytes (uint8); one nncodecs cannot keep (strings, sparse values, such a
dtype in typed fields) refuses the whole model, by name. Values in typed fields
(``float_data``, ``value_floats`` ...) are decoded by the ``onnx`` package, from their
own bytes, when they are read. External data files are read only where they lie inside
the model's directory, and only when a tensor is read.

A model comes back byte for byte (``decompress`` to ``.onnx``): each tensor whose
``raw_data`` lies in the file is read from there and put back there; every other byte
(the graph, small and typed-field values) is kept verbatim
(:mod:`nncodecs.formats.spliced`); the external data files alike, written beside the
model (:mod:`nncodecs.formats.onnx_external`). Where that cannot be (external data that
is not exactly its values), every ``Constant`` is listed, and the model restores as
safetensors.
"""

from __future__ import annotations

import itertools
import math
import mmap
import os
import posixpath
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.dtypes import dtype_name
from nncodecs.errors import CorruptDataError
from nncodecs.extras import need
from nncodecs.formats.onnx_external import EXTERNAL, check_external_name, external_records
from nncodecs.formats.onnx_graph import WireTensor, graph_tensors
from nncodecs.formats.onnx_wire import external_locations
from nncodecs.formats.paths import inside
from nncodecs.formats.source import FileRows, Source, Tensor
from nncodecs.formats.spliced import Place, spliced_metadata

__all__ = ["OnnxSource"]

#: ONNX data types (``TensorProto.DataType``) the codecs model, as NumPy dtypes; any other
#: with ``raw_data`` is stored as its bytes (float4 and int4 hold two values a byte).
#: Where a model cannot come back as ONNX, its small Constants are listed as tensors (the
#: graph's bytes are not kept): up to this many, not a container of millions of arrays.
SMALL_LIMIT = 1 << 16

_DTYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
    16: "bfloat16",
    17: "float8_e4m3fn",
    19: "float8_e5m2",
}
#: A Constant's typed attributes: the field holding the value, and its dtype.
_ATTRIBUTES = {
    "value_float": ("f", "float32"),
    "value_floats": ("floats", "float32"),
    "value_int": ("i", "int64"),
    "value_ints": ("ints", "int64"),
}


class OnnxSource(Source):
    """The tensors of an ONNX model, from the headers the wire walk finds."""

    format = "onnx"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.places: list[Place] | None = None  # None: not restorable byte for byte
        self.inexact: str | None = None
        self.external_places: dict[str, list[Place]] = {}

    def _list(self) -> list[Tensor]:
        if self.size == 0:
            raise CorruptDataError(f"{self.path}: an empty file, not an ONNX model")
        raw = np.memmap(self.path, dtype=np.uint8, mode="r")
        tensors = self._from_wire(graph_tensors(memoryview(raw), str(self.path)))
        self._every_external_file(raw)
        if not self.inexact and _overlapping(self.external_places):
            self.inexact = "has external tensors that share bytes"
        if self.inexact:  # (restored as safetensors: the small Constants are tensors too)
            try:
                listed = graph_tensors(
                    memoryview(raw), str(self.path), small=True, limit=SMALL_LIMIT
                )
            except OverflowError:
                raise ValueError(
                    f"{self.path}: the model {self.inexact}, so it cannot come back as ONNX; "
                    f"as tensors alone, its more than {SMALL_LIMIT} small Constants would be "
                    "as many arrays: refused"
                ) from None
            tensors = self._from_wire(listed)
        return tensors

    def _every_external_file(self, raw: np.ndarray) -> None:
        """Every external data file the graph names is kept, byte for byte: one that no
        listed tensor lies in (a node attribute's tensor, say) whole. Each name is
        checked as the listed tensors' are, and must be a regular file."""
        with self.path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            if m.find(b"location") < 0:  # (no external data entry anywhere: no walk)
                return
        for name in sorted(external_locations(memoryview(raw), str(self.path))):
            location = self._checked_location(name, "a tensor")
            if location not in self.external_places and not self.inexact:
                file = self.path.parent / location
                if file.resolve() == self.path.resolve():
                    self.inexact = f"keeps external data in the model file itself ({location!r})"
                    continue
                self._regular(file, location, "a tensor")
                self.external_places[location] = []  # (no tensor listed in it: kept whole)

    def _from_wire(self, listed: list[WireTensor]) -> list[Tensor]:
        names = Counter(t.name for t in listed)
        twice = next((n for n, c in names.items() if c > 1), None)
        if twice is not None:  # (the empty name too)
            raise CorruptDataError(f"{self.path}: two tensors named {twice!r}")
        self.places, self.external_places = [], {}
        out = []
        for wt in listed:
            if wt.external is not None:
                self._checked_location(wt.external.get("location", ""), repr(wt.name))
            out.append(self._tensor(wt))
        return out

    def _checked_location(self, location: str, what: str) -> str:
        """An external data file's name, normalised; the names decompress would refuse
        are refused here, with the reason."""
        try:
            normal = check_external_name(location)
        except ValueError as exc:
            raise CorruptDataError(
                f"{self.path}: tensor {what} has external data at {location!r}, "
                f"which nncodecs would not write back: {exc}"
            ) from None
        inside(self.path.parent / normal, self.path.parent)
        return normal

    def _regular(self, file: Path, location: str, what: str) -> None:
        if not file.is_file():  # (missing, a folder, a FIFO that would block the read)
            raise CorruptDataError(
                f"{self.path}: tensor {what} has external data at {location!r}, "
                "which is not a regular file"
            )

    def _tensor(self, wt: WireTensor) -> Tensor:
        name = wt.name
        if wt.kind != "tensor":  # (a Constant's value_floats ...: decoded when read)
            value = self._typed(wt)
            return Tensor(name, value.dtype, value.shape, load=lambda: value)
        known = _DTYPES.get(wt.data_type)
        if known is None:
            if wt.raw is None:
                raise TypeError(
                    f"{self.path}: tensor {name!r} cannot be stored by nncodecs (ONNX data "
                    f"type {wt.data_type}, not in raw_data); nothing was written"
                )
            return self._placed(name, np.dtype(np.uint8), (wt.raw[1],), wt.raw)
        dtype = np.dtype(known)
        if any(d < 0 for d in wt.dims):
            raise CorruptDataError(f"{self.path}: tensor {name!r}: dims {list(wt.dims)}")
        shape = wt.dims
        if wt.raw is not None:
            want = math.prod(shape) * dtype.itemsize
            if wt.raw[1] != want:
                raise CorruptDataError(
                    f"{self.path}: tensor {name!r}: {wt.raw[1]} bytes of raw data "
                    f"for {want} ({dtype} {list(shape)})"
                )
            return self._placed(name, dtype, shape, wt.raw)
        if wt.external is not None:
            return self._external_tensor(Tensor(name, dtype, shape), wt.external)
        return Tensor(name, dtype, shape, load=lambda: self._typed(wt))

    def _placed(self, name: str, dtype: np.dtype, shape: tuple[int, ...], raw: Any) -> Tensor:
        """Read from the file where the model holds it, put back there on restore."""
        assert self.places is not None
        self.places.append((name, raw[0], raw[1], dtype_name(dtype)))
        return Tensor(name, dtype, shape, rows=FileRows(str(self.path), raw[0], dtype, shape))

    def _external_tensor(self, t: Tensor, info: dict[str, str]) -> Tensor:
        """A tensor in an external file: read from there by byte range, and put back there
        on restore, where its bytes are exactly its values."""
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise CorruptDataError(
                f"{self.path}: tensor {t.name!r}: external data {info}"
            ) from None
        location = posixpath.normpath(info.get("location", ""))  # ("./d.bin", "d.bin": one)
        file = self.path.parent / location
        self._regular(file, location, repr(t.name))
        size = file.stat().st_size
        length = size - offset if length is None else length
        if offset < 0 or offset + length > size:
            raise CorruptDataError(
                f"{self.path}: tensor {t.name!r}: external data at {offset} ({length} bytes) "
                f"runs past the end of {location!r} ({size} bytes)"
            )
        if length != t.nbytes:  # (as onnx itself refuses it: never values from beyond it)
            raise CorruptDataError(
                f"{self.path}: tensor {t.name!r}: {length} bytes of external data for "
                f"{t.nbytes} ({t.dtype} {list(t.shape)})"
            )
        if file.resolve() == self.path.resolve():
            self.inexact = f"keeps external data in the model file itself ({location!r})"
        if self.inexact:
            return Tensor(t.name, t.dtype, t.shape, load=lambda: _external_values(t, file, offset))
        self.external_places.setdefault(location, []).append(
            (t.name, offset, length, dtype_name(t.dtype))
        )
        return Tensor(t.name, t.dtype, t.shape, rows=FileRows(str(file), offset, t.dtype, t.shape))

    def _typed(self, wt: WireTensor) -> np.ndarray:
        """Values in typed fields, decoded by the onnx package from their own bytes."""
        onnx = need("onnx", f"tensor {wt.name!r}, whose values are in typed fields,")
        numpy_helper = need("onnx.numpy_helper", "reading ONNX typed fields")
        with self.path.open("rb") as f:
            data = b""
            for start, end in wt.message:
                f.seek(start)
                data += f.read(end - start)
        try:
            if wt.kind == "tensor":
                arr = numpy_helper.to_array(onnx.TensorProto.FromString(data))
                return np.asarray(arr).astype(_DTYPES[wt.data_type], copy=False)
            attr = onnx.AttributeProto.FromString(data)
            field, dtype = _ATTRIBUTES[wt.kind]
            return np.array(getattr(attr, field), dtype)
        except Exception as exc:  # protobuf's and onnx's errors for damaged values
            raise CorruptDataError(f"{self.path}: tensor {wt.name!r}: {exc}") from None

    def metadata(self) -> dict[str, str]:
        """Besides the CRC32C: where each tensor's bytes lie in the file and in its
        external data files, and every other byte, so that the model comes back byte for
        byte."""
        meta = super().metadata()
        self.tensors()
        if self.places is not None and not self.inexact:
            tensors = meta.pop("source.tensors")
            try:
                meta.update(spliced_metadata(self.path, "onnx", self.places))
                if self.external_places:
                    meta[EXTERNAL] = external_records(self.path.parent, self.external_places)
            except CorruptDataError:  # (external tensors that share bytes: not restorable)
                self.inexact = "has external tensors that share bytes"
                meta = {k: v for k, v in meta.items() if not k.startswith("source.onnx.")}
            meta["source.tensors"] = tensors
        if self.inexact:
            meta["source.onnx.inexact"] = self.inexact
        return meta


def _overlapping(places: dict[str, list[Place]]) -> bool:
    """Whether two tensors share bytes of one external file."""
    for items in places.values():
        ends = sorted((start, start + size) for _, start, size, _ in items)
        if any(b[0] < a[1] for a, b in itertools.pairwise(ends)):
            return True
    return False


def _external_values(t: Tensor, file: Path, offset: int) -> np.ndarray:
    """An external tensor's values where they cannot be put back in place: read whole."""
    try:
        with file.open("rb") as f:
            if offset < 0 or offset + t.nbytes > os.fstat(f.fileno()).st_size:
                raise CorruptDataError(f"{file}: external data of {t.name!r} is short")
            f.seek(offset)
            data = f.read(t.nbytes)
    except OSError as exc:
        raise CorruptDataError(f"{file}: external data not readable ({exc})") from None
    if len(data) != t.nbytes:  # (the file shrank while read)
        raise CorruptDataError(f"{file}: external data of {t.name!r} is short")
    return np.frombuffer(data, t.dtype).reshape(t.shape)
