"""An ONNX model's tensors, listed by the wire walk alone (:mod:`nncodecs.formats.onnx_wire`):
what :class:`nncodecs.formats.onnx.OnnxSource` stores, in the order it lists them.

Listed are the initializers of the main graph and of every subgraph (``If`` / ``Loop``
bodies), then, node by node, each ``Constant`` node's value and each subgraph's own.
A subgraph's names are its own (two branches of an ``If`` may both name a ``t``): its
tensors are listed as ``node.attribute/name`` (the node's name where it is one of a
kind in its graph, else ``<op_type>_<index>``). A ``Constant``'s value that takes
under :data:`SMALL_CONSTANT` bytes in the file (a shape, a scalar: the graph's own
program, exported models hold thousands) is not listed unless ``small``: it stays in
the graph's bytes, which the container keeps verbatim, so a model of millions of
such nodes lists in the memory of its few real tensors. A value held in external data
is always listed. Nothing here decodes values: each :class:`WireTensor` says where
they are.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from nncodecs.formats.onnx_wire import LEN, VARINT, Message, Span, Wire

__all__ = ["SMALL_CONSTANT", "WireTensor", "graph_tensors"]

#: A Constant node's value attribute under this many bytes in the file stays in the graph.
SMALL_CONSTANT = 1024

# field numbers (onnx.proto)
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_SPARSE = 1, 5, 15
_NODE_OUTPUT, _NODE_NAME, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 2, 3, 4, 5, 7
_ATTR_NAME, _ATTR_T, _ATTR_G, _ATTR_GRAPHS, _ATTR_TYPE = 1, 5, 6, 11, 20
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_NAME, _TENSOR_RAW = 1, 2, 8, 9
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 13, 14
_GRAPH, _GRAPHS = 5, 10  # AttributeProto.AttributeType
_EXTERNAL = 1  # TensorProto.DataLocation
_LOCATION_KEY = _TENSOR_DATA_LOCATION << 3 | VARINT  # (its first byte, however written)
#: A Constant's typed attributes (their values are read by the onnx package).
TYPED_ATTRIBUTES = ("value_float", "value_int", "value_floats", "value_ints")


@dataclass
class WireTensor:
    """One listed tensor: its name and where its values are. ``kind``: ``"tensor"`` (a
    TensorProto: ``data_type``, ``dims``, and ``raw`` (offset, bytes) in the file, or
    ``external`` entries, or neither: typed fields) or a Constant's other attribute
    (``"value_floats"``, ...: typed values); ``message``: its spans, for a decoder."""

    name: str
    kind: str
    message: Message
    data_type: int = 0
    dims: tuple[int, ...] = ()
    raw: tuple[int, int] | None = None
    external: dict[str, str] | None = None
    tensor_name: str = field(default="", repr=False)


def graph_tensors(
    buf: Any, name: str = "model", small: bool = False, limit: int | None = None
) -> list[WireTensor]:
    """The tensors of the ONNX model in ``buf`` (the whole file), in listing order; a
    malformed file raises :class:`nncodecs.CorruptDataError`, a tensor nncodecs cannot
    list (a sparse initializer, a Constant of strings) ``TypeError``. ``small``: the
    small Constants too, and ``OverflowError`` once more than ``limit`` of them are."""
    wire = Wire(buf, name)
    wire.budget = limit
    out: list[WireTensor] = []
    _graph(wire, wire.model(), "", out, small, 0)
    return out


def tensor(wire: Wire, name: str, message: Message) -> WireTensor:
    """A TensorProto's header, read from its fields (protobuf's rules: a scalar field
    given twice counts once, its last)."""
    t = WireTensor(name, "tensor", message)
    dims: list[int] = []
    external, entries = False, []
    for f, w, v in wire.fields(message):
        if f == _TENSOR_DIMS:
            if w == VARINT:
                dims.append(v)
            elif w == LEN:  # (packed)
                pos, end = v
                while pos < end:
                    d, pos = wire.varint(pos, end)
                    dims.append(d)
        elif f == _TENSOR_DATA_TYPE and w == VARINT:
            t.data_type = v
        elif f == _TENSOR_RAW and w == LEN:
            t.raw = (v[0], v[1] - v[0])
        elif f == _TENSOR_DATA_LOCATION and w == VARINT:
            external = v == _EXTERNAL
        elif f == _TENSOR_EXTERNAL_DATA and w == LEN:
            entries.append(v)
        elif f == _TENSOR_NAME and w == LEN:
            t.tensor_name = wire.text(v)
    # (int64 dims as varints: a negative one reads as 2**64 - n, refused where used)
    t.dims = tuple(d - (1 << 64) if d >= 1 << 63 else d for d in dims)
    if external:
        t.external, t.raw = wire.entries(entries), None
    return t


def _graph(
    wire: Wire, graph: Message, scope: str, out: list[WireTensor], small: bool, depth: int
) -> None:
    for f, v in wire.graph_fields(graph, depth):
        if f == _GRAPH_INITIALIZER:
            init = tensor(wire, "", [v])
            init.name = scope + init.tensor_name
            out.append(init)
        elif f == _GRAPH_SPARSE:
            raise TypeError(
                f"{wire.name}: a sparse initializer cannot be stored yet; nothing was written"
            )
    # Node by node, each Constant's value and each subgraph's tensors. A subgraph's scope
    # needs to know whether its node's name is one of a kind in the graph: the listing
    # keeps its order in ``later`` (few entries: listed Constants, nodes with subgraphs)
    # and is made once every node's name is counted.
    names: Counter[bytes] = Counter()
    later: list[WireTensor | _Subgraphs] = []
    nodes = (v for f, w, v in wire.fields(graph) if f == _GRAPH_NODE and w == LEN)
    for i, node in enumerate(nodes):
        _node(wire, node, i, scope, names, later, small)
    for item in later:
        if isinstance(item, WireTensor):
            out.append(item)
            continue
        unique = item.node_name and names[item.node_name] == 1
        node_name = item.node_name.decode("utf-8", "replace")
        where = f"{scope}{node_name if unique else f'{item.op}_{item.index}'}"
        for attr in item.attributes:
            _subgraphs(wire, attr, where, out, small, depth)


@dataclass
class _Subgraphs:
    """A node holding subgraphs, walked once its graph's node names are counted."""

    index: int
    op: str
    node_name: bytes
    attributes: list[Span]


