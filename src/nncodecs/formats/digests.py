"""What a container records to check a restored file against its source: the source
file's CRC32C, combined from the CRC32Cs of the tensors as compression reads them
(:class:`ReadDigest`, safetensors), or computed on a thread of its own while the
tensors encode (:func:`hash_ahead`, the other formats).

A restore is fed to a CRC32C as it is written, and checked against it. Containers
written before recorded the source's sha256 instead, and are checked against that.
The sha256 took as long as decoding the model on two cores, and as long as the
encoding of its tensors took on one: at over 10 GB/s the CRC32C costs a tenth of it.
Each tensor's bytes are checked by their frames' own CRC32C already; the whole-file
CRC32C adds the header, the order and the bytes between tensors.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import itertools
import os
import string
import threading
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError

__all__ = [
    "Crc32c",
    "ReadDigest",
    "check_restored",
    "file_digests",
    "hash_ahead",
    "restore_hash",
]

#: Bytes a hashing read takes at a time.
_BLOCK = 1 << 20


class Crc32c:
    """CRC32C with ``hashlib``'s ``update`` / ``hexdigest`` (8 hex digits). ``daemon``: for
    a daemon thread, which must not wait for the GIL inside C++ (at shutdown Python ends
    such a thread with an unwind that C++ turns into an abort): it keeps the GIL, a
    tenth of a millisecond per MiB."""

    name = "crc32c"

    def __init__(self, daemon: bool = False) -> None:
        self.crc, self.release = 0, not daemon

    def update(self, data: Any) -> None:
        self.crc = _core.crc32c(data, self.crc, self.release)

    def hexdigest(self) -> str:
        return f"{self.crc:08x}"


# digests of files being hashed ahead, on a thread of their own, by real path: the
# (path, size, mtime) they had then, and the future result
_AHEAD: dict[str, tuple[tuple[str, int, int, int], concurrent.futures.Future[dict[str, str]]]] = {}


def _file_key(path: Path) -> tuple[str, int, int, int]:
    """What says a file is still the one read: real path, size, modification time and
    inode (a file replaced by another of the same size and time is a new inode)."""
    st = path.stat()
    return (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino)


def hash_ahead(paths: list[Path]) -> None:
    """Start hashing files on a thread of their own, while the caller encodes (the hashes
    and the reads release the GIL); :func:`file_digests` then waits for the result."""
    futures = {}
    for path in paths:
        with contextlib.suppress(OSError):
            futures[_file_key(path)] = concurrent.futures.Future()
    if not futures:
        return
    _AHEAD.update({key[0]: (key, future) for key, future in futures.items()})

    def run() -> None:
        for (real, *_), future in futures.items():
            try:
                future.set_result(_digests(Path(real), daemon=True))
            except BaseException as exc:  # (file_digests raises it in the caller)
                future.set_exception(exc)

    threading.Thread(target=run, name="nncodecs-hash", daemon=True).start()


def _digests(path: Path, daemon: bool = False) -> dict[str, str]:
    crc = Crc32c(daemon)
    _feed(path, crc)
    return {"crc32c": crc.hexdigest()}


def _feed(path: Path, digest: Any) -> None:
    block = memoryview(bytearray(_BLOCK))
    with path.open("rb", buffering=0) as f:
        while n := f.readinto(block):
            digest.update(block[:n])


class ReadDigest:
    """A file's CRC32C from the CRC32Cs of the byte ranges a compressor read anyway (each
    tensor's), reading only the bytes between them: no second pass over the tensors.
    Hashing the 1.09 GB model again on a thread of its own cost 7% of its compression's
    CPU in the kernel's copies alone (perf). Made before the first read: a file changed
    by the end (size, modification time or inode) is an error, as for :func:`file_digests`."""

    def __init__(self, path: Path) -> None:
        self.path, self.key = path, _file_key(path)
        self.ranges: list[tuple[int, int, int]] = []  # (offset, length, CRC32C)

    def read(self, offset: int, data: Any) -> None:
        """``data`` (a C-contiguous array) was read at ``offset``."""
        if data.nbytes:
            view = data.reshape(-1).view(np.uint8)
            self.ranges.append((offset, int(data.nbytes), int(_core.crc32c(view))))

    def digests(self) -> dict[str, str]:
        """``{"crc32c": hex}`` of the whole file: the ranges read, combined in offset order
        with the CRC32C of the bytes between them (read now). Ranges that overlap (tensors
        sharing bytes) or a file grown or cut short: the file is read whole."""
        if _file_key(self.path) != self.key:
            raise RuntimeError(f"{self.path}: the file changed while it was being compressed")
        size, crc, at = self.key[1], 0, 0
        ranges = sorted(self.ranges)
        if any(a < b + n for (b, n, _), (a, _, _) in itertools.pairwise(ranges)):
            return _digests(self.path)
        if ranges and ranges[-1][0] + ranges[-1][1] > size:
            return _digests(self.path)
        with self.path.open("rb", buffering=0) as f:
            for offset, length, part in [*ranges, (size, 0, 0)]:
                while at < offset:  # (the bytes no range covers: headers, padding)
                    block = os.pread(f.fileno(), min(_BLOCK, offset - at), at)
                    if not block:
                        return _digests(self.path)
                    crc = _core.crc32c(block, crc)
                    at += len(block)
                crc = _core.crc32c_combine(crc, part, length)
                at = offset + length
        return {"crc32c": f"{crc:08x}"}


def file_digests(path: Path) -> dict[str, str]:
    """What a container records of a source file: ``{"crc32c": hex}`` (for one hashed
    ahead, that result). A file hashed ahead that has changed since (its size,
    modification time or inode) is an error: its tensors may have been read before the change,
    so no digest would describe what the container holds."""
    key = _file_key(path)
    ahead = _AHEAD.pop(key[0], None)
    if ahead is None:
        return _digests(path)
    if ahead[0] != key:
        raise RuntimeError(f"{path}: the file changed while it was being compressed")
    return ahead[1].result()


def restore_hash(expected: dict[str, Any], what: Any) -> Any:
    """The hash a restore feeds every byte it writes: CRC32C where the source's was
    recorded (``expected["crc32c"]``), else sha256 (``expected["sha256"]``: containers
    written before), else ``None``. A record that is there but is not a digest of its
    kind is a :class:`CorruptDataError` (it must not turn the check off)."""
    for kind, digits, make in (("crc32c", 8, Crc32c), ("sha256", 64, hashlib.sha256)):
        value = expected.get(kind)
        if value is None:
            continue
        if not (isinstance(value, str) and len(value) == digits and set(value) <= _HEX):
            raise CorruptDataError(f"{what}: the source's {kind} record {value!r:.80} is damaged")
        return make()
    return None


_HEX = set(string.hexdigits)


def check_restored(path: Path, expected: dict[str, Any], what: Any, digest: Any = None) -> None:
    """A restored file must be its source byte for byte (where the container recorded the
    source's digests, ``expected``): ``digest`` from :func:`restore_hash`, fed every
    byte as the file was written, else the file is read once."""
    if digest is None:
        digest = restore_hash(expected, what)
        if digest is None:
            return
        _feed(path, digest)
    kind = digest.name  # ("crc32c" or hashlib's "sha256")
    if digest.hexdigest() != str(expected.get(kind)).lower():
        raise CorruptDataError(
            f"{what}: the restored file's {kind} differs from the source's; nothing was written"
        )
