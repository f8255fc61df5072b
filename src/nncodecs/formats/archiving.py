"""Archive many tensors, shards or whole models in parallel, as dask tasks.

:func:`archive` plans every model first, then creates all their Zarr
metadata in one batch (groups, arrays, attributes), then encodes and writes
the data as dask tasks, one per slab of whole shards (or of whole chunks,
for unsharded arrays; small tensors whole, several to a task): no two tasks
write the same object. Last, each
tensor is marked complete and each container's order and metadata written,
so a run that dies leaves no tensor that reads back wrong (a Reader skips
incomplete ones). Tasks run on dask's threaded scheduler by default, on
``"processes"``, or on a ``dask.distributed`` cluster given as a ``Client``
or an address; they carry what they need (the target's URL and storage
options, the array, a loader of the source's rows), not open stores.

Reading back in parallel: :meth:`nncodecs.Reader.to_dask` (a dask array a
tensor, over the Zarr array: chunks read and decoded as tasks).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.container import CHUNK_BYTES, MAX_CHAIN, Writer, check_codec
from nncodecs.dtypes import as_numpy, dtype_name
from nncodecs.formats.archive_chain import run_chain
from nncodecs.formats.archive_tasks import ArchiveResult, ArrayRows, Model, run
from nncodecs.formats.compressing import file_bytes
from nncodecs.formats.file_modes import SIZE, source_bytes
from nncodecs.formats.opening import open_source
from nncodecs.formats.source import KEPT, Tensor
from nncodecs.formats.spliced import keep_gaps_apart
from nncodecs.outputs import OutputLock, check_output, is_url, publish, remove_stale, temp_path

__all__ = ["ArchiveResult", "archive"]


def _is_array(obj: Any) -> bool:
    return hasattr(obj, "shape") and hasattr(obj, "dtype")


def _in_memory(name: str, value: Any) -> Tensor:
    arr = np.asarray(as_numpy(value), order="C")
    return Tensor(name, arr.dtype, tuple(arr.shape), rows=ArrayRows(arr))


def _plan_model(name: str, source: Any, target: str) -> Model:
    """The tensors of one model: a mapping of arrays, or a model file (its
    tensors read by the tasks themselves where the format allows)."""
    if isinstance(source, Mapping):
        tensors = []
        for tname, value in source.items():
            t = _in_memory(str(tname), value)
            dtype_name(t.dtype)  # TypeError for an unsupported dtype
            tensors.append(t)
        return Model(name, target, tensors, {})
    with open_source(Path(source)) as src:
        # the same records as compress's, so that decompress restores it alike
        meta = src.checked_metadata()
        meta[SIZE] = str(source_bytes(Path(source), src.format))  # (info's original)
        gaps = {**keep_gaps_apart(meta, Path(source)), **src.hidden_files()}
        kept = src.kept_files()
        if kept:
            meta[KEPT] = str(len(kept))
        tensors = [t if t.rows else _in_memory(t.name, t.read()) for t in src.tensors()]
    return Model(name, target, tensors, meta, kept, gaps)


def _keep_files(m: Model, storage_options: dict[str, Any] | None) -> None:
    """A model's kept files and bytes, added to its container once its tensors are in."""
    if not m.kept and not m.gaps:
        return
    with Writer(m.target, mode="a", storage_options=storage_options) as w:
        for rel, path in m.kept:
            w.add_file(rel, file_bytes(path))
        for name, data in m.gaps.items():
            w.add_hidden_file(name, data)


def _plan(sources: Any, target: Any) -> list[Model]:
    """One model into ``target``, or many, each into ``target/<name>``."""
    if str(target).endswith(".zip"):
        raise ValueError("archive writes directory or URL containers, not a zip file")
    target = str(target)
    if isinstance(sources, Mapping) and all(_is_array(v) for v in sources.values()):
        return [_plan_model("model", sources, target)]
    if isinstance(sources, str | os.PathLike):
        return [_plan_model(Path(sources).stem, sources, target)]
    if isinstance(sources, Mapping):
        named = list(sources.items())
    else:
        named = [(Path(s).name.split(".")[0], s) for s in sources]
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise ValueError(f"two models would share a container name: {names}")
    for name in names:  # (each a container inside target: one plain name, never a path)
        if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0"):
            raise ValueError(f"model name {name!r}: a container name is one plain name, not a path")
    return [_plan_model(n, s, f"{target.rstrip('/')}/{n}") for n, s in named]


