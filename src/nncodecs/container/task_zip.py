"""A zip container written by many tasks: the task API (:mod:`nncodecs.container.tasks`)
for a target that is one file.

No two processes can write one zip at once, so each writes a part of its own, and
the commit joins them:

1. :func:`begin`, once, first: a folder beside the target (``.<name>.nncodecs-parts``,
   begun as :func:`nncodecs.container.tasks.begin` begins a container) that holds
   the parts until the commit.
2. Each process opens a :class:`Part` in that folder, adds the objects its tasks
   encode (:func:`nncodecs.container.tasks.encode_rows`) and closes it: its
   :class:`PartRecord` (the file's name, its entries and size) goes to the commit
   with the tasks' records.
3. :func:`commit`, once, last: the records checked as
   :func:`nncodecs.container.tasks.commit` checks them, the parts joined into one zip
   (the first renamed, the others copied after it, in the kernel where it can), the
   tensors' documents and the root document added, the central directory written,
   and the zip renamed over the target (an existing one only with ``overwrite``).
   The folder is removed after.

A run killed before its commit leaves the target as it was and the folder behind:
the next :func:`begin` for that target removes it (it removes nothing else).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nncodecs.container import tasks
from nncodecs.errors import CorruptDataError
from nncodecs.outputs import OutputLock, is_container_zip, is_url, publish
from nncodecs.store.zip_writer import ZipWriter, contiguous

__all__ = ["Part", "PartRecord", "begin", "commit", "parts_folder"]

_PARTS = "parts"


@dataclass(frozen=True)
class PartRecord:
    """A closed part: its file (in the parts folder), its entries (plain data: they
    pickle) and its size in bytes."""

    name: str
    entries: tuple[Any, ...]
    size: int


def parts_folder(target: str | Path) -> Path:
    """The folder beside a zip target where its parts are written until the commit."""
    target = Path(target)
    return target.parent / f".{target.name}.nncodecs-parts"


def begin(target: str | Path, overwrite: bool = False) -> Path:
    """The parts folder of a zip ``target`` (a local path ending in ``.zip``), begun
    empty: what a killed run left there is removed first. An existing target is
    refused unless ``overwrite`` and it is a container zip (replaced at the commit, not
    here); so is one a Writer holds (its lock)."""
    path = _target(target)
    _check_target(path, overwrite)
    folder = parts_folder(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with OutputLock(path):  # (a Writer appending to it: refused, naming its pid)
        if folder.exists() or folder.is_symlink():
            try:
                tasks.check_begun(str(folder))
            except ValueError:
                raise FileExistsError(
                    f"{folder}: exists, and no run began it: never removed (move it away "
                    f"to write {path.name})"
                ) from None
            shutil.rmtree(folder)  # (a run's that never committed: begun here, by tasks)
        tasks.begin(str(folder))
        (folder / _PARTS).mkdir()
    return folder


def _target(target: str | Path) -> Path:
    text = str(target)
    if is_url(text) or not text.endswith(".zip"):
        raise ValueError(f"{text}: task_zip writes a local zip file (NAME.zip)")
    return Path(text)


def _check_target(path: Path, overwrite: bool) -> None:
    """An existing target is replaced only with ``overwrite``, and only a container zip."""
    if not (path.exists() or path.is_symlink()):
        return
    if not overwrite:
        raise FileExistsError(f"{path}: exists (overwrite=True replaces it at the commit)")
    if path.is_symlink():
        raise FileExistsError(f"{path}: a link: never replaced (name the file it points to)")
    if not is_container_zip(path):
        raise FileExistsError(f"{path}: exists and is not a container zip: never replaced")


class Part:
    """One process's part of the zip: the objects it adds, as entries of a file of its
    own in the parts folder (chunks stored, never deflated), in the order added."""

    def __init__(self, folder: str | Path) -> None:
        tasks.check_begun(str(folder))
        self.file = Path(folder) / _PARTS / f"{uuid.uuid4().hex}.zip"
        self._zip = ZipWriter(self.file)

    def add(self, objects: dict[str, Any]) -> None:
        """Objects (key relative to the container: bytes-like) as entries of the part."""
        for key, data in objects.items():
            self._zip.add(key, data)

    def close(self) -> PartRecord:
        """Close the file (no central directory: the commit writes one) and say what it
        holds."""
        self._zip.discard()
        return PartRecord(self.file.name, self._zip.entries, self._zip.tell())

    def abandon(self) -> None:
        """Close and remove the file (a part that will not be committed)."""
        self._zip.discard()
        self.file.unlink(missing_ok=True)


def commit(
    target: str | Path,
    plans: list[tasks.TensorPlan],
    records: Iterable[tasks.SlabRecord | tasks.TensorRecord],
    parts: list[PartRecord],
    metadata: dict[str, str] | None = None,
    overwrite: bool = False,
) -> None:
    """Join the parts into the zip at ``target`` and commit it (see the module). Refused,
    with the target and the parts as they were (so a commit may be tried again), where
    :func:`nncodecs.container.tasks.commit` would refuse the records, where a part is
    not what its record says (its file, its size, its entries one after another), or
    where the target may not be replaced (``overwrite``, as :func:`begin` takes it)."""
    path = _target(target)
    folder = parts_folder(path)
    tasks.check_begun(str(folder))
    objects = tasks.commit_objects(plans, records, metadata, str(target))
    files = _checked_parts(folder, parts)
    with OutputLock(path):
        _check_target(path, overwrite)
        joined = folder / "joined.zip"
        kept = [(f, p) for f, p in zip(files, parts, strict=True) if p.size]
        first = kept[0] if kept else None
        if first is not None:
            first[0].rename(joined)
            out = ZipWriter(joined, tuple(first[1].entries), first[1].size)
        else:
            joined.unlink(missing_ok=True)  # (whatever is there, a link too: never followed)
            out = ZipWriter(joined)
        try:
            for file, p in kept[1:]:
                out.join(file, tuple(p.entries), p.size)
            for key, data in objects.items():  # (the root document last)
                out.add(key, data, deflate=True)
            out.close()
            publish(joined, path, force=overwrite)
        except BaseException:
            out.discard()
            if first is not None and joined.exists():  # (the first part back, as it was)
                os.truncate(joined, first[1].size)
                joined.rename(first[0])
            raise
    shutil.rmtree(folder)


_PART_NAME = re.compile(r"^[0-9a-f]{32}\.zip$")


def _checked_parts(folder: Path, parts: list[PartRecord]) -> list[Path]:
    """Each part's file: a regular file of the folder (not a link) of the size its
    record says, holding its entries one after another; else refused, by name."""
    names = [getattr(p, "name", None) for p in parts]
    if len(set(names)) != len(names) or not all(
        isinstance(n, str) and _PART_NAME.match(n) for n in names
    ):
        raise ValueError(f"{folder}: the parts named are not distinct parts of the folder")
    files = []
    for p in parts:
        file = folder / _PARTS / p.name
        try:
            st = file.lstat()
        except FileNotFoundError:
            raise CorruptDataError(f"{file}: a part named is not there") from None
        if not stat.S_ISREG(st.st_mode):
            raise CorruptDataError(f"{file}: not a regular file (a part is one)")
        if not contiguous(p.entries, p.size) or st.st_size != p.size:
            raise CorruptDataError(
                f"{file}: {p.size} bytes of entries were recorded, it holds another size "
                "or other entries"
            )
        files.append(file)
    return files
