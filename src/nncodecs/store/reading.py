"""A container's target opened for reading: its files (local, read without Zarr)
or its store, the Zarr store made on first use, and one listing of stored sizes.

A :class:`nncodecs.Reader` holds one; everything it reads goes through it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from nncodecs.store import storage
from nncodecs.store.files import ContainerFiles, local_target, open_local

__all__ = ["OpenedTarget"]


class OpenedTarget:
    """``target`` opened for reading (``check_open``: raises once its reader is closed).

    ``files``: the container's files, with the checks of every key read;
    ``where``: the target as messages name it."""

    def __init__(
        self, target: Any, storage_options: dict | None, check_open: Callable[[], None]
    ) -> None:
        self._base: Any = None
        self._zarr: Any = None
        self._owned = True
        self._lock = threading.Lock()
        self._sizes: dict[str, int] | None = None
        self._check_open = check_open
        local = local_target(target) if storage_options is None else None
        if local is not None:
            self.files: ContainerFiles = open_local(local)
            self.where = str(target)
        else:
            from nncodecs.store.opening import describe_target, files_of, open_store

            self._base, self._owned = open_store(target, "r", storage_options)
            self.where, self.files = describe_target(target), files_of(self._base)

    def zarr_store(self) -> Any:
        """The Zarr store every Zarr object reads through (a CheckedStore sharing the
        files' checks), made on first use."""
        with self._lock:
            if self._zarr is None:
                self._check_open()
                from nncodecs.store.opening import CheckedStore, zarr_store

                if self._base is None:
                    self._base = zarr_store(self.files)
                self._zarr = CheckedStore(self._base, self.files)
            return self._zarr

    @property
    def chunk_reads(self) -> Any:
        """What whole reads read chunks through: the local files, else the Zarr store."""
        return self.files if self.files.local else self.zarr_store()

    def root(self) -> Callable[[], Any] | None:
        """A reader of the root document without Zarr (local files), else ``None``."""
        return (lambda: self.files.read_meta("zarr.json")) if self.files.local else None

    def stored(self, path: str) -> int:
        """Stored bytes of an array, from one listing of the store made on first use."""
        if self._sizes is None:
            self._sizes = storage.stored_sizes(self.files if self.files.local else self._base)
        return self._sizes.get(path, 0)

    def close(self) -> None:
        self.files.close()
        if self._owned and self._base is not None:
            self._base.close()
