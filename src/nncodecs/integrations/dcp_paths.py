"""Where a DCP checkpoint is written (:mod:`nncodecs.integrations.dcp`): its target,
the hidden sibling a local directory is written under and renamed from, and what a
killed save left behind (removed by the next save, nothing else ever is)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from nncodecs.container import task_zip
from nncodecs.container import tasks as container_tasks
from nncodecs.container.series import reference_chain
from nncodecs.outputs import OutputLock, foreign_entries, is_container_dir, is_url

__all__ = ["begin_save", "is_zip", "remove_unfinished", "staging_of", "swap", "target_of"]


def target_of(checkpoint_id: Any, writing: bool = True) -> str:
    """A checkpoint id as a target: a path or URL; a zip, a local one (to read, any)."""
    target = os.fspath(checkpoint_id)
    if not isinstance(target, str) or not target:
        raise TypeError(f"a checkpoint id is a path or URL, got {checkpoint_id!r}")
    for scheme in ("file://", "local://"):  # (a local path, as fsspec means it)
        if target.startswith(scheme):
            target = target.removeprefix(scheme) or "/"
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
        reference = target_of(reference, writing=False)
        if _same_target(reference, path):
            raise ValueError(
                f"{path}: a checkpoint cannot be its own reference (it is replaced by the "
                "save that would be stored against it)"
            )
        for there in reference_chain(reference, opts):  # (opens and checks each)
            if _same_target(there, path):
                raise ValueError(
                    f"{path}: the reference {reference} is stored against it (through "
                    f"{there}): replacing it would leave both unreadable"
                )
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
        with OutputLock(local):  # (a Writer appending to it: refused, naming its pid)
            _settle_old(local)
            _check_directory(local, overwrite)
            remove_unfinished(staging, opts, staging=True)
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


def swap(staging: Path, path: Path, overwrite: bool) -> None:
    """The committed container into place, under the target's lock: what was at ``path``
    moved aside first, then removed once the new one is there."""
    old = path.parent / f".{path.name}.nncodecs-old"
    with OutputLock(path):
        _check_directory(path, overwrite)  # (again: what appeared since the save began)
        if path.exists():
            path.rename(old)
        staging.rename(path)
        shutil.rmtree(old, ignore_errors=True)


def _check_directory(local: Path, overwrite: bool) -> None:
    """A directory target is replaced only with ``overwrite``, and only a container
    holding nothing but its own (never a link, a file, or a folder of other things)."""
    if not (local.exists() or local.is_symlink()):
        return
    if not overwrite:
        raise FileExistsError(f"{local}: exists (overwrite=True replaces it at the commit)")
    if not is_container_dir(local):
        raise FileExistsError(f"{local}: exists and is not a container: never replaced")
    foreign = foreign_entries(local)
    if foreign:
        raise FileExistsError(
            f"{local}: holds {', '.join(foreign)}, which the container does not: never replaced"
        )


def _settle_old(local: Path) -> None:
    """What a save killed between its two renames left: the previous container, moved
    aside, is put back where nothing took its place, and removed where the new one did;
    a folder of that name that is no container is never touched."""
    old = local.parent / f".{local.name}.nncodecs-old"
    if not is_container_dir(old):
        if old.exists() or old.is_symlink():
            raise FileExistsError(f"{old}: exists and is not a container: never removed")
        return
    if local.exists() or local.is_symlink():
        shutil.rmtree(old)
    else:
        old.rename(local)
