"""Where a DCP checkpoint is written (:mod:`nncodecs.integrations.dcp`): its target,
the hidden sibling a local directory is written under and renamed from, and what a
killed save left behind (removed by the next save, nothing else ever is)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from nncodecs.container import Reader, task_zip
from nncodecs.container import tasks as container_tasks
from nncodecs.outputs import is_container_dir, is_url

__all__ = ["begin_save", "is_zip", "remove_unfinished", "staging_of", "swap", "target_of"]


def target_of(checkpoint_id: Any, writing: bool = True) -> str:
    """A checkpoint id as a target: a path or URL; a zip, a local one (to read, any)."""
    target = os.fspath(checkpoint_id)
    if not isinstance(target, str) or not target:
        raise TypeError(f"a checkpoint id is a path or URL, got {checkpoint_id!r}")
    if target.startswith("file://"):  # (a local path, as fsspec means it)
        target = target.removeprefix("file://") or "/"
    if writing and is_url(target) and is_zip(target.rstrip("/")):
        raise ValueError(
            f"{target}: a zip is written as a local file (its parts joined and renamed into "
            "place); a URL takes a directory container, each rank writing its own objects"
        )
    return target.rstrip("/") if target not in ("/",) else target


def is_zip(target: str) -> bool:
    """A zip target (one file): its name ends in ``.zip``."""
    return target.endswith(".zip")


def _same_target(a: str, b: str) -> bool:
    if is_url(a) or is_url(b):
        return a.rstrip("/") == b.rstrip("/")
    return os.path.realpath(a) == os.path.realpath(b)


def staging_of(path: str) -> str:
    """Where the container is written: a hidden sibling of a local directory."""
    if is_url(path):
        return path
    local = Path(path)
    return str(local.parent / f".{local.name}.nncodecs-dcp")


def begin_save(
    path: str, overwrite: bool, reference: str | None, opts: dict[str, Any] | None
) -> str:
    """Begin a save at ``path`` (the coordinator, once): where the ranks write (the
    staging container, a zip's parts folder, or the URL itself), after the checks and
    the removal of what a killed save left there."""
    if reference is not None:  # (a reference that cannot be read: refused first)
        if _same_target(reference, path):
            raise ValueError(
                f"{path}: a checkpoint cannot be its own reference (it is replaced by the "
                "save that would be stored against it)"
            )
        Reader(reference, storage_options=opts).close()
    if is_zip(path):
        return str(task_zip.begin(path, overwrite))
    staging = staging_of(path)
    if is_url(path):
        if overwrite:
            raise ValueError(
                f"{path}: overwrite is for a local directory (a URL has no rename: a "
                "container there would be gone before the new one is committed)"
            )
        remove_unfinished(path, opts)
    else:
        local = Path(path)
        if (local.exists() or local.is_symlink()) and not overwrite:
            raise FileExistsError(f"{path}: exists (overwrite=True replaces it at the commit)")
        if local.exists() and not is_container_dir(local):
            raise FileExistsError(f"{path}: exists and is not a container: never replaced")
        remove_unfinished(staging, opts, staging=True)
        shutil.rmtree(local.parent / f".{local.name}.nncodecs-old", ignore_errors=True)
        local.parent.mkdir(parents=True, exist_ok=True)
    container_tasks.begin(staging, {}, opts)
    return staging


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
