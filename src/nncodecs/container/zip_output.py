"""A zip container's output, written in one pass.

Objects go straight into ``.NAME.nncodecs-PID.tmp/new.zip`` as they are
written: chunks stored (a reader maps or seeks them; no inflating), metadata
documents deflated. The root ``zarr.json`` goes in at a commit, and the zip is
renamed over the target. A commit before the last (``Writer.flush``) closes the
zip, publishes a copy of it with the root document added, and appends on to
the original. In mode ``"a"`` the entries of the container's committed
tensors are copied over first (the previous root document and anything else
stay behind).
"""

from __future__ import annotations

import shutil
import time
import zipfile
from pathlib import PurePosixPath

from nncodecs.container.files import zip_problems
from nncodecs.container.output import LockedOutput, remove_settled
from nncodecs.errors import CorruptDataError
from nncodecs.outputs import _remove, check_output, publish, temp_path, uninterrupted
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
        self._zf: zipfile.ZipFile | None = None
        _remove(self.temp)
        try:
            self.temp.mkdir(parents=True)
            self.zip_path = self.temp / "new.zip"
            if mode == "a":
                from nncodecs.container._store import open_zip  # (Zarr: only to append)

                self.store = open_zip(path)  # read: what the container holds
                bad = zip_problems(self.store._zf)
                if bad:
                    key, why = next(iter(bad.items()))
                    raise CorruptDataError(f"{path}: {key}: {why}")
            self._zf = self._new_zip("w")
        except BaseException:
            self._close_read()
            _remove(self.temp)
            raise

    def _new_zip(self, mode: str) -> zipfile.ZipFile:
        zf = zipfile.ZipFile(self.zip_path, mode, compression=zipfile.ZIP_STORED, allowZip64=True)
        self._writeback = Writeback(zf.fp)
        return zf

    def _entry(self, key: str) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(key, date_time=time.localtime()[:6])
        meta = key.rsplit("/", 1)[-1] == "zarr.json"
        info.compress_type = zipfile.ZIP_DEFLATED if meta else zipfile.ZIP_STORED
        info.external_attr = 0o644 << 16
        return info

    def put(self, items: dict[str, bytes]) -> None:
        assert self._zf is not None
        for key, data in items.items():
            self._zf.writestr(self._entry(key), data)
        self._writeback.written(self._zf.fp.tell())

    def discard(self, path: str) -> None:
        pass  # (nothing unfinished is ever in the zip being written)

    def adopt(self, nodes: set[str]) -> None:
        assert self.store is not None and self._zf is not None
        src = self.store._zf
        for info in src.infolist():
            name = PurePosixPath(info.filename)
            if info.is_dir() or info.filename == ROOT:
                continue
            if name.is_absolute() or ".." in name.parts:
                raise CorruptDataError(f"{self.path}: entry {info.filename!r} leaves the container")
            if name.parts[0] not in nodes:
                continue  # (no committed tensor's: left behind)
            self._zf.writestr(self._entry(info.filename), src.read(info))

    def commit(self, root: bytes, final: bool = False) -> None:
        assert self._zf is not None
        if final:
            self._zf.writestr(self._entry(ROOT), root)
            self._zf.close()
            self._zf = None
            publish(self.zip_path, self.path, force=self.force)
            self.force = True
            return
        self._zf.close()
        copy = self.temp / "commit.zip"
        shutil.copyfile(self.zip_path, copy)
        with zipfile.ZipFile(copy, "a", allowZip64=True) as z:
            z.writestr(self._entry(ROOT), root)
        publish(copy, self.path, force=self.force)
        self.force = True  # from now on the zip there is this writer's
        self._zf = self._new_zip("a")

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
                try:
                    zf.close()
                except ValueError:  # (an entry an interrupt left open: the zip is dropped)
                    zf.fp.close()
            self._close_read()
            uninterrupted(remove_settled, self.temp)
        finally:
            self.lock.release()
