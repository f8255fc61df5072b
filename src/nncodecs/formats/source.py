"""The one interface of every model format: a :class:`Source` lists its tensors from the
file's header (name, dtype, shape, how to read them) and says what a container must keep
so that the file comes back; ``compress``, ``archive``, ``info`` and ``decompress`` share it.

A format module (``safetensors_source``, ``gguf``, ``npz``, ``torch``, ``onnx``,
``ztensor``) subclasses :class:`Source`; :func:`nncodecs.formats.open_source` picks one
by :func:`nncodecs.formats.detect_format`. Writable formats also have a function that
restores them from a container (``restore_safetensors``, ``restore_gguf``, ``write_npz``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import math
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.errors import CorruptDataError

__all__ = [
    "FileRows",
    "Progress",
    "Source",
    "Tensor",
    "check_sha256",
    "file_sha256",
    "hash_ahead",
    "stream_tensors",
]

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


@dataclass(frozen=True)
class Tensor:
    """One tensor of a model file, known from its header; its data is read only by
    :meth:`read` (``load``: the whole tensor, NumPy or torch) or ``rows``."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    load: Callable[[], Any] | None = None
    #: A picklable ``(start, stop) -> rows`` where the format reads rows from its file
    #: (``archive``'s tasks read them themselves); else ``None``.
    rows: Any = None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def read(self) -> Any:
        """The whole tensor."""
        if self.load is not None:
            return self.load()
        return self.rows(0, self.shape[0] if self.shape else 1)


class FileRows:
    """Rows of a tensor stored whole at ``offset`` in a file, read by whoever calls it
    (a byte range: picklable, so nothing of the model goes through a task graph)."""

    def __init__(self, path: str, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.path, self.offset, self.dtype, self.shape = path, offset, dtype, shape

    def __call__(self, start: int, stop: int) -> np.ndarray:
        row = math.prod(self.shape[1:]) * self.dtype.itemsize if self.shape else 0
        if not self.shape:
            start, stop, row = 0, 1, self.dtype.itemsize
        with open(self.path, "rb") as f:
            f.seek(self.offset + start * row)
            raw = f.read((stop - start) * row)
        arr = np.frombuffer(raw, dtype=self.dtype)
        return arr.reshape((stop - start, *self.shape[1:])) if self.shape else arr.reshape(())


class Source:
    """A model file (or directory) of one format, read lazily.

    Subclasses set ``format`` and implement :meth:`_list`; those whose restore needs
    more than the tensors (safetensors, GGUF) extend :meth:`metadata`.
    """

    format = ""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tensors: list[Tensor] | None = None

    def _list(self) -> list[Tensor]:
        raise NotImplementedError

    def tensors(self) -> list[Tensor]:
        """Every tensor, in file order, from the header (no tensor data read)."""
        if self._tensors is None:
            self._tensors = self._list()
        return self._tensors

    def arrays(self) -> Iterator[tuple[str, Any]]:
        """``(name, array)`` of every tensor, one read at a time."""
        for t in self.tensors():
            yield t.name, t.read()

    def close(self) -> None:
        """Release what reading holds open (nothing, for most formats)."""

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def size(self) -> int:
        """Bytes on disk (what a progress bar counts against)."""
        return self.path.stat().st_size

    def metadata(self) -> dict[str, str]:
        """What a container records of its source (``source.*``), so that it comes back
        whole and checked: here the format, the file's sha256 and the tensor count."""
        return {
            "source.format": self.format,
            "source.sha256": file_sha256(self.path),
            "source.tensors": str(len(self.tensors())),
        }


# sha256 of files being hashed ahead, on a thread of their own, by (path, size, mtime)
_AHEAD: dict[tuple[str, int, int], concurrent.futures.Future[str]] = {}


def _file_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (os.path.realpath(path), st.st_size, st.st_mtime_ns)


def hash_ahead(paths: list[Path]) -> None:
    """Start hashing files on a thread of their own, while the caller encodes (hashlib
    and the reads release the GIL); :func:`file_sha256` then waits for the result."""
    futures = {}
    for path in paths:
        with contextlib.suppress(OSError):
            futures[_file_key(path)] = concurrent.futures.Future()
    if not futures:
        return
    _AHEAD.update(futures)

    def run() -> None:
        for (real, _, _), future in futures.items():
            try:
                future.set_result(_digest(Path(real)))
            except BaseException as exc:  # (file_sha256 raises it in the caller)
                future.set_exception(exc)

    threading.Thread(target=run, name="nncodecs-sha256", daemon=True).start()


def _digest(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_sha256(path: Path) -> str:
    """A file's sha256 (one being hashed ahead, unchanged since: that result)."""
    try:
        future = _AHEAD.pop(_file_key(path), None)
    except OSError:
        future = None
    return future.result() if future is not None else _digest(path)


def check_sha256(path: Path, expected: Any, what: Any, digest: Any = None) -> None:
    """A restored file must be the source byte for byte (containers that recorded it);
    ``digest``: a hash fed every byte as the file was written (else the file is read)."""
    if not isinstance(expected, str):
        return
    got = digest.hexdigest() if digest is not None else file_sha256(path)
    if got != expected:
        raise CorruptDataError(
            f"{what}: the restored file's sha256 differs from the source's; nothing was written"
        )


def stream_tensors(
    r: Any, names: list[str], progress: Progress | None
) -> Iterator[tuple[str, Any]]:
    """A container's tensors ``names`` (a :class:`nncodecs.Reader` ``r``), each read with its
    checksums checked and dropped before the next is read: one tensor at a time."""
    total = sum(r.info(n).nbytes for n in r) or 1
    done = 0
    for name in names:
        arr = r.read_tensor(name, check=True)
        done += arr.nbytes
        if progress:
            progress(min(done, total), total)
        yield name, arr
        del arr  # before the next one is read: one tensor at a time
