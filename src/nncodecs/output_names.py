"""The names nncodecs writes in and beside its outputs, and what in a directory is its own.

Below :mod:`nncodecs.outputs` (which decides what may be replaced): a container
directory's own entries (Zarr documents of its nodes, chunk keys of its arrays) and
nncodecs' own temporary and lock names. Knows paths and JSON, not tensors.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = [
    "CONTAINER_FORMAT",
    "foreign_entries",
    "is_container_dir",
    "is_container_zip",
    "own_name",
]

#: The ``format`` attribute of a container's root group (nncodecs.container.layout.FORMAT).
CONTAINER_FORMAT = "nncodecs-container"

# A root zarr.json holds the consolidated metadata of every tensor: large for big models.
_META_CAP = 1 << 28

#: nncodecs' own names inside or beside a container: a writer's temporary, a replace's
#: ``.old`` and a lock (the module's docstring).
_OWN = re.compile(r"^\..+\.nncodecs(?:-\d+\.(?:tmp|old)|\.lock)$")


def own_name(name: str) -> bool:
    """Whether a file name is one nncodecs itself creates beside an output (a
    temporary or a lock): never a user's file, never taken in as a kept file."""
    return _OWN.match(name) is not None


def _node_type(folder: Path) -> Any:
    """The ``node_type`` of a folder's ``zarr.json`` (``None``: no readable document)."""
    meta = folder / "zarr.json"
    if meta.is_symlink() or not meta.is_file():
        return None
    try:
        with meta.open("rb") as f:
            doc = json.loads(f.read(_META_CAP))
    except (OSError, ValueError):
        return None
    return doc.get("node_type") if isinstance(doc, dict) else None


def foreign_entries(path: Path, limit: int = 5) -> list[str]:
    """What a container directory holds that is not the container's (at most ``limit``
    entries, relative): anything but the Zarr documents of its nodes, the chunk keys of
    its arrays (``c/`` and digits) and nncodecs' own temporary and lock names. A
    ``--force`` replaces a directory only when this is empty: a user's file or a
    ``.git`` there is named in the refusal, never deleted."""
    found: list[str] = []

    def chunks(folder: Path, rel: str) -> None:
        for entry in sorted(folder.iterdir()):
            name = f"{rel}{entry.name}"
            if len(found) >= limit or _OWN.match(entry.name):
                continue
            if not entry.name.isdigit() or entry.is_symlink():
                found.append(name)
            elif entry.is_dir():
                chunks(entry, name + "/")

    def walk(folder: Path, rel: str, kind: Any) -> None:
        for entry in sorted(folder.iterdir()):
            name = f"{rel}{entry.name}"
            if len(found) >= limit or entry.name == "zarr.json" or _OWN.match(entry.name):
                continue
            if entry.is_symlink():
                found.append(name)
            elif kind == "array" and entry.name == "c":  # (a 0-d array's one chunk: a file)
                if entry.is_dir():
                    chunks(entry, name + "/")
                elif not entry.is_file():
                    found.append(name)
            elif not entry.is_dir():
                found.append(name)
            elif kind == "group" and _node_type(entry) in ("group", "array"):
                walk(entry, name + "/", _node_type(entry))
            else:
                found.append(name + "/")

    walk(path, "", "group")
    return found


def is_container_dir(path: Path) -> bool:
    """Whether ``path`` is a directory holding an nncodecs container (its root ``zarr.json``
    says so): the only kind of directory nncodecs ever deletes, and only when told to."""
    meta = path / "zarr.json"
    if path.is_symlink() or not path.is_dir() or not meta.is_file() or meta.is_symlink():
        return False
    try:
        with meta.open("rb") as f:
            doc = json.loads(f.read(_META_CAP))
        return doc.get("attributes", {}).get("nncodecs", {}).get("format") == CONTAINER_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def is_container_zip(path: Path) -> bool:
    """Whether ``path`` is a zip file holding an nncodecs container (its root ``zarr.json``
    says so): the only kind of file a DCP save or a zip of tasks replaces, when told to."""
    import zipfile
    import zlib

    if path.is_symlink() or not path.is_file():
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo("zarr.json")
            if info.file_size > _META_CAP or info.flag_bits & 0x1:  # (too big; encrypted)
                return False
            doc = json.loads(zf.read(info))
        return doc.get("attributes", {}).get("nncodecs", {}).get("format") == CONTAINER_FORMAT
    except (OSError, ValueError, AttributeError, KeyError, EOFError, zlib.error,
            zipfile.BadZipFile, NotImplementedError):  # fmt: skip # (what a damaged zip raises)
        return False
