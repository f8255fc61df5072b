"""Where a DCP checkpoint is written (:mod:`nncodecs.integrations.dcp`): its target,
the hidden sibling a local directory is written under and renamed from, and what a
killed save left behind (removed by the next save, nothing else ever is)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from nncodecs.container import tasks as container_tasks
from nncodecs.outputs import is_url

__all__ = ["remove_unfinished", "swap", "target_of"]


def target_of(checkpoint_id: Any, writing: bool = True) -> str:
    """A checkpoint id as a target: a path or URL; a zip only to read (``writing=False``)."""
    target = os.fspath(checkpoint_id)
    if not isinstance(target, str) or not target:
        raise TypeError(f"a checkpoint id is a path or URL, got {checkpoint_id!r}")
    if writing and target.rstrip("/").endswith(".zip"):
        raise ValueError(
            f"{target}: a DCP checkpoint is written as a directory or URL container, each "
            "rank writing its own objects; a zip is written in one piece (`nncodecs "
            "convert DIR -o NAME.zarr.zip` makes one afterwards, which ContainerReader reads)"
        )
    return target.rstrip("/") if target not in ("/",) else target


def remove_unfinished(target: str, opts: dict[str, Any] | None, staging: bool = False) -> None:
    """Remove what a killed save left at ``target``: a container begun by tasks and
    never committed, or (``staging``: the hidden name only a save writes) one committed
    and not yet renamed into place. Nothing else is ever removed."""
    try:
        container_tasks.check_begun(target, opts)
    except ValueError as exc:
        if not (staging and "committed already" in str(exc)):
            return  # (nothing there, or not an unfinished container)
    if is_url(target):
        import fsspec

        fs, root = fsspec.core.url_to_fs(target, **(opts or {}))
        fs.rm(root, recursive=True)
    else:
        shutil.rmtree(target)


def swap(staging: Path, path: Path) -> None:
    """The committed container into place: what was at ``path`` moved aside first, then
    removed once the new one is there."""
    old = path.parent / f".{path.name}.nncodecs-old"
    if path.exists():
        path.rename(old)
    staging.rename(path)
    shutil.rmtree(old, ignore_errors=True)
