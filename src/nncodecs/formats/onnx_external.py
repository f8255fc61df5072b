"""An ONNX model's external data files, restored byte for byte beside the model.

A model saved with external data (``onnx.save_model(..., save_as_external_data=True)``)
holds each large tensor's bytes in a file beside it (``location``, ``offset``,
``length`` in the tensor's ``external_data``). ``compress`` reads those tensors from
there (only files inside the model's directory) and records, per file, each tensor's
place and the bytes between them (:func:`external_records`, metadata
``source.onnx.external``); ``decompress`` to ``.onnx`` writes every such file beside the
restored model under its recorded name (:func:`restore_external`): the names are the
model's own (its graph refers to them). A container never names a file for you: every
name meets :func:`check_external_name` (``compress`` refuses a model whose names do
not: a relative path of plain parts, none starting with ``.``, so never ``.bashrc`` or
``.ssh/authorized_keys``), no link lies on its way, and no existing file is replaced
unless ``force`` and the model already at the output names it as its own external data
(a re-run). All are checked before any byte is written, written under temporary names,
checked against their recorded CRC32C, then renamed into place. A container written
before this rule that holds a dotted name restores only into a new, empty directory.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
from pathlib import Path, PurePosixPath
from typing import Any

from nncodecs.errors import CorruptDataError
from nncodecs.formats.digests import check_restored, file_digests
from nncodecs.formats.onnx_wire import external_locations
from nncodecs.formats.spliced import Place, record_gaps, splice, spliced_metadata
from nncodecs.outputs import atomic_output

__all__ = [
    "EXTERNAL",
    "check_external_name",
    "external_records",
    "owned_external",
    "restore_external",
]

EXTERNAL = "source.onnx.external"


def external_records(base: Path, places: dict[str, list[Place]]) -> str:
    """The records of each external file (``places``: by location, under ``base``)."""
    out = []
    for location, items in places.items():
        path = base / location
        meta = spliced_metadata(path, "x", items)
        out.append(
            {
                "file": location,
                "ranges": json.loads(meta["source.x.ranges"]),
                "gap_spans": json.loads(meta["source.x.gap_spans"]),
                "crc32c": file_digests(path)["crc32c"],
            }
        )
    return json.dumps(out)


def check_external_name(name: Any) -> str:
    """An external data file's name as the model states it, normalised (``./d.bin``
    -> ``d.bin``); ``ValueError`` saying why where it is not one nncodecs writes:
    a relative POSIX path of plain parts, no ``..``, no part starting with ``.``
    (``.bashrc``, ``.ssh/``: a dotfile is never model data), no backslash or NUL."""
    if not isinstance(name, str) or not name:
        raise ValueError("not a file name")
    if name.startswith("/") or "\\" in name or "\0" in name:
        raise ValueError("not a relative path of plain parts")
    parts = PurePosixPath(name).parts
    if ".." in parts:
        raise ValueError("it leads out of the model's directory ('..')")
    normal = posixpath.normpath(name)
    if normal in ("", ".") or any(p.startswith(".") for p in PurePosixPath(normal).parts):
        raise ValueError("a part of it starts with '.' (a hidden file, never model data)")
    return normal


class _NotHereError(ValueError):
    """A sound container's file that the output's folder cannot take (a dotted name
    into a folder that is not new and empty)."""


def _target(out: Path, name: Any, fresh: bool) -> Path:
    """Where an external file goes: ``name`` under the output's directory, never above,
    never through a link. A dotted name (a container written before the rule) only
    into a new, empty directory (``fresh``)."""
    try:
        normal = check_external_name(name)
    except ValueError as exc:
        dotted = isinstance(name, str) and "starts with '.'" in str(exc)
        if dotted and not fresh:  # (an older container, sound: the output's folder is not)
            raise _NotHereError(
                f"the container's ONNX external file {name!r} is a hidden file's name, which "
                f"nncodecs writes only into a new, empty directory: restore it there ({exc})"
            ) from None
        if not dotted:
            raise CorruptDataError(
                f"the container's ONNX external file name {name!r} is not one nncodecs "
                f"writes: {exc}"
            ) from None
        normal = posixpath.normpath(name)
    parts = PurePosixPath(normal).parts
    target = out.parent / Path(*parts)  # (inside it: plain parts; links: _no_link_on_the_way)
    if target == out or target.resolve() == out.resolve():
        raise CorruptDataError(f"external file {name!r} takes the model's own name")
    return target


def _no_link_on_the_way(root: Path, target: Path, name: str) -> None:
    """A link in the output's directory on the way to an external file (the user's
    folder, not the container's fault): refused, nothing written."""
    step = root
    for part in target.relative_to(root).parts:
        step = step / part
        if step.is_symlink():
            raise ValueError(
                f"external file {name!r}: {step} is a link, which nncodecs does not write "
                "through; nothing written"
            )
    inside = root.resolve()
    if inside != target.parent.resolve() and inside not in target.parent.resolve().parents:
        raise ValueError(f"external file {name!r} would be written outside {root}")


