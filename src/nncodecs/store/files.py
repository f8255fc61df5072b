"""A container's bytes as a Reader may read them, without Zarr.

:class:`ContainerFiles` holds what every read of a container is checked against (the
checks :class:`nncodecs.store.opening.CheckedStore` puts in front of a Zarr store)
and, for a container in a local directory or zip file, reads its keys here and now,
with ``pread`` on the file: a whole read of a model needs no Zarr store at all, nor
``import zarr`` (a fifth of a second of every process that reads). Zarr's store is
made on the first use of a Zarr object (a slice, a dask array), around this same object.
"""

from __future__ import annotations

import contextlib
import os
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError, NotAContainerError
from nncodecs.outputs import is_url
from nncodecs.store import storage
from nncodecs.store.zip_entries import ZipEntries, check_zip, zip_problems

__all__ = ["ContainerFiles", "Strict", "local_target", "open_local"]


def local_target(target: Any) -> Path | None:
    """The local path of a target given as a path (``file://`` stripped); ``None`` for
    URLs and anything else (stores: Zarr's business)."""
    if isinstance(target, str | os.PathLike) and not is_url(target):
        return Path(str(target).removeprefix("file://"))
    return None


def is_zip_target(path: Path) -> bool:
    return path.suffix == ".zip" or (path.is_file() and not path.is_symlink())


def open_local(path: Path) -> ContainerFiles:
    """A local container (``*.zip`` or a file: a zip; else a directory), open for reading."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such container")
    if not (path.is_file() or path.is_dir()):  # (a FIFO or device: never opened, it may block)
        raise NotAContainerError(f"{path}: not an nncodecs container (not a file or directory)")
    if is_zip_target(path):
        check_zip(path)
        try:
            zf = zipfile.ZipFile(path, mode="r")
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise CorruptDataError(f"{path}: a damaged zip file ({exc})") from None
        return ContainerFiles(str(path), zf=zf, owns_zip=True)
    if not (path / "zarr.json").is_file():
        raise NotAContainerError(f"{path}: not an nncodecs container (no zarr.json)")
    return ContainerFiles(str(path), root=str(path))


@dataclass(frozen=True)
class Strict:
    """A tensor's array whose every chunk was written (the ``chunks: "all"`` record)."""

    name: str
    grid: storage.Grid


