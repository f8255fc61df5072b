"""torch.distributed.checkpoint (DCP) storage: one nncodecs container per checkpoint.

``dcp.save(state_dict, storage_writer=ContainerWriter(path))`` on N ranks writes one
container (a directory, or an fsspec URL such as ``s3://bucket/step-100``) through
the container's task API: the coordinator begins it, every rank encodes and writes
only its own shards' objects, in parallel, and returns their records; the
coordinator commits once. Each saved item is a tensor of the container: an unsharded
tensor under its fully qualified name, a shard under ``<fqn>@<offsets>`` (its global
offsets), a bytes item (a step count, a scheduler's state, pickled by DCP) as bytes.
DCP's ``Metadata`` is stored as JSON of its dataclasses (:data:`METADATA`), never
as a pickle.

``dcp.load(state_dict, storage_reader=ContainerReader(path))`` restores it, resharded
to another world size where the state dict asks: each rank reads only the stored
shards its plan needs. DCP's default load planner unpickles a bytes item with
``weights_only=False``, so the reader first checks that the item loads with
``weights_only=True`` and refuses it otherwise.

A local directory is written under a hidden sibling name (``.<name>.nncodecs-dcp``)
and renamed into place at the commit: an existing container there is replaced only
then, and only with ``overwrite=True``; a save killed midway leaves what was there
as it was, and the next save to the path removes what it left behind. A URL has no
rename: its container is written in place, an existing one refused (a killed save's,
marked as being written, is removed by the next save). A local ``NAME.zip`` is one
file: each rank writes its objects into a part of its own (beside the target, in
``.NAME.zip.nncodecs-parts``) and the coordinator joins the parts at the commit (the
first renamed, the others copied after it in the kernel), then renames the zip into
place, with the same rules: an existing one replaced only with ``overwrite=True``, what
a killed save left removed by the next. Where creating a file costs much (one per
stored object and tensor in a directory), the zip is the faster target.
"""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nncodecs.container import MAX_CHAIN, Reader, task_zip
from nncodecs.container import tasks as container_tasks
from nncodecs.container.series import Series, check_max_chain, write_tensor
from nncodecs.dtypes import as_numpy
from nncodecs.errors import CorruptDataError
from nncodecs.extras import need
from nncodecs.gcpause import collector_paused
from nncodecs.integrations.dcp_metadata import (
    METADATA,
    index_key,
    metadata_from_json,
    metadata_json,
    shard_name,
)
from nncodecs.integrations.dcp_paths import begin_save, is_zip, staging_of, swap, target_of
from nncodecs.integrations.dcp_writes import Batch, Previous
from nncodecs.outputs import is_url

try:  # (without torch this module still imports: its classes refuse to be made, by name)
    from torch.distributed.checkpoint import StorageReader, StorageWriter
except ModuleNotFoundError:
    StorageReader = StorageWriter = object  # type: ignore[misc,assignment]

if TYPE_CHECKING:
    from torch.distributed.checkpoint import Metadata
    from torch.distributed.checkpoint.metadata import StorageMeta
    from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner, SavePlan, SavePlanner
    from torch.distributed.checkpoint.storage import WriteResult
    from torch.futures import Future

_NEEDS = "torch.distributed.checkpoint storage"

__all__ = ["METADATA", "ContainerReader", "ContainerWriter"]


