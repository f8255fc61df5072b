"""What a rank of a DCP save writes (:mod:`nncodecs.integrations.dcp`): its objects a
batch at a time, and the previous step's shards it is stored against."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from nncodecs.container import Reader
from nncodecs.container import tasks as container_tasks
from nncodecs.container.series import tensor_hash
from nncodecs.container.tasks import TensorRecord
from nncodecs.dtypes import dtype_name

__all__ = ["Batch", "Previous"]


class Batch:
    """Objects gathered and written a batch at a time, in a thread of their own while
    the next batch is encoded (one write of hundreds of small tensors' objects, not
    hundreds of writes): into the store at ``target``, or given to ``sink`` (a part of a
    zip, :class:`nncodecs.container.task_zip.Part`), one batch after another."""

    BYTES = 64 << 20

    def __init__(
        self,
        target: str,
        opts: dict[str, Any] | None,
        sink: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.sink = sink or functools.partial(container_tasks.write_objects, target, opts)
        self.objects: dict[str, Any] = {}
        self.size = 0
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="nncodecs-dcp")
        self.pending: Any = None

    def add(self, objects: dict[str, Any]) -> None:
        self.objects.update(objects)
        self.size += sum(len(v) for v in objects.values())
        if self.size >= self.BYTES:
            self.flush(wait=False)

    def flush(self, wait: bool = True) -> None:
        if self.pending is not None:
            self.pending.result()  # (one batch in flight: its error is raised here)
            self.pending = None
        if self.objects:
            write = functools.partial(self.sink, self.objects)
            self.objects, self.size = {}, 0
            self.pending = self.pool.submit(write)
        if wait and self.pending is not None:
            self.pending.result()
            self.pending = None

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class Previous:
    """The previous step's container (``reference``), opened on first use: the record and
    values of its shard of a name, where it has one of the same dtype and shape."""

    def __init__(self, reference: str | None, opts: dict[str, Any] | None) -> None:
        self.reference, self.opts = reference, opts
        self.reader: Reader | None = None

    def record(self, name: str, array: Any) -> tuple[TensorRecord, Any] | None:
        if self.reference is None:
            return None
        if self.reader is None:
            self.reader = Reader(self.reference, storage_options=self.opts)
        r = self.reader
        if name not in r or r.layout(name) != "dense":
            return None
        info = r.info(name)
        if tuple(info.shape) != tuple(array.shape) or info.dtype != dtype_name(array.dtype):
            return None
        values = r.read_tensor(name, check=True)
        digest = tensor_hash(values)
        if digest is None:
            return None
        here = (self.reference, name, info.depth)
        shape = tuple(info.shape)
        rec = TensorRecord(
            name, {}, int(values.nbytes), digest, info.depth, here, shape, info.dtype
        )
        return rec, values

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
