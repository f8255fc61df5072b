"""Reading an ONNX file's protobuf wire format directly: the structure only (field keys
and lengths), never the model as objects.

``onnx.load`` parses a whole model into objects (gigabytes for a model of millions of
nodes) and says nothing of where a tensor's ``raw_data`` sits in the file, which a
byte-identical restore needs. :class:`Wire` walks the fields of a message in place;
every length is checked against its enclosing message, so a malformed file raises
:class:`nncodecs.CorruptDataError`. A message is a list of spans: protobuf merges a
singular message field given more than once, which is parsing the concatenation of
its occurrences, so :meth:`Wire.merged` gathers them and :meth:`Wire.fields` walks
them in turn. :mod:`nncodecs.formats.onnx_graph` lists a model's tensors with it;
:func:`external_locations` names the external data files a model refers to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nncodecs.errors import CorruptDataError

__all__ = ["DEPTH", "LEN", "VARINT", "Message", "Span", "Wire", "external_locations"]

Span = tuple[int, int]  # (start, end) in the file
Message = list[Span]  # the occurrences of one message, merged in order
LEN, VARINT, _I64, _I32, _GROUP_START, _GROUP_END = 2, 0, 1, 5, 3, 4
DEPTH = 64  # subgraphs nested deeper are refused (onnx itself stops far earlier)
# field numbers (onnx.proto)
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_ATTRIBUTE = 5
_ATTR_T, _ATTR_G, _ATTR_TENSORS, _ATTR_GRAPHS = 5, 6, 10, 11
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 13, 14
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_EXTERNAL = 1  # TensorProto.DataLocation


class Wire:
    """The fields of the messages in ``buf`` (a whole file, mapped); ``name`` for errors."""

    def __init__(self, buf: Any, name: str) -> None:
        # (bytes, never NumPy's uint8 scalars: a mapped array indexes as those, and
        # their sums wrap around)
        self.buf, self.name = memoryview(buf).cast("B"), name
        self.budget: int | None = None  # (what a walk may still list, where it is bounded)

    def bad(self, what: str) -> CorruptDataError:
        return CorruptDataError(f"{self.name}: not a readable ONNX model ({what})")

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        buf = self.buf
        value = shift = 0
        while True:
            if pos >= end or shift > 63:
                raise self.bad("a varint runs past its message")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, pos
            shift += 7

    def fields(self, message: Message) -> Iterator[tuple[int, int, Any]]:
        """``(field, wire type, value)``: an int for varints, a span for lengths."""
        buf, varint = self.buf, self.varint
        for pos, end in message:
            while pos < end:
                key = buf[pos]  # (one-byte varints, the most, read here: a third faster)
                key, pos = (key, pos + 1) if key < 0x80 else varint(pos, end)
                field, wire = key >> 3, key & 7
                if field == 0:  # (as protobuf refuses it: zeros are not a message)
                    raise self.bad("field number 0")
                if wire == VARINT:
                    value, pos = varint(pos, end)
                    yield field, wire, value
                    continue
                if wire == LEN:
                    n = buf[pos] if pos < end else 0x80
                    n, pos = (n, pos + 1) if n < 0x80 else varint(pos, end)
                    value, pos = (pos, pos + n), pos + n
                elif wire in (_I64, _I32):
                    value, pos = None, pos + (8 if wire == _I64 else 4)
                elif wire == _GROUP_START:  # (a proto2 group: skipped, its fields are not ONNX's)
                    value, pos = None, self.skip_group(pos, end, field)
                else:
                    raise self.bad(f"wire type {wire}")
                if pos > end:
                    raise self.bad("a field runs past its message")
                yield field, wire, value

    def skip_group(self, pos: int, end: int, field: int, depth: int = 0) -> int:
        """Past the end of a group begun before ``pos`` (groups nest; depth bounded)."""
        if depth > DEPTH:
            raise self.bad("groups nested too deep")
        while pos < end:
            key, pos = self.varint(pos, end)
            inner, wire = key >> 3, key & 7
            if wire == _GROUP_END:
                if inner != field:
                    raise self.bad("a group ends with another's field")
                return pos
            if wire == VARINT:
                pos = self.varint(pos, end)[1]
            elif wire == LEN:
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

    def graph_fields(self, graph: Message, depth: int) -> Iterator[tuple[int, Span]]:
        """The length-delimited fields of a graph nested ``depth`` subgraphs deep (refused
        deeper than :data:`DEPTH`)."""
        if depth > DEPTH:
            raise self.bad("subgraphs nested too deep")
        for f, w, v in self.fields(graph):
            if w == LEN:
                yield f, v

    def merged(self, message: Message, field: int) -> Message:
        """The occurrences of a message field, as one message (protobuf's merge)."""
        return [v for f, w, v in self.fields(message) if f == field and w == LEN]

    def model(self) -> Message:
        """The model's graph (field 7 of the file's ModelProto, merged)."""
        return self.merged([(0, len(self.buf))], _MODEL_GRAPH)

    def tensor_location(self, tensor: Message) -> str | None:
        """A TensorProto's external data ``location`` (as written), or ``None`` where its
        values are in the file."""
        external, entries = False, []
        for f, w, v in self.fields(tensor):
            if f == _TENSOR_DATA_LOCATION and w == VARINT:
                external = v == _EXTERNAL
            elif f == _TENSOR_EXTERNAL_DATA and w == LEN:
                entries.append(v)
        return self.entries(entries).get("location", "") if external else None

    def entries(self, spans: list[Span]) -> dict[str, str]:
        """``StringStringEntryProto`` messages as a dict (a key given twice: the last)."""
        out = {}
        for span in spans:
            key = value = ""
            for f, w, v in self.fields([span]):
                if w == LEN and f == _ENTRY_KEY:
                    key = self.text(v)
                elif w == LEN and f == _ENTRY_VALUE:
                    value = self.text(v)
            out[key] = value
        return out


def external_locations(buf: Any, name: str = "model") -> set[str]:
    """The external data files a model's tensors name (``location``, as written: the
    caller normalises), by the wire walk alone: initializers and every node
    attribute's tensors, subgraphs included, as ``onnx.external_data_helper`` lists
    them, without parsing the model into objects (a model of millions of nodes)."""
    wire = Wire(buf, name)
    out: set[str] = set()
    _locations(wire, wire.model(), out, 0)
    return out


def _locations(wire: Wire, graph: Message, out: set[str], depth: int) -> None:
    for f, v in wire.graph_fields(graph, depth):
        if f == _GRAPH_INITIALIZER:
            _add(out, wire.tensor_location([v]))
        elif f == _GRAPH_NODE:
            for attr in wire.merged([v], _NODE_ATTRIBUTE):
                for af, aw, av in wire.fields([attr]):
                    if aw == LEN and af in (_ATTR_T, _ATTR_TENSORS):
                        _add(out, wire.tensor_location([av]))
                    elif aw == LEN and af in (_ATTR_G, _ATTR_GRAPHS):
                        _locations(wire, [av], out, depth + 1)


def _add(out: set[str], location: str | None) -> None:
    if location is not None:
        out.add(location)
