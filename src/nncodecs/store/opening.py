"""Open what a user passes as a container target as a Zarr store.

:func:`open_store` opens a path, URL or store (for readers and the parallel
archive); :class:`CheckedStore` is a Reader's view of it (the integrity
checks every read gets). Writers go through :mod:`nncodecs.store.output`.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from zarr.abc.store import Store
from zarr.storage import LocalStore, WrapperStore, ZipStore

from nncodecs.errors import CorruptDataError, NotAContainerError
from nncodecs.extras import need_for_url
from nncodecs.outputs import is_chained, is_url
from nncodecs.store import storage, zarr_nodes
from nncodecs.store.files import ContainerFiles, is_zip_target
from nncodecs.store.zip_entries import check_zip

__all__ = ["CheckedStore", "describe_target", "files_of", "open_store", "zarr_store"]

zarr_nodes.zarr_with_types()  # (every Zarr store of nncodecs' is made here)


def local_path(target: Any) -> Path | None:
    """The local path of a target (``file://`` stripped), ``None`` for URLs and stores."""
    if isinstance(target, Store) or is_url(target):
        return None
    if isinstance(target, str | os.PathLike):
        return Path(str(target).removeprefix("file://"))
    raise TypeError(
        f"a container target is a path, a URL or a Zarr store, got {type(target).__name__}"
    )


def _chained(target: str, mode: str) -> str | None:
    """A chained fsspec URL a container target may be: ``zip::PATH`` (a local zip
    container: its path, read only). Anything else chained is refused by name, never
    taken for a local file of that literal name."""
    rest = target[len("zip::") :] if target.startswith("zip::") else None
    if rest is not None and mode == "r" and not is_url(rest):
        return rest.removeprefix("file://")
    if mode != "r":
        raise ValueError(
            f"{target}: a chained URL (zip::, simplecache::) is not a target nncodecs writes: "
            "name a local path (NAME.zarr.zip for a zip) or a plain URL (s3://bucket/model.zarr)"
        )
    return None


def open_store(
    target: Any, mode: str, storage_options: dict[str, Any] | None = None
) -> tuple[Any, bool]:
    """(store, owned) for a path (``*.zip``: one zip file, read only; else a directory), a URL
    (``memory://``, ``s3://`` ...: through fsspec, with ``storage_options`` such as an
    ``endpoint_url`` and keys), or any Zarr store object.

    ``owned`` says whether the caller must close the store. Writers use
    :func:`nncodecs.store.target.open_output`; this serves readers and
    the parallel archive.
    """
    if isinstance(target, Store):
        return target, False
    if is_chained(target):
        chained = _chained(target, mode)
        if chained is not None:
            return open_store(chained, mode, storage_options)
    if is_url(target):
        if str(target).rstrip("/").endswith(".zip"):
            raise ValueError(
                f"{target}: a zip container on an object store is not supported; "
                "write a directory container there (s3://bucket/model.zarr)"
            )
        need_for_url(str(target))
        from zarr.storage import FsspecStore

        store = FsspecStore.from_url(
            target, storage_options=storage_options or None, read_only=mode == "r"
        )
        return store, True
    if storage_options:
        raise ValueError("storage_options go with a URL target (s3://...)")
    path = local_path(target)
    assert path is not None
    if mode != "r":
        return LocalStore(path), True
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such container")
    if is_zip_target(path):
        return open_zip(path), True
    if not (path / "zarr.json").is_file():
        raise NotAContainerError(f"{path}: not an nncodecs container (no zarr.json)")
    return LocalStore(path, read_only=True), True


def open_zip(path: Path) -> ZipStore:
    """A zip container, open for reading (a damaged zip is a CorruptDataError)."""
    check_zip(path)
    store = ZipStore(path, mode="r")
    try:
        store._sync_open()  # noqa: SLF001 (zarr's ZipStore opens lazily; no public call)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise CorruptDataError(f"{path}: a damaged zip file ({exc})") from None
    return store


def describe_target(target: Any) -> str:
    """A target as errors name it: its path or URL, a store's class."""
    return type(target).__name__ if isinstance(target, Store) else str(target)


class CheckedStore(WrapperStore):
    """A Reader's view of a Zarr store: every key read through it gets the checks of a
    :class:`ContainerFiles` (what Zarr would quietly read as fill values, or read from
    outside the container, is an error instead), and whole reads of chunks are read
    from local files here and now (:meth:`ContainerFiles.read_now`)."""

    def __init__(self, store: Any, files: ContainerFiles | None = None) -> None:
        super().__init__(store)
        if files is None:
            files = files_of(store)
        self.files = files
        self.strict = files.strict

    def _with_store(self, store: Any) -> CheckedStore:
        return type(self)(store, self.files)

    def check_key(self, key: str) -> None:
        self.files.check_key(key)

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        self.files.check_key(key)
        try:
            buf = await self._store.get(key, prototype, byte_range)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:  # a bad CRC, a cut entry
            raise self.files.describe_error(key, f"a damaged zip entry ({exc})") from None
        suffix = None
        if byte_range is not None:
            from zarr.abc.store import SuffixByteRequest

            suffix = byte_range.suffix if isinstance(byte_range, SuffixByteRequest) else 0
        self.files.check_value(key, buf, suffix)
        return buf

    def read_now(self, keys: list[str]) -> list[np.ndarray | None] | None:
        return self.files.read_now(keys)

    def memory_map(self, z: Any) -> np.ndarray | None:
        """A read-only map of a raw, one-chunk array's bytes in a local file (``None``
        where the array or the store is otherwise); CorruptDataError for a missing chunk
        of an array recorded whole, or a chunk of another size than the array's."""
        codecs = [c.to_dict() for c in z.metadata.codecs]
        raw = len(codecs) == 1 and codecs[0]["name"] == "bytes"
        if not raw or tuple(z.chunks) != tuple(max(1, d) for d in z.shape) or z.size == 0:
            return None
        endian = codecs[0].get("configuration", {}).get("endian", "little")
        if z.dtype.itemsize > 1 and endian != "little":
            return None
        if not self.files.local:
            return None  # (an object store: read, not mapped)
        key = f"{z.path}/{storage.single_chunk_key(z.ndim)}"
        self.files.check_key(key)  # (a zip entry: its local header checked too)
        located = self.files.locate(key)
        if located is None:
            if z.path in self.strict:
                raise CorruptDataError(f"chunk {key} is missing")
            return None
        path, offset, length = located
        if length != z.nbytes:
            raise CorruptDataError(f"its raw chunk holds {length} bytes, its shape says {z.nbytes}")
        return np.memmap(path, dtype=z.dtype, mode="r", offset=offset, shape=tuple(z.shape))


def files_of(store: Any) -> ContainerFiles:
    """The checks (and local reads) of a Zarr store: a zip's entries, a directory's root."""
    if isinstance(store, ZipStore):
        # (zarr's ZipStore has no public way to open it or reach its zip file)
        if not store._is_open:  # noqa: SLF001
            store._sync_open()  # noqa: SLF001 (as above)
        return ContainerFiles(str(store.path), zf=store._zf)  # noqa: SLF001 (as above)
    if isinstance(store, LocalStore):
        return ContainerFiles(str(store.root), root=str(store.root))
    return ContainerFiles(
        str(getattr(store, "path", None) or getattr(store, "root", None) or store)
    )


def zarr_store(files: ContainerFiles) -> Any:
    """A Zarr store over a local container that :func:`open_local` opened (read only)."""
    if files.zip is not None:
        return open_zip(Path(files.path))
    return LocalStore(files.path, read_only=True)
