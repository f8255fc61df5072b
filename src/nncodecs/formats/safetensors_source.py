"""A safetensors model as a :class:`Source`: one file, or the shards of a snapshot
directory (with or without its ``model.safetensors.index.json``)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nncodecs.container import check_file_name
from nncodecs.errors import CorruptDataError
from nncodecs.formats.detect import INDEX
from nncodecs.formats.digests import ReadDigest, file_digests
from nncodecs.formats.paths import inside, plain_name
from nncodecs.formats.safetensors import SafetensorsFile
from nncodecs.formats.source import FileRows, Source, Tensor
from nncodecs.formats.torch_members import Members
from nncodecs.outputs import own_name

__all__ = ["MAX_GAP_BYTES", "SafetensorsSource", "safetensors_files"]

#: Bytes of a safetensors file outside its tensors (padding, trailing data) kept per file.
MAX_GAP_BYTES = 1 << 20


def safetensors_files(path: Path) -> tuple[list[Path], str | None]:
    """The files of a safetensors model (a file, a directory, or its index) and the
    index's text (``None`` without one). Shards are the index's, else every
    ``*.safetensors`` of the directory; none may be a link out of it."""
    if path.is_dir():
        index = path / INDEX
        if index.is_symlink():
            inside(index, path)
    elif path.name.endswith(".index.json"):
        index, path = path, path.parent
    else:
        return [path], None  # the file the user named
    if index.is_file():
        text = index.read_text()
        try:
            weight_map = json.loads(text)["weight_map"]
            names = set(weight_map.values())
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise CorruptDataError(f"{index}: not a safetensors index (no weight_map)") from None
        files = sorted(plain_name(f, str(index)) for f in names)
        for f in files:
            if not (path / f).is_file():
                raise FileNotFoundError(f"{path / f}: a shard named in {index} is missing")
        return [inside(path / f, path) for f in files], text
    files = sorted(f for f in path.glob("*.safetensors") if f.is_file())
    return [inside(f, path) for f in files], None


class SafetensorsSource(Source):
    """Every shard's tensors, read from the file by byte range."""

    format = "safetensors"
    digests_its_reads = True

    def __init__(self, path: Path, directory: bool) -> None:
        super().__init__(path)
        self.directory = directory
        files, self.index = safetensors_files(path)
        # each file's CRC32C, from its tensors' as arrays() reads them (made before the
        # header is read: a file changed from then on is refused)
        self._reads = {str(f): ReadDigest(f) for f in files}
        self.files = [SafetensorsFile(f) for f in files]
        self._torch: Members | None = None

    def arrays(self) -> Iterator[tuple[str, Any]]:
        for t in self.tensors():
            arr = t.read()
            if t.rows is not None:  # (a torch file's storages: that file's digest is its own)
                self._reads[t.rows.path].read(t.rows.offset, arr)
            yield t.name, arr
            del arr  # (before the next is read: one tensor in memory at a time)

    def _digests(self, st: SafetensorsFile) -> dict[str, str]:
        """The file's CRC32C: from the reads of a whole pass of :meth:`arrays`, else read."""
        reads = sum(len(r.ranges) for r in self._reads.values())
        if reads == sum(1 for t in self.tensors() if t.nbytes and t.rows is not None):
            return self._reads[str(st.path)].digests()
        return file_digests(st.path)

    def _list(self) -> list[Tensor]:
        tensors = [
            Tensor(
                name, dtype, shape, rows=FileRows(str(st.path), st.data_start + begin, dtype, shape)
            )
            for st in self.files
            for name, dtype, shape, begin, _ in st.entries
        ]
        members = self._members().tensors()
        taken = {t.name for t in tensors} & {t.name for t in members}
        if taken:
            raise ValueError(
                f"{self.path}: tensor {sorted(taken)[0]!r} is named in a safetensors file and "
                "by a torch file's path alike"
            )
        return tensors + members

    def _members(self) -> Members:
        """The folder's torch files stored typed (:mod:`nncodecs.formats.torch_members`)."""
        if self._torch is None:
            self._torch = Members(self._other_files() if self.directory else [])
        return self._torch

    def hidden_files(self) -> dict[str, Any]:
        return self._members().metadata_and_files()[1] if self._members().sources else {}

    def close(self) -> None:
        if self._torch is not None:
            self._torch.close()

    @property
    def size(self) -> int:
        torch = sum(source.size for _, source, _ in self._members().sources)
        return sum(st.path.stat().st_size for st in self.files) + torch

    def kept_files(self) -> list[tuple[str, Path]]:
        """Every other file of a directory (config, tokenizer, README, subdirectories':
        a Hugging Face snapshot whole), by its path relative to the directory; links only
        where they lead inside it (or into its cache repository's ``blobs/``); torch
        files stored typed excepted."""
        return self._members().kept

    def _other_files(self) -> list[tuple[str, Path]]:
        root = self.path if self.path.is_dir() else self.path.parent
        skip = {st.path.name for st in self.files} | {INDEX}
        out = []

        def unreadable(exc: OSError) -> None:
            raise ValueError(f"{exc.filename}: not readable ({exc.strerror}): nothing was written")

        for top, dirs, names in os.walk(root, onerror=unreadable):
            for name in sorted(dirs + names):
                path = Path(top, name)
                if path.is_symlink():
                    inside(path, root)
                    if path.is_dir():  # (os.walk does not follow it: its files would be lost)
                        raise ValueError(
                            f"{path}: a link to a directory, which nncodecs does "
                            "not follow: nothing was written"
                        )
                if name in dirs:
                    continue
                rel = path.relative_to(root).as_posix()
                if rel in skip or own_name(name):  # (never a temporary or lock of nncodecs)
                    continue
                if not path.is_file():  # (a FIFO, a socket, a device: not a file to keep)
                    raise ValueError(f"{path}: not a regular file: nothing was written")
                if not os.access(path, os.R_OK):  # (refused before any tensor is encoded)
                    raise ValueError(f"{path}: not readable: nothing was written")
                out.append((check_file_name(rel), path))
        return sorted(out)

    def metadata(self) -> dict[str, str]:
        """Each file's header, tensor order and CRC32C, the bytes its tensors do not cover,
        the shard index, and whether it was a directory: restored byte-identical."""
        records, held = [], {}
        for st in self.files:
            rec = {
                "file": st.path.name,
                "header": st.header_bytes.decode("utf-8"),
                "exact": True,
                "tensors": [e[0] for e in st.entries],
                **self._digests(st),  # its crc32c
            }
            if not st.tiles_exactly():  # padding, trailing bytes or shared offsets: kept
                rec["size"] = st.data_size
                rec["gaps"] = _gaps(st)
            records.append(rec)
            held[st.path.name] = set(rec["tensors"])
        if self.index is not None:
            _check_index(self.path, self.index, held)
        meta = {"source.format": self.format, "source.files": json.dumps(records)}
        if self.index is not None:
            meta["source.index"] = self.index
        meta["source.layout"] = "directory" if self.directory else "file"
        meta["source.tensors"] = str(len(self.tensors()))
        if self._members().sources:
            meta.update(self._members().metadata_and_files()[0])
        return meta


