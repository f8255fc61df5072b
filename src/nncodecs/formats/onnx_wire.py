"""Where an ONNX file's tensor bytes lie: a walk of its protobuf wire format.

``onnx.load`` parses a model into objects but says nothing of where a tensor's
``raw_data`` sits in the file; a byte-identical restore needs exactly that. This walk reads
only the structure (field keys and lengths; payloads are skipped) and yields, in the order
:class:`nncodecs.formats.onnx.OnnxSource` lists tensors, each tensor's ``raw_data`` span
``(offset, bytes)`` in the file, or ``None`` where its values are elsewhere (typed fields,
external data, a Constant's ``value_float`` ...). Every length is checked against its
enclosing message: a malformed file raises :class:`nncodecs.CorruptDataError`, and a
message field given twice (which protobuf would merge) yields ``None`` for what it holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nncodecs.errors import CorruptDataError

__all__ = ["external_locations", "raw_data_spans"]

Span = tuple[int, int]  # (start, end) in the file
_LEN, _VARINT, _I64, _I32, _GROUP_START, _GROUP_END = 2, 0, 1, 5, 3, 4
# field numbers (onnx.proto)
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 4, 5, 7
_ATTR_NAME, _ATTR_T, _ATTR_G, _ATTR_GRAPHS, _ATTR_TYPE = 1, 5, 6, 11, 20
_TENSOR_RAW_DATA, _TENSOR_DATA_LOCATION, _TENSOR_EXTERNAL_DATA = 9, 14, 13
_ATTR_TENSORS = 10
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_GRAPH, _GRAPHS = 5, 10  # AttributeProto.AttributeType
_EXTERNAL = 1  # TensorProto.DataLocation


class _Wire:
    def __init__(self, buf: Any, name: str) -> None:
        self.buf, self.name = buf, name

    def bad(self, what: str) -> CorruptDataError:
        return CorruptDataError(f"{self.name}: not a readable ONNX model ({what})")

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            if pos >= end or shift > 63:
                raise self.bad("a varint runs past its message")
            b = self.buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, pos
            shift += 7

    def fields(self, span: Span) -> Iterator[tuple[int, int, Any]]:
        """``(field, wire type, value)``: an int for varints, a span for lengths."""
        pos, end = span
        while pos < end:
            key, pos = self.varint(pos, end)
            field, wire = key >> 3, key & 7
            if wire == _VARINT:
                value, pos = self.varint(pos, end)
                yield field, wire, value
                continue
            if wire == _LEN:
                n, pos = self.varint(pos, end)
                value, pos = (pos, pos + n), pos + n
            elif wire in (_I64, _I32):
                value, pos = None, pos + (8 if wire == _I64 else 4)
            elif wire == _GROUP_START:  # (a proto2 group: skipped, as its fields are not ONNX's)
                value, pos = None, self.skip_group(pos, end, field)
            else:
                raise self.bad(f"wire type {wire}")
            if pos > end:
                raise self.bad("a field runs past its message")
            yield field, wire, value

    def skip_group(self, pos: int, end: int, field: int, depth: int = 0) -> int:
        """Past the end of a group begun before ``pos`` (groups nest; depth bounded)."""
        if depth > 64:
            raise self.bad("groups nested too deep")
        while pos < end:
            key, pos = self.varint(pos, end)
            inner, wire = key >> 3, key & 7
            if wire == _GROUP_END:
                if inner != field:
                    raise self.bad("a group ends with another's field")
                return pos
            if wire == _VARINT:
                pos = self.varint(pos, end)[1]
            elif wire == _LEN:
                n, pos = self.varint(pos, end)
                pos += n
            elif wire in (_I64, _I32):
                pos += 8 if wire == _I64 else 4
            elif wire == _GROUP_START:
                pos = self.skip_group(pos, end, inner, depth + 1)
            else:
                raise self.bad(f"wire type {wire}")
        raise self.bad("a group runs past its message")

    def text(self, span: Span) -> str:
        return bytes(self.buf[span[0] : span[1]]).decode("utf-8", "replace")

    def one(self, span: Span, field: int) -> list[Any]:
        return [v for f, w, v in self.fields(span) if f == field and w == _LEN]


def raw_data_spans(buf: Any, name: str = "model") -> list[tuple[int, int] | None]:
    """Each listed tensor's ``raw_data`` as ``(offset, bytes)`` in ``buf`` (the whole
    file), or ``None``; in the order of :meth:`OnnxSource._walk`."""
    wire = _Wire(buf, name)
    graphs = wire.one((0, len(buf)), _MODEL_GRAPH)
    out: list[tuple[int, int] | None] = []
    if len(graphs) == 1:
        _graph(wire, graphs[0], out)
    return out


def _graph(wire: _Wire, span: Span, out: list[tuple[int, int] | None]) -> None:
    nodes, inits = [], []
    for f, w, v in wire.fields(span):
        if w == _LEN and f == _GRAPH_NODE:
            nodes.append(v)
        elif w == _LEN and f == _GRAPH_INITIALIZER:
            inits.append(v)
    for init in inits:
        out.append(_raw(wire, init))
    for node in nodes:
        op = domain = ""
        attrs = []
        for f, w, v in wire.fields(node):
            if w == _LEN and f == _NODE_OP_TYPE:
                op = wire.text(v)
            elif w == _LEN and f == _NODE_DOMAIN:
                domain = wire.text(v)
            elif w == _LEN and f == _NODE_ATTRIBUTE:
                attrs.append(v)
        constant = op == "Constant" and domain in ("", "ai.onnx")
        for attr in attrs:
            names = [wire.text(v) for v in wire.one(attr, _ATTR_NAME)]
            if constant and names == ["value"]:
                tensors = wire.one(attr, _ATTR_T)
                out.append(_raw(wire, tensors[0]) if len(tensors) == 1 else None)
            elif constant:
                out.append(None)  # value_float(s) / value_int(s): typed fields
        for attr in attrs:
            kinds = [v for f, w, v in wire.fields(attr) if f == _ATTR_TYPE and w == _VARINT]
            if kinds == [_GRAPH]:
                for g in wire.one(attr, _ATTR_G)[:1]:
                    _graph(wire, g, out)
            elif kinds == [_GRAPHS]:
                for g in wire.one(attr, _ATTR_GRAPHS):
                    _graph(wire, g, out)


def external_locations(buf: Any, name: str = "model") -> set[str]:
    """The external data files a model's tensors name (``location``, as written: the
    caller normalises), by the wire walk alone: initializers and every node
    attribute's tensors, subgraphs included, as ``onnx.external_data_helper`` lists
    them, without parsing the model into objects (a model of millions of nodes)."""
    wire = _Wire(buf, name)
    out: set[str] = set()
    for graph in wire.one((0, len(buf)), _MODEL_GRAPH)[:1]:
        _locations(wire, graph, out, 0)
    return out


def _locations(wire: _Wire, span: Span, out: set[str], depth: int) -> None:
    if depth > 64:
        raise wire.bad("subgraphs nested too deep")
    for f, w, v in wire.fields(span):
        if w != _LEN:
            continue
        if f == _GRAPH_INITIALIZER:
            _location(wire, v, out)
        elif f == _GRAPH_NODE:
            for attr in wire.one(v, _NODE_ATTRIBUTE):
                for af, aw, av in wire.fields(attr):
                    if aw == _LEN and af in (_ATTR_T, _ATTR_TENSORS):
                        _location(wire, av, out)
                    elif aw == _LEN and af in (_ATTR_G, _ATTR_GRAPHS):
                        _locations(wire, av, out, depth + 1)


def _location(wire: _Wire, span: Span, out: set[str]) -> None:
    external, entries = False, []
    for f, w, v in wire.fields(span):
        if f == _TENSOR_DATA_LOCATION and w == _VARINT:
            external = v == _EXTERNAL
        elif f == _TENSOR_EXTERNAL_DATA and w == _LEN:
            entries.append(v)
    if not external:
        return
    location = ""
    for entry in entries:
        key = value = ""
        for f, w, v in wire.fields(entry):
            if w == _LEN and f == _ENTRY_KEY:
                key = wire.text(v)
            elif w == _LEN and f == _ENTRY_VALUE:
                value = wire.text(v)
        if key == "location":
            location = value
    out.add(location)


def _raw(wire: _Wire, span: Span) -> tuple[int, int] | None:
    raws, external = [], False
    for f, w, v in wire.fields(span):
        if f == _TENSOR_RAW_DATA and w == _LEN:
            raws.append(v)
        elif f == _TENSOR_DATA_LOCATION and w == _VARINT:
            external = v == _EXTERNAL
    if external or len(raws) != 1:
        return None
    start, end = raws[0]
    return start, end - start
