"""ONNX models as a :class:`Source`, through the optional ``onnx`` package: initializers
and ``Constant`` nodes' values, in the main graph and in every subgraph (``If`` /
``Loop`` bodies). A tensor of a dtype the codecs do not model (complex, int4, ...) is
stored as its ``raw_data`` bytes (uint8); one nncodecs cannot keep (strings, sparse
values, such a dtype in typed fields) refuses the whole model, by name. External data
files are read only where they lie inside the model's directory, and only when a tensor
is read.

A model comes back byte for byte (``decompress`` to ``.onnx``): each tensor whose
``raw_data`` lies in the file (found by :mod:`nncodecs.formats.onnx_wire`) is read from
there and put back there; every other byte (the graph, typed-field tensors) is kept
verbatim (:mod:`nncodecs.formats.spliced`); the external data files alike, written
beside the model (:mod:`nncodecs.formats.onnx_external`).
"""

from __future__ import annotations

import math
import posixpath
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.dtypes import dtype_name
from nncodecs.errors import CorruptDataError
from nncodecs.formats.onnx_external import EXTERNAL, check_external_name, external_records
from nncodecs.formats.onnx_wire import raw_data_spans
from nncodecs.formats.paths import inside
from nncodecs.formats.source import FileRows, Source, Tensor
from nncodecs.formats.spliced import Place, spliced_metadata

__all__ = ["OnnxSource"]

_Entry = tuple[str, np.dtype, tuple[int, ...], Callable[[], np.ndarray]]


