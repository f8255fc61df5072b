"""Start an output file's writing to disk as it grows, so that the fsync that makes it
durable before its rename waits for the last few MiB only (on the 1 GB model that fsync
took 0.25-0.65 s after the last write; it now takes about 0.01 s)."""

from __future__ import annotations

from typing import Any

from nncodecs import _core

__all__ = ["Writeback"]

#: Each time this many bytes are written, their writeback is started.
STEP = 32 << 20


class Writeback:
    """Call :meth:`written` after writes to the open file ``f`` (a Python file object)."""

    def __init__(self, f: Any) -> None:
        self.f, self.started = f, 0

    def written(self, end: int) -> None:
        """The file is written up to byte ``end``: start writing out what is due."""
        if end - self.started >= STEP:
            self.f.flush()
            _core.start_writeback(self.f.fileno(), self.started, end - self.started)
            self.started = end
