"""Open what a user passes as a container target as a Zarr store.

:func:`open_store` opens a path, URL or store (for readers and the parallel
archive); :class:`CheckedStore` is a Reader's view of it (the integrity
checks every read gets). Writers go through :mod:`nncodecs.container.output`.
"""

from __future__ import annotations

import os
import struct
import weakref
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from zarr.abc.store import Store
from zarr.storage import LocalStore, WrapperStore, ZipStore

from nncodecs import _core
from nncodecs.container import storage
from nncodecs.errors import CorruptDataError, NotAContainerError
from nncodecs.outputs import is_url

__all__ = ["CheckedStore", "describe_target", "open_store"]

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
    :func:`nncodecs.container.target.open_output`; this serves readers and
    the parallel archive.
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
        return open_zip(path), True
    if not (path / "zarr.json").is_file():
        raise NotAContainerError(f"{path}: not an nncodecs container (no zarr.json)")
    return LocalStore(path, read_only=True), True


def open_zip(path: Path) -> ZipStore:
    """A zip container, open for reading (a damaged zip is a CorruptDataError)."""
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            begins_as_zip = f.read(4) == b"PK\x03\x04"
        if begins_as_zip:  # (a zip's directory is at its end: a cut one has none)
            raise CorruptDataError(f"{path}: a damaged zip file (no central directory: cut short?)")
        raise NotAContainerError(f"{path}: not an nncodecs container (not a zip file)")
    store = ZipStore(path, mode="r")
    try:
        store._sync_open()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise CorruptDataError(f"{path}: a damaged zip file ({exc})") from None
    return store


def zip_problems(zf: zipfile.ZipFile) -> dict[str, str]:
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
        # A descriptor of its own on the zip's open file, read with pread: no open per
        # entry (which cost more than the read), and closed with the Reader, after which
        # a read is an error (never a read of whatever file took the number since).
        self.fd = os.dup(zf.fp.fileno())
        self._closing = weakref.finalize(self, os.close, self.fd)
        self.size = os.fstat(self.fd).st_size

    def close(self) -> None:
        self.fd = -1
        self._closing()

    def _fd(self) -> int:
        if self.fd < 0:
            raise ValueError(f"{self.path}: the container is closed")
        return self.fd

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of the zip file (fewer where it ends first)."""
        return os.pread(self._fd(), length, offset)

    def read_into(self, buf: Any, offset: int) -> int:
        """Fill ``buf`` from ``offset`` of the zip file; the bytes read."""
        return os.preadv(self._fd(), [buf], offset)

    def span(self, key: str) -> tuple[int, int] | None:
        """(offset, length) of an entry's stored bytes in the file; ``None`` if absent."""
        if key in self._spans:
            return self._spans[key]
        try:
            info = self.zf.getinfo(key)
        except KeyError:
            return None
        # (the header and, right after it, the name the directory gives: one read)
        # (UTF-8 is at least as long as cp437, the other encoding a header may use)
        header = self.read(info.header_offset, 30 + len(info.orig_filename.encode()))
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            raise CorruptDataError(f"{key}: its local zip header is damaged")
        flags, method = struct.unpack("<HH", header[6:10])
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        try:
            name = info.orig_filename.encode("utf-8" if flags & 0x800 else "cp437")
        except UnicodeEncodeError:  # (a name the local header's encoding cannot hold)
            name = b""
        if name_len != len(name) or header[30 : 30 + name_len] != name:
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
    grid: storage.Grid


