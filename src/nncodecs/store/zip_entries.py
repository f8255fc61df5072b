"""A zip container's entries as a Reader reads them: where each lies, checked against
its local header, and the entries nncodecs never writes (which a reader refuses)."""

from __future__ import annotations

import os
import struct
import weakref
import zipfile
from pathlib import Path
from typing import Any

from nncodecs.errors import CorruptDataError, NotAContainerError

__all__ = ["METADATA_CAP", "ZipEntries", "check_zip", "zip_problems"]

#: Metadata entries of a zip may be deflated; none inflates past this.
METADATA_CAP = 64 << 20


def check_zip(path: Path) -> None:
    """NotAContainerError for a file that is no zip, CorruptDataError for a cut one."""
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            begins_as_zip = f.read(4) == b"PK\x03\x04"
        if begins_as_zip:  # (a zip's directory is at its end: a cut one has none)
            raise CorruptDataError(f"{path}: a damaged zip file (no central directory: cut short?)")
        raise NotAContainerError(f"{path}: not an nncodecs container (not a zip file)")


def zip_problems(zf: zipfile.ZipFile) -> dict[str, str]:
    """Entries a reader must refuse: deflated chunks (a zip bomb inflates whole), metadata
    that would inflate past METADATA_CAP, encrypted entries (zipfile would raise a bare
    RuntimeError asking for a password) and a name of two entries (which one is read is
    the zip library's choice): nncodecs writes none of them."""
    bad, seen = {}, set()
    for info in zf.infolist():
        name, meta = info.filename, info.filename.rsplit("/", 1)[-1] == "zarr.json"
        if name in seen:
            bad[name] = "two entries of this name (nncodecs never writes them)"
        elif info.flag_bits & 0x1:
            bad[name] = "an encrypted entry (nncodecs never writes one)"
        elif meta and info.file_size > METADATA_CAP:
            bad[name] = f"metadata of {info.file_size} bytes (at most {METADATA_CAP})"
        elif not meta and info.compress_type != zipfile.ZIP_STORED:
            bad[name] = "a compressed chunk entry (chunk entries are stored)"
        seen.add(name)
    return bad


class ZipEntries:
    """Where each entry of a zip container lies, checked against its local header.

    The zips nncodecs writes (:mod:`nncodecs.store.zip_writer`), like those of Python's
    ``zipfile`` on a seekable file, have contiguous entries (local header, name, extra field,
    data; a data descriptor only where flag bit 3 says so), the last one ending where the
    central directory starts. A local header whose name differs from the central directory's,
    or whose data would not end exactly there (a forged extra-field length shifts the data),
    is a :class:`CorruptDataError`.
    """

    def __init__(self, path: str | os.PathLike[str], zf: zipfile.ZipFile, own: bool) -> None:
        self.path, self.zf = str(path), zf
        offsets = sorted({info.header_offset for info in zf.infolist()})
        self._next = dict(zip(offsets, [*offsets[1:], zf.start_dir], strict=True))
        self._spans: dict[str, tuple[int, int]] = {}
        # Entries are read with pread on the zip's descriptor: no open per entry (which
        # cost more than the read). ``own``: the caller's zip file, whose descriptor is
        # read directly; else a duplicate of its own (the zip is another's to close).
        # Once closed, a read is an error (never a read of whatever file took the number).
        self.fd = zf.fp.fileno() if own else os.dup(zf.fp.fileno())
        self._closing = None if own else weakref.finalize(self, os.close, self.fd)
        self.size = os.fstat(self.fd).st_size

    def close(self) -> None:
        self.fd = -1
        if self._closing is not None:
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
