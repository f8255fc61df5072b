"""The process's malloc, set for streaming models tensor by tensor (glibc only)."""

from __future__ import annotations

import ctypes
import sys

__all__ = ["use_one_malloc_arena"]


def use_one_malloc_arena() -> None:
    """glibc: let every thread allocate from one malloc arena, for the rest of the process.

    Zarr encodes and decodes chunks on a pool of threads, and glibc gives each
    thread an arena of its own that keeps what was freed in it, so a model
    streamed tensor by tensor held several tensors' worth of freed memory (the
    figures: docs/formats.md, "Memory"). It applies to arenas made from now on;
    elsewhere than glibc it does nothing. ``compress`` and ``decompress`` call it.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_arena_max = -8
    mallopt(m_arena_max, 1)
