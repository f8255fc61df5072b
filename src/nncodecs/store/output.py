"""Where a Writer writes until a commit, and what a commit publishes.

An :class:`Output` per kind of target: a Zarr store or URL (written in
place), a directory container (a temporary renamed into place at the first
commit, or written in place when appended to) and a zip container (a staging
directory zipped and renamed over the target at each commit). Local outputs
hold the target's lock; every path they create beside a target comes from
:mod:`nncodecs.outputs`. Local outputs write their files themselves: Zarr is
imported only for a store or URL target, or a directory appended to.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from nncodecs.outputs import (
    OutputLock,
    _remove,
    check_output,
    is_url,
    publish,
    remove_stale,
    temp_path,
    uninterrupted,
)
from nncodecs.store import storage
from nncodecs.store.documents import ATTRS_KEY, FORMAT

__all__ = ["DirOutput", "LockedOutput", "Output", "StoreOutput", "remove_settled", "settle"]


def settle(timeout: float = 120.0) -> None:
    """Wait for the tasks on Zarr's event loop to finish.

    Zarr runs every write on its own event-loop thread; an exception raised in
    the caller's thread while it waits (Ctrl-C, a signal handler) leaves those
    writes running. Removing a temporary under them would let them recreate
    part of it, so an abandoning writer waits for them first.
    """
    if "zarr.core.sync" not in sys.modules:
        return  # (no Zarr in this process: nothing of it running)
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


def remove_settled(path: Path) -> None:
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

    def put(self, items: dict[str, bytes]) -> None:
        """Write objects by key (chunks, or metadata documents ``.../zarr.json``)."""
        from zarr.core.sync import sync

        sync(storage.set_many(self.store, items))

    def discard(self, path: str) -> None:
        """Remove what an unfinished write left under a node (before it is written again)."""
        if self.in_place:
            from zarr.core.sync import sync

            sync(self.store.delete_dir(path))

    def adopt(self, nodes: set[str]) -> None:
        """Mode ``"a"``: keep these nodes of the container being appended to (and only them)."""

    def commit(self, root: bytes, final: bool = False) -> None:
        """Write the root ``zarr.json`` and make what was written the container at the
        target (``final``: the last commit, the output closes next)."""
        self.put({"zarr.json": root})

    def abandon(self) -> None:
        """Drop what was not committed; leave the target as the last commit left it."""
        settle()  # (writes an interrupt left running)
        self.close()

    def close(self) -> None:
        if self.owned:
            self._close_store()

    def _close_store(self) -> None:
        self.store.close()


class StoreOutput(Output):
    """A Zarr store object or an fsspec URL: written in place, no lock (object stores
    hold no locks: concurrent writers to one URL are not supported)."""

    def __init__(self, store: Any, owned: bool) -> None:
        self.store, self.owned = store, owned

    def check_replaceable(self, target: Any, overwrite: bool) -> None:
        """Mode "w": nothing there, or (overwrite) an nncodecs container."""
        import zarr
        from zarr.core.sync import sync

        if sync(self.store.is_empty("")):
            return
        where = target if is_url(target) else type(self.store).__name__
        if not overwrite:
            raise FileExistsError(f"{where}: holds data already; use overwrite=True to replace it")
        try:
            attrs = zarr.open_group(self.store, mode="r").attrs.get(ATTRS_KEY)
        except Exception:
            attrs = None
        if not (isinstance(attrs, dict) and attrs.get("format") == FORMAT):
            raise FileExistsError(
                f"{where}: holds data that is not an nncodecs container: not replaced, "
                "even with overwrite=True"
            )


class LockedOutput(Output):
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


class DirOutput(LockedOutput):
    """A directory container: a new one is written under ``.NAME.nncodecs-PID.tmp``
    and renamed into place at its first commit; an existing one (mode ``"a"``)
    is written in place, under the lock.

    Objects are written as files directly (no Zarr store round trip); in place,
    a metadata document goes through a temporary name and a rename, so a reader
    never sees half of one."""

    def _open(self, mode: str, overwrite: bool) -> None:
        path = self.path
        self.overwrite = overwrite
        self._dirs: set[str] = set()  # folders made (relative to the root)
        if mode == "a":
            if not (path / "zarr.json").is_file():
                raise FileNotFoundError(f"{path}: no container to append to")
            _tidy(path)
            self.in_place = True
            self.root = path
        else:
            check_output(path, overwrite)
            self.temp = temp_path(path)
            _remove(self.temp)  # a leftover of this very pid (a reused pid)
            try:
                self.temp.mkdir()
                self.in_place = False
                self.root = self.temp
            except BaseException:
                _remove(self.temp)
                raise
        self._store: Any = None

    @property
    def store(self) -> Any:  # type: ignore[override]
        """A Zarr store of the directory, made where one is needed (appending reads
        the container through it)."""
        if self._store is None:
            from zarr.storage import LocalStore

            self._store = LocalStore(self.root)
        return self._store

    def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def put(self, items: dict[str, bytes]) -> None:
        root = str(self.root)
        for key, data in items.items():
            folder, _, name = key.rpartition("/")
            if folder and folder not in self._dirs:
                self._mkdirs(folder)
            file = os.path.join(root, key)
            if self.in_place and name == "zarr.json":
                part = f"{file}.{uuid.uuid4().hex}.partial"
                with open(part, "wb") as f:
                    f.write(data)
                os.replace(part, file)
            else:
                with open(file, "wb") as f:
                    f.write(data)

    def _mkdirs(self, folder: str) -> None:
        """Make a folder (relative to the root) and its parents: one mkdir each."""
        parent = folder.rpartition("/")[0]
        if parent and parent not in self._dirs:
            self._mkdirs(parent)
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.path.join(self.root, folder))
        self._dirs.add(folder)

    def discard(self, path: str) -> None:
        if self.in_place:
            _remove(self.root.joinpath(*path.split("/")))
            self._dirs.clear()

    def commit(self, root: bytes, final: bool = False) -> None:
        self.put({"zarr.json": root})
        if self.in_place:
            return
        self._close_store()
        publish(self.temp, self.path, force=self.overwrite)
        self.in_place = True
        self.root = self.path
        self._dirs.clear()

    def abandon(self) -> None:
        try:
            settle()  # (writes an interrupt left running, in place or not)
            self._close_store()
            if not self.in_place:
                uninterrupted(remove_settled, self.temp)
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
