"""What a container records of its source's files: their size (``source.bytes``: every
file the source is, an ONNX model's external data included; the original of the ratio
``info`` shows), and a source file's mode and times, kept as zstd and tar keep them:
``compress`` records them (``source.mode``, octal; ``source.mtime_ns``) and gives them
to the container file;
``decompress`` and ``convert`` give them to the restored file, its mode set from the
file's first byte (:func:`nncodecs.outputs.created_mode`), so a private model is never
readable by others on the way. A container made through the API (no record) restores
with the umask's mode and the time of the restore. Folders (a snapshot, a directory
container) keep the umask's modes."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from nncodecs.outputs import created_mode, keep_times
from nncodecs.sizes import path_bytes

__all__ = [
    "MODE",
    "MTIME",
    "SIZE",
    "kept_like",
    "recorded",
    "recorded_bytes",
    "source_bytes",
    "source_record",
]

MODE, MTIME, SIZE = "source.mode", "source.mtime_ns", "source.bytes"


def source_bytes(source: Path, fmt: str) -> int:
    """The bytes of every file a source is: a folder's files, an ONNX model's external
    data files too."""
    size = path_bytes(source)
    if fmt == "onnx" and source.is_file():
        from nncodecs.formats.onnx_external import owned_external

        files = {(source.parent / name).resolve() for name in owned_external(source)}
        size += sum(f.stat().st_size for f in files if f.is_file())
    return size


def recorded_bytes(metadata: dict[str, str]) -> int | None:
    """The source's bytes a container recorded (``None`` where it recorded none)."""
    with contextlib.suppress(KeyError, ValueError, TypeError):
        size = int(metadata[SIZE])
        return size if size >= 0 else None
    return None


def source_record(source: Path) -> tuple[os.stat_result | None, dict[str, str]]:
    """A single-file source's stat and the metadata that records its mode and times."""
    if not source.is_file():
        return None, {}
    st = source.stat()
    return st, {MODE: f"{stat.S_IMODE(st.st_mode):o}", MTIME: str(st.st_mtime_ns)}


def recorded(metadata: dict[str, str]) -> tuple[int | None, int | None]:
    """``(mode, mtime_ns)`` a container recorded of its source (each ``None`` where it
    recorded none, or nothing readable)."""
    mode = mtime = None
    # (permission bits only: a container's record never sets setuid, setgid or sticky)
    with contextlib.suppress(ValueError, TypeError):
        mode = int(metadata[MODE], 8) & 0o777 if MODE in metadata else None
    with contextlib.suppress(ValueError, TypeError):
        mtime = int(metadata[MTIME]) if MTIME in metadata else None
    return mode, (mtime if mtime is None or mtime >= 0 else None)


@contextlib.contextmanager
def kept_like(mode: int | None, mtime_ns: int | None, out: Path) -> Iterator[None]:
    """The output files made inside get ``mode`` from their first byte; ``out``, once
    made, gets ``mtime_ns`` (as its access time too)."""
    with created_mode(mode):
        yield
    if mtime_ns is not None and out.is_file() and not out.is_symlink():
        keep_times(out, mtime_ns)
