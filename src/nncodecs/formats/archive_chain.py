"""The dask side of ``nncodecs.archive(..., delta="previous")``: a checkpoint series, each
container stored against the one before it.

First every tensor's SHA-256, as parallel tasks (one read of each). Then one task a
tensor a checkpoint (:func:`nncodecs.container.series.write_tensor`): it waits only
for the task holding its reference, an earlier checkpoint's tensor of its hash,
dtype and shape under any name, or the previous checkpoint's tensor of its name,
whose values it reads from that checkpoint's source, never from the container being
written. The tensors of a series run in parallel, each down its own chain. Last,
each container is committed with its tasks' records.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nncodecs.container import series, tasks
from nncodecs.extras import need
from nncodecs.formats.archive_tasks import ArchiveResult, Model, _client, _compute

__all__ = ["run_chain"]


def _whole(rows: Any, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(rows(0, shape[0] if shape else 1), order="C").reshape(shape)  # (0-d kept)


def _hash_task(rows: Any, shape: tuple[int, ...]) -> str | None:
    return series.tensor_hash(_whole(rows, shape))


def _tensor_task(
    target: str,
    options: dict | None,
    p: tasks.TensorPlan,
    rows: Any,
    places: tuple[str, str],
    max_chain: int,
    previous: tasks.TensorRecord | None,
    previous_rows: Any,
    same: tasks.TensorRecord | None,
) -> tasks.TensorRecord:
    """Store one tensor of a checkpoint (``places``: where this container and the
    previous one end up)."""

    def base() -> np.ndarray:  # (read only where a difference is tried)
        return _whole(previous_rows, p.shape)

    where = series.Series(places[0], places[1], previous, base, same, max_chain)
    return series.write_tensor(target, p, _whole(rows, p.shape), where, options)


def run_chain(
    models: list[Model],
    finals: list[str],
    storage_options: dict[str, Any] | None,
    codec: str,
    chunk_bytes: int,
    scheduler: Any,
    progress: bool,
    max_chain: int,
) -> ArchiveResult:
    """Write ``models`` (a series, in order; ``finals``: the places each container ends
    up, which the next records as its reference) as described above."""
    dask = need("dask", "archive")

    if codec not in ("auto", "rans", "huffman"):
        raise ValueError(
            f"delta archives need the weights codec (auto, rans, huffman), not {codec!r}"
        )
    max_chain = series.check_max_chain(max_chain)
    plans = [m.plans(codec, int(chunk_bytes)) for m in models]
    for m in models:
        tasks.begin(m.target, m.metadata, storage_options)
    client = _client(scheduler)
    task = dask.delayed(_tensor_task, pure=False)
    per_model: list[list[Any]] = []
    try:
        # Every tensor's hash first (one pass, in parallel): a tensor with the bits of an
        # earlier checkpoint's, under any name, then waits for that one's task alone.
        hashed = dask.delayed(_hash_task, pure=False)
        flat_t = [t for m in models for t in m.tensors]
        digests = iter(
            _compute(
                [hashed(t.rows, tuple(t.shape)) for t in flat_t], client or scheduler, progress
            )
        )
        prev: dict[str, tuple[Any, Any]] = {}
        seen: dict[tuple[str, str, tuple[int, ...]], Any] = {}  # (hash, dtype, shape) -> task
        for i, (m, ps) in enumerate(zip(models, plans, strict=True)):
            places = (finals[i], finals[i - 1] if i else "")
            work, mine, found = [], {}, {}
            for t, p in zip(m.tensors, ps, strict=True):
                before = prev.get(t.name)
                digest = next(digests)
                key = (digest, np.dtype(t.dtype).str, tuple(t.shape)) if digest else None
                work.append(
                    task(
                        m.target,
                        storage_options,
                        p,
                        t.rows,
                        places,
                        int(max_chain),
                        before[0] if before else None,
                        before[1] if before else None,
                        seen.get(key) if key else None,
                    )
                )
                mine[t.name] = (work[-1], t.rows)
                if key and key not in seen:
                    found.setdefault(key, work[-1])
            per_model.append(work)
            prev = mine
            seen.update({k: v for k, v in found.items() if k not in seen})  # (after: across
            # checkpoints only; a container never refers to itself)
        flat = [t for work in per_model for t in work]
        written = _compute(flat, client or scheduler, progress)
    finally:
        if client is not None and client is not scheduler:
            client.close()
    at = 0
    for m, ps, work in zip(models, plans, per_model, strict=True):
        tasks.commit(m.target, ps, written[at : at + len(work)], m.metadata, storage_options)
        at += len(work)
    return ArchiveResult(
        targets={m.name: m.target for m in models},
        tensors=sum(len(m.tensors) for m in models),
        nbytes=int(sum(r.nbytes for r in written)),
        tasks=len(flat),
    )
