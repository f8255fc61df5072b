"""Rules for the paths nncodecs reads and writes: names taken from files, links out of
an input directory, and the names a container or a restored model file may take."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nncodecs.errors import CorruptDataError
from nncodecs.formats.detect import WRITE_FORMATS
from nncodecs.outputs import is_url

__all__ = [
    "MODEL_SUFFIXES",
    "READ_ONLY_SUFFIXES",
    "check_container_name",
    "check_model_file_name",
    "default_container",
    "input_root",
    "inside",
    "local_output",
    "plain_name",
]

#: Suffixes of model files: never the name of a container nncodecs writes.
MODEL_SUFFIXES = (*WRITE_FORMATS, ".onnx", ".pt", ".pth", ".bin", ".ckpt", ".zt")
#: Suffixes of model files nncodecs reads but does not write.
READ_ONLY_SUFFIXES = tuple(s for s in MODEL_SUFFIXES if s not in WRITE_FORMATS)


def plain_name(name: Any, what: str) -> str:
    """A file name taken from a file (a shard index, a container's records): one path
    component, relative, no ``..``; anything else is :class:`CorruptDataError`."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or Path(name).is_absolute()
    ):
        raise CorruptDataError(f"{what}: {name!r} is not a plain file name")
    return name


def inside(path: Path, root: Path) -> Path:
    """``path`` (under the input directory ``root``), refused when it is a link that leads
    outside ``root``, except into the ``blobs/`` of the same Hugging Face cache repository
    (``.../models--org--name/snapshots/REV/file -> ../../blobs/SHA``)."""
    real, real_root = path.resolve(), root.resolve()
    allowed = [real_root]
    if real_root.parent.name == "snapshots":
        allowed.append(real_root.parent.parent / "blobs")
    if not any(real == a or a in real.parents for a in allowed):
        raise ValueError(f"{path}: a link to {real}, outside the input directory {root}: refused")
    return path


def input_root(source: Path) -> Path:
    """What an input stands for on disk: a directory, or the directory an index file
    (``model.safetensors.index.json``) stands for, or the file itself. No output lies
    inside it."""
    if source.is_file() and source.name.endswith(".index.json"):
        return source.parent
    return source


def default_container(source: Path) -> Path:
    """The container ``compress`` writes when not told: ``NAME.zarr.zip`` beside the
    input (beside the folder an index file stands for, never inside it)."""
    root = input_root(source)
    if not root.name:  # (".": the folder the command runs in, by the name it was reached by)
        root = Path(os.path.abspath(root))
    return root.with_name(root.name + ".zarr.zip")


def local_output(target: Any) -> Path | None:
    """The local path of an output, ``None`` for a URL or a store object."""
    if isinstance(target, str | os.PathLike) and not is_url(str(target)):
        return Path(str(target).removeprefix("file://"))
    return None


def check_container_name(path: Path) -> None:
    """A container is never written under a model file's name (``-o m.safetensors`` would
    make a Zarr directory a user takes for a model file)."""
    if path.suffix.lower() in MODEL_SUFFIXES:
        kind = WRITE_FORMATS.get(path.suffix.lower())
        hint = (
            f"use `nncodecs convert` to write {kind}"
            if kind
            else f"nncodecs writes model files as {', '.join(WRITE_FORMATS)} only"
        )
        raise ValueError(f"{path}: a model file's name, not a container's ({hint})")


def check_model_file_name(path: Path) -> None:
    """A restored model file is never written under a container's name, nor under the
    suffix of a format nncodecs does not write (``-o y.onnx`` would hold safetensors)."""
    name = path.name.lower()
    if name.endswith((".zarr", ".zip")) or path.suffix.lower() in READ_ONLY_SUFFIXES:
        raise ValueError(
            f"{path}: not a name for a restored model file (nncodecs writes "
            f"{', '.join(WRITE_FORMATS)})"
        )
