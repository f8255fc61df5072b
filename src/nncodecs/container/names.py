r"""Reversible escaping of tensor names into Zarr node names.

Zarr v3 node names may not contain ``/``, may not be ``.`` or ``..``, may not
be empty and may not start with ``__``; nor may a node take the name of a
metadata document Zarr reads or skips in a group's listing: ``zarr.json``
(v3) and ``.zarray``, ``.zattrs``, ``.zgroup``, ``.zmetadata`` (v2, escaped
by their leading dot). Tensor names (``encoder.layer.0.weight``, GGUF's
``blk.0.attn_q.weight``) almost always pass unchanged; the rest are
percent-escaped, and ``%`` itself is escaped so that the mapping is one to one.
A backslash is escaped too: Zarr reads it as ``/`` in a path, so a node
holding one was not addressable through Zarr (a slice read fill values).
Escapes are only ever added: every name escapes as it always has, but
``zarr.json`` (which no Writer could store before) and names with a
backslash (:func:`legacy_escape` gives their node names of before).

>>> escape("encoder.layer.0.weight")
'encoder.layer.0.weight'
>>> escape("model/layers/0"), unescape(escape("model/layers/0"))
('model%2Flayers%2F0', 'model/layers/0')
>>> escape("__init__"), escape(".."), escape("")
('%5F_init__', '%2E.', '%00')
>>> escape("zarr.json"), escape(".zarray"), unescape(escape("zarr.json"))
('zarr%2Ejson', '%2Ezarray', 'zarr.json')
>>> escape("a\\b"), unescape(escape("a\\b")) == "a\\b", legacy_escape("a\\b")
('a%5Cb', True, 'a\\b')
"""

from __future__ import annotations

__all__ = ["check_tensor_name", "escape", "legacy_escape", "unescape"]


def check_tensor_name(name: object) -> str:
    """``name`` if a Writer can store it: a str, valid Unicode, whose node name holds no
    NUL and is at most 255 bytes (a file name); else ``TypeError`` / ``ValueError``
    (refused when added, not at ``close()``, where it would abandon the container)."""
    if not isinstance(name, str):
        raise TypeError(f"a tensor name must be a str, got {type(name).__name__}")
    try:
        node = escape(name).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"tensor name {name!r} is not valid Unicode text") from None
    if b"\0" in node:
        raise ValueError(f"tensor name {name[:60]!r}: a NUL character cannot be stored")
    if len(node) > 255:
        raise ValueError(
            f"tensor name {name[:60]!r}... cannot be stored: {len(node)} bytes once escaped "
            "for Zarr, where a node name (a file name) holds at most 255"
        )
    return name


def escape(name: str) -> str:
    """The Zarr node name for a tensor name (``unescape`` inverts it)."""
    return legacy_escape(name).replace("\\", "%5C")


def legacy_escape(name: str) -> str:
    """The node name nncodecs gave a tensor name before backslashes were escaped."""
    if not isinstance(name, str):
        raise TypeError(f"a tensor name must be a str, got {type(name).__name__}")
    if name == "":
        return "%00"
    out = name.replace("%", "%25").replace("/", "%2F")
    if out.startswith("_"):
        out = "%5F" + out[1:]
    if out.startswith("."):  # "." and ".." (and, harmlessly, any leading dot)
        out = "%2E" + out[1:]
    if out == "zarr.json":  # a node there would be the group's own metadata document
        out = "zarr%2Ejson"
    return out


def unescape(node: str) -> str:
    """The tensor name a Zarr node name stands for."""
    if node == "%00":
        return ""
    out = []
    i = 0
    while i < len(node):
        if node[i] == "%" and node[i + 1 : i + 3] in _CODES:
            out.append(_CODES[node[i + 1 : i + 3]])
            i += 3
        else:
            out.append(node[i])
            i += 1
    return "".join(out)


_CODES = {"25": "%", "2F": "/", "5F": "_", "2E": ".", "5C": "\\"}
