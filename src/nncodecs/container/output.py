"""Where a Writer writes until a commit, and what a commit publishes.

An :class:`Output` per kind of target: a Zarr store or URL (written in
place), a directory container (a temporary renamed into place at the first
commit, or written in place when appended to) and a zip container (a staging
directory zipped and renamed over the target at each commit). Local outputs
hold the target's lock; every path they create beside a target comes from
:mod:`nncodecs.outputs`.
"""

from __future__ import annotations

import os
import re
import shutil
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import zarr
from zarr.abc.store import Store
from zarr.storage import LocalStore

from nncodecs.container import layout
from nncodecs.container._store import local_path, open_store, open_zip, zip_problems
from nncodecs.errors import CorruptDataError, NotAContainerError
from nncodecs.outputs import (
    OutputLock,
    _remove,
    check_output,
    is_url,
    publish,
    remove_stale,
    temp_path,
)

__all__ = ["Output", "StoreOutput", "open_output", "settle"]


def settle(timeout: float = 120.0) -> None:
    """Wait for the tasks on Zarr's event loop to finish.

    Zarr runs every write on its own event-loop thread; an exception raised in
    the caller's thread while it waits (Ctrl-C, a signal handler) leaves those
    writes running. Removing a temporary under them would let them recreate
    part of it, so an abandoning writer waits for them first.
    """
    import asyncio

    from zarr.core import sync as zsync

    loop = zsync.loop[0]
    if loop is None or loop.is_closed() or not loop.is_running():
        return

    async def drain() -> None:
        me = asyncio.current_task()
        others = [t for t in asyncio.all_tasks() if t is not me]
        if others:
            await asyncio.wait(others, timeout=timeout)

    future = asyncio.run_coroutine_threadsafe(drain(), loop)
    try:
        future.result(timeout + 5)
    except Exception:  # (best effort: the removal below retries)
        future.cancel()


def _remove_settled(path: Path) -> None:
    """Remove a writer's temporary once no write into it is running (twice if one was)."""
    settle()
    _remove(path)
    if os.path.lexists(path):  # a write still landed there: wait again, remove again
        settle()
        _remove(path)


class Output:
    """Where a Writer writes: its store, and what ``commit`` / ``abandon`` / ``close`` do.

    ``in_place``: writes land in the named container at once (a directory
    appended to, or one already published); else in a temporary copy that
    ``commit`` publishes.
    """

    store: Any
    owned: bool = True
    in_place: bool = True
    local: bool = False

    def commit(self) -> bool:
        """Make what the store holds the container at the target. Returns whether
        ``store`` changed (the writer then reopens its group on it)."""
        return False

    def abandon(self) -> None:
        """Drop what was not committed; leave the target as the last commit left it."""
        settle()  # (writes an interrupt left running)
        self.close()

    def close(self) -> None:
        if self.owned:
            self.store.close()


class StoreOutput(Output):
    """A Zarr store object or an fsspec URL: written in place, no lock (object stores
    hold no locks: concurrent writers to one URL are not supported)."""

    def __init__(self, store: Any, owned: bool) -> None:
        self.store, self.owned = store, owned

    def check_replaceable(self, target: Any, overwrite: bool) -> None:
        """Mode "w": nothing there, or (overwrite) an nncodecs container."""
        from zarr.core.sync import sync

        if sync(self.store.is_empty("")):
            return
        where = target if is_url(target) else type(self.store).__name__
        if not overwrite:
            raise FileExistsError(f"{where}: holds data already; use overwrite=True to replace it")
        try:
            attrs = zarr.open_group(self.store, mode="r").attrs.get(layout.ATTRS_KEY)
        except Exception:
            attrs = None
        if not (isinstance(attrs, dict) and attrs.get("format") == layout.FORMAT):
            raise FileExistsError(
                f"{where}: holds data that is not an nncodecs container: not replaced, "
                "even with overwrite=True"
            )


class _LockedOutput(Output):
    local = True

    def __init__(self, path: Path, mode: str, overwrite: bool) -> None:
        if path.is_symlink():
            raise FileExistsError(f"{path}: a link; nncodecs never writes through a link")
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = OutputLock(path)
        try:  # (one try from the lock on: an exception anywhere, a signal's too, releases it)
            self.lock.acquire()
            remove_stale(path)
            self._open(mode, overwrite)
        except BaseException:
            self.lock.release()
            raise

    def _open(self, mode: str, overwrite: bool) -> None:
        raise NotImplementedError

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.lock.release()


