"""Threads the kernels use: one process-wide setting."""

from __future__ import annotations

import functools
import os

__all__ = ["get_threads", "set_threads"]

_threads = 0  # 0: every hardware thread


def set_threads(threads: int | None) -> None:
    """Set the threads the kernels use on large buffers (``None`` or 0: all cores).

    >>> set_threads(1); get_threads()
    1
    >>> set_threads(None)
    """
    global _threads
    if threads is None:
        threads = 0
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError(f"threads must be a non-negative integer or None, got {threads!r}")
    _threads = threads


def get_threads() -> int:
    """Threads the kernels use on large buffers: the setting, or every core."""
    return _threads or _cores()


@functools.cache
def _cores() -> int:
    # Asked once: os.cpu_count() reads sysfs on every call (docs/development.md).
    return os.cpu_count() or 1
