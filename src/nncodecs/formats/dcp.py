"""A torch.distributed.checkpoint directory (``.metadata`` and ``__R_I.distcp`` files, as
DCP's ``FileSystemWriter`` writes them) as a :class:`Source`, restored byte for byte.

``.metadata`` is a pickle of DCP's ``Metadata``: it is read through a restricted
unpickler that admits DCP's metadata classes and a few of torch's names and nothing else
(a pickle naming any other is refused by name; no code of its choosing runs; torch's own
weights-only unpickler does not read the pickle protocol DCP writes). It says where each
saved item lies: a file, an offset, a length. A tensor item is a ``torch.save`` of one
shard: a small zip whose one storage record holds the shard's bytes. Each such record is
a tensor of the container, typed by the metadata's dtype and shaped as its chunk, named
by its fully qualified name (``<fqn>@<offsets>`` for a shard that is not the whole
tensor). Everything else (each zip's headers and pickle, bytes items, items written
through a stream transform such as DCP's ZStandard extension) is kept as the file's
bytes around those records, and ``.metadata`` as a kept file: ``decompress`` writes
every file back byte for byte, each checked against its CRC32C (:func:`restore_dcp`).
"""

from __future__ import annotations

import io
import json
import math
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any

from nncodecs.container import HIDDEN
from nncodecs.dtypes import normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.extras import need
from nncodecs.formats.digests import file_digests
from nncodecs.formats.source import FileRows, Source, Tensor
from nncodecs.formats.spliced import (
    check_files,
    keep_gaps_apart,
    restore_files,
    spliced_metadata,
)

__all__ = [
    "DCP_FILES",
    "DCP_TENSORS",
    "DcpSource",
    "check_dcp",
    "is_dcp_directory",
    "read_dcp_metadata",
]

#: Metadata: the records of a DCP directory's ``.distcp`` files.
DCP_FILES = "source.dcp.files"
#: Metadata: the checkpoint's tensors by fully qualified name (JSON: each one's dtype,
#: global size and chunks with their names in the container; a bytes item's name).
DCP_TENSORS = "source.dcp.tensors"


def is_dcp_directory(path: Path) -> bool:
    """Whether ``path`` is a directory DCP's FileSystemWriter wrote."""
    return path.is_dir() and (path / ".metadata").is_file()


def read_dcp_metadata(path: Path) -> Any:
    """DCP's ``Metadata`` from a ``.metadata`` file, through a restricted unpickler: it
    admits DCP's metadata classes, ``torch.Size``, torch's dtypes and layouts and a path
    (the checkpoint's id), and refuses any other name the pickle gives (no code of the
    file's choosing runs)."""
    torch = need("torch", "reading a torch.distributed.checkpoint directory")
    from torch.distributed.checkpoint.metadata import Metadata

    try:
        found = _MetadataUnpickler(io.BytesIO(path.read_bytes()), torch).load()
    except _RefusedError as exc:
        raise ValueError(f"{path}: refused: {exc}") from None
    except (pickle.UnpicklingError, ValueError, TypeError, AttributeError, EOFError,
            IndexError, KeyError, RecursionError) as exc:  # fmt: skip # (a damaged pickle's)
        raise CorruptDataError(f"{path}: damaged DCP metadata ({type(exc).__name__})") from None
    if not isinstance(found, Metadata) or not isinstance(found.storage_data, dict):
        raise ValueError(f"{path}: not DCP metadata (a {type(found).__name__})")
    return found


class _RefusedError(Exception):
    pass


#: What a DCP ``.metadata`` pickle may name: its dataclasses, and a few of torch's.
_ADMITTED = {
    *(
        ("torch.distributed.checkpoint.metadata", name)
        for name in (
            "Metadata",
            "TensorStorageMetadata",
            "BytesStorageMetadata",
            "ChunkStorageMetadata",
            "TensorProperties",
            "MetadataIndex",
            "StorageMeta",
            "_MEM_FORMAT_ENCODING",
        )
    ),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),  # (a layout by its name: torch.strided)
    ("collections", "OrderedDict"),
    *(("pathlib", name) for name in ("PosixPath", "PurePosixPath", "PureWindowsPath")),
}


