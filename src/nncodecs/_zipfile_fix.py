"""Concurrent reads of a zip's stored entries, right on every Python nncodecs supports.

CPython 3.12.0-3.12.8 and 3.13.0-3.13.1 (gh-127847, fixed in 3.12.9 and 3.13.2): seeking
forward in a stored entry (``ZipExtFile.seek``'s fast path, new in 3.12) moves the
archive's shared file relative to wherever another entry's last read left it, so two
threads reading byte ranges of entries of one ``zipfile.ZipFile`` can get each other's
bytes. That is what zarr, xarray and dask do with a ``.zarr.zip`` opened through fsspec's
``zip::`` URL (fsspec's zip file system reads ranges on threads): shard indexes and frames
then fail their checksums, and a raw tensor (no checksum) would come back wrong.

:func:`apply` (run when nncodecs is imported, which reading any container does) resolves a
relative seek of the shared file against that entry's own position, under the archive's
lock, as the fixed versions do; elsewhere it changes nothing.
"""

from __future__ import annotations

import os
import sys

AFFECTED = (3, 12, 0) <= sys.version_info[:3] <= (3, 12, 8) or (
    (3, 13, 0) <= sys.version_info[:3] <= (3, 13, 1)
)


def apply(force: bool = False) -> bool:
    """Patch ``zipfile._SharedFile.seek`` where this Python has the bug (or ``force``).
    Returns whether the patch is in place; applying twice changes nothing."""
    if not (AFFECTED or force):
        return False
    import zipfile

    # (the stdlib class this module patches: there is no public name for it)
    shared = zipfile._SharedFile  # type: ignore[attr-defined]  # noqa: SLF001
    if getattr(shared.seek, "nncodecs_fix", False):
        return True
    original = shared.seek

    def seek(self: object, offset: int, whence: int = 0) -> int:
        if whence == os.SEEK_CUR:
            with self._lock:  # type: ignore[attr-defined]
                # (the lock is re-entrant: the original takes it again)
                return original(self, self._pos + offset, os.SEEK_SET)  # type: ignore[attr-defined]
        return original(self, offset, whence)

    seek.nncodecs_fix = True  # type: ignore[attr-defined]
    shared.seek = seek
    return True