def _node(
    wire: Wire,
    node: Span,
    i: int,
    scope: str,
    names: Counter[bytes],
    later: list[WireTensor | _Subgraphs],
    small: bool,
) -> None:
    op = domain = ""
    node_name, output = b"", None
    attrs = []
    buf = wire.buf
    for f, w, v in wire.fields([node]):
        if w != LEN:
            continue
        if f == _NODE_ATTRIBUTE:
            attrs.append(v)
        elif f == _NODE_OP_TYPE:
            op = wire.text(v)
        elif f == _NODE_NAME:
            node_name = bytes(buf[v[0] : v[1]])
        elif f == _NODE_OUTPUT and output is None:
            output = v
        elif f == _NODE_DOMAIN:
            domain = wire.text(v)
    names[node_name] += 1
    if op == "Constant" and domain in ("", "ai.onnx"):
        name = scope + (wire.text(output) if output else node_name.decode("utf-8", "replace"))
        for attr in attrs:
            _constant(wire, attr, name, later, small)
    subgraphs = [attr for attr in attrs if _has_graph(wire, attr)]
    if subgraphs:
        later.append(_Subgraphs(i, op, node_name, subgraphs))


def _has_graph(wire: Wire, attr: Span) -> bool:
    return any(w == LEN and f in (_ATTR_G, _ATTR_GRAPHS) for f, w, _ in wire.fields([attr]))


def _constant(
    wire: Wire, attr: Span, name: str, out: list[WireTensor | _Subgraphs], small: bool
) -> None:
    is_small = attr[1] - attr[0] < SMALL_CONSTANT
    if is_small and not small:
        held = bytes(wire.buf[attr[0] : attr[1]])
        if _LOCATION_KEY not in held and _LOCATION_KEY | 0x80 not in held:
            return  # (no data_location key, even written long: not external, stays in the graph)
    attr_name, tensors = "", []
    for f, w, v in wire.fields([attr]):
        if f == _ATTR_NAME and w == LEN:
            attr_name = wire.text(v)
        elif f == _ATTR_T and w == LEN:
            tensors.append(v)
    if small and is_small and wire.budget is not None:
        wire.budget -= 1
        if wire.budget < 0:
            raise OverflowError("more small Constants than the limit")
    if attr_name == "value":
        t = tensor(wire, name, tensors)
        if small or not is_small or t.external is not None:
            out.append(t)
    elif small or not is_small:
        if attr_name not in TYPED_ATTRIBUTES:
            raise TypeError(
                f"{wire.name}: Constant {name!r} holds a {attr_name}, which nncodecs "
                "cannot store yet; nothing was written"
            )
        out.append(WireTensor(name, attr_name, [attr]))


def _subgraphs(
    wire: Wire, attr: Span, where: str, out: list[WireTensor], small: bool, depth: int
) -> None:
    attr_name, kind, one, many = "", None, [], []
    for f, w, v in wire.fields([attr]):
        if f == _ATTR_NAME and w == LEN:
            attr_name = wire.text(v)
        elif f == _ATTR_TYPE and w == VARINT:
            kind = v
        elif f == _ATTR_G and w == LEN:
            one.append(v)
        elif f == _ATTR_GRAPHS and w == LEN:
            many.append(v)
    if kind == _GRAPH and one:
        _graph(wire, one, f"{where}.{attr_name}/", out, small, depth + 1)
    elif kind == _GRAPHS:
        for k, g in enumerate(many):
            _graph(wire, [g], f"{where}.{attr_name}.{k}/", out, small, depth + 1)