class _MetadataUnpickler(pickle.Unpickler):
    """A pickle's globals limited to :data:`_ADMITTED` and torch's dtypes and layouts."""

    def __init__(self, file: Any, torch: Any) -> None:
        super().__init__(file)
        self.torch = torch

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ADMITTED:
            return super().find_class(module, name)
        kinds = (self.torch.dtype, self.torch.layout, self.torch.memory_format)
        if module == "torch" and isinstance(getattr(self.torch, name, None), kinds):
            return getattr(self.torch, name)
        raise _RefusedError(f"its pickle names {module}.{name}, which is not DCP's metadata")

    def persistent_load(self, pid: Any) -> Any:
        raise _RefusedError("its pickle names a persistent object, which DCP's metadata never does")


class DcpSource(Source):
    """The shards of a DCP directory, each read from its file by byte range."""

    format = "dcp"

    def _list(self) -> list[Tensor]:
        from torch.distributed.checkpoint.metadata import MetadataIndex, TensorStorageMetadata

        meta = read_dcp_metadata(self.path / ".metadata")
        self._places: dict[str, list[tuple[str, int, int, str]]] = {}
        self.by_fqn: dict[str, Any] = {}  # (DCP_TENSORS)
        out = []
        for fqn, item in meta.state_dict_metadata.items():
            if not isinstance(item, TensorStorageMetadata):
                self.by_fqn[fqn] = {"bytes": fqn}  # (kept as its file's bytes)
                continue
            dtype = _dtype(item.properties.dtype)
            chunks: list[dict[str, Any]] = []
            self.by_fqn[fqn] = {
                "dtype": str(item.properties.dtype).removeprefix("torch."),
                "size": [int(d) for d in item.size],
                "chunks": chunks,
            }
            for chunk in item.chunks:
                offsets, shape = [int(o) for o in chunk.offsets], [int(s) for s in chunk.sizes]
                whole = not any(offsets) and shape == [int(d) for d in item.size]
                name = fqn if whole else f"{fqn}@{','.join(map(str, offsets))}"
                chunks.append({"offsets": offsets, "sizes": shape, "name": name})
                info = meta.storage_data.get(MetadataIndex(fqn, chunk.offsets))
                if dtype is None or info is None or info.transform_descriptors:
                    continue  # (through a stream transform, or a dtype not stored: bytes)
                at = self._record(info, math.prod(shape) * dtype.itemsize)
                if at is None:
                    continue
                place = (name, at, math.prod(shape) * dtype.itemsize, dtype.name)
                self._places.setdefault(info.relative_path, []).append(place)
                rows = FileRows(str(self._file(info.relative_path)), at, dtype, tuple(shape))
                out.append(Tensor(name, dtype, tuple(shape), rows=rows))
        return out

    def _file(self, relative: Any) -> Path:
        """A ``.distcp`` file the metadata names: a plain name inside the directory."""
        if not isinstance(relative, str) or "/" in relative or relative in ("", ".", ".."):
            raise CorruptDataError(f"{self.path}: the metadata names a file {relative!r}")
        return self.path / relative

    def _record(self, info: Any, nbytes: int) -> int | None:
        """Where the storage record of the ``torch.save`` zip at ``info``'s span starts in
        its file, where it holds ``nbytes`` stored (not compressed); else ``None``. Only
        the zip's directory and the record's header are read, not its data."""
        path = self._file(info.relative_path)
        start, length = int(info.offset), int(info.length)
        with path.open("rb") as f:
            if f.seek(0, io.SEEK_END) < start + length:
                raise CorruptDataError(f"{path}: shorter than its metadata says")
            span = _Span(f, start, length)
            try:
                with zipfile.ZipFile(span) as z:
                    found = [i for i in z.infolist() if i.filename.split("/")[-2:-1] == ["data"]]
            except (zipfile.BadZipFile, ValueError, EOFError, NotImplementedError, OSError):
                return None
            if len(found) != 1 or found[0].compress_type or found[0].file_size != nbytes:
                return None
            span.seek(found[0].header_offset + 26)
            name_len, extra_len = struct.unpack("<HH", span.read(4))
        return start + found[0].header_offset + 30 + name_len + extra_len

    @property
    def size(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())

    def kept_files(self) -> list[tuple[str, Path]]:
        """``.metadata``, and any file of the directory that is not a ``.distcp`` file
        holding placed records."""
        self.tensors()
        for f in self.path.iterdir():  # (nothing dropped: a folder or a link is refused)
            if f.is_symlink() or not f.is_file():
                raise ValueError(f"{f}: not a regular file of a DCP directory: nothing was written")
        return sorted((f.name, f) for f in self.path.iterdir() if f.name not in self._places)

    def metadata(self) -> dict[str, str]:
        """Each ``.distcp`` file's places, gaps and CRC32C: restored byte for byte."""
        self.tensors()
        records = []
        self._gaps: dict[str, Any] = {}
        for i, (name, places) in enumerate(sorted(self._places.items())):
            path = self._file(name)
            spans = spliced_metadata(path, "dcp", places)
            meta = dict(spans)
            gaps = keep_gaps_apart(meta, path)[f"{HIDDEN}source-gaps"]
            records.append({
                "file": name,
                "crc32c": file_digests(path)["crc32c"],
                "ranges": json.loads(meta["source.dcp.ranges"]),
                "gap_sizes": json.loads(meta["source.dcp.gap_sizes"]),
                "gaps_file": f"{HIDDEN}external-gaps-{i}",
            })  # fmt: skip # (one record a file)
            self._gaps[f"{HIDDEN}external-gaps-{i}"] = gaps
        return {
            "source.format": self.format,
            "source.layout": "directory",
            "source.tensors": str(len(self.tensors())),
            DCP_FILES: json.dumps(records),
            DCP_TENSORS: json.dumps(self.by_fqn),
        }

    def hidden_files(self) -> dict[str, Any]:
        if not hasattr(self, "_gaps"):
            self.metadata()
        return dict(self._gaps)


