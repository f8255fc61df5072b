"""Files restored byte for byte as their kept bytes with each tensor at its place (GGUF,
ONNX): the records a container keeps, and the restore from them.

A format's :class:`Source` lists ``places``: ``(name, offset, bytes, kind)`` of each tensor
whose bytes lie verbatim in the file; :func:`spliced_metadata` records the places
(``source.<format>.ranges``) and where every byte between and around them lies.
``compress`` and ``archive`` then keep those bytes (a GGUF's vocabulary, an ONNX
graph), read straight from the file, as a hidden array, the kept file
``.nncodecs/source-gaps`` (``Writer.add_hidden_file``), compressed and checked as a
tensor is (:func:`keep_gaps_apart`: ``source.<format>.gap_sizes`` records each gap's
length). Containers written before kept them inline (``source.<format>.gaps``, base64),
which still reads. :func:`restore_spliced` writes gaps and tensors back in turn. The
file's CRC32C, recorded beside them, is checked on the restored file by the caller.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.container import HIDDEN, check_file_name
from nncodecs.errors import CorruptDataError
from nncodecs.formats.digests import check_restored, restore_hash

__all__ = [
    "GAPS_FILE",
    "DigestSink",
    "check_files",
    "check_spliced",
    "has_places",
    "keep_gaps_apart",
    "record_gaps",
    "restore_files",
    "restore_spliced",
    "splice",
    "spliced_metadata",
]

#: The kept file holding a spliced source's bytes outside its tensors, one gap after another.
GAPS_FILE = ".nncodecs/source-gaps"

Place = tuple[str, int, int, str]  # (tensor name, offset in the file, bytes, kind)


def spliced_metadata(path: Path, fmt: str, places: list[Place]) -> dict[str, str]:
    """The records of ``places`` (in file order, none overlapping) and where every byte
    of the file outside them lies (``source.<format>.gap_spans``: spans of the file, read
    by :func:`keep_gaps_apart`, never kept themselves)."""
    spans, ranges, at = [], [], 0
    for name, start, size, kind in sorted(places, key=lambda p: p[1]):
        if start < at:
            raise CorruptDataError(f"{path}: tensor {name!r} overlaps the one before it")
        spans.append([at, start])
        ranges.append([name, start, size, kind])
        at = start + size
    spans.append([at, path.stat().st_size])
    return {
        f"source.{fmt}.ranges": json.dumps(ranges),
        f"source.{fmt}.gap_spans": json.dumps(spans),
    }


def keep_gaps_apart(meta: dict[str, str], path: Path) -> dict[str, np.ndarray]:
    """The bytes of the source file ``path`` outside its tensors (``meta``: its metadata,
    changed in place) as hidden files, each a run of bytes read from the file (one copy,
    never held twice), their lengths left in their place: the file's in
    :data:`GAPS_FILE`, those of each of its other files (``source.<format>.external``:
    an ONNX model's data files, under ``path``'s directory) in
    ``.nncodecs/external-gaps-<i>``."""
    out = {}
    for key in [k for k in meta if k.startswith("source.") and k.endswith(".gap_spans")]:
        data, sizes = _read_spans(path, json.loads(meta.pop(key)))
        meta[key.removesuffix(".gap_spans") + ".gap_sizes"] = json.dumps(sizes)
        out[GAPS_FILE] = data
    for key in [k for k in meta if k.startswith("source.") and k.endswith(".external")]:
        records = json.loads(meta[key])
        for i, record in enumerate(records):
            spans = record.pop("gap_spans")
            data, record["gap_sizes"] = _read_spans(path.parent / record["file"], spans)
            record["gaps_file"] = f"{HIDDEN}external-gaps-{i}"
            out[record["gaps_file"]] = data
        meta[key] = json.dumps(records)
    return out


def _read_spans(path: Path, spans: list[list[int]]) -> tuple[np.ndarray, list[int]]:
    """The bytes of ``spans`` of a file, one after another, and each one's length."""
    sizes = [b - a for a, b in spans]
    data = np.empty(sum(sizes), np.uint8)
    at = 0
    with path.open("rb") as f:
        for (start, _), size in zip(spans, sizes, strict=True):
            f.seek(start)
            if f.readinto(memoryview(data)[at : at + size]) != size:
                raise CorruptDataError(f"{path}: the file changed while it was read")
            at += size
    return data, sizes


