"""A Writer's writing: objects and documents queued, and handed in batches to one thread
that writes them in order, behind the caller."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from nncodecs.outputs import uninterrupted

__all__ = ["Batches", "ObjectQueue"]

#: Batches handed over and not yet written, at most. Two, not one: with one, the caller
#: waited for each batch before handing the next, 0.6 s of compressing the 24-copy
#: model; two cut that model's compress by 10% (interleaved A/B), at the same peak RSS.
IN_FLIGHT = 2


class Batches:
    """Batches for ``write`` (one thread, in the order given, up to IN_FLIGHT behind
    the caller, so the next tensors encode meanwhile). A batch that fails stops every
    one after it (never a tensor's document written after its chunks failed); its
    error is raised at the next :meth:`put` or :meth:`wait`."""

    def __init__(self, write: Callable[[dict[str, bytes]], None]) -> None:
        self._write = write
        self._pool: ThreadPoolExecutor | None = None
        self._pending: collections.deque[Future[None]] = collections.deque()
        self._failed = False

    def put(self, items: dict[str, bytes]) -> None:
        while len(self._pending) >= IN_FLIGHT:
            self._pending.popleft().result()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="nncodecs-write")
        self._pending.append(self._pool.submit(self._run, items))

    def _run(self, items: dict[str, bytes]) -> None:
        if self._failed:  # (on the one thread: batches run one after another)
            raise RuntimeError("not written: a batch before it failed")
        try:
            self._write(items)
        except BaseException:
            self._failed = True
            raise

    def wait(self) -> None:
        """Until every batch handed over is written (the first error raised here)."""
        while self._pending:
            self._pending.popleft().result()

    def stop(self) -> None:
        """The thread done, its errors ignored (a writer abandoning its output); a second
        Ctrl-C must not let the output be closed under a batch still being written."""
        with contextlib.suppress(BaseException):
            self.wait()
        if self._pool is not None:
            uninterrupted(self._pool.shutdown)
            self._pool = None


class ObjectQueue:
    """Objects (chunks, shards) and documents queued for a store: objects go out in a batch
    of ``batch_bytes`` or ``batch_count`` (a model of 5,000 tiny tensors must not pay a
    store round trip per object), and documents only after the objects they commit
    (:meth:`drain`), through :class:`Batches`."""

    def __init__(
        self, write: Callable[[dict[str, bytes]], None], batch_bytes: int, batch_count: int
    ) -> None:
        self.batches = Batches(write)
        self._objects: dict[str, bytes] = {}  # chunks not yet written
        self._docs: dict[str, bytes] = {}  # their arrays' documents, written after
        self._bytes = 0
        self._batch_bytes, self._batch_count = batch_bytes, batch_count

    def object(self, key: str, data: bytes) -> None:
        self._objects[key] = data
        self._bytes += len(data)
        if self._bytes >= self._batch_bytes:
            self.drain(docs_too=False)

    def doc(self, key: str, data: bytes) -> None:
        self._docs[key] = data
        if len(self._objects) + len(self._docs) >= self._batch_count:
            self.drain()

    def forget(self, prefix: str) -> None:
        """Drop the queued objects under ``prefix`` (a tensor that failed: a retry starts
        afresh)."""
        self._objects = {k: v for k, v in self._objects.items() if not k.startswith(prefix)}
        self._bytes = sum(len(v) for v in self._objects.values())

    def drain(self, docs_too: bool = True) -> None:
        """Hand the queued objects to the writing thread, then (``docs_too``) the
        documents that commit them: the next tensors encode while they are written."""
        queue, self._objects, self._bytes = self._objects, {}, 0
        if queue:
            self.batches.put(queue)
        if docs_too and self._docs:
            queued, self._docs = self._docs, {}
            self.batches.put(queued)

    def wait(self) -> None:
        """Until the batches handed over are written (an error raised here)."""
        self.batches.wait()

    def stop(self, drop: bool = False) -> None:
        """The writing thread done, its errors ignored (``drop``: what is queued is never
        written, as for a writer abandoning its output)."""
        if drop:
            self._objects, self._docs, self._bytes = {}, {}, 0
        self.batches.stop()
