"""A model file (or a directory of shards) into one container."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.container import Writer
from nncodecs.formats.detect import detect_format
from nncodecs.formats.digests import hash_ahead
from nncodecs.formats.file_modes import MODE, source_record
from nncodecs.formats.malloc import use_one_malloc_arena
from nncodecs.formats.opening import open_source
from nncodecs.formats.paths import check_container_name, input_root, local_output
from nncodecs.formats.source import KEPT, ORDER, TIED, Progress
from nncodecs.formats.spliced import keep_gaps_apart
from nncodecs.gcpause import collector_paused
from nncodecs.outputs import check_output, created_mode, keep_times, made_parents

__all__ = ["compress"]


def compress(
    source: str | Path,
    target: Any,
    codec: str = "auto",
    threads: int | None = None,
    chunk_bytes: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
    reference: Any = None,
    max_chain: int | None = None,
    dedup: bool = True,
    recorded: dict[str, str] | None = None,
) -> str:
    """Compress a model file (or a directory of shards) into one container. Returns its format.

    Tensors stream one at a time: the peak memory is about the largest
    tensor's size times 1.5 plus Zarr's working set (see docs/formats.md).
    An existing ``target`` is refused unless ``force`` (and a directory is
    replaced only when it is a container); the container appears at
    ``target`` only once complete. What the source needs to come back
    (:meth:`Source.metadata`) goes into the container's metadata. ``reference``
    (and ``max_chain``, ``dedup``): containers its tensors may be stored against,
    as :class:`nncodecs.Writer` takes them (a checkpoint's previous one). ``recorded``: a
    dict that receives what the container records of its source (``source.bytes``, and a
    file's ``source.mode`` and ``source.mtime_ns``), which a front end reports.
    """
    use_one_malloc_arena()
    source = Path(source)
    fmt = detect_format(source)
    if fmt == "container":
        raise ValueError(f"{source}: already a container")
    local = local_output(target)
    if local is not None:
        check_container_name(local)
        check_output(local, force, inputs=(source, input_root(source)))
    kwargs: dict[str, Any] = {"codec": codec, "threads": threads}
    if chunk_bytes:
        kwargs["chunk_bytes"] = chunk_bytes
    if reference:
        kwargs["reference"] = reference
    if max_chain is not None:
        kwargs["max_chain"] = max_chain
    if not dedup:
        kwargs["dedup"] = False
    # (its size, the original of the ratio info shows; its mode and times, kept)
    st, record = source_record(source, fmt)
    mode = int(record[MODE], 8) if MODE in record else None
    if recorded is not None:
        recorded.update(record)
    with open_source(source, fmt) as src:
        if not src.digests_its_reads:  # (its CRC32C, for its metadata, while tensors encode)
            hash_ahead([source] if source.is_file() else sorted(source.glob("*.safetensors")))
        total, done = src.size, 0
        with (
            collector_paused(),
            made_parents(local),
            created_mode(mode),
            Writer(target, overwrite=force, **kwargs) as w,
        ):
            tied = src.tied()  # (stored once: the first name of their bytes)
            kept = src.kept_files()  # (listed first: an unreadable one refused before encoding)
            for name, arr in src.arrays():
                if name not in tied:
                    w.add_tensor(name, arr)
                done += _nbytes(arr)
                del arr  # before the next one is read: one tensor at a time
                if progress:
                    progress(min(done, total), total)
            for rel, path in kept:  # (a snapshot's config, tokenizer, ...)
                w.add_file(rel, file_bytes(path))
            meta = src.checked_metadata()
            # (a GGUF's vocabulary, an ONNX graph: arrays, not attributes)
            for name, data in {**keep_gaps_apart(meta, source), **src.hidden_files()}.items():
                w.add_hidden_file(name, data)
            w.metadata.update(meta)
            w.metadata.update(record)
            if kept:  # (counted: a restore that finds fewer refuses)
                w.metadata[KEPT] = str(len(kept))
            if tied:
                w.metadata[TIED] = json.dumps(tied)
                w.metadata[ORDER] = json.dumps([t.name for t in src.tensors()])
            if progress:
                progress(1, 1)  # the bar ends at 100% (sizes on disk and in memory differ)
    if st is not None and local is not None and local.is_file() and not local.is_symlink():
        os.chmod(local, int(record[MODE], 8))  # (a read-only mode: once it is written)
        keep_times(local, st.st_mtime_ns, st.st_atime_ns)
    return fmt


def file_bytes(path: Path) -> Any:
    """A file's bytes, mapped (read as they are encoded, not into memory first)."""
    return np.memmap(path, np.uint8, mode="r") if path.stat().st_size else b""


def _nbytes(arr: Any) -> int:
    """Bytes of a tensor (of a sparse one, its values)."""
    n = getattr(arr, "nbytes", None)
    return int(n) if n is not None else int(arr.data.nbytes)
