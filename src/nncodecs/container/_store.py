"""Open what a user passes as a container target as a Zarr store.

Writers go through an :class:`Output` (where the bytes land before and
after a commit, the lock, the temporaries); readers through
:func:`open_store` and :class:`CheckedStore` (the integrity checks every
read gets). Every path nncodecs creates beside a target comes from
:mod:`nncodecs.outputs`.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from zarr.abc.store import Store
from zarr.storage import LocalStore, WrapperStore, ZipStore

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

__all__ = ["CheckedStore", "Output", "open_output", "open_store"]

#: Metadata entries of a zip may be deflated; none inflates past this.
METADATA_CAP = 64 << 20


def local_path(target: Any) -> Path | None:
    """The local path of a target (``file://`` stripped), ``None`` for URLs and stores."""
    if isinstance(target, Store) or is_url(target):
        return None
    if isinstance(target, str | os.PathLike):
        return Path(str(target).removeprefix("file://"))
    raise TypeError(
        f"a container target is a path, a URL or a Zarr store, got {type(target).__name__}"
    )


def _is_zip_target(path: Path) -> bool:
    return path.suffix == ".zip" or (path.is_file() and not path.is_symlink())


def open_store(
    target: Any, mode: str, storage_options: dict[str, Any] | None = None
) -> tuple[Any, bool]:
    """(store, owned) for a path (``*.zip``: one zip file, read only; else a directory), a URL
    (``memory://``, ``s3://`` ...: through fsspec, with ``storage_options`` such as an
    ``endpoint_url`` and keys), or any Zarr store object.

    ``owned`` says whether the caller must close the store. Writers use
    :func:`open_output`; this serves readers and the parallel archive.
    """
    if isinstance(target, Store):
        return target, False
    if is_url(target):
        if str(target).rstrip("/").endswith(".zip"):
            raise ValueError(
                f"{target}: a zip container on an object store is not supported; "
                "write a directory container there (s3://bucket/model.zarr)"
            )
        from zarr.storage import FsspecStore

        store = FsspecStore.from_url(
            target, storage_options=storage_options or None, read_only=mode == "r"
        )
        return store, True
    if storage_options:
        raise ValueError("storage_options go with a URL target (s3://...)")
    path = local_path(target)
    assert path is not None
    if mode != "r":
        return LocalStore(path), True
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such container")
    if _is_zip_target(path):
        return _open_zip(path), True
    if not (path / "zarr.json").is_file():
        raise NotAContainerError(f"{path}: not an nncodecs container (no zarr.json)")
    return LocalStore(path, read_only=True), True


def _open_zip(path: Path) -> ZipStore:
    if not zipfile.is_zipfile(path):
        raise NotAContainerError(f"{path}: not an nncodecs container (not a zip file)")
    store = ZipStore(path, mode="r")
    try:
        store._sync_open()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise CorruptDataError(f"{path}: a damaged zip file ({exc})") from None
    return store


def _zip_problems(zf: zipfile.ZipFile) -> dict[str, str]:
    """Entries a reader must refuse: deflated chunks (a zip bomb inflates whole) and
    metadata that would inflate past METADATA_CAP."""
    bad = {}
    for info in zf.infolist():
        meta = info.filename.rsplit("/", 1)[-1] == "zarr.json"
        if meta and info.file_size > METADATA_CAP:
            bad[info.filename] = f"metadata of {info.file_size} bytes (at most {METADATA_CAP})"
        elif not meta and info.compress_type != zipfile.ZIP_STORED:
            bad[info.filename] = "a compressed chunk entry (chunk entries are stored)"
    return bad


# -- reading: the checks every read gets --------------------------------------------


class ZipEntries:
    """Where each entry of a zip container lies, checked against its local header.

    The zips nncodecs writes come from Python's ``zipfile`` on a seekable file:
    entries are contiguous (local header, name, extra field, data; a data
    descriptor only where flag bit 3 says so), the last one ending where the
    central directory starts. A local header whose name differs from the
    central directory's, or whose data would not end exactly there (a forged
    extra-field length shifts the data), is a :class:`CorruptDataError`.
    """

    def __init__(self, path: str | os.PathLike[str], zf: zipfile.ZipFile) -> None:
        self.path, self.zf = str(path), zf
        offsets = sorted({info.header_offset for info in zf.infolist()})
        self._next = dict(zip(offsets, [*offsets[1:], zf.start_dir], strict=True))
        self._spans: dict[str, tuple[int, int]] = {}

    def span(self, key: str) -> tuple[int, int] | None:
        """(offset, length) of an entry's stored bytes in the file; ``None`` if absent."""
        if key in self._spans:
            return self._spans[key]
        try:
            info = self.zf.getinfo(key)
        except KeyError:
            return None
        with open(self.path, "rb") as f:
            f.seek(info.header_offset)
            header = f.read(30)
            if len(header) < 30 or header[:4] != b"PK\x03\x04":
                raise CorruptDataError(f"{key}: its local zip header is damaged")
            flags, method = struct.unpack("<HH", header[6:10])
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            if f.read(name_len) != info.orig_filename.encode("utf-8" if flags & 0x800 else "cp437"):
                raise CorruptDataError(f"{key}: its local zip header names another entry")
        if method != info.compress_type or (flags & 0x08) != (info.flag_bits & 0x08):
            raise CorruptDataError(f"{key}: its local zip header disagrees with the directory")
        start = info.header_offset + 30 + name_len + extra_len
        end, following = start + info.compress_size, self._next[info.header_offset]
        # A data descriptor (flag bit 3): CRC and sizes (4 or 8 bytes each), a signature or not.
        gaps = (12, 16, 20, 24) if info.flag_bits & 0x08 else (0,)
        if following - end not in gaps:
            raise CorruptDataError(
                f"{key}: its data would end at byte {end}, the next entry starts at "
                f"{following} (a damaged local zip header)"
            )
        self._spans[key] = (start, info.compress_size)
        return self._spans[key]


@dataclass(frozen=True)
class Strict:
    """A tensor's array whose every chunk was written (the ``chunks: "all"`` record)."""

    name: str
    count: int  # chunks along the first (only chunked) axis
    per: int  # chunks per shard, 0 when unsharded


class CheckedStore(WrapperStore):
    """A Reader's view of a store: what Zarr would quietly read as fill values, or
    read from outside the container, is an error instead.

    - a chunk (or a shard's chunk) of an array recorded as fully written that
      is missing: :class:`CorruptDataError` naming the tensor;
    - a key of a directory container that resolves outside it (a link);
    - a compressed chunk entry, or an oversized metadata entry, of a zip.
    """

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.strict: dict[str, Strict] = {}
        root = getattr(store, "root", None) if isinstance(store, LocalStore) else None
        self._root = os.path.realpath(root) if root is not None else None
        self._bad: dict[str, str] = {}
        self.zip: ZipEntries | None = None
        if isinstance(store, ZipStore):
            if not store._is_open:
                store._sync_open()
            self._bad = _zip_problems(store._zf)
            self.zip = ZipEntries(store.path, store._zf)

    def _with_store(self, store: Any) -> CheckedStore:
        out = type(self)(store)
        out.strict = self.strict
        return out

    def describe_error(self, key: str, why: object) -> CorruptDataError:
        return CorruptDataError(f"{self._describe()}: {key}: {why}")

    def check_key(self, key: str) -> None:
        """Refuse a key that leaves the container or that a reader must not inflate."""
        if key in self._bad:
            raise self.describe_error(key, self._bad[key])
        if self.zip is not None:
            try:
                self.zip.span(key)
            except CorruptDataError as exc:
                raise CorruptDataError(f"{self._describe()}: {exc}") from None
        if self._root is not None:
            real = os.path.realpath(os.path.join(self._root, key))
            if real != self._root and not real.startswith(self._root + os.sep):
                raise CorruptDataError(
                    f"{self._describe()}: {key} is a link to {real}, outside the container"
                )

    def _describe(self) -> str:
        store = self._store
        return str(getattr(store, "path", None) or getattr(store, "root", None) or store)

    def _strict_of(self, key: str) -> tuple[Strict, tuple[int, ...]] | None:
        if not self.strict:
            return None
        parts = key.split("/")
        for j in range(len(parts) - 1, 0, -1):
            if parts[j] == "c":
                node = self.strict.get("/".join(parts[:j]))
                if node is not None:
                    try:
                        return node, tuple(int(p) for p in parts[j + 1 :])
                    except ValueError:
                        return None
        return None

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        self.check_key(key)
        try:
            buf = await self._store.get(key, prototype, byte_range)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:  # a bad CRC, a cut entry
            raise self.describe_error(key, f"a damaged zip entry ({exc})") from None
        found = self._strict_of(key)
        if found is None:
            return buf
        node, coords = found
        if buf is None:
            raise CorruptDataError(f"tensor {node.name!r}: chunk {key} is missing")
        if node.per:
            from zarr.abc.store import SuffixByteRequest

            index_len = 16 * node.per + 4
            suffix = isinstance(byte_range, SuffixByteRequest) and byte_range.suffix == index_len
            if byte_range is None or suffix:
                self._check_index(node, key, coords, buf.to_bytes()[-index_len:])
        return buf

    @staticmethod
    def _check_index(node: Strict, key: str, coords: tuple[int, ...], index: bytes) -> None:
        import numpy as np

        shard = coords[0] if coords else 0
        inner = min(node.per, node.count - shard * node.per)
        if len(index) < 16 * node.per + 4:
            raise CorruptDataError(f"tensor {node.name!r}: shard {key} is cut short")
        spans = np.frombuffer(index[:-4], "<u8").reshape(node.per, 2)[:inner]
        empty = np.flatnonzero((spans == 2**64 - 1).all(axis=1))
        if empty.size:
            raise CorruptDataError(
                f"tensor {node.name!r}: chunk {int(empty[0])} of shard {key} is missing "
                "(its index entry is empty)"
            )


# -- writing: where the bytes go until a commit --------------------------------------


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
    zf = _open_zip(path)._zf
    bad = _zip_problems(zf)
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
