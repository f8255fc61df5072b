"""Open what a user passes as a container target as a Zarr store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from zarr.abc.store import Store
from zarr.storage import LocalStore, ZipStore

__all__ = ["StagedZip", "open_store"]


class StagedZip:
    """A zip container written through a staging directory.

    Zarr's ZipStore appends a new entry each time a key is rewritten (the
    metadata is rewritten often while a model streams in) and a zip file has
    no usable index until it is closed. So a Writer fills a directory beside
    the target and, on close, writes the zip to a temporary file and renames
    it over the target: a writer killed at any point leaves the previous zip
    untouched.
    """

    def __init__(self, path: Path, mode: str) -> None:
        import tempfile
        import zipfile

        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        if mode == "a":
            if not path.exists():
                raise FileNotFoundError(f"no container at {path} to append to")
            with zipfile.ZipFile(path) as z:
                z.extractall(self.staging)
        self.store = LocalStore(self.staging)

    def commit(self) -> None:
        """Write the zip (stored, not deflated: the chunks are compressed) and swap it in."""
        import shutil
        import zipfile

        partial = self.path.with_name(self.path.name + ".partial")
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            for file in sorted(self.staging.rglob("*")):
                if file.is_file():
                    z.write(file, file.relative_to(self.staging).as_posix())
        os.replace(partial, self.path)
        shutil.rmtree(self.staging, ignore_errors=True)

    def abandon(self) -> None:
        import shutil

        shutil.rmtree(self.staging, ignore_errors=True)


def open_store(
    target: Any, mode: str, storage_options: dict[str, Any] | None = None
) -> tuple[Any, bool]:
    """(store, owned) for a path (``*.zip``: one zip file, read only; else a directory), a URL
    (``memory://``, ``s3://`` ...: through fsspec, with ``storage_options`` such as an
    ``endpoint_url`` and keys), or any Zarr store object.

    ``owned`` says whether the caller must close the store.
    """
    if isinstance(target, Store):
        return target, False
    if isinstance(target, str) and "://" in target and not target.startswith("file://"):
        from zarr.storage import FsspecStore

        store = FsspecStore.from_url(
            target, storage_options=storage_options or None, read_only=mode == "r"
        )
        return store, True
    if storage_options:
        raise ValueError("storage_options go with a URL target (s3://...)")
    if isinstance(target, str | os.PathLike):
        path = Path(str(target).removeprefix("file://"))
        if path.suffix == ".zip":
            if mode != "r":  # writers go through StagedZip, never through ZipStore
                raise ValueError(f"{path}: a zip container is written through StagedZip")
            if not path.exists():
                raise FileNotFoundError(f"no container at {path}")
            return ZipStore(path, mode="r"), True
        if mode == "r" and not path.exists():
            raise FileNotFoundError(f"no container at {path}")
        return LocalStore(path, read_only=mode == "r"), True
    raise TypeError(
        f"a container target is a path, a URL or a Zarr store, got {type(target).__name__}"
    )