def _gaps(st: SafetensorsFile) -> list[list[Any]]:
    """The data section's bytes no tensor covers, as [offset, base64] pairs in order."""
    spans, at = [], 0
    for _, _, _, begin, end in st.entries:
        if begin > at:
            spans.append((at, begin))
        at = max(at, end)
    if st.data_size > at:
        spans.append((at, st.data_size))
    if sum(b - a for a, b in spans) > MAX_GAP_BYTES:
        raise ValueError(
            f"{st.path}: {sum(b - a for a, b in spans)} bytes outside its tensors; nncodecs "
            f"keeps at most {MAX_GAP_BYTES} of them, so it would not come back whole"
        )
    gaps = []
    with st.path.open("rb") as f:
        for a, b in spans:
            f.seek(st.data_start + a)
            gaps.append([a, base64.b64encode(f.read(b - a)).decode("ascii")])
    return gaps


def _check_index(path: Path, index: str, held: dict[str, set[str]]) -> None:
    """The shard index must describe the shards: every tensor in the file it names, every
    tensor of every shard named, no other shard in the directory (it would be dropped)."""
    root = path if path.is_dir() else path.parent
    weight_map = json.loads(index)["weight_map"]
    unlisted = sorted(
        f.name for f in root.glob("*.safetensors") if f.is_file() and f.name not in held
    )
    if unlisted:
        raise ValueError(
            f"{root}: {', '.join(unlisted[:4])} not in {INDEX}; it would be dropped "
            "(compress the file on its own, or list it in the index)"
        )
    for name, file in weight_map.items():
        if name not in held.get(file, ()):
            raise CorruptDataError(f"{root / INDEX}: tensor {name!r} is not in {file}")
    missing = sorted(n for names in held.values() for n in names if n not in weight_map)
    if missing:
        raise CorruptDataError(
            f"{root / INDEX}: tensors {', '.join(map(repr, missing[:4]))} of the shards are "
            "not in the index"
        )