def archive(
    sources: Any,
    target: Any,
    scheduler: Any = None,
    *,
    codec: str = "auto",
    chunk_bytes: int = CHUNK_BYTES,
    storage_options: dict[str, Any] | None = None,
    progress: bool = True,
    overwrite: bool = False,
    delta: str | None = None,
    max_chain: int = MAX_CHAIN,
) -> ArchiveResult:
    """Compress models into containers with dask: every slab of whole shards a task.

    Parameters
    ----------
    sources
        One model: a mapping of tensor names to arrays (NumPy, torch CPU),
        or a model file or directory (safetensors, GGUF, npz, torch, ONNX,
        ztensor); its container is ``target``. Many models: a list of such
        files, or a mapping of names to models; each goes to
        ``target/<name>``.
    target
        A directory or an fsspec URL (``s3://bucket/prefix``).
    scheduler
        ``None`` (dask's threads), ``"threads"``, ``"processes"``,
        ``"sync"``, a ``dask.distributed.Client``, or a scheduler address
        (``"tcp://host:8786"``).
    codec, chunk_bytes
        As for :class:`nncodecs.Writer`.
    storage_options
        For URL targets: the filesystem's options (s3fs: ``endpoint_url``,
        ``key``, ``secret``). The tasks carry them to the workers.
    progress
        Show dask's progress bar while the tasks run.
    overwrite
        Replace an existing local container (only a container: any other
        existing file or non-empty directory is refused). A local container
        is written under a temporary name and renamed into place when every
        task has finished; a URL target is written in place.
    delta, max_chain
        ``"previous"``: the models are a series (a training run's checkpoints, in
        order) and each container is stored against the one before it: a tensor
        with the same bits as the previous checkpoint's is a reference to it, a
        close one its difference (where that is smaller), every ``max_chain``-th
        difference in a row a keyframe stored whole (docs/container.md,
        "Checkpoint series"). One task a tensor a checkpoint, each waiting only
        for the previous checkpoint's task of that tensor.
    """
    if delta not in (None, "previous"):
        raise ValueError(f"delta must be None or 'previous', got {delta!r}")
    check_codec(codec)
    models = _plan(sources, target)
    if delta and (len(models) < 2 or isinstance(sources, str | os.PathLike)):
        raise ValueError("delta='previous' archives a series: give several models, in order")
    places = [m.target for m in models]  # (where each container ends up: its references)
    finals: list[tuple[Path, Path]] = []  # (temporary, named) of local containers
    locks: list[OutputLock] = []  # one writer per local container, as for Writer
    try:
        for m in models:
            if not is_url(m.target):
                named = Path(m.target.removeprefix("file://"))
                check_output(named, overwrite)
                locks.append(OutputLock(named).acquire())
                remove_stale(named)  # (may put back a previous container: checked again)
                check_output(named, overwrite)
                finals.append((temp_path(named), named))
                m.target = str(finals[-1][0])
        if delta:
            result = run_chain(
                models, places, storage_options, codec, chunk_bytes, scheduler, progress, max_chain
            )
        else:
            result = run(models, storage_options, codec, chunk_bytes, scheduler, progress)
        for m in models:
            _keep_files(m, storage_options)
        for temp, named in finals:
            publish(temp, named, overwrite)
    except BaseException:
        for temp, _ in finals:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    finally:
        for lock in locks:
            lock.release()
    named_of = {str(temp): str(named) for temp, named in finals}
    targets = {name: named_of.get(t, t) for name, t in result.targets.items()}
    return ArchiveResult(targets, result.tensors, result.nbytes, result.tasks)