def owned_external(out: Path) -> set[str]:
    """The external data files the model already at ``out`` names as its own (a re-run
    may replace those, with ``force``); none where there is no readable model."""
    if not out.is_file() or out.is_symlink():
        return set()
    try:
        return _graph_locations(out)
    except (CorruptDataError, OSError):
        return set()


def _graph_locations(path: Path) -> set[str]:
    """The external data files a restored model's graph names (normalised), read by
    the wire walk alone (``onnx_wire.external_locations``): no onnx package needed,
    and a model of millions of nodes needs no more memory than its file."""
    import numpy as np

    if not path.stat().st_size:
        raise CorruptDataError(f"{path}: an empty file, not an ONNX model")
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    return {posixpath.normpath(x) for x in external_locations(memoryview(raw), str(path))}


def restore_external(
    r: Any,
    out: Path,
    model: Path,
    force: bool,
    inputs: tuple[Path, ...],
    fresh: bool = False,
    owned: set[str] | None = None,
) -> list[Path]:
    """Write the external data files of the ONNX model a container (``r``) holds, beside
    ``out`` (the restored model's path; ``model``: its restored bytes, not yet in place).
    The files must be exactly those the model's graph names (where the container records
    any: the check parses the model); every name is checked before any byte is written,
    all are written and checked before any is renamed into place; nothing is left
    behind on an error. ``fresh``: the output's directory was new or empty before the
    run; ``owned``: the names the model that was at ``out`` before the run gave its own
    external data (only those may be replaced, and only with ``force``). Returns the
    files written."""
    if EXTERNAL not in r.metadata:  # (no data files: no parse of the model, a second a model)
        return []
    try:
        records = json.loads(r.metadata[EXTERNAL])
        if not isinstance(records, list) or not all(isinstance(x, dict) for x in records):
            raise ValueError("a list of records expected")
        files = [(_target(out, x.get("file"), fresh), x) for x in records]
        if not all(isinstance(x.get("crc32c"), str) for _, x in files):
            raise ValueError("a file without its CRC32C")
        gaps = [record_gaps(r, x) for _, x in files]
    except _NotHereError:
        raise
    except (KeyError, ValueError, TypeError) as exc:
        raise CorruptDataError(
            f"the container's ONNX external records are damaged ({exc})"
        ) from None
    names = [posixpath.normpath(x["file"]) for _, x in files]
    if len(set(names)) != len(names) or any(b.startswith(a + "/") for a in names for b in names):
        raise CorruptDataError("the container's ONNX external records name a file twice")
    wanted = _graph_locations(model)
    if wanted != set(names):
        raise CorruptDataError(
            f"the model names the external data files {sorted(wanted)}, the container's "
            f"records {sorted(names)}"
        )
    for (target, _), name in zip(files, names, strict=True):
        _no_link_on_the_way(out.parent, target, name)
    owned = owned or set()
    for (target, _), name in zip(files, names, strict=True):
        if (target.exists() or target.is_symlink()) and not (force and name in owned):
            why = "; the model at the output does not name it as its own" if force else ""
            raise FileExistsError(f"{target}: exists (ONNX external data{why}); nothing written")
    with contextlib.ExitStack() as stack:
        for (target, record), kept in zip(files, gaps, strict=True):
            tmp = stack.enter_context(atomic_output(target, force, inputs=inputs))
            splice(r, tmp, record.get("ranges"), kept, "ONNX external")
            check_restored(tmp, {"crc32c": record.get("crc32c")}, target)
    return [target for target, _ in files]
