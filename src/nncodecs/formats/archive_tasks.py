"""The dask side of :func:`nncodecs.archive`: one container's tasks of the task API
(:mod:`nncodecs.container.tasks`) a slab, as dask tasks, then one commit a container."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.container import tasks
from nncodecs.extras import need
from nncodecs.formats.source import Tensor

__all__ = ["ArchiveResult", "ArrayRows", "Model", "run"]


@dataclass(frozen=True)
class ArchiveResult:
    """What :func:`nncodecs.archive` wrote: each container's target; tensors, bytes, tasks."""

    targets: dict[str, str]
    tensors: int
    nbytes: int
    tasks: int


class ArrayRows:
    """Rows of an array in memory (pickled into the task graph)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __call__(self, start: int, stop: int) -> np.ndarray:
        return self.array[start:stop] if self.array.ndim else self.array


@dataclass
class Model:
    """One container to write: its tensors (each with a picklable ``rows``) and metadata."""

    name: str
    target: str
    tensors: list[Tensor]
    metadata: dict[str, str]
    #: A snapshot directory's other files ((name, path)), and the bytes of a GGUF, ONNX or
    #: zip checkpoint around its tensors: kept once the tensors are written.
    kept: list[tuple[str, Path]] = field(default_factory=list)
    gaps: dict[str, Any] = field(default_factory=dict)

    def plans(self, codec: str, chunk_bytes: int) -> list[tasks.TensorPlan]:
        return [tasks.plan(t.name, t.dtype, t.shape, codec, chunk_bytes) for t in self.tensors]


def _write_slab(
    target: str, options: dict | None, p: tasks.TensorPlan, start: int, stop: int, rows: Any
) -> tasks.SlabRecord:
    """Read a source's rows and write them. ``rows``: a loader, or the whole array
    (scattered to a cluster once)."""
    if isinstance(rows, np.ndarray):
        data = rows[start:stop] if rows.ndim else rows
    else:
        data = rows(start, stop)
    return tasks.write_rows(target, p, start, stop, data, options, check=False)


def _write_slabs(
    target: str, options: dict | None, items: list[tuple[Any, ...]]
) -> list[tasks.SlabRecord]:
    """One dask task: its slabs, one after another (a slab of a large tensor, or
    several small tensors whole), once the container is checked to be uncommitted."""
    tasks.check_begun(target, options)
    return [_write_slab(target, options, *item) for item in items]


def run(
    models: list[Model],
    storage_options: dict[str, Any] | None,
    codec: str,
    chunk_bytes: int,
    scheduler: Any,
    progress: bool,
) -> ArchiveResult:
    """Begin the containers, write every slab as a dask task, then commit them."""
    plans = [m.plans(codec, int(chunk_bytes)) for m in models]
    for m in models:
        tasks.begin(m.target, m.metadata, storage_options)
    client = _client(scheduler)
    try:
        work, owner = [], []
        for i, (m, ps) in enumerate(zip(models, plans, strict=True)):
            small: list[tuple[Any, ...]] = []  # small tensors, grouped up to TASK_BYTES
            small_bytes = 0
            for t, p in zip(m.tensors, ps, strict=True):
                slabs = p.slabs()
                rows = t.rows
                if client is not None and isinstance(rows, ArrayRows) and slabs:
                    # in memory: sent to the cluster once, not with every task
                    rows = client.scatter(rows.array)
                if len(slabs) == 1 and p.nbytes < tasks.TASK_BYTES:
                    small.append((p, *slabs[0], rows))
                    small_bytes += p.nbytes
                    if small_bytes >= tasks.TASK_BYTES:
                        work.append(_task(m.target, storage_options, small))
                        owner.append(i)
                        small, small_bytes = [], 0
                    continue
                for start, stop in slabs:
                    work.append(_task(m.target, storage_options, [(p, start, stop, rows)]))
                    owner.append(i)
            if small:
                work.append(_task(m.target, storage_options, small))
                owner.append(i)
        written = _compute(work, client or scheduler, progress)
    finally:
        if client is not None and client is not scheduler:
            client.close()
    for i, (m, ps) in enumerate(zip(models, plans, strict=True)):
        records = [r for who, done in zip(owner, written, strict=True) if who == i for r in done]
        tasks.commit(m.target, ps, records, m.metadata, storage_options)
    return ArchiveResult(
        targets={m.name: m.target for m in models},
        tensors=sum(len(m.tensors) for m in models),
        nbytes=int(sum(r.nbytes for done in written for r in done)),
        tasks=len(work),
    )


def _task(target: str, options: dict | None, items: list[tuple[Any, ...]]) -> Any:
    dask = need("dask", "archive")

    return dask.delayed(_write_slabs, pure=False)(target, options, items)


def _client(scheduler: Any) -> Any:
    """The dask.distributed Client of a scheduler argument (``None`` for local ones)."""
    if isinstance(scheduler, str) and "://" in scheduler:
        return need("distributed", "a dask.distributed scheduler").Client(scheduler)
    return scheduler if type(scheduler).__name__ == "Client" else None


def _compute(work: list[Any], scheduler: Any, progress: bool) -> list[Any]:
    import dask

    if not work:
        return []
    if type(scheduler).__name__ == "Client":
        futures = scheduler.compute(work)
        if progress:
            from distributed import progress as show

            with contextlib.redirect_stdout(sys.stderr):  # (stdout is a command's --json)
                show(futures)
        return list(scheduler.gather(futures))
    bar: Any = contextlib.nullcontext()
    if progress:
        from dask.diagnostics import ProgressBar

        bar = ProgressBar(out=sys.stderr)  # (stdout is a command's --json)
    with bar:
        return list(dask.compute(*work, scheduler=scheduler or "threads"))