class OnnxSource(Source):
    """The tensors of an ONNX model, from the parsed protobuf's tensor headers."""

    format = "onnx"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.model: Any = None  # the parsed ModelProto, external data loaded on first read
        self._external_loaded = False
        self.places: list[Place] | None = None  # None: not restorable byte for byte
        # each external tensor's (location, offset, length or None); their places by file
        self._external: dict[str, tuple[str, int, int | None]] = {}
        self.external_places: dict[str, list[Place]] = {}

    def _list(self) -> list[Tensor]:
        path = self.path
        try:
            import onnx
            from onnx import external_data_helper
        except ImportError:
            raise ValueError(
                f"{path}: reading ONNX needs the onnx package (pip install onnx)"
            ) from None
        if self.size == 0:
            raise CorruptDataError(f"{path}: an empty file, not an ONNX model")
        try:
            self.model = onnx.load(str(path), load_external_data=False)
        except Exception as exc:  # protobuf's errors for a file that is not ONNX
            raise CorruptDataError(f"{path}: not a readable ONNX model ({exc})") from None
        base = path.parent
        for tensor in external_data_helper._get_all_tensors(self.model):
            if external_data_helper.uses_external_data(tensor):
                info = {e.key: e.value for e in tensor.external_data}
                location = info.get("location", "")
                try:  # (the names decompress would refuse are refused here, with the reason)
                    check_external_name(location)
                except ValueError as exc:
                    raise CorruptDataError(
                        f"{path}: tensor {tensor.name!r} has external data at {location!r}, "
                        f"which nncodecs would not write back: {exc}"
                    ) from None
                inside(base / location, base)
        entries = list(self._walk(self.model.graph, ""))
        if len({e[0] for e in entries}) != len(entries):
            twice = next(n for n, c in Counter(e[0] for e in entries).items() if c > 1)
            raise CorruptDataError(f"{path}: two tensors named {twice!r}")
        spans = self._spans()
        self.inexact = None
        if spans is not None and len(spans) != len(entries):
            spans = None  # (a layout the walk does not follow: restored as safetensors)
            self.inexact = "has a layout nncodecs does not follow (a graph given twice?)"
        self.places = None if spans is None else []
        out = []
        for i, (name, dtype, shape, load) in enumerate(entries):
            span = spans[i] if spans is not None else None
            t = Tensor(name, dtype, shape, load=load)
            if span is not None and span[1] == t.nbytes and self.places is not None:
                # read from the file where the model holds it, put back there on restore
                t = Tensor(name, dtype, shape, rows=FileRows(str(path), span[0], dtype, shape))
                self.places.append((name, span[0], span[1], dtype_name(dtype)))
            elif name in self._external:
                t = self._external_tensor(t)
            out.append(t)
        return out

    def _external_tensor(self, t: Tensor) -> Tensor:
        """A tensor in an external file: read from there by byte range, and put back there
        on restore, where its bytes are exactly its values."""
        location, offset, length = self._external[t.name]
        location = posixpath.normpath(location)  # ("./d.bin" and "d.bin": one file)
        file = self.path.parent / location
        if "\\" in location or file.resolve() == self.path.resolve():
            self.inexact = f"keeps external data at {location!r}, a name nncodecs cannot restore"
            return t
        size = file.stat().st_size if file.is_file() else -1
        length = size - offset if length is None else length
        if length != t.nbytes or offset < 0 or offset + length > size:
            self.inexact = f"has an external tensor ({t.name!r}) whose bytes are not its values"
            return t
        self.external_places.setdefault(location, []).append(
            (t.name, offset, length, dtype_name(t.dtype))
        )
        return Tensor(t.name, t.dtype, t.shape, rows=FileRows(str(file), offset, t.dtype, t.shape))

    def _spans(self) -> list[tuple[int, int] | None] | None:
        if self.size == 0:
            return None
        raw = np.memmap(self.path, dtype=np.uint8, mode="r")
        return raw_data_spans(memoryview(raw), str(self.path))

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

    def _load_external(self) -> None:
        from onnx import external_data_helper

        if not self._external_loaded:
            try:
                external_data_helper.load_external_data_for_model(self.model, str(self.path.parent))
            except Exception as exc:  # a missing or short external file
                raise CorruptDataError(f"{self.path}: external data not readable ({exc})") from None
            self._external_loaded = True

    def _tensor(self, name: str, tensor: Any) -> _Entry:
        """A TensorProto's entry: dtype and shape from its header, its values on demand."""
        from onnx import helper, numpy_helper

        try:
            dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
            dtype_name(dtype)
        except Exception as exc:  # complex, int4, float8 fnuz ...: their bytes; strings: refused
            if tensor.HasField("raw_data") and not tensor.external_data:
                raw = tensor.raw_data  # (as its bytes, uint8: put back at its place all the same)
                return name, np.dtype(np.uint8), (len(raw),), lambda: np.frombuffer(raw, np.uint8)
            raise TypeError(
                f"{self.path}: tensor {name!r} cannot be stored by nncodecs ({exc}); "
                "nothing was written"
            ) from None

        shape = tuple(int(d) for d in tensor.dims)
        if tensor.HasField("raw_data") and not tensor.external_data:
            want = math.prod(shape) * np.dtype(dtype).itemsize
            if len(tensor.raw_data) != want:
                raise CorruptDataError(
                    f"{self.path}: tensor {name!r}: {len(tensor.raw_data)} bytes of raw data "
                    f"for {want} ({np.dtype(dtype)} {list(shape)})"
                )

        if tensor.external_data:
            info = {e.key: e.value for e in tensor.external_data}
            try:
                length = int(info["length"]) if "length" in info else None
                self._external[name] = (info["location"], int(info.get("offset", 0)), length)
            except (KeyError, ValueError):
                raise CorruptDataError(
                    f"{self.path}: tensor {name!r}: external data {info}"
                ) from None

        def load() -> np.ndarray:
            self._load_external()
            return numpy_helper.to_array(tensor)

        return name, np.dtype(dtype), shape, load

    def _walk(self, graph: Any, scope: str) -> Iterator[_Entry]:
        import onnx

        # A subgraph's names are its own (two branches of an If may both name a "t"):
        # its tensors are stored under "node.attribute/name", the main graph's as they are.
        for init in graph.initializer:
            yield self._tensor(scope + init.name, init)
        for sparse in graph.sparse_initializer:
            raise TypeError(
                f"{self.path}: sparse initializer {sparse.values.name!r} cannot be stored yet; "
                "nothing was written"
            )
        names = Counter(n.name for n in graph.node)
        for i, node in enumerate(graph.node):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                yield from self._constant(node, scope)
            # (a node's name where it is one of a kind, else its type and place)
            unique = node.name and names[node.name] == 1
            where = f"{scope}{node.name if unique else f'{node.op_type}_{i}'}"
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from self._walk(attr.g, f"{where}.{attr.name}/")
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for k, g in enumerate(attr.graphs):
                        yield from self._walk(g, f"{where}.{attr.name}.{k}/")

    def _constant(self, node: Any, scope: str) -> Iterator[_Entry]:
        name = scope + (node.output[0] if node.output else node.name)
        for attr in node.attribute:
            if attr.name == "value":
                yield self._tensor(name, attr.t)
            elif attr.name in ("value_float", "value_int", "value_floats", "value_ints"):
                floats = attr.name.startswith("value_float")
                dtype = np.dtype(np.float32 if floats else np.int64)
                if attr.name.endswith("s"):
                    value: Any = attr.floats if floats else attr.ints
                else:
                    value = attr.f if floats else attr.i
                arr = np.array(value, dtype)
                yield name, dtype, arr.shape, lambda arr=arr: arr
            else:
                raise TypeError(
                    f"{self.path}: Constant {name!r} holds a {attr.name}, which nncodecs "
                    "cannot store yet; nothing was written"
                )