class DirOutput(_LockedOutput):
    """A directory container: a new one is written under ``.NAME.nncodecs-PID.tmp``
    and renamed into place at its first commit; an existing one (mode ``"a"``)
    is written in place, under the lock."""

    def _open(self, mode: str, overwrite: bool) -> None:
        path = self.path
        self.overwrite = overwrite
        if mode == "a":
            if not (path / "zarr.json").is_file():
                raise FileNotFoundError(f"{path}: no container to append to")
            _tidy(path)
            self.in_place = True
            self.store = LocalStore(path)
        else:
            check_output(path, overwrite)
            self.temp = temp_path(path)
            _remove(self.temp)  # a leftover of this very pid (a reused pid)
            try:
                self.temp.mkdir()
                self.in_place = False
                self.store = LocalStore(self.temp)
            except BaseException:
                _remove(self.temp)
                raise

    def commit(self) -> bool:
        if self.in_place:
            return False
        self.store.close()
        publish(self.temp, self.path, force=self.overwrite)
        self.in_place = True
        self.store = LocalStore(self.path)
        return True

    def abandon(self) -> None:
        try:
            settle()  # (writes an interrupt left running, in place or not)
            self.store.close()
            if not self.in_place:
                _remove_settled(self.temp)
        finally:
            self.lock.release()


# Zarr's LocalStore writes a key through "<stem>.<uuid4 hex>.partial" and a rename.
_PARTIAL = re.compile(r"^[^/]*\.[0-9a-f]{32}\.partial$")


def _tidy(path: Path) -> None:
    """Remove what a writer killed in this directory container left at its top: Zarr's
    partial metadata files and member folders holding nothing but those. Only after
    an unfinished write (the root holds no consolidated metadata); what is removed
    was made by nncodecs, and nothing else is touched."""
    import json

    try:
        with open(path / "zarr.json", "rb") as f:
            if json.loads(f.read(1 << 28)).get("consolidated_metadata"):
                return
    except (OSError, ValueError):
        return
    for entry in os.scandir(path):
        if entry.is_file(follow_symlinks=False) and _PARTIAL.match(entry.name):
            os.unlink(entry.path)
        elif entry.is_dir(follow_symlinks=False):
            inside = os.listdir(entry.path)
            if "zarr.json" not in inside and all(_PARTIAL.match(n) for n in inside):
                for name in inside:
                    os.unlink(os.path.join(entry.path, name))
                os.rmdir(entry.path)


class ZipOutput(_LockedOutput):
    """A zip container: written into ``.NAME.nncodecs-PID.tmp/store`` (the previous
    zip unpacked there in mode ``"a"``); each commit writes
    ``.NAME.nncodecs-PID.tmp/new.zip`` and renames it over the target."""

    def _open(self, mode: str, overwrite: bool) -> None:
        path = self.path
        if mode == "a" and not path.is_file():
            raise FileNotFoundError(f"{path}: no container to append to")
        if mode == "w":
            check_output(path, overwrite)
        self.force = overwrite or mode == "a"
        self.temp = temp_path(path)
        _remove(self.temp)
        try:
            staging = self.temp / "store"
            staging.mkdir(parents=True)
            if mode == "a":
                _unpack(path, staging)
            self.in_place = False
            self.store = LocalStore(staging)
        except BaseException:
            _remove(self.temp)
            raise

    def commit(self) -> bool:
        """Write the zip (stored, not deflated: the chunks are compressed) and swap it in."""
        staging, out = self.temp / "store", self.temp / "new.zip"
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            for file in sorted(staging.rglob("*")):
                if file.is_file() and not file.name.endswith(".partial"):
                    z.write(file, file.relative_to(staging).as_posix())
        publish(out, self.path, force=self.force)
        self.force = True  # from now on the zip there is this writer's
        return False

    def abandon(self) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.store.close()
            _remove_settled(self.temp)
        finally:
            self.lock.release()


def _unpack(path: Path, staging: Path) -> None:
    """Unpack a zip container for appending, refusing what a reader refuses."""
    zf = open_zip(path)._zf
    bad = zip_problems(zf)
    if bad:
        key, why = next(iter(bad.items()))
        raise CorruptDataError(f"{path}: {key}: {why}")
    for info in zf.infolist():
        name = PurePosixPath(info.filename)
        if info.is_dir():
            continue
        if name.is_absolute() or ".." in name.parts:
            raise CorruptDataError(f"{path}: entry {info.filename!r} leaves the container")
        dest = staging.joinpath(*name.parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(dest, "xb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    zf.close()


def open_output(
    target: Any, mode: str, overwrite: bool, storage_options: dict[str, Any] | None
) -> Output:
    """The Output of a Writer's target (see :class:`nncodecs.Writer`)."""
    if isinstance(target, Store):
        return StoreOutput(target, owned=False)
    if is_url(target):
        store, owned = open_store(target, mode, storage_options)
        return StoreOutput(store, owned)
    if storage_options:
        raise ValueError("storage_options go with a URL target (s3://...)")
    path = local_path(target)
    assert path is not None
    if path.suffix == ".zip":
        return ZipOutput(path, mode, overwrite)
    if path.is_file() and not path.is_symlink():
        if mode == "a":
            raise NotAContainerError(f"{path}: a file, not a directory container")
        if not overwrite:
            raise FileExistsError(f"{path}: exists (a file); use overwrite=True to replace it")
    return DirOutput(path, mode, overwrite)
