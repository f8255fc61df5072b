"""The one interface of every model format: a :class:`Source` lists its tensors from the
file's header (name, dtype, shape, how to read them) and says what a container must keep
so that the file comes back; ``compress``, ``archive``, ``info`` and ``decompress`` share it.

A format module (``safetensors_source``, ``gguf``, ``npz``, ``torch``, ``onnx``,
``ztensor``) subclasses :class:`Source`; :func:`nncodecs.formats.open_source` picks one
by :func:`nncodecs.formats.detect_format`. Writable formats also have a function that
restores them from a container (``restore_safetensors``, ``restore_gguf``, ``write_npz``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import json
import lzma
import math
import os
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs import _core
from nncodecs.errors import CorruptDataError, raised_by_nncodecs
from nncodecs.formats.digests import file_digests

__all__ = [
    "KEPT",
    "ORDER",
    "TIED",
    "FileRows",
    "Pieces",
    "Progress",
    "Source",
    "Tensor",
    "named_order",
    "stream_named",
    "stream_tensors",
]

#: A container's metadata: tensors stored once under another name ({name: stored name}),
#: and every name the source had, in order (JSON; torch's tied tensors, see ``Source.tied``).
TIED, ORDER = "torch.tied", "torch.order"
#: How many files the source kept beside its tensors (``Source.kept_files``).
KEPT = "source.kept_files"

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
    #: ``(GGML type, logical shape)`` of a tensor that is quantized blocks (its ``dtype``
    #: and ``shape`` are then those of its bytes); else ``None``.
    quantized: tuple[str, tuple[int, ...]] | None = None

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
        # (into memory the output cache holds, already mapped: reading into fresh memory
        # cost as much in page faults as the copy itself)
        raw = _core.output_buffer((stop - start) * row)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            got = 0
            while got < raw.nbytes:  # (one call reads at most 2 GiB)
                n = os.preadv(fd, [raw[got:]], self.offset + start * row + got)
                if n == 0:
                    raise CorruptDataError(f"{self.path}: the file ends inside a tensor")
                got += n
        finally:
            os.close(fd)
        arr = raw.view(self.dtype)
        return arr.reshape((stop - start, *self.shape[1:])) if self.shape else arr.reshape(())


#: What the parsers of other packages a Source calls (zipfile, json, NumPy's npz, the
#: ``gguf`` package, onnx, the bz2 / lzma decompressors) raise on damaged bytes, besides a
#: plain ValueError; RecursionError: JSON or a protobuf nested beyond Python's stack.
_DAMAGED = (
    zipfile.BadZipFile,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    NotImplementedError,
    struct.error,
    KeyError,
    IndexError,
    OverflowError,
    RecursionError,
)
#: Damage only where another package raised them (zipfile's RuntimeError for an entry
#: flagged encrypted, its KeyError for a missing one): raised in nncodecs' own code they
#: are a gap of nncodecs (a finding), and pass as they are.
_ELSEWHERE = (KeyError, IndexError, RuntimeError)


@contextlib.contextmanager
def damaged_file(path: Path, fmt: str) -> Iterator[None]:
    """Turns what a parser of another package raises on a damaged file (``_DAMAGED``, and
    ValueError's subclasses such as UnicodeDecodeError; an OSError that no system call
    raised, as bz2's "Invalid data stream", or EINVAL, as zipfile's seek to a forged
    negative offset) into a CorruptDataError that names the file; nncodecs' own errors,
    ValueError and TypeError pass as they are."""
    try:
        yield
    except (*_DAMAGED, ValueError, OSError, RuntimeError) as exc:
        kind = type(exc)
        ours = kind is ValueError or kind.__module__.startswith("nncodecs")
        if ours or (isinstance(exc, OSError) and exc.errno not in (None, errno.EINVAL)):
            raise
        mine = raised_by_nncodecs(exc) and not isinstance(exc, RecursionError)
        if isinstance(exc, _ELSEWHERE) and mine:
            raise
        what = f"{kind.__name__}: {exc}" if str(exc) else kind.__name__
        raise CorruptDataError(f"{path}: a damaged {fmt} file ({what})") from None


def _guarded(load: Callable[[], Any], path: Path, fmt: str) -> Callable[[], Any]:
    @functools.wraps(load)
    def read() -> Any:
        with damaged_file(path, fmt):
            return load()

    return read


class Source:
    """A model file (or directory) of one format, read lazily.

    Subclasses set ``format`` and implement :meth:`_list`; those whose restore needs
    more than the tensors (safetensors, GGUF) extend :meth:`metadata`.
    """

    format = ""
    #: Whether :meth:`metadata` takes the file's CRC32C from the bytes :meth:`arrays` read
    #: (else it is read again: :func:`nncodecs.formats.digests.hash_ahead` starts that early).
    digests_its_reads = False

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tensors: list[Tensor] | None = None

    def _list(self) -> list[Tensor]:
        raise NotImplementedError

    def tensors(self) -> list[Tensor]:
        """Every tensor, in file order, from the header (no tensor data read)."""
        if self._tensors is None:
            with damaged_file(self.path, self.format):
                listed = self._list()
            self._tensors = [
                t
                if t.load is None
                else dataclasses.replace(t, load=_guarded(t.load, self.path, self.format))
                for t in listed
            ]
        return self._tensors

    def arrays(self) -> Iterator[tuple[str, Any]]:
        """``(name, array)`` of every tensor, one read at a time."""
        for t in self.tensors():
            yield t.name, t.read()

    def tied(self) -> dict[str, str]:
        """Tensors that are another's very bytes (the same view of one storage: an output
        layer that is the embedding), ``{name: the first name of those bytes}``: stored
        once; none for most formats."""
        return {}

    def kept_files(self) -> list[tuple[str, Path]]:
        """``(name, path)`` of the files kept beside the tensors (``Writer.add_file``):
        a snapshot directory's other files; none for a model file."""
        return []

    def hidden_files(self) -> dict[str, Any]:
        """Bytes the container keeps for nncodecs itself (``Writer.add_hidden_file``): a
        torch checkpoint's pickle; none for most formats."""
        return {}

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

    def checked_metadata(self) -> dict[str, str]:
        """:meth:`metadata`, with what another package raises on a damaged file made a
        CorruptDataError (as :meth:`tensors` does): what ``compress`` and ``archive`` call."""
        with damaged_file(self.path, self.format):
            return self.metadata()

    def metadata(self) -> dict[str, str]:
        """What a container records of its source (``source.*``), so that it comes back
        whole and checked: here the format, the file's CRC32C and the tensor count."""
        return {
            "source.format": self.format,
            "source.crc32c": file_digests(self.path)["crc32c"],
            "source.tensors": str(len(self.tensors())),
        }


