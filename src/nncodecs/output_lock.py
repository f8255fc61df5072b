"""The lock of a local container: one writer at a time (``.NAME.nncodecs.lock``).

Below :mod:`nncodecs.outputs`, which names it among the paths nncodecs may create;
with :func:`uninterrupted`, which the clean-up of an interrupted run goes through.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Any

__all__ = ["OutputLock", "lock_path", "uninterrupted"]


def lock_path(target: Path) -> Path:
    """The lock file of a local container."""
    return target.parent / f".{target.name}.nncodecs.lock"


class OutputLock:
    """The lock of a local container (``.NAME.nncodecs.lock``), held by one writer at a time.

    An ``flock`` on the file (through :func:`filelock.lock_descriptor`), so a
    writer that dies, however it dies, releases it: a lock file left by a dead
    writer is simply taken over. The holder writes its pid into the file, and a
    second writer's error names it. The file is removed on release.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> target = Path(tempfile.mkdtemp()) / "m.zarr"
    >>> with OutputLock(target):
    ...     OutputLock(target).acquire()
    Traceback (most recent call last):
    ...
    BlockingIOError: ...m.zarr: another writer (pid ...) holds .m.zarr.nncodecs.lock
    """

    def __init__(self, target: Path) -> None:
        self.target = Path(target)
        self.path = lock_path(self.target)
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        from filelock import lock_descriptor

        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(8):  # the file can be removed by its holder between open and lock
            # No O_TRUNC: the holder's pid stays readable; O_NOFOLLOW: never through a link.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            locked = False
            try:
                if not lock_descriptor(fd, blocking=False):
                    pid = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
                    raise BlockingIOError(
                        errno.EWOULDBLOCK,
                        f"{self.target}: another writer (pid {pid}) holds {self.path.name}",
                    )
                locked = True
                if self._same(fd):  # locked, and still the file at that name: ours
                    self._fd, fd = fd, -1  # (from here, release() removes it)
                    os.ftruncate(self._fd, 0)
                    os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
                    return self
            except BaseException:
                # (an interrupt, or any exception a signal handler raises, while it was
                # being taken: a lock held is let go as release() does, file and all;
                # a file made but not yet locked goes too, once locking it shows no
                # other writer took it meanwhile)
                if self._fd is not None:
                    self.release()
                elif (locked or lock_descriptor(fd, blocking=False)) and self._same(fd):
                    with contextlib.suppress(FileNotFoundError):
                        self.path.unlink()
                raise
            finally:
                if fd != -1:
                    os.close(fd)
        raise BlockingIOError(errno.EWOULDBLOCK, f"{self.target}: could not take {self.path.name}")

    def _same(self, fd: int) -> bool:
        """Whether ``fd`` is the file at the lock's path."""
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path, follow_symlinks=False))
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """Remove the lock file, then unlock (a waiter that opened it retries on the new
        one); a second Ctrl-C landing in it does not leave the file."""
        uninterrupted(self._release)

    def _release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        fd, self._fd = self._fd, None
        os.close(fd)  # closing releases the flock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def uninterrupted(fn: Any, *args: Any, attempts: int = 8) -> Any:
    """``fn(*args)`` run to its end though Ctrl-C (or the command's SIGTERM) lands in it:
    run again after an interrupt (``fn`` must be safe to repeat: a removal, a wait),
    and the interrupt raised once it has finished. For the clean-up of an interrupted
    run, which would otherwise leave a temporary, or remove one still being written."""
    interrupt: BaseException | None = None
    for _ in range(attempts - 1):
        try:
            result = fn(*args)
            break
        except KeyboardInterrupt as exc:
            interrupt = exc
    else:
        result = fn(*args)
    if interrupt is not None:
        raise interrupt
    return result
