"""The Output a Writer writes through, by kind of target."""

from __future__ import annotations

from typing import Any

from nncodecs.errors import NotAContainerError
from nncodecs.store.files import local_target
from nncodecs.store.output import DirOutput, Output, StoreOutput
from nncodecs.store.zip_output import ZipOutput

__all__ = ["open_output"]


def open_output(
    target: Any, mode: str, overwrite: bool, storage_options: dict[str, Any] | None
) -> Output:
    """The Output of a Writer's target (see :class:`nncodecs.Writer`). A local path
    needs no Zarr; a store or URL is Zarr's."""
    path = local_target(target)
    if path is None:
        from zarr.abc.store import Store

        from nncodecs.store.opening import open_store

        if isinstance(target, Store):
            return StoreOutput(target, owned=False)
        store, owned = open_store(target, mode, storage_options)  # (TypeError: not a target)
        return StoreOutput(store, owned)
    if storage_options:
        raise ValueError("storage_options go with a URL target (s3://...)")
    if path.suffix == ".zip":
        return ZipOutput(path, mode, overwrite)
    if path.is_file() and not path.is_symlink():
        if mode == "a":
            raise NotAContainerError(f"{path}: a file, not a directory container")
        if not overwrite:
            raise FileExistsError(f"{path}: exists (a file); use overwrite=True to replace it")
    return DirOutput(path, mode, overwrite)