@dataclass(frozen=True)
class Pieces:
    """A container's dense tensor as the pieces of its bytes, each read as it is asked
    for (:meth:`nncodecs.Reader.read_pieces`): what a writer of raw bytes takes instead
    of the whole tensor."""

    reader: Any
    name: str
    nbytes: int

    def pieces(self) -> Iterator[np.ndarray]:
        return self.reader.read_pieces(self.name)


def stream_tensors(
    r: Any, names: list[str], progress: Progress | None, pieces: bool = False
) -> Iterator[tuple[str, Any]]:
    """A container's tensors ``names`` (a :class:`nncodecs.Reader` ``r``), each read with its
    checksums checked and dropped before the next is read: one tensor at a time.
    ``pieces``: dense tensors come as :class:`Pieces` (a window of chunks at a time)."""
    sizes = {n: r.info(n).nbytes for n in r}
    total = sum(sizes.values()) or 1
    done = 0
    for name in names:
        if pieces and r.layout(name) == "dense":
            arr = Pieces(r, name, sizes[name])
        else:
            arr = r.read_tensor(name, check=True)
        nbytes = arr.nbytes
        yield name, arr
        del arr  # before the next one is read: one tensor at a time
        done += nbytes
        if progress:  # (once the caller is done with it: pieces are read as written)
            progress(min(done, total), total)


def named_order(r: Any) -> tuple[list[str], dict[str, str]]:
    """Every tensor name of a container's source in order, tied ones included, and the
    tied ones' stored names (``TIED``, ``ORDER``), checked: a tie names a stored tensor,
    the order every name once."""
    try:
        tied = json.loads(r.metadata.get(TIED, "{}"))
        order = json.loads(r.metadata.get(ORDER, "null"))
    except ValueError as exc:
        raise CorruptDataError(f"the container's tensor records are damaged ({exc})") from None
    if not isinstance(tied, dict) or any(
        not isinstance(n, str) or n in r or not isinstance(t, str) or t not in r
        for n, t in tied.items()
    ):
        raise CorruptDataError("the container's record of tied tensors is damaged")
    names = list(r.keys()) + [n for n in tied]
    if order is None:
        order = names
    if not isinstance(order, list) or sorted(order) != sorted(names):
        raise CorruptDataError("the container's tensor order is damaged")
    return order, tied


def stream_named(
    r: Any, progress: Progress | None, pieces: bool = False
) -> Iterator[tuple[str, Any]]:
    """:func:`stream_tensors` of every name of :func:`named_order`: a tied tensor's
    stored bytes under each of its names."""
    order, tied = named_order(r)
    reads = stream_tensors(r, [tied.get(n, n) for n in order], progress, pieces)
    for name, (_, arr) in zip(order, reads, strict=True):
        yield name, arr
