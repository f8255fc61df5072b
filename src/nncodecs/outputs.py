"""Where nncodecs writes: only the output the user named, and only once it is whole.

Every output (a container directory or zip, a restored model file or directory) is
written under a temporary name beside it and renamed into place when it is complete
and flushed, so a failed or killed run leaves the previous output (or nothing) at the
named path. The names nncodecs may create beside an output ``NAME`` are, and are only:

``.NAME.nncodecs-PID.tmp``
    the output being written by process ``PID``;
``.NAME.nncodecs-PID.old``
    a directory being replaced, between two renames;
``.NAME.nncodecs.lock``
    the lock of a writer appending to a local container (see
    :mod:`nncodecs.container`);
``.NAME.nncodecs-parts``, ``.NAME.nncodecs-dcp``, ``.NAME.nncodecs-old``
    a zip's parts (:mod:`nncodecs.container.task_zip`); a DCP save's container and the
    one it replaces, until renamed (:mod:`nncodecs.integrations.dcp`).

A run removes the temporaries of processes that no longer exist before it writes. An
existing output is replaced only when the caller says so (``force`` / ``overwrite``), and
a directory only when it is an nncodecs container holding nothing but its own documents
and chunks (and these temporaries): nothing else is ever deleted.

This module sits below every other one: it knows paths, not tensors.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from nncodecs.output_lock import OutputLock, lock_path, uninterrupted
from nncodecs.output_names import (
    foreign_entries,
    is_container_dir,
    is_container_zip,
    own_name,
)

__all__ = [
    "OutputLock",
    "atomic_output",
    "check_output",
    "created_mode",
    "final_mode",
    "foreign_entries",
    "is_chained",
    "is_container_dir",
    "is_container_zip",
    "is_url",
    "keep_times",
    "lock_path",
    "made_parents",
    "open_new",
    "own_name",
    "publish",
    "remove_stale",
    "temp_path",
    "uninterrupted",
]

_TEMP = re.compile(r"^\.(?P<name>.+)\.nncodecs-(?P<pid>\d+)\.(?:tmp|old)$")


def is_url(target: Any) -> bool:
    """Whether ``target`` is a URL for fsspec (``s3://``, ``memory://``, a chained
    ``zip::x.zip`` or ``simplecache::s3://...``; not ``file://``): never a local
    file's name."""
    if not isinstance(target, str):
        return False
    return ("://" in target and not target.startswith("file://")) or is_chained(target)


def is_chained(target: Any) -> bool:
    """Whether ``target`` is an fsspec chained URL (``zip::x.zip``, ``simplecache::s3://...``)."""
    if not isinstance(target, str):
        return False
    local = target[7:] if target[:7].lower() == "file://" else target
    return "::" in local.split("://", 1)[0]


def temp_path(target: Path, kind: str = "tmp", pid: int | None = None) -> Path:
    """The temporary name of ``target`` for this process (``kind``: ``tmp`` or ``old``)."""
    return target.parent / f".{target.name}.nncodecs-{os.getpid() if pid is None else pid}.{kind}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale(target: Path) -> list[Path]:
    """Remove the temporaries of ``target`` left by writers that no longer run (only
    names of the documented pattern, for this very target). A dead writer's ``.old``
    when nothing is at ``target`` is the previous output of a replace killed between
    its two renames (:func:`publish`): it is renamed back, never deleted. Returns
    what was removed."""
    removed: list[Path] = []
    parent = target.parent
    if not parent.is_dir():
        return removed
    stale = []
    for entry in parent.iterdir():
        m = _TEMP.match(entry.name)
        if m and m["name"] == target.name and not _alive(int(m["pid"])):
            stale.append(entry)
    olds = [e for e in stale if e.name.endswith(".old")]
    if olds and not os.path.lexists(target):
        newest = max(olds, key=lambda e: e.lstat().st_mtime_ns)
        with contextlib.suppress(FileNotFoundError, FileExistsError, OSError):
            os.rename(newest, target)  # (another run may have put it back first)
            _fsync(parent)
        stale.remove(newest)
    for entry in stale:
        _remove(entry)
        removed.append(entry)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


#: What an existing output's error tells the user (the command's flag, the API's keyword).
_REPLACE = "use --force (overwrite=True) to replace it"


def check_output(target: Path, force: bool = False, inputs: tuple[Path, ...] = ()) -> None:
    """Refuse an output that would destroy something.

    Raises ``FileExistsError`` for an existing file, link or non-empty
    directory unless ``force``; with ``force``, a directory that is not an
    nncodecs container is still refused. An output that is, or lies inside,
    one of ``inputs`` (or holds one) is refused whatever ``force`` says.
    """
    target = Path(target)
    for src in inputs:
        src_r, out_r = Path(src).resolve(), target.resolve()
        if out_r == src_r or src_r in out_r.parents or out_r in src_r.parents:
            raise ValueError(f"{target}: the output would overwrite the input {src}")
    if target.is_symlink():
        if not force:
            raise FileExistsError(f"{target}: exists (a link); {_REPLACE}")
        return
    if target.is_dir():
        if not any(target.iterdir()):
            return
        if not force:
            raise FileExistsError(f"{target}: exists (a directory); {_REPLACE}")
        if not is_container_dir(target):
            raise FileExistsError(
                f"{target}: a directory that is not an nncodecs container: not replaced, "
                "even with --force (overwrite=True)"
            )
        foreign = foreign_entries(target)
        if foreign:
            raise FileExistsError(
                f"{target}: holds {', '.join(foreign)}, which the container does not: "
                "not replaced, even with --force (overwrite=True)"
            )
        return
    if target.exists() and not target.is_file():  # (a device, a FIFO, a socket)
        raise FileExistsError(
            f"{target}: exists and is not a regular file (a device, FIFO or socket): "
            "not replaced, even with --force (overwrite=True)"
        )
    if target.exists() and not force:
        raise FileExistsError(f"{target}: exists; {_REPLACE}")


def _fsync(path: Path) -> None:
    """Flush a file, or a directory's entries, to disk (best effort where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _syncfs(path: Path) -> bool:
    """Flush the file system holding ``path`` in one call (Linux's syncfs): a
    directory of thousands of files would pay a journal commit per fsync."""
    import ctypes

    try:
        syncfs, fd = ctypes.CDLL(None, use_errno=True).syncfs, os.open(path, os.O_RDONLY)
    except (OSError, AttributeError):
        return False
    try:
        return syncfs(fd) == 0
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    if path.is_dir():
        if _syncfs(path):
            return
        for root, _, files in os.walk(path):
            for name in files:
                _fsync(Path(root) / name)
            _fsync(Path(root))
    else:
        _fsync(path)


def publish(temp: Path, target: Path, force: bool = False) -> None:
    """Move a complete ``temp`` (file or directory) to ``target``, flushed first.

    Without ``force`` an output that appeared meanwhile is not replaced
    (``FileExistsError``). A directory being replaced is renamed aside first
    and deleted only after the new one is in place.
    """
    _fsync_tree(temp)
    if temp.is_dir():
        old = None
        if target.is_dir() and not target.is_symlink() and any(target.iterdir()):
            check_output(target, force)
            old = temp_path(target, "old")
            os.rename(target, old)
        elif target.is_symlink() or target.is_file():
            check_output(target, force)
            target.unlink()
        elif target.is_dir():  # empty: rename replaces it
            pass
        try:
            os.rename(temp, target)
        except OSError as exc:
            if old is not None:
                os.rename(old, target)  # put the previous output back
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise FileExistsError(f"{target}: appeared while it was written") from None
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    elif force:
        if target.is_dir() and not target.is_symlink():
            check_output(target, force)
            old = temp_path(target, "old")
            os.rename(target, old)
            os.replace(temp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(temp, target)
    else:
        try:
            os.link(temp, target)  # fails if the target exists: no replace without force
        except FileExistsError:
            raise FileExistsError(f"{target}: appeared while it was written") from None
        except OSError:  # a file system without hard links
            check_output(target, force)
            os.replace(temp, target)
        else:
            temp.unlink()
    _fsync(target.parent)


def _missing_parents(target: Path) -> list[Path]:
    return [d for d in target.parents if not d.exists()]  # deepest first


def _remove_dirs(dirs: list[Path]) -> None:
    for d in dirs:  # deepest first; only while empty
        with contextlib.suppress(OSError):
            d.rmdir()


@contextlib.contextmanager
def made_parents(target: Path | None) -> Iterator[None]:
    """Around a run that may create ``target``'s missing parent directories (a Writer
    does): if it fails, the directories it made are removed again (when still empty)."""
    made = _missing_parents(Path(target)) if target is not None else []
    try:
        yield
    except BaseException:
        _remove_dirs(made)
        raise


@contextlib.contextmanager
def atomic_output(
    target: str | os.PathLike[str],
    force: bool = False,
    directory: bool = False,
    inputs: tuple[Path, ...] = (),
) -> Iterator[Path]:
    """Write ``target`` through a temporary name: ``with atomic_output(p) as tmp: ...``.

    The body writes ``tmp`` (a file path to create; with ``directory=True`` a
    directory made for it); on success the result is flushed and renamed to
    ``target``; on any error, or an interrupt, the temporary is removed and
    ``target`` is left as it was.

    Examples
    --------
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp()) / "a.txt"
    >>> with atomic_output(out) as tmp:
    ...     _ = tmp.write_text("hello")
    >>> out.read_text(), sorted(os.listdir(out.parent))
    ('hello', ['a.txt'])
    """
    target = Path(target)
    check_output(target, force, inputs)  # (before touching anything: refused early)
    if not directory and target.is_dir() and not target.is_symlink():
        raise FileExistsError(f"{target}: exists (a directory); the output is a file")
    made = _missing_parents(target)  # removed again if the run fails
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target)  # (a previous output put back from .old is checked again below)
    check_output(target, force, inputs)
    temp = temp_path(target)
    _remove(temp)  # a leftover of this very pid (a reused pid)
    if directory:
        temp.mkdir()
    elif _CREATE_MODE.get() is not None:  # (the body's open("wb") keeps it: private at once)
        open_new(temp).close()
    try:
        yield temp
        final_mode(temp)
        publish(temp, target, force)
    except BaseException as exc:
        _remove(temp)
        _remove_dirs(made)
        if str(temp) in str(exc) and len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc.args = (exc.args[0].replace(str(temp), str(target)),)  # the user's name
        raise


#: The permission bits of the output files made inside :func:`created_mode` (a source's,
#: kept on what is made from it); ``None``: the umask's.
_CREATE_MODE: ContextVar[int | None] = ContextVar("nncodecs_create_mode", default=None)


@contextlib.contextmanager
def created_mode(mode: int | None) -> Iterator[None]:
    """Output files made inside get ``mode`` (its permission bits) from their first byte:
    a private source's container or restored file is never readable by others, not even
    while it is written."""
    token = _CREATE_MODE.set(None if mode is None else mode & 0o7777)
    try:
        yield
    finally:
        _CREATE_MODE.reset(token)


def open_new(path: Path) -> Any:
    """``path`` opened to write from its start (made, or emptied), with the mode of
    :func:`created_mode` set before any byte (created under the umask, never wider,
    then given exactly that mode); the umask's mode outside."""
    mode = _CREATE_MODE.get()
    if mode is None:
        return path.open("wb")
    writable = mode | 0o200  # (written by its owner first: a read-only mode comes at the end)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, writable & 0o777)
    try:
        os.fchmod(fd, writable)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def final_mode(path: Path) -> None:
    """Give a finished output file exactly the mode of :func:`created_mode` (a read-only
    one included), where one is set."""
    mode = _CREATE_MODE.get()
    if mode is not None and path.is_file() and not path.is_symlink():
        os.chmod(path, mode)


def keep_times(path: Path, mtime_ns: int, atime_ns: int | None = None) -> None:
    """Give ``path`` a source's modification time (and access time: the same where none
    is given), as zstd and tar keep them, where the file system allows."""
    # (a time the platform cannot hold is left as it is: the file is written and kept)
    with contextlib.suppress(OSError, OverflowError, ValueError):
        os.utime(path, ns=(mtime_ns if atime_ns is None else atime_ns, mtime_ns))
