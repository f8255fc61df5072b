"""A zip container's output, written in one pass.

Objects go straight into ``.NAME.nncodecs-PID.tmp/new.zip`` as they are
written (:class:`nncodecs.store.zip_writer.ZipWriter`): chunks stored (a
reader maps or seeks them; no inflating), metadata documents deflated. The root
``zarr.json`` goes in at a commit, with the central directory, and the zip is
renamed over the target. A commit before the last (``Writer.flush``) publishes
a copy of the zip with the root document and a central directory added, and
writes on into the original. In mode ``"a"`` the entries of the container's
committed tensors are copied over first (the previous root document and
anything else stay behind).
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import PurePosixPath

from nncodecs.errors import CorruptDataError
from nncodecs.outputs import _remove, check_output, publish, temp_path, uninterrupted
from nncodecs.store.output import LockedOutput, remove_settled
from nncodecs.store.zip_entries import zip_problems
from nncodecs.store.zip_writer import ZipWriter
from nncodecs.writeback import Writeback

__all__ = ["ZipOutput"]

ROOT = "zarr.json"


class ZipOutput(LockedOutput):
    """A zip container: see the module's docstring."""

    in_place = False

    def _open(self, mode: str, overwrite: bool) -> None:
        path = self.path
        if mode == "a" and not path.is_file():
            raise FileNotFoundError(f"{path}: no container to append to")
        if mode == "w":
            check_output(path, overwrite)
            if not overwrite and path.is_dir() and not path.is_symlink():  # (an empty one)
                raise FileExistsError(
                    f"{path}: exists (a directory); a zip container is a file: "
                    "use --force (overwrite=True) to replace it"
                )
        self.force = overwrite or mode == "a"
        self.temp = temp_path(path)
        self.store = None
        self._zf: ZipWriter | None = None
        _remove(self.temp)
        try:
            self.temp.mkdir(parents=True)
            self.zip_path = self.temp / "new.zip"
            if mode == "a":
                from nncodecs.store.opening import open_zip  # (Zarr: only to append)

                self.store = open_zip(path)  # read: what the container holds
                bad = zip_problems(self.store._zf)  # noqa: SLF001 (zarr's ZipStore's zip file)
                if bad:
                    key, why = next(iter(bad.items()))
                    raise CorruptDataError(f"{path}: {key}: {why}")
            self._zf = ZipWriter(self.zip_path)
            self._writeback = Writeback(self._zf.file)
        except BaseException:
            self._close_read()
            _remove(self.temp)
            raise

    def put(self, items: dict[str, bytes]) -> None:
        assert self._zf is not None
        for key, data in items.items():
            self._zf.add(key, data, deflate=_is_metadata(key))
        self._writeback.written(self._zf.tell())

    def discard(self, path: str) -> None:
        pass  # (nothing unfinished is ever in the zip being written)

    def adopt(self, nodes: set[str]) -> None:
        assert self.store is not None and self._zf is not None
        src = self.store._zf  # noqa: SLF001 (zarr's ZipStore's zip file: no public name)
        for info in src.infolist():
            name = PurePosixPath(info.filename)
            if info.is_dir() or info.filename == ROOT:
                continue
            if name.is_absolute() or ".." in name.parts:
                raise CorruptDataError(f"{self.path}: entry {info.filename!r} leaves the container")
            if name.parts[0] not in nodes:
                continue  # (no committed tensor's: left behind)
            try:
                data = src.read(info)  # (zipfile checks the entry's CRC-32)
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                raise CorruptDataError(f"{self.path}: entry {info.filename!r}: {exc}") from None
            self._zf.add(info.filename, data, deflate=_is_metadata(info.filename))

    def commit(self, root: bytes, final: bool = False) -> None:
        assert self._zf is not None
        if final:
            self._zf.add(ROOT, root, deflate=True)
            zf, self._zf = self._zf, None
            zf.close()
            publish(self.zip_path, self.path, force=self.force)
            self.force = True
            return
        copy = self.temp / "commit.zip"
        self._zf.snapshot(copy, {ROOT: (root, True)})
        publish(copy, self.path, force=self.force)
        self.force = True  # from now on the zip there is this writer's

    def _close_read(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def abandon(self) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self._zf is not None:
                zf, self._zf = self._zf, None
                zf.discard()  # (not committed: nothing of it is published)
            self._close_read()
            uninterrupted(remove_settled, self.temp)
        finally:
            self.lock.release()


def _is_metadata(key: str) -> bool:
    """Metadata documents are deflated; chunks stored (read in place, never inflated)."""
    return key.rsplit("/", 1)[-1] == "zarr.json"
