"""What a container records to check a restored file against its source: the source
file's CRC32C, computed on a thread of its own while the tensors encode
(:func:`hash_ahead`).

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
import os
import string
import threading
from pathlib import Path
from typing import Any

from nncodecs import _core
from nncodecs.errors import CorruptDataError

__all__ = ["Crc32c", "check_restored", "file_digests", "hash_ahead", "restore_hash"]

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
_AHEAD: dict[str, tuple[tuple[str, int, int], concurrent.futures.Future[dict[str, str]]]] = {}


def _file_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (os.path.realpath(path), st.st_size, st.st_mtime_ns)


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
        for (real, _, _), future in futures.items():
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


def file_digests(path: Path) -> dict[str, str]:
    """What a container records of a source file: ``{"crc32c": hex}`` (for one hashed
    ahead, that result). A file hashed ahead that has changed since (its size or
    modification time) is an error: its tensors may have been read before the change,
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