class ContainerWriter(StorageWriter):
    """DCP storage writing one nncodecs container at ``path`` (see the module).

    ``codec``: the container's codec for every tensor (``"auto"``); ``overwrite``:
    replace a container already at a local ``path`` (at the commit); ``reference``: the
    previous step's container: a shard it holds too (the same fqn, offsets and sizes) is
    stored against it, as a duplicate or a difference (chains at most ``max_chain``
    deep), any other whole; ``storage_options``: for a URL, as fsspec takes them.
    ``reset(checkpoint_id)`` points the same writer at the next step's path (and
    ``reference`` may be set between steps)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        codec: str = "auto",
        overwrite: bool = False,
        reference: str | os.PathLike[str] | None = None,
        max_chain: int = MAX_CHAIN,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        need("torch", _NEEDS)
        super().__init__()
        container_tasks.plan("x", "uint8", (0,), codec)  # (an unknown codec refused here)
        self.codec, self.overwrite, self.storage_options = codec, overwrite, storage_options
        self.reference = None if reference is None else target_of(reference, writing=False)
        self.max_chain = check_max_chain(max_chain)
        self.path: str | None = None
        self.is_coordinator = False
        if path is not None:
            self.reset(path)

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id is not None:
            self.path = target_of(checkpoint_id)

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        if self.path is None:
            raise ValueError("ContainerWriter: no path (give one, or a checkpoint_id)")
        self.is_coordinator = is_coordinator

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        """Begin the container (the coordinator, once, before any rank writes), where
        every rank then writes: the plans carry its name."""
        staging = begin_save(str(self.path), self.overwrite, self.reference, self.storage_options)
        return [dataclasses.replace(p, storage_data=staging) for p in plans]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        """Encode and write this rank's items; their records go to the coordinator."""
        from torch.futures import Future

        target = plan.storage_data
        container_tasks.check_begun(target, self.storage_options)
        previous = Previous(self.reference, self.storage_options)
        part = task_zip.Part(target) if is_zip(str(self.path)) else None
        batch = Batch(target, self.storage_options, part.add if part else None)
        try:
            with collector_paused():  # (hundreds of items: no full collection among them)
                results = [
                    self._write_item(target, item, planner, previous, batch) for item in plan.items
                ]
            batch.flush()
        except BaseException:
            batch.close()
            if part is not None:
                part.abandon()
            raise
        finally:
            previous.close()
            batch.close()
        if part is not None:  # (the part's record travels with the rank's first result)
            closed = part.close()
            if results:
                p, records, _ = results[0].storage_data
                results[0] = dataclasses.replace(results[0], storage_data=(p, records, closed))
        done: Future[list[WriteResult]] = Future()  # (torch's: DCP waits on it)
        done.set_result(results)
        return done

    def _write_item(
        self, target: str, item: Any, planner: SavePlanner, previous: Previous, batch: Batch
    ) -> WriteResult:
        """One item: a tensor (a shard) or bytes, stored whole, or against the
        previous step's shard of its name."""
        from torch.distributed.checkpoint.planner import WriteItemType
        from torch.distributed.checkpoint.storage import WriteResult

        opts = self.storage_options
        data = planner.resolve_data(item)
        if item.type == WriteItemType.BYTE_IO:
            name, array = item.index.fqn, _bytes_array(data.getvalue())
        else:
            name = shard_name(item.index.fqn, item.tensor_data.chunk.offsets, item)
            array = _array(data.detach().to("cpu").contiguous())
        p = container_tasks.plan(name, array.dtype, array.shape, self.codec)
        found = previous.record(name, array) if item.type != WriteItemType.BYTE_IO else None
        if found is not None:
            there = str(self.reference)
            step = Series(str(self.path), there, found[0], found[1], None, self.max_chain)
            records: list[Any] = [write_tensor(target, p, array, step, opts, batch.add)]
        else:
            records = []
            for a, b in p.slabs():  # (begun: checked once in write_data, not once a slab)
                objects, record = container_tasks.encode_rows(
                    p, a, b, array[a:b] if array.ndim else array
                )
                batch.add(objects)
                records.append(record)
        return WriteResult(item.index, int(array.nbytes), (p, records, None))

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        """Commit (the coordinator, once every rank has written): DCP's metadata as JSON,
        then, for a local directory, the rename into place."""
        with collector_paused():
            self._commit(metadata, results)

    def _commit(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        plans, records, names, parts = [], [], {}, []
        for result in (r for rank in results for r in rank):
            p, slabs, part = result.storage_data
            plans.append(p)
            records.extend(slabs)
            names[index_key(result.index)] = p.name
            parts += [part] if part is not None else []
        meta = {METADATA: metadata_json(metadata, names)}
        if is_zip(str(self.path)):
            task_zip.commit(str(self.path), plans, records, parts, meta, self.overwrite)
            return
        staging = staging_of(str(self.path))
        container_tasks.commit(staging, plans, records, meta, self.storage_options)
        if staging != self.path:
            swap(Path(staging), Path(str(self.path)), self.overwrite)

    def storage_meta(self) -> StorageMeta | None:
        from torch.distributed.checkpoint.metadata import StorageMeta

        return StorageMeta(checkpoint_id=self.path)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike[str]) -> bool:
        """A directory or URL, or a local zip."""
        try:
            target_of(checkpoint_id)
        except (TypeError, ValueError):
            return False
        return True


