"""Files kept beside the tensors (a model's config, its tokenizer): bytes, not tensors.

A snapshot directory holds more than weights; a container made from it keeps every other
file so that the directory comes back whole. Each kept file is a 1-D uint8 array under the
group ``_files`` (``_files/0``, ``_files/1``, ...: no tensor's node starts with ``_``, which
the name escaping escapes), encoded and checked as a tensor is, with the attribute
``{"nncodecs": {"file": name, ...}}``. The root's attributes map each name to its node
(``"files": {name: node}``), in the order they were added; a name is a relative path
with ``/`` between its parts (no empty, ``.`` or ``..`` part, no backslash, no NUL).
A Reader lists them apart from the tensors: ``Reader.files()``, ``Reader.read_file``.
Those under ``.nncodecs/`` (:data:`HIDDEN`) are nncodecs' own records, listed only on
request.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from nncodecs.errors import CorruptDataError
from nncodecs.store import zarr_nodes

__all__ = [
    "FILES_NODE",
    "HIDDEN",
    "check_file_name",
    "check_new_file",
    "check_pieces",
    "clashes",
    "kept_entries",
    "kept_key",
]

FILES_NODE = "_files"
#: Kept files under this folder are nncodecs' own (a source's bytes around its tensors:
#: ``Writer.add_hidden_file``), not the source's: ``Reader.files()`` lists them only when
#: asked, and ``Writer.add_file`` refuses the name.
HIDDEN = ".nncodecs/"
_NODE = re.compile(r"_files/[0-9]{1,9}")


def kept_key(name: str) -> tuple[str, str]:
    """A kept file's key among a Reader's members (a tuple: never a tensor's name)."""
    return ("file", name)


def check_file_name(name: Any, error: type[Exception] = ValueError) -> str:
    """``name`` if it is a kept file's name (see the module), else ``error``."""
    parts = name.split("/") if isinstance(name, str) else []
    if (
        not parts
        or any(p in ("", ".", "..") or len(p.encode("utf-8", "replace")) > 255 for p in parts)
        or "\\" in name
        or "\0" in name
        or len(name.encode("utf-8", "replace")) > 4096
    ):
        raise error(
            f"{name!r} is not a kept file's name (a relative path, / between parts of at "
            "most 255 bytes)"
        )
    return name


def kept_entries(
    store: Any, attrs: dict[str, Any], docs: dict[str, Any] | None, group: Any, key: str
) -> dict[tuple[str, str], tuple[dict[str, Any], Any, Any, str]]:
    """The kept files of a container, by :func:`kept_key`: (their attributes under
    ``key``, a function making their Zarr array, their document or ``None``, their node);
    from the consolidated documents ``docs``, else from the Zarr ``group``."""
    files = attrs.get("files", {})
    if not isinstance(files, dict):
        raise CorruptDataError("the record of its kept files is damaged")
    out = {}
    for name, node in files.items():
        check_file_name(name, CorruptDataError)
        if not (isinstance(node, str) and _NODE.fullmatch(node)):
            raise CorruptDataError(f"kept file {name!r}: its node {node!r} is not one")
        if docs is not None:
            doc = docs.get(node)
            if not isinstance(doc, dict) or doc.get("node_type") != "array":
                raise CorruptDataError(f"kept file {name!r}: no array at {node!r}")
            own = doc.get("attributes", {}).get(key)
            load = functools.partial(zarr_nodes.array_from_doc, store, node, doc)
        else:
            try:
                arr = group[node]
            except KeyError:
                raise CorruptDataError(f"kept file {name!r}: no array at {node!r}") from None
            own, doc, load = arr.attrs.get(key), None, lambda a=arr: a
        if not (isinstance(own, dict) and own.get("file") == name):
            raise CorruptDataError(f"kept file {name!r}: its array at {node!r} is another's")
        out[kept_key(name)] = (own, load, doc, node)
    _no_orphans(set(files.values()), docs, group)
    return out


def _no_orphans(recorded: set[Any], docs: dict[str, Any] | None, group: Any) -> None:
    """A kept file's array whose record is gone is a damaged container, not a file to
    drop: its record was removed (and the count edited with it, perhaps)."""
    if docs is not None:
        present = {k for k, d in docs.items() if _NODE.fullmatch(k) and isinstance(d, dict)}
    else:
        try:
            files = group[FILES_NODE]
        except KeyError:
            return
        present = {f"{FILES_NODE}/{k}" for k in files.array_keys()}
        present = {k for k in present if _NODE.fullmatch(k)}
    orphans = sorted(present - recorded)
    if orphans:
        raise CorruptDataError(
            f"kept file array {orphans[0]!r} has no record in the container's root "
            f"({len(orphans)} such): the record of its kept files is damaged"
        )


def check_pieces(pieces: Any) -> None:
    """Decode a kept file (its pieces, each checked as it is decoded) a window of chunks
    at a time, holding none of it: a kept file of gigabytes verifies in the memory a
    tensor of as many bytes takes."""
    for _ in pieces:
        pass


def clashes(name: str, names: Any) -> str | None:
    """A kept file among ``names`` that ``name`` could not be restored beside: one is the
    other's directory (``a`` and ``a/b``)."""
    for other in names:
        if other.startswith(name + "/") or name.startswith(other + "/"):
            return other
    return None


def check_new_file(name: Any, hidden: bool, names: Any) -> str:
    """A new kept file's name, checked: a valid relative path, hidden (under HIDDEN,
    nncodecs' own) or not as asked, and none of ``names`` nor beside one as its
    directory."""
    is_hidden = isinstance(name, str) and name.startswith(HIDDEN)
    if hidden and not is_hidden:
        raise ValueError(f"a hidden file's name starts with {HIDDEN}, got {name!r}")
    if is_hidden and not hidden:
        raise ValueError(f"kept file {name!r}: names under {HIDDEN} are nncodecs' own")
    if check_file_name(name) in names or clashes(name, names):
        raise ValueError(f"kept file {name!r}: already in the container, or as a directory")
    return name