def describe_target(target: Any) -> str:
    """A target as errors name it: its path or URL, a store's class."""
    return type(target).__name__ if isinstance(target, Store) else str(target)


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
        self._closed = [False]  # (shared with the views Zarr derives from this one)
        if isinstance(store, ZipStore):
            if not store._is_open:
                store._sync_open()
            self._bad = zip_problems(store._zf)
            self.zip = ZipEntries(store.path, store._zf)

    def close_files(self) -> None:
        """Close what this view holds open of its own (the zip's descriptor); from now
        on every read through it is a ValueError (arrays, dask graphs and read_pieces
        generators made before, of a directory container too)."""
        self._closed[0] = True
        if self.zip is not None:
            self.zip.close()

    def _with_store(self, store: Any) -> CheckedStore:
        out = type(self)(store)
        out.strict, out._closed = self.strict, self._closed
        return out

    def describe_error(self, key: str, why: object) -> CorruptDataError:
        return CorruptDataError(f"{self._describe()}: {key}: {why}")

    def check_key(self, key: str) -> None:
        """Refuse a key that leaves the container or that a reader must not inflate."""
        if self._closed[0]:
            raise ValueError(f"{self._describe()}: the container is closed")
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

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        self.check_key(key)
        try:
            buf = await self._store.get(key, prototype, byte_range)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:  # a bad CRC, a cut entry
            raise self.describe_error(key, f"a damaged zip entry ({exc})") from None
        self._check_value(key, buf, byte_range)
        return buf

    def _check_value(self, key: str, buf: Any, byte_range: Any = None) -> None:
        """A chunk of an array recorded whole must be there, a shard's index whole."""
        found = storage.parse_chunk_key(key, self.strict) if self.strict else None
        if found is None:
            return
        node, coords = found
        if buf is None:
            raise CorruptDataError(f"tensor {node.name!r}: chunk {key} is missing")
        per = node.grid.per
        if per:
            from zarr.abc.store import SuffixByteRequest

            index_len = storage.index_nbytes(per)
            suffix = isinstance(byte_range, SuffixByteRequest) and byte_range.suffix == index_len
            if byte_range is None or suffix:
                if isinstance(buf, bytes | np.ndarray):
                    tail = bytes(buf[-index_len:])
                else:
                    tail = buf.to_bytes()[-index_len:]
                self._check_index(node, key, coords, tail)

    def read_now(self, keys: list[str]) -> list[np.ndarray | None] | None:
        """Whole values of ``keys``, read from local files here and now (no trip through
        Zarr's event loop), with :meth:`get`'s checks; ``None`` where the store is not
        a local directory or zip. (A zip entry's CRC-32 is not checked: chunks carry
        their own CRC32C, or are checked whole against the one recorded.)

        The values are uint8 views of one buffer from the decoder's output cache:
        memory already mapped, so reading into it costs no page faults."""
        if not isinstance(self._store, LocalStore | ZipStore):
            return None
        spans = []
        for key in keys:
            self.check_key(key)
            spans.append(self.locate(key))
        buf = _core.output_buffer(sum(s[2] for s in spans if s is not None))
        out: list[np.ndarray | None] = []
        at = 0
        for key, located in zip(keys, spans, strict=True):
            data = None
            if located is not None:
                path, offset, length = located
                data, at = buf[at : at + length], at + length
                if self.zip is not None:
                    got = self.zip.read_into(data, offset)
                else:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        got = os.preadv(fd, [data], offset)
                    finally:
                        os.close(fd)
                if got != length:
                    raise self.describe_error(key, "cut short")
            self._check_value(key, data)
            out.append(data)
        return out

    @staticmethod
    def _check_index(node: Strict, key: str, coords: tuple[int, ...], tail: bytes) -> None:
        index = storage.shard_index(np.frombuffer(tail, np.uint8), node.grid.per)
        if index is None:
            raise CorruptDataError(f"tensor {node.name!r}: shard {key} is cut short")
        inner = node.grid.inner(coords[0] if coords else 0)
        if index.crc_ok and not index.in_order(inner):
            raise CorruptDataError(
                f"tensor {node.name!r}: the chunk index of shard {key} is out of order"
            )
        spans = index.spans[:inner]
        empty = np.flatnonzero((spans == storage.EMPTY).all(axis=1))
        if empty.size:
            raise CorruptDataError(
                f"tensor {node.name!r}: chunk {int(empty[0])} of shard {key} is missing "
                "(its index entry is empty)"
            )

    def memory_map(self, z: Any) -> np.ndarray | None:
        """A read-only map of a raw, one-chunk array's bytes in a local file (``None``
        where the array or the store is otherwise); CorruptDataError for a missing chunk
        of an array recorded whole, or a chunk of another size than the array's."""
        codecs = [c.to_dict() for c in z.metadata.codecs]
        raw = len(codecs) == 1 and codecs[0]["name"] == "bytes"
        if not raw or tuple(z.chunks) != tuple(max(1, d) for d in z.shape) or z.size == 0:
            return None
        endian = codecs[0].get("configuration", {}).get("endian", "little")
        if z.dtype.itemsize > 1 and endian != "little":
            return None
        if not isinstance(self._store, LocalStore | ZipStore):
            return None  # (an object store: read, not mapped)
        key = f"{z.path}/{storage.single_chunk_key(z.ndim)}"
        self.check_key(key)  # (a zip entry: its local header checked too)
        located = self.locate(key)
        if located is None:
            if z.path in self.strict:
                raise CorruptDataError(f"chunk {key} is missing")
            return None
        path, offset, length = located
        if length != z.nbytes:
            raise CorruptDataError(f"its raw chunk holds {length} bytes, its shape says {z.nbytes}")
        return np.memmap(path, dtype=z.dtype, mode="r", offset=offset, shape=tuple(z.shape))

    def locate(self, key: str) -> tuple[str, int, int] | None:
        """(file, offset, length) of a key's bytes when they lie uncompressed in a
        local file (a zip entry's span checked against its local header)."""
        store = self._store
        if isinstance(store, LocalStore):
            path = Path(store.root) / key
            return (str(path), 0, path.stat().st_size) if path.is_file() else None
        if isinstance(store, ZipStore) and self.zip is not None:
            span = self.zip.span(key)
            if span is None:
                return None
            if self.zip.zf.getinfo(key).compress_type != zipfile.ZIP_STORED:
                raise self.describe_error(
                    key, "a compressed chunk entry (chunk entries are stored)"
                )
            start, length = span
            if start + length > self.zip.size:
                raise self.describe_error(key, "its bytes pass the end of the zip")
            return str(store.path), start, length
        return None
