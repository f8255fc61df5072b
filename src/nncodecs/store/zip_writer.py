"""A zip file written in one pass: each entry's local header, then its bytes, once.

Python's ``zipfile`` computes each entry's CRC-32 with zlib (3.7 GB/s on the 2-core
AMD EPYC: 7% of compressing the 1.09 GB 24-copy model, ``perf``) and, on a seekable
file, writes every local header twice (before the data, then again with the CRC and
sizes). Here the CRC-32 comes from ISA-L (``isal``, 18 GB/s; zlib's where it is
missing) over bytes already in memory, so the header is written once, right.

The central directory is written by :meth:`ZipWriter.close`, or into a copy of the
file by :meth:`ZipWriter.snapshot` (a commit before the last: the copy is published
while this file grows on). Entries are contiguous, the last one ending where the
central directory starts, as :class:`nncodecs.store.zip_entries.ZipEntries` checks;
an entry whose write fails is cut off again. Sizes and offsets past 2 GiB take
ZIP64 records, as ``zipfile`` writes them.
"""

from __future__ import annotations

import os
import shutil
import struct
import time
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

from nncodecs.errors import CorruptDataError
from nncodecs.outputs import open_new

try:
    from isal.isal_zlib import crc32
except ImportError:  # (optional: ISA-L's wheels cover x86-64 and aarch64 Linux, macOS)
    from zlib import crc32

__all__ = ["ZipWriter", "contiguous"]

# zipfile's limits: past them, ZIP64 fields (it writes them from 2 GiB on).
ZIP64_LIMIT = (1 << 31) - 1
ZIP_FILECOUNT_LIMIT = 0xFFFF
_UNIX_644 = 0o100644 << 16  # (a regular file, rw-r--r--)
_STORED, _DEFLATED = 0, 8


@dataclass(frozen=True)
class _Entry:
    name: bytes
    flags: int
    method: int
    crc: int
    size: int  # uncompressed
    stored: int  # compressed (as written)
    offset: int  # of the local header


def _dos_time(t: time.struct_time) -> tuple[int, int]:
    year = max(t.tm_year, 1980)
    return (t.tm_hour << 11) | (t.tm_min << 5) | (t.tm_sec // 2), (
        ((year - 1980) << 9) | (t.tm_mon << 5) | t.tm_mday
    )


class ZipWriter:
    """Entries into ``path`` (created, or cut back to ``start`` bytes and ``entries``,
    as :meth:`snapshot` leaves a copy), written as :meth:`add` is called."""

    def __init__(self, path: Path, entries: tuple[_Entry, ...] = (), start: int = 0) -> None:
        self.path = path
        # (a new zip has the mode of outputs.created_mode from its first byte)
        self._f: BinaryIO = path.open("r+b") if start else open_new(path)
        self._f.truncate(start)
        self._f.seek(start)
        self._entries = list(entries)
        self._at = start
        self._time, self._date = _dos_time(time.localtime())

    @property
    def file(self) -> BinaryIO:
        """The file being written (for its descriptor)."""
        return self._f

    def tell(self) -> int:
        """Bytes written (the end of the last entry)."""
        return self._at

    def add(self, name: str, data: Any, deflate: bool = False) -> None:
        """An entry ``name`` holding ``data`` (bytes-like), stored or deflated."""
        raw = memoryview(data).cast("B")
        crc, size = crc32(raw), raw.nbytes
        body: Any = raw
        if deflate:
            packer = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
            body = packer.compress(raw) + packer.flush()
        encoded = name.encode("ascii", "ignore")
        flags = 0
        if encoded.decode("ascii") != name:
            encoded, flags = name.encode("utf-8"), 0x800  # (bit 11: the name is UTF-8)
        entry = _Entry(
            encoded, flags, _DEFLATED if deflate else _STORED, crc, size, len(body), self._at
        )
        header = _local_header(entry, self._time, self._date)
        try:
            self._f.write(header)
            self._f.write(body)
        except BaseException:  # (cut off again: entries stay contiguous)
            self._f.seek(entry.offset)
            self._f.truncate(entry.offset)
            raise
        self._at += len(header) + len(body)
        self._entries.append(entry)

    @property
    def entries(self) -> tuple[_Entry, ...]:
        """The entries written so far (what a later ZipWriter, or :meth:`join`, takes)."""
        return tuple(self._entries)

    def join(self, part: Path, entries: tuple[_Entry, ...], size: int) -> None:
        """Append the entries of another file that a ZipWriter wrote and discarded (a
        part: ``size`` bytes of contiguous entries, no central directory), copied in the
        kernel where it can (``copy_file_range``), their offsets moved to where they land."""
        self._f.flush()
        with open(part, "rb") as src:
            if os.fstat(src.fileno()).st_size != size:
                raise CorruptDataError(f"{part}: {size} bytes were written, it holds another size")
            at, left, fd = self._at, size, self._f.fileno()
            while left:
                try:
                    n = os.copy_file_range(src.fileno(), fd, left, size - left, at)
                except (AttributeError, OSError):  # (not Linux, or across file systems)
                    n = os.pwrite(fd, os.pread(src.fileno(), min(left, 64 << 20), size - left), at)
                if n <= 0:
                    raise CorruptDataError(f"{part}: ends before its {size} bytes")
                at, left = at + n, left - n
        self._entries += [replace(e, offset=e.offset + self._at) for e in entries]
        self._at += size
        self._f.seek(self._at)

    def _directory(self) -> bytes:
        """The central directory and its end records, for the entries so far, at ``_at``."""
        records = [_central_record(e, self._time, self._date) for e in self._entries]
        size = sum(map(len, records))
        return b"".join(records) + _end_records(len(self._entries), self._at, size)

    def snapshot(self, copy: Path, extra: dict[str, tuple[Any, bool]]) -> None:
        """A complete zip at ``copy``: this file's entries, then ``extra`` (name: (data,
        deflate)) and the central directory. This file grows on without them."""
        self._f.flush()
        shutil.copyfile(self.path, copy)
        other = ZipWriter(copy, tuple(self._entries), self._at)
        other._time, other._date = self._time, self._date
        try:
            for name, (data, deflate) in extra.items():
                other.add(name, data, deflate)
        finally:
            other.close()

    def close(self) -> None:
        """Write the central directory and close the file (once; again does nothing)."""
        if self._f.closed:
            return
        try:
            self._f.write(self._directory())
            self._f.flush()
        finally:
            self._f.close()

    def discard(self) -> None:
        """Close the file without a central directory (a zip nobody will publish)."""
        self._f.close()


