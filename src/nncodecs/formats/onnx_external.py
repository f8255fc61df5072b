"""An ONNX model's external data files, restored byte for byte beside the model.

A model saved with external data (``onnx.save_model(..., save_as_external_data=True)``)
holds each large tensor's bytes in a file beside it (``location``, ``offset``,
``length`` in the tensor's ``external_data``). ``compress`` reads those tensors from
there (only files inside the model's directory) and records, per file, each tensor's
place and the bytes between them (:func:`external_records`, metadata
``source.onnx.external``); ``decompress`` to ``.onnx`` writes every such file beside the
restored model under its recorded name (:func:`restore_external`): the names are the
model's own (its graph refers to them), each checked to be a relative path that stays
in the output's directory, each refused where a file exists (unless ``force``), written
under a temporary name, checked against its recorded CRC32C, then renamed into place.
"""

from __future__ import annotations

import base64
import contextlib
import json
from pathlib import Path, PurePosixPath
from typing import Any

from nncodecs.errors import CorruptDataError
from nncodecs.formats.digests import check_restored, file_digests
from nncodecs.formats.spliced import Place, splice, spliced_metadata
from nncodecs.outputs import atomic_output

__all__ = ["EXTERNAL", "external_records", "restore_external"]

EXTERNAL = "source.onnx.external"


def external_records(base: Path, places: dict[str, list[Place]]) -> str:
    """The records of each external file (``places``: by location, under ``base``)."""
    out = []
    for location, items in places.items():
        path = base / location
        meta = spliced_metadata(path, "x", items)
        out.append({
            "file": location,
            "ranges": json.loads(meta["source.x.ranges"]),
            "gaps": json.loads(meta["source.x.gaps"]),
            "crc32c": file_digests(path)["crc32c"],
        })  # fmt: skip
    return json.dumps(out)


def _target(out: Path, name: Any) -> Path:
    """Where an external file goes: ``name`` under the output's directory, never above."""
    parts = PurePosixPath(name).parts if isinstance(name, str) else ()
    if (
        not parts
        or name.startswith("/")
        or "\\" in name
        or "\0" in name
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise CorruptDataError(f"the container's ONNX external file name {name!r} is not one")
    target = out.parent / Path(*parts)
    root = out.parent.resolve()
    if root not in target.parent.resolve().parents and target.parent.resolve() != root:
        raise CorruptDataError(f"external file {name!r} would be written outside {out.parent}")
    if target.resolve() == out.resolve():
        raise CorruptDataError(f"external file {name!r} takes the model's own name")
    return target


def restore_external(r: Any, out: Path, force: bool, inputs: tuple[Path, ...]) -> list[Path]:
    """Write the external data files of the ONNX model a container (``r``) holds, beside
    ``out`` (the restored model's path); returns their paths. All are written and checked
    before any is renamed into place; nothing is left behind on an error."""
    try:
        records = json.loads(r.metadata[EXTERNAL])
        if not isinstance(records, list) or not all(isinstance(x, dict) for x in records):
            raise ValueError("a list of records expected")
        files = [(_target(out, x.get("file")), x) for x in records]
        if not all(isinstance(x.get("crc32c"), str) for _, x in files):
            raise ValueError("a file without its CRC32C")
        gaps = [[base64.b64decode(g) for g in x.get("gaps", [])] for _, x in files]
    except (ValueError, TypeError) as exc:
        raise CorruptDataError(
            f"the container's ONNX external records are damaged ({exc})"
        ) from None
    if len({t.resolve() for t, _ in files}) != len(files):
        raise CorruptDataError("the container's ONNX external records name a file twice")
    with contextlib.ExitStack() as stack:
        for (target, record), kept in zip(files, gaps, strict=True):
            tmp = stack.enter_context(atomic_output(target, force, inputs=inputs))
            splice(r, tmp, record.get("ranges"), kept, "ONNX external")
            check_restored(tmp, {"crc32c": record.get("crc32c")}, target)
    return [t for t, _ in files]
