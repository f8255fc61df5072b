"""A container restored to a stream (``decompress -o -``), as ``zstd -dc`` writes: a
safetensors file is one header, then its tensors in order, so it streams; its bytes are
checked against the source's recorded CRC32C as they go, and a mismatch is an error at
the end (the bytes are out already, as with zstd). Formats that need their own layout
written whole (GGUF, ONNX, torch checkpoints, npz) and folders of files do not stream:
refused by name before any byte is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

from nncodecs.container import Reader
from nncodecs.dtypes import normalize_dtype
from nncodecs.formats.digests import check_restored, restore_hash
from nncodecs.formats.restore import check_dense, default_format
from nncodecs.formats.safetensors import safetensors_header, write_safetensors
from nncodecs.formats.safetensors_restore import file_records
from nncodecs.formats.source import Progress, named_order, stream_named, stream_tensors
from nncodecs.gcpause import collector_paused

__all__ = ["check_safetensors_files", "stream_safetensors"]


def stream_safetensors(
    container: Any,
    stream: BinaryIO,
    fmt: str | None = None,
    progress: Progress | None = None,
    references: Any = None,
) -> None:
    """Write the container as one safetensors file to ``stream`` (its source's own bytes
    where it came from one safetensors file, checked; else a file of its tensors)."""
    with collector_paused(), Reader(container, references=references) as r:
        fmt = fmt or default_format(r.metadata)
        if fmt != "safetensors":
            raise ValueError(
                f"-o -: only a safetensors file streams to standard output; {container} "
                f"restores as {fmt} (--format safetensors streams its tensors)"
            )
        check_dense(r, fmt)
        own = r.metadata.get("source.format") == "safetensors" and "source.files" in r.metadata
        records = file_records(r, str(container)) if own else None
        if records is not None and (
            r.metadata.get("source.layout") == "directory" or len(records) != 1
        ):
            raise ValueError(
                f"-o -: {container} holds a folder of files, which does not stream: give -o NAME"
            )
        rec = records[0] if records else None
        if rec is None or not rec.get("exact") or "gaps" in rec:  # (its tensors, in order)
            order, tied = named_order(r)
            infos = [(name, r.info(tied.get(name, name))) for name in order]
            header = safetensors_header((n, normalize_dtype(i.dtype), i.shape) for n, i in infos)
            pieces = stream_named(r, progress, pieces=True)
            write_safetensors(stream, pieces, header_bytes=header)
            return
        digest = restore_hash(rec, rec["file"])
        tensors = stream_tensors(r, rec["tensors"], progress, pieces=True)
        header = rec["header"].encode("utf-8")
        write_safetensors(stream, tensors, header_bytes=header, digest=digest)
        check_restored(Path("-"), rec, rec["file"], digest)


class _Discard:
    """A stream that keeps nothing: a restore checked against its digests, not written."""

    def write(self, data: Any) -> int:
        return memoryview(data).nbytes

    def flush(self) -> None:
        pass

    def seekable(self) -> bool:  # (no write-back to pace: nothing reaches a disk)
        return False


def check_safetensors_files(r: Any, where: str) -> bool:
    """``verify`` of a safetensors source: every file record checked (as ``decompress``
    checks them), and each file rebuilt into its recorded digest, nothing written.
    Returns whether every file was rebuilt byte for byte (a record that keeps gaps, or
    one without a digest, is left to ``decompress``'s own check)."""
    exact = True
    for rec in file_records(r, where):
        digest = restore_hash(rec, rec["file"]) if rec.get("exact") else None
        if digest is None or "gaps" in rec:
            exact = False
            continue
        tensors = stream_tensors(r, rec["tensors"], None, pieces=True)
        header = rec["header"].encode("utf-8")
        write_safetensors(_Discard(), tensors, header_bytes=header, digest=digest)
        check_restored(Path(rec["file"]), rec, f"{where}: {rec['file']}", digest)
    return exact
