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
import functools
import operator
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from nncodecs.outputs import created_mode, keep_times

__all__ = [
    "MODE",
    "MTIME",
    "SIZE",
    "common_mode",
    "kept_like",
    "recorded",
    "recorded_bytes",
    "source_bytes",
    "source_files",
    "source_record",
    "strictest",
]

MODE, MTIME, SIZE = "source.mode", "source.mtime_ns", "source.bytes"


def source_files(source: Path, fmt: str) -> list[Path]:
    """Every file a source is: a folder's files; a model file and, for ONNX, the external
    data files its graph names (one walk of the graph)."""
    if source.is_dir():
        return sorted(f for f in source.rglob("*") if f.is_file())
    return [source, *_external_files(source, fmt)]


def source_bytes(source: Path, fmt: str) -> int:
    """The bytes of every file a source is (:func:`source_files`)."""
    return sum(f.stat().st_size for f in source_files(source, fmt))


def recorded_bytes(metadata: dict[str, str]) -> int | None:
    """The source's bytes a container recorded (``None`` where it recorded none)."""
    text = metadata.get(SIZE)
    if isinstance(text, str) and _TIME_TEXT.fullmatch(text) and int(text) < 2**63:
        return int(text)  # (digits only, below 2^63: a forged record is no size)
    return None


def source_record(source: Path, fmt: str = "") -> tuple[os.stat_result | None, dict[str, str]]:
    """What a container records of its source: the bytes of all its files, and for a
    single-file source its stat, mode and times. The mode is the strictest of its files'
    (an ONNX model's 0600 external data keeps the container and every restored file
    private), the times the file's own. Its files are listed once (an ONNX graph walked
    once)."""
    files = source_files(source, fmt)
    record = {SIZE: str(sum(f.stat().st_size for f in files))}
    if not source.is_file():
        return None, record
    st = source.stat()
    record.update({MODE: f"{strictest(files):o}", MTIME: str(st.st_mtime_ns)})
    return st, record


def strictest(paths: list[Path]) -> int | None:
    """The permission bits every one of ``paths`` grants (``None`` where none is a file)."""
    return common_mode([stat.S_IMODE(p.stat().st_mode) for p in paths if p.is_file()])


def common_mode(modes: list[int]) -> int | None:
    """The permission bits every one of ``modes`` grants (``None`` for none)."""
    if not modes:
        return None
    return functools.reduce(operator.and_, modes, 0o777)


def _external_files(source: Path, fmt: str) -> list[Path]:
    if fmt != "onnx":
        return []
    from nncodecs.formats.onnx_external import owned_external

    files = {(source.parent / name).resolve() for name in owned_external(source)}
    return sorted(f for f in files if f.is_file())


#: A recorded mode: octal permission bits, and nothing else (a forged "-1" or " 76 "
#: is no mode).
_MODE_TEXT = re.compile(r"[0-7]{1,4}")
_TIME_TEXT = re.compile(r"[0-9]{1,19}")


def recorded(metadata: dict[str, str]) -> tuple[int | None, int | None]:
    """``(mode, mtime_ns)`` a container recorded of its source (each ``None`` where it
    recorded none, or nothing readable). The mode gives permission bits only, less the
    umask's (as tar gives them to a user other than root): a container's record never
    sets setuid, setgid or sticky, nor grants what this user's umask withholds."""
    mode_text, time_text = metadata.get(MODE), metadata.get(MTIME)
    mode = mtime = None
    if isinstance(mode_text, str) and _MODE_TEXT.fullmatch(mode_text):
        mode = int(mode_text, 8) & 0o777 & ~_umask()
    if isinstance(time_text, str) and _TIME_TEXT.fullmatch(time_text):
        mtime = int(time_text) if int(time_text) < 2**63 else None
    return mode, mtime


def _umask() -> int:
    """This process's umask, read without changing it where Linux tells it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    old = os.umask(0o022)  # (elsewhere: set and put back at once)
    os.umask(old)
    return old


@contextlib.contextmanager
def kept_like(mode: int | None, mtime_ns: int | None, out: Path) -> Iterator[None]:
    """The output files made inside get ``mode`` from their first byte; ``out``, once
    made, gets ``mtime_ns`` (as its access time too)."""
    with created_mode(mode):
        yield
    if mtime_ns is not None and out.is_file() and not out.is_symlink():
        keep_times(out, mtime_ns)
