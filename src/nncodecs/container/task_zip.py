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

import shutil
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nncodecs.container import tasks
from nncodecs.outputs import check_output, is_url, publish
from nncodecs.store.zip_writer import ZipWriter

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
    refused unless ``overwrite`` (it is replaced at the commit, not here)."""
    target = str(target)
    if is_url(target) or not target.endswith(".zip"):
        raise ValueError(f"{target}: task_zip writes a local zip file (NAME.zip)")
    path = Path(target)
    check_output(path, overwrite)
    if path.is_dir() and not path.is_symlink():
        raise FileExistsError(f"{target}: a directory, where a zip file would go")
    if path.is_file() and not _is_container_zip(path):
        raise FileExistsError(f"{target}: exists and is not a container: never replaced")
    folder = parts_folder(path)
    try:
        tasks.check_begun(str(folder))
    except ValueError:
        pass  # (nothing there, or not a folder begun here: left as it is, and refused below)
    else:
        shutil.rmtree(folder)  # (a killed run's: begun here and never committed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tasks.begin(str(folder))
    (folder / _PARTS).mkdir()
    return folder


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
    """Join the parts into the zip at ``target`` and commit it (see the module): refused,
    with the target untouched, where :func:`nncodecs.container.tasks.commit` would
    refuse the records."""
    path = Path(target)
    folder = parts_folder(path)
    tasks.check_begun(str(folder))
    objects = tasks.commit_objects(plans, records, metadata, str(target))
    names = [p.name for p in parts]
    if len(set(names)) != len(names) or any(Path(n).name != n for n in names):
        raise ValueError(f"{target}: the parts named are not distinct files of the folder")
    joined = folder / "joined.zip"
    parts = [p for p in parts if p.size]  # (a part that holds nothing: left in the folder)
    if parts:
        first = parts[0]
        (folder / _PARTS / first.name).rename(joined)
        out = ZipWriter(joined, first.entries, first.size)
    else:
        out = ZipWriter(joined)
    try:
        for p in parts[1:]:
            out.join(folder / _PARTS / p.name, p.entries, p.size)
        for key, data in objects.items():  # (the root document last)
            out.add(key, data, deflate=True)
    except BaseException:
        out.discard()
        raise
    out.close()
    publish(joined, path, force=overwrite)
    shutil.rmtree(folder)


def _is_container_zip(path: Path) -> bool:
    """A zip file whose root document is there (what a commit makes)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            return "zarr.json" in zf.namelist()
    except (OSError, zipfile.BadZipFile):
        return False
