"""A container back to safetensors: the source's files byte for byte from their records
(``source.files``), or one file with a header built from the container's tensors."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

from nncodecs.container import kept_key
from nncodecs.dtypes import normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.formats.detect import INDEX
from nncodecs.formats.digests import check_restored, restore_hash
from nncodecs.formats.paths import plain_name
from nncodecs.formats.safetensors import raw_bytes, safetensors_header, write_safetensors
from nncodecs.formats.source import KEPT, Progress, named_order, stream_named, stream_tensors
from nncodecs.formats.torch_members import restore_members

__all__ = ["file_records", "restore_safetensors", "write_kept"]


def file_records(r: Any, where: str) -> list[dict[str, Any]]:
    """The container's safetensors file records, every field checked: file names are data
    (plain, no duplicates), tensors are the container's, headers tile their tensors."""
    try:
        records = json.loads(r.metadata["source.files"])
    except (KeyError, ValueError) as exc:
        raise CorruptDataError(
            f"{where}: the container's file records are damaged ({exc})"
        ) from None
    if not isinstance(records, list) or not records:
        raise CorruptDataError(f"{where}: the container's file records are not a list of files")
    seen: set[str] = set()
    for rec in records:
        if not isinstance(rec, dict) or not isinstance(rec.get("tensors"), list):
            raise CorruptDataError(f"{where}: the container's file record {rec!r:.80} is damaged")
        name = plain_name(rec.get("file"), f"{where}: the container's file records")
        if name == INDEX:
            raise CorruptDataError(f"{where}: a file record takes the shard index's name")
        if name in seen:
            raise CorruptDataError(f"{where}: the container's file records name {name!r} twice")
        seen.add(name)
        for t in rec["tensors"]:
            if not isinstance(t, str) or t not in r:
                raise CorruptDataError(f"{where}: file {name!r} lists {t!r}, not in the container")
        if rec.get("exact") and "gaps" not in rec:  # (a kept layout is checked as written)
            _check_header(r, rec, where)
        elif "gaps" in rec and not (
            isinstance(rec.get("size"), int) and isinstance(rec["gaps"], list)
        ):
            raise CorruptDataError(f"{where}: file {name!r}: the stored layout is damaged")
    if r.metadata.get("source.layout") != "directory" and len(records) != 1:
        raise CorruptDataError(f"{where}: a single-file container records several files")
    return records


def _check_header(r: Any, rec: dict[str, Any], where: str) -> None:
    """A stored header must place each tensor right after the one before (no holes, no
    offsets past the data: a forged offset cannot make a huge sparse file)."""
    try:
        header = json.loads(rec["header"])
        at = 0
        for t in rec["tensors"]:
            begin, end = header[t]["data_offsets"]
            if begin != at or end - begin != r.info(t).nbytes:
                raise ValueError(f"tensor {t!r} at {begin}..{end}, expected at {at}")
            at = end
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptDataError(
            f"{where}: file {rec['file']!r}: stored header damaged ({exc})"
        ) from None


def restore_safetensors(
    r: Any, tmp: Path, records: list[dict[str, Any]] | None, progress: Progress | None
) -> None:
    """Write the container ``r`` at ``tmp``: the files of ``records`` (from
    :func:`file_records`; ``tmp`` is a directory when the source was), else one file."""
    if records is None:  # a header from the tensors' infos, so that they stream
        order, tied = named_order(r)  # (a tied tensor written under each of its names)
        infos = [(name, r.info(tied.get(name, name))) for name in order]
        header = safetensors_header((n, normalize_dtype(i.dtype), i.shape) for n, i in infos)
        write_safetensors(tmp, stream_named(r, progress, pieces=True), header_bytes=header)
        return
    directory = r.metadata.get("source.layout") == "directory"
    if directory and "source.index" in r.metadata:
        (tmp / INDEX).write_bytes(r.metadata["source.index"].encode("utf-8"))
    for rec in records:
        path = tmp / rec["file"] if directory else tmp
        header = rec["header"].encode("utf-8") if rec.get("exact") else None
        if "gaps" in rec:  # the file's own layout: gaps and shared offsets as they were
            _write_layout(r, path, rec, progress)
            digest = None
        else:
            # (fed as the file is written: no second read)
            digest = restore_hash(rec, rec["file"]) if header is not None else None
            write_safetensors(
                path,
                stream_tensors(r, rec["tensors"], progress, pieces=header is not None),
                header_bytes=header,
                digest=digest,
            )
        if header is not None:
            check_restored(path, rec, rec["file"], digest)
    if directory:
        taken = {rec["file"] for rec in records} | {INDEX}
        taken |= restore_members(r, tmp, taken)  # (a Trainer folder's torch files)
        write_kept(r, tmp, taken)


def write_kept(r: Any, tmp: Path, taken: set[str]) -> None:
    """A snapshot directory's other files (config, tokenizer ...), kept in the container:
    names checked when read (relative, no ``..``), never over a restored weights file;
    as many as the source had. Each is written a window of decoded chunks at a time, as a
    tensor is: a kept file of gigabytes needs no more memory than a tensor of as many."""
    if str(len(r.files())) != r.metadata.get(KEPT, str(len(r.files()))):
        raise CorruptDataError(
            f"the container keeps {len(r.files())} files, its source had {r.metadata[KEPT]}"
        )
    for name in r.files():
        if name in taken or name.split("/")[0] in taken:
            raise CorruptDataError(f"kept file {name!r} takes the place of a restored file")
        path = tmp / name
        try:  # ("a" and "a/b" both kept: one cannot be written)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("xb") as f:  # (a window of chunks at a time, as tensors are)
                for piece in r.read_pieces(kept_key(name)):
                    f.write(piece)
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:
            raise CorruptDataError(f"kept file {name!r} cannot be written ({exc})") from None


def _write_layout(r: Any, path: Path, rec: dict[str, Any], progress: Progress | None) -> None:
    """A safetensors file whose tensors do not tile its data section: the header as it was,
    then every byte in order, from the tensors or from the kept gaps (each checked to fill
    exactly the span no tensor covers, so forged records cannot leave holes)."""
    header_bytes = rec["header"].encode("utf-8")
    header = json.loads(header_bytes)
    size = rec["size"]
    gaps = list(rec["gaps"])
    bad = CorruptDataError(f"file {rec['file']!r}: the stored layout does not fit")
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes)
        at = 0

        def gap_to(stop: int) -> None:
            nonlocal at
            if not gaps or gaps[0][0] != at:
                raise bad
            data = base64.b64decode(gaps.pop(0)[1])
            if at + len(data) != stop:
                raise bad
            f.write(data)
            at = stop

        for name, arr in stream_tensors(r, rec["tensors"], progress):
            begin, end = header[name]["data_offsets"]
            raw = raw_bytes(arr)
            if end - begin != raw.nbytes or not 0 <= begin <= end <= size:
                raise bad
            if begin > at:
                gap_to(begin)
            if end > at:  # (a tensor sharing bytes with the one before: only the rest)
                f.write(raw[at - begin :])
                at = end
        if size > at:
            gap_to(size)
        if gaps:
            raise bad