def _split(data: bytes, sizes: Any) -> list[Any]:
    if not (
        isinstance(sizes, list)
        and all(type(n) is int and n >= 0 for n in sizes)
        and sum(sizes) == len(data)
    ):
        raise ValueError(f"gap sizes that do not add up to the {len(data)} bytes kept")
    ends = np.cumsum([0, *sizes]).tolist()
    view = memoryview(data)  # (slices of the one read, not copies)
    return [view[a:b] for a, b in itertools.pairwise(ends)]


def _gaps(r: Any, fmt: str) -> list[Any]:
    """The kept bytes between and around the tensors: inline, or in :data:`GAPS_FILE`."""
    if f"source.{fmt}.gaps" in r.metadata:
        return [base64.b64decode(g) for g in json.loads(r.metadata[f"source.{fmt}.gaps"])]
    return _split(r.read_file(GAPS_FILE), json.loads(r.metadata[f"source.{fmt}.gap_sizes"]))


def record_gaps(r: Any, record: dict[str, Any]) -> list[Any]:
    """The gaps of another file of the source (a record of ``source.<format>.external``):
    inline (``gaps``, base64), or in its hidden file (``gaps_file``, ``gap_sizes``)."""
    if "gaps" in record:
        return [base64.b64decode(g) for g in record["gaps"]]
    name = record.get("gaps_file")
    if not (isinstance(name, str) and name.startswith(f"{HIDDEN}external-gaps-")):
        raise ValueError(f"gaps file {name!r}")
    return _split(r.read_file(name), record.get("gap_sizes"))


def has_places(metadata: dict[str, str], fmt: str) -> bool:
    """Whether a container (its ``metadata``) can restore its ``fmt`` source byte for byte."""
    return (
        metadata.get("source.format") == fmt
        and f"source.{fmt}.ranges" in metadata
        and ("source.crc32c" in metadata or "source.sha256" in metadata)
    )


def restore_spliced(r: Any, out: Path, fmt: str) -> None:
    """Write the ``fmt`` file a container (``r``, a :class:`nncodecs.Reader`) was made from:
    the kept bytes, each tensor at its recorded place."""
    what = fmt.upper()
    try:
        ranges = json.loads(r.metadata[f"source.{fmt}.ranges"])
        gaps = _gaps(r, fmt)
    except (KeyError, ValueError, TypeError) as exc:
        raise CorruptDataError(f"the container's {what} records are damaged ({exc})") from None
    splice(r, out, ranges, gaps, what)


def splice(r: Any, out: Any, ranges: Any, gaps: list[bytes], what: str) -> None:
    """Write ``out`` (a path, or a :class:`DigestSink`): each gap, then the next tensor of
    ``ranges`` (checked: at its recorded offset and size, a tensor of the container
    ``r``), the last gap after them."""
    if not isinstance(ranges, list) or len(gaps) != len(ranges) + 1:
        raise CorruptDataError(
            f"the container's {what} records are damaged (one gap more than tensors expected)"
        )
    with out.open("wb") if isinstance(out, Path) else contextlib.nullcontext(out) as f:
        for gap, item in zip(gaps, ranges, strict=False):
            if not (
                isinstance(item, list)
                and len(item) == 4
                and isinstance(item[0], str)
                and item[0] in r
                and isinstance(item[1], int)
                and isinstance(item[2], int)
            ):
                raise CorruptDataError(f"the container's {what} record {item!r} is damaged")
            name, start, size, _ = item
            f.write(gap)
            if r.layout(name) not in ("dense", "records"):
                raise CorruptDataError(f"tensor {name!r} is {r.layout(name)}, not a file's bytes")
            if f.tell() != start or r.info(name).nbytes != size:
                raise CorruptDataError(f"tensor {name!r} does not fit its place in the {what} file")
            f.write(np.asarray(r.read_tensor(name, check=True)).tobytes())
        f.write(gaps[-1])