class ContainerFiles:
    """The checks of every read of a container, and, where it lies in a local directory
    (``root``) or zip file (``zf``), its keys read from the file here and now.

    - a chunk (or a shard's chunk) of an array recorded as fully written that
      is missing: :class:`CorruptDataError` naming the tensor;
    - a key of a directory container that resolves outside it (a link);
    - a compressed chunk entry, or an oversized metadata entry, of a zip;
    - any read once closed: ``ValueError``.
    """

    def __init__(
        self,
        where: str,
        zf: zipfile.ZipFile | None = None,
        root: str | None = None,
        owns_zip: bool = False,
    ) -> None:
        self.where, self._abspath = where, os.path.abspath(where)
        self.strict: dict[str, Strict] = {}
        self.closed = False
        self.root = os.path.realpath(root) if root is not None else None
        self.zip = ZipEntries(where, zf, own=owns_zip) if zf is not None else None
        self._bad = zip_problems(zf) if zf is not None else {}
        self._owned_zip = zf if owns_zip else None

    @property
    def path(self) -> str:
        """The container's file or directory for whoever opens it again (Zarr's store,
        a memory map): a zip through the descriptor held open, where the system can
        (``/proc/self/fd``), so that a file published over it since is never mixed in."""
        if self.zip is not None:
            proc = f"/proc/self/fd/{self.zip.fd}"
            return proc if self.zip.fd >= 0 and os.path.exists(proc) else self._abspath
        return self.root if self.root is not None else self.where

    @property
    def local(self) -> bool:
        """Whether keys are read from a local file here (else through a Zarr store)."""
        return self.zip is not None or self.root is not None

    def close(self) -> None:
        """From now on every read through these checks is a ValueError (arrays, dask
        graphs and read_pieces generators made before, of a directory container too)."""
        self.closed = True
        if self.zip is not None:
            self.zip.close()
        if self._owned_zip is not None:
            self._owned_zip.close()

    def describe_error(self, key: str, why: object) -> CorruptDataError:
        return CorruptDataError(f"{self.where}: {key}: {why}")

    def check_key(self, key: str) -> None:
        """Refuse a key that leaves the container or that a reader must not inflate."""
        if self.closed:
            raise ValueError(f"{self.where}: the container is closed")
        if key in self._bad:
            raise self.describe_error(key, self._bad[key])
        if self.zip is not None:
            try:
                self.zip.span(key)
            except CorruptDataError as exc:
                raise CorruptDataError(f"{self.where}: {exc}") from None
        if self.root is not None:
            real = os.path.realpath(os.path.join(self.root, key))
            if real != self.root and not real.startswith(self.root + os.sep):
                raise CorruptDataError(
                    f"{self.where}: {key} is a link to {real}, outside the container"
                )
            with contextlib.suppress(OSError):  # (absent: Zarr says so)
                mode = os.stat(real).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # (a FIFO would block)
                    raise self.describe_error(key, "not a regular file")

    def check_value(self, key: str, buf: Any, suffix: int | None = None) -> None:
        """A chunk of an array recorded whole must be there, a shard's index whole
        (``suffix``: ``buf`` holds only the value's last ``suffix`` bytes, 0 another
        part of it: a shard's index is checked only where ``buf`` is all of it)."""
        found = storage.parse_chunk_key(key, self.strict) if self.strict else None
        if found is None:
            return
        node, coords = found
        if buf is None:
            raise CorruptDataError(f"tensor {node.name!r}: chunk {key} is missing")
        per = node.grid.per
        index_len = storage.index_nbytes(per)
        if per and suffix in (None, index_len):
            if isinstance(buf, bytes | np.ndarray):
                tail = bytes(buf[-index_len:])
            else:
                tail = buf.to_bytes()[-index_len:]
            _check_index(node, key, coords, tail)

    def read_meta(self, key: str) -> bytes | None:
        """A metadata document's bytes (a zip entry inflated, its CRC-32 checked)."""
        self.check_key(key)
        if self.zip is not None:
            try:
                return self.zip.zf.read(key)
            except KeyError:
                return None
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                raise self.describe_error(key, f"a damaged zip entry ({exc})") from None
        assert self.root is not None
        path = os.path.join(self.root, key)
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            return f.read()

    def read_now(self, keys: list[str]) -> list[np.ndarray | None] | None:
        """Whole values of ``keys``, read from local files here and now (no trip through
        Zarr's event loop), with the checks of every read; ``None`` where the container
        is not a local directory or zip. (A zip entry's CRC-32 is not checked: chunks
        carry their own CRC32C, or are checked whole against the one recorded.)

        The values are uint8 views of one buffer from the decoder's output cache:
        memory already mapped, so reading into it costs no page faults."""
        if not self.local:
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
            self.check_value(key, data)
            out.append(data)
        return out

    def locate(self, key: str) -> tuple[str, int, int] | None:
        """(file, offset, length) of a key's bytes when they lie uncompressed in a
        local file (a zip entry's span checked against its local header)."""
        if self.root is not None:
            path = os.path.join(self.root, key)
            return (path, 0, os.stat(path).st_size) if os.path.isfile(path) else None
        if self.zip is None:
            return None
        span = self.zip.span(key)
        if span is None:
            return None
        if self.zip.zf.getinfo(key).compress_type != zipfile.ZIP_STORED:
            raise self.describe_error(key, "a compressed chunk entry (chunk entries are stored)")
        start, length = span
        if start + length > self.zip.size:
            raise self.describe_error(key, "its bytes pass the end of the zip")
        return self.path, start, length

    def stored_chunks(self, path: str) -> tuple[int, int] | None:
        """How many objects hold an array's chunks, and their bytes, from the zip's
        directory or the folder's entries (``None`` where not local)."""
        head = f"{path}/c"  # (a 0-d array's one chunk is "c" itself)
        if self.zip is not None:
            sizes = [
                i.compress_size
                for i in self.zip.zf.infolist()
                if not i.is_dir() and (i.filename == head or i.filename.startswith(f"{head}/"))
            ]
            return len(sizes), int(sum(sizes))
        if self.root is None:
            return None
        top = os.path.join(self.root, *head.split("/"))
        if os.path.commonpath([self.root, os.path.realpath(top)]) != self.root:  # (never outside)
            raise CorruptDataError(f"{path!r}: its chunks resolve outside the container")
        if os.path.isfile(top):
            return 1, os.lstat(top).st_size
        count = total = 0
        for folder, _, files in os.walk(top):
            for name in files:
                count += 1
                total += os.lstat(os.path.join(folder, name)).st_size
        return count, total

    def stored_keys(self) -> list[tuple[str, int]] | None:
        """(key, bytes as stored) of every object (``None`` where not local)."""
        if self.zip is not None:  # (a zip's directory: bytes as stored, metadata deflated)
            return [(i.filename, i.compress_size) for i in self.zip.zf.infolist() if not i.is_dir()]
        if self.root is None:
            return None
        found = []
        for folder, _, files in os.walk(self.root):
            rel = os.path.relpath(folder, self.root).replace(os.sep, "/")
            for name in files:
                key = name if rel == "." else f"{rel}/{name}"
                found.append((key, os.lstat(os.path.join(folder, name)).st_size))
        return found


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