class _Span(io.RawIOBase):
    """Bytes ``start``.. ``start + length`` of an open file, as a file of their own (what
    :mod:`zipfile` reads a zip embedded in a ``.distcp`` file through)."""

    def __init__(self, f: Any, start: int, length: int) -> None:
        super().__init__()
        self.f, self.start, self.length, self.at = f, start, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.at, io.SEEK_END: self.length}[whence]
        self.at = max(0, base + offset)
        return self.at

    def readinto(self, buffer: Any) -> int:
        n = max(0, min(len(buffer), self.length - self.at))
        self.f.seek(self.start + self.at)
        got = self.f.readinto(memoryview(buffer)[:n])
        self.at += got or 0
        return got or 0


def _dtype(torch_dtype: Any) -> Any:
    """The NumPy dtype of a torch dtype nncodecs stores, else ``None`` (kept as bytes)."""
    try:
        return normalize_dtype(torch_dtype)
    except TypeError:
        return None


def dcp_records(r: Any) -> list[dict[str, Any]]:
    """A DCP container's file records, checked to be a list of records."""
    try:
        records = json.loads(r.metadata[DCP_FILES])
    except (KeyError, ValueError):
        records = None
    if not isinstance(records, list) or not all(isinstance(rec, dict) for rec in records):
        raise CorruptDataError("the container's records of its DCP files are damaged")
    return records


def restore_dcp(r: Any, tmp: Path) -> None:
    """The DCP directory a container was made from, into ``tmp`` (a new directory): every
    ``.distcp`` file spliced and checked, every kept file (``.metadata``) written."""
    from nncodecs.formats.safetensors_restore import write_kept

    taken = restore_files(r, dcp_records(r), tmp, set(), "DCP file")
    write_kept(r, tmp, taken)


def check_dcp(r: Any) -> int:
    """Every ``.distcp`` file restored into its digest and checked (``verify``)."""
    return check_files(r, dcp_records(r), "DCP file")