class DigestSink:
    """Where :func:`splice` writes when only the digest of the file is wanted."""

    def __init__(self, digest: Any) -> None:
        self.digest, self.at = digest, 0

    def write(self, data: bytes) -> None:
        self.digest.update(data)
        self.at += len(data)

    def tell(self) -> int:
        return self.at


def check_spliced(r: Any, fmt: str) -> int:
    """Restore the ``fmt`` file (and its other files: an ONNX model's data) a container
    was made from into digests only, each checked against its recorded one (what
    ``verify`` does: no file written). Returns the number of files checked."""
    what = fmt.upper()
    try:
        ranges = json.loads(r.metadata[f"source.{fmt}.ranges"])
        files = [
            (
                ranges,
                _gaps(r, fmt),
                {k: r.metadata.get(f"source.{k}") for k in ("crc32c", "sha256")},
            )
        ]
        for record in json.loads(r.metadata.get(f"source.{fmt}.external", "[]")):
            files.append((record["ranges"], record_gaps(r, record), {"crc32c": record["crc32c"]}))
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise CorruptDataError(f"the container's {what} records are damaged ({exc})") from None
    for file_ranges, gaps, expected in files:
        digest = restore_hash(expected, f"the {what} source")
        if digest is None:
            raise CorruptDataError(f"the container's {what} source has no checksum record")
        splice(r, DigestSink(digest), file_ranges, gaps, what)
        kind = digest.name
        if digest.hexdigest() != str(expected.get(kind)).lower():
            raise CorruptDataError(f"the {what} source would not come back byte for byte ({kind})")
    return len(files)


def restore_files(
    r: Any, records: list[dict[str, Any]], tmp: Path, taken: set[str], what: str
) -> set[str]:
    """Write the files of ``records`` (each ``file``, its ``ranges``, its gaps as
    :func:`record_gaps` finds them, its ``crc32c``) under the folder ``tmp``, each
    byte for byte and checked, never over a name of ``taken``; returns their names."""
    written: set[str] = set()
    for rec in records:
        name = check_file_name(rec.get("file"), CorruptDataError)
        if name in taken | written or name.split("/")[0] in taken:
            raise CorruptDataError(f"{what} {name!r} takes the place of a restored file")
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        splice(r, path, rec.get("ranges"), _file_gaps(r, rec, name, what), what)
        check_restored(path, {"crc32c": rec.get("crc32c")}, name)
        written.add(name)
    return written


def check_files(r: Any, records: list[dict[str, Any]], what: str) -> int:
    """The files of ``records`` restored into their digests only, each checked against
    its CRC32C (what ``verify`` does: nothing written); returns how many."""
    for rec in records:
        name = str(rec.get("file"))
        digest = restore_hash({"crc32c": rec.get("crc32c")}, name)
        if digest is None:
            raise CorruptDataError(f"{what} {name!r} has no checksum record")
        splice(r, DigestSink(digest), rec.get("ranges"), _file_gaps(r, rec, name, what), what)
        if digest.hexdigest() != str(rec.get("crc32c")).lower():
            raise CorruptDataError(f"{what} {name!r} would not come back byte for byte")
    return len(records)


def _file_gaps(r: Any, rec: dict[str, Any], name: str, what: str) -> list[Any]:
    try:
        return record_gaps(r, rec)
    except (ValueError, TypeError) as exc:
        raise CorruptDataError(f"{what} {name!r}: its kept bytes are damaged ({exc})") from None