class ContainerReader(StorageReader):
    """DCP storage reading a container :class:`ContainerWriter` wrote (see the module).

    ``bytes_read``: after a load, the stored bytes this rank read (its plan's shards)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        need("torch", _NEEDS)
        super().__init__()
        self.storage_options = storage_options
        self.path: str | None = None
        self.bytes_read = 0
        self.names: dict[tuple[str, tuple[int, ...] | None], str] = {}
        self.shapes: dict[str, tuple[Any, tuple[int, ...]]] = {}
        if path is not None:
            self.reset(path)

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id is not None:
            self.path = target_of(checkpoint_id, writing=False)
        self.bytes_read = 0

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        if self.path is None:
            raise ValueError("ContainerReader: no path (give one, or a checkpoint_id)")
        with collector_paused(), self._open() as r:
            record = r.metadata.get(METADATA)
            if record is None:
                raise ValueError(f"{self.path}: not a container of a DCP checkpoint")
            metadata, self.names = metadata_from_json(record, r)
        self.shapes = _shapes(metadata, self.names)
        return metadata

    def set_up_storage_reader(
        self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any
    ) -> None:
        if metadata.storage_data:
            self.names = metadata.storage_data
            self.shapes = _shapes(metadata, self.names)

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        """Read the stored shards this rank's plan names, each once, checked, one at a
        time."""
        import torch
        from torch.distributed._shard._utils import narrow_tensor_by_index
        from torch.distributed.checkpoint.planner import LoadItemType
        from torch.futures import Future

        by_name: dict[str, list[Any]] = {}  # (one stored shard in memory at a time)
        for req in plan.items:
            name = self.names.get(index_key(req.storage_index))
            if name is None:
                raise CorruptDataError(f"{self.path}: {req.storage_index.fqn!r} is not stored")
            by_name.setdefault(name, []).append(req)
        with collector_paused(), self._open() as r:  # (paused first: the Reader opens too)
            for name, reqs in by_name.items():
                if name not in r:
                    raise CorruptDataError(f"{self.path}: {name!r} is not stored")
                self.bytes_read += r.info(name).stored_bytes
                held = r.read_tensor(name, to="torch", check=True)
                shape = self.shapes.get(name)
                if shape is not None and held.dtype != shape[0]:  # (stored as its bytes)
                    held = held.reshape(-1).view(torch.uint8).view(shape[0]).reshape(shape[1])
                for req in reqs:
                    if req.type == LoadItemType.BYTE_IO:
                        raw = held.numpy().tobytes()
                        _check_weights_only(raw, req.storage_index.fqn)
                        planner.load_bytes(req, io.BytesIO(raw))
                        continue
                    tensor = narrow_tensor_by_index(held, req.storage_offsets, req.lengths)
                    target = planner.resolve_tensor(req).detach()
                    if target.size() != tensor.size():
                        raise CorruptDataError(
                            f"{self.path}: {name!r}: a stored shard of {list(tensor.size())}, "
                            f"where the plan reads {list(target.size())}"
                        )
                    target.copy_(tensor)
                    planner.commit_tensor(req, target)
                del held
        done: Future[None] = Future()
        done.set_result(None)
        return done

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike[str]) -> bool:
        """A container at a local path (a directory with its ``zarr.json``, or a zip),
        or any URL."""
        target = str(checkpoint_id)
        local = Path(target)
        return is_url(target) or (local / "zarr.json").is_file() or local.suffix == ".zip"

    def _open(self) -> Reader:
        return Reader(str(self.path), storage_options=self.storage_options)


def _shapes(metadata: Any, names: dict[Any, str]) -> dict[str, tuple[Any, tuple[int, ...]]]:
    """The dtype and shape of each stored shard, by its name in the container."""
    out = {}
    for fqn, m in metadata.state_dict_metadata.items():
        for c in getattr(m, "chunks", []):
            name = names.get((fqn, tuple(int(o) for o in c.offsets)))
            if name is not None:
                out[name] = (m.properties.dtype, tuple(int(d) for d in c.sizes))
    return out


def _array(tensor: Any) -> Any:
    """A tensor as NumPy; one of a dtype nncodecs does not code (complex) as its bytes
    (DCP's metadata keeps its dtype: the reader views them back)."""
    try:
        return as_numpy(tensor)
    except TypeError:
        import torch

        return as_numpy(tensor.reshape(-1).view(torch.uint8))


def _bytes_array(data: bytes) -> Any:
    import numpy as np

    return np.frombuffer(data, np.uint8)


def _check_weights_only(raw: bytes, fqn: str) -> None:
    """A bytes item must load with ``weights_only=True`` before DCP's planner unpickles
    it with ``weights_only=False`` (which would run its code)."""
    import torch

    try:
        torch.load(io.BytesIO(raw), weights_only=True)
    except Exception as exc:  # (torch's loader: its refusals have no fixed class)
        raise ValueError(
            f"bytes item {fqn!r} does not load with weights_only=True, so it is not handed "
            "to DCP's planner, which would unpickle it with weights_only=False "
            f"({type(exc).__name__})"
        ) from None
