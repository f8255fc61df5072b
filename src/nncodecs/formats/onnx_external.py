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

import contextlib
import json
import posixpath
from pathlib import Path, PurePosixPath
from typing import Any

from nncodecs.errors import CorruptDataError
from nncodecs.formats.digests import check_restored, file_digests
from nncodecs.formats.spliced import Place, record_gaps, splice, spliced_metadata
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


def _graph_locations(path: Path) -> set[str] | None:
    """The external data files a restored model's graph names (normalised), read with
    the onnx package; ``None`` where it is not installed."""
    try:
        import onnx
        from onnx import external_data_helper
    except ImportError:
        return None
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # (protobuf's own errors)
        raise CorruptDataError(f"the restored ONNX model does not parse ({exc})") from None
    return {
        posixpath.normpath({e.key: e.value for e in t.external_data}.get("location", ""))
        for t in external_data_helper._get_all_tensors(model)
        if external_data_helper.uses_external_data(t)
    }


def restore_external(r: Any, out: Path, model: Path, force: bool, inputs: tuple[Path, ...]) -> None:
    """Write the external data files of the ONNX model a container (``r``) holds, beside
    ``out`` (the restored model's path; ``model``: its restored bytes, not yet in place).
    The files must be exactly those the model's graph names (where the container records
    any: the check parses the model); all are written and checked before any is renamed
    into place; nothing is left behind on an error."""
    if EXTERNAL not in r.metadata:  # (no data files: no parse of the model, a second a model)
        return
    try:
        records = json.loads(r.metadata[EXTERNAL])
        if not isinstance(records, list) or not all(isinstance(x, dict) for x in records):
            raise ValueError("a list of records expected")
        files = [(_target(out, x.get("file")), x) for x in records]
        if not all(isinstance(x.get("crc32c"), str) for _, x in files):
            raise ValueError("a file without its CRC32C")
        gaps = [record_gaps(r, x) for _, x in files]
    except (KeyError, ValueError, TypeError) as exc:
        raise CorruptDataError(
            f"the container's ONNX external records are damaged ({exc})"
        ) from None
    names = [posixpath.normpath(x["file"]) for _, x in files]
    if len(set(names)) != len(names) or any(b.startswith(a + "/") for a in names for b in names):
        raise CorruptDataError("the container's ONNX external records name a file twice")
    wanted = _graph_locations(model)
    if wanted is None and files:
        raise ValueError("restoring an ONNX model's external data needs the onnx package")
    if wanted is not None and wanted != set(names):
        raise CorruptDataError(
            f"the model names the external data files {sorted(wanted)}, the container's "
            f"records {sorted(names)}"
        )
    with contextlib.ExitStack() as stack:
        for (target, record), kept in zip(files, gaps, strict=True):
            tmp = stack.enter_context(atomic_output(target, force, inputs=inputs))
            splice(r, tmp, record.get("ranges"), kept, "ONNX external")
            check_restored(tmp, {"crc32c": record.get("crc32c")}, target)