def _local_header(e: _Entry, dtime: int, ddate: int) -> bytes:
    zip64 = e.size > ZIP64_LIMIT or e.stored > ZIP64_LIMIT
    extra = struct.pack("<HHQQ", 1, 16, e.size, e.stored) if zip64 else b""
    sizes = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (e.stored, e.size)
    head = struct.pack(
        "<IHHHHHIIIHH",
        0x04034B50,
        45 if zip64 else 20,
        e.flags,
        e.method,
        dtime,
        ddate,
        e.crc,
        *sizes,
        len(e.name),
        len(extra),
    )
    return head + e.name + extra


def _central_record(e: _Entry, dtime: int, ddate: int) -> bytes:
    fields, extra = [], []
    for value in (e.size, e.stored, e.offset):  # (ZIP64 extra: these, in this order)
        if value > ZIP64_LIMIT:
            fields.append(0xFFFFFFFF)
            extra.append(value)
        else:
            fields.append(value)
    packed = struct.pack(f"<HH{len(extra)}Q", 1, 8 * len(extra), *extra) if extra else b""
    version = 45 if extra else 20
    head = struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50,
        (3 << 8) | version,
        version,
        e.flags,
        e.method,
        dtime,
        ddate,
        e.crc,
        fields[1],
        fields[0],
        len(e.name),
        len(packed),
        0,
        0,
        0,
        _UNIX_644,
        fields[2],
    )
    return head + e.name + packed


def _end_records(count: int, offset: int, size: int) -> bytes:
    """The end of central directory record, after ZIP64's where a field overflows."""
    out = b""
    if count > ZIP_FILECOUNT_LIMIT or offset > ZIP64_LIMIT or size > ZIP64_LIMIT:
        at = offset + size
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, size, offset)
        out += struct.pack("<IIQI", 0x07064B50, 0, at, 1)
        count, offset, size = (min(count, 0xFFFF), min(offset, 0xFFFFFFFF), min(size, 0xFFFFFFFF))
    return out + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, size, offset, 0)


def contiguous(entries: Any, size: int) -> bool:
    """Whether ``entries`` are a ZipWriter's, lying one after another from byte 0 and
    ending at ``size`` (a part as :meth:`ZipWriter.join` takes it)."""
    if not isinstance(entries, tuple | list) or type(size) is not int:
        return False
    at = 0
    for e in entries:
        if not isinstance(e, _Entry) or not isinstance(e.name, bytes):
            return False
        fields = (e.offset, e.size, e.stored, e.crc, e.flags, e.method)
        if any(type(v) is not int or v < 0 for v in fields) or e.offset != at:
            return False
        try:
            at += len(_local_header(e, 0, 0)) + e.stored
        except struct.error:  # (a field past what its header holds)
            return False
    return at == size
