"""Write named tensors into a Zarr group: the nncodecs container."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any, Self

import numpy as np
import zarr
from zarr.core.sync import sync

from nncodecs.container import composite, layout, storage
from nncodecs.container._store import CheckedStore, describe_target
from nncodecs.container.arrays import to_host_array
from nncodecs.container.names import escape
from nncodecs.container.output import Output, StoreOutput, open_output
from nncodecs.dtypes import array_kind, dtype_name
from nncodecs.frame import set_threads

__all__ = ["Writer"]

# Small tensors are written in batches, concurrently: a model of 5,000 tiny
# tensors would otherwise pay Zarr's per-call overhead 15,000 times. The
# group's tensor order is rewritten after each batch (and at close); tensors
# past the last rewrite are still found by the Reader through their commit flag.
_BATCH_BYTES = 16 << 20
_BATCH_COUNT = 256
# Tensors from this size on are written at once, not copied into a batch:
# Zarr's per-array overhead is small next to their coding.
_ALONE_BYTES = 1 << 20
# Chunks written per call for a large unsharded tensor (see _write).
_SLAB_CHUNKS = 4


class Writer:
    """Write a model, tensor by tensor, as one Zarr v3 group.

    Parameters
    ----------
    target : path, URL or Zarr store
        ``*.zarr`` directory, ``*.zip`` single file, an fsspec URL
        (``memory://...``) or any Zarr store.
    mode : {"w", "a"}
        ``"w"`` creates a container (an existing output is refused unless
        ``overwrite``); ``"a"`` adds tensors to an existing container without
        rewriting the ones it has.
    codec : {"auto", "rans", "huffman", "zstd", "raw"}
        Default codec of the tensors (``auto``: the fused weights codec).
    chunk_bytes : int
        Target chunk size along the first axis (random access granularity).
    threads : int, optional
        Threads of the codecs (process-wide, as ``nncodecs.set_threads``);
        ``None`` leaves the setting as it is (default: every core).
    storage_options : dict, optional
        For a URL target: the fsspec filesystem's options (for S3 through
        s3fs: ``endpoint_url``, ``key``, ``secret``, ...).
    overwrite : bool
        Mode ``"w"`` only: replace an existing output (a file, by rename; a
        directory only if it is an nncodecs container). Without it an
        existing file or non-empty directory raises ``FileExistsError``.

    Notes
    -----
    What is committed when (see docs/container.md, "Guarantees"): every
    tensor added before :meth:`flush` or :meth:`close` returns; and, in a
    directory container that exists already (mode ``"a"``, or after the first
    flush), a tensor of 1 MiB or more as soon as :meth:`add_tensor` returns.
    A new container appears at its path only at its first commit. A local
    container has one writer at a time (``.NAME.nncodecs.lock``; a second
    writer gets ``BlockingIOError`` naming the holder's pid).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.zarr")
    >>> with Writer(path) as w:
    ...     w.add_tensor("layer.weight", np.ones((4, 3), np.float32))
    ...     w.metadata["format"] = "pt"
    >>> from nncodecs import Reader
    >>> with Reader(path) as r:
    ...     r.keys(), r.read_tensor("layer.weight").sum(), r.metadata["format"]
    (['layer.weight'], np.float32(12.0), 'pt')
    """

    def __init__(
        self,
        target: Any,
        mode: str = "w",
        codec: str = "auto",
        chunk_bytes: int = layout.CHUNK_BYTES,
        threads: int | None = None,
        storage_options: dict[str, Any] | None = None,
        *,
        overwrite: bool = False,
    ) -> None:
        if threads is not None:
            set_threads(threads)
        if mode not in ("w", "a"):
            raise ValueError(f"mode must be 'w' or 'a', got {mode!r}")
        layout.codec_settings(codec)  # validates the name
        self.codec = codec
        self.chunk_bytes = int(chunk_bytes)
        if overwrite and mode != "w":
            raise ValueError("overwrite goes with mode 'w'")
        self._closed = True  # until the output is open
        self._names: list[str] = []  # committed and pending, in order
        self._pending: list[tuple[str, np.ndarray, str | None]] = []
        self._pending_bytes = 0
        self.metadata: dict[str, str] = {}
        # Whether this container records every chunk written and CRCs (all its tensors do).
        self._records = True
        self._output: Output = open_output(target, mode, bool(overwrite), storage_options)
        try:  # (right after the output is open: any exception abandons it, lock and all)
            self._store = self._output.store
            if mode == "a":
                where = describe_target(self._store)
                _, attrs, members = layout.open_container(CheckedStore(self._store), where)
                self._names = layout.tensor_order(attrs, members)
                self.metadata = dict(attrs.get("metadata", {}))
                self._records = attrs.get("records") == layout.RECORDS
                # Not through the consolidated metadata: the group's next write drops it.
                self._group = zarr.open_group(self._store, mode="a", use_consolidated=False)
            else:
                if isinstance(self._output, StoreOutput):
                    self._output.check_replaceable(target, bool(overwrite))
                self._group = zarr.open_group(self._store, mode="w")
        except BaseException:
            self._output.abandon()
            raise
        # The consolidated metadata at the target lists every committed tensor;
        # before the first change in place it is dropped (a Reader then lists
        # the members), and written anew at the next commit.
        self._consolidated = mode == "a"
        self._closed = False

    def add_tensor(self, name: str, tensor: Any, codec: str | None = None) -> None:
        """Store one tensor (NumPy, torch CPU/CUDA, CuPy) under ``name``.

        Raises ``ValueError`` for a name already there and ``TypeError`` for a
        dtype nncodecs does not support. Tensors under 1 MiB are written in
        batches (a copy is kept until then); a larger one is written at once,
        in slabs of whole shards.
        """
        self._check_new(name)
        if array_kind(tensor) == "scipy.sparse":
            self._add_composite(name, composite.scipy_parts(name, tensor), codec)
            return
        arr = np.asarray(to_host_array(tensor), order="C")  # (ascontiguousarray makes 0-d 1-d)
        try:
            dtype_name(arr.dtype)
        except TypeError as exc:
            raise TypeError(f"tensor {name!r}: {exc}") from None
        layout.codec_settings(codec or self.codec)  # validates a per-tensor codec name
        if arr.nbytes >= _ALONE_BYTES:
            self._flush()
            self._pending.append((name, arr, codec))
            self._flush()
            return
        self._names.append(name)
        self._pending.append((name, arr.copy(), codec))
        self._pending_bytes += arr.nbytes
        if self._pending_bytes >= _BATCH_BYTES or len(self._pending) >= _BATCH_COUNT:
            self._flush()

    def _check_new(self, name: Any) -> None:
        self._check_open()
        if not isinstance(name, str):
            raise TypeError(f"a tensor name must be a str, got {type(name).__name__}")
        if name in self._names:
            raise ValueError(f"tensor {name!r} is already in the container")

    # -- composite layouts: a sub-group of 1-D (or small) arrays ----------------------

    def add_sparse_csr(
        self, name: str, data: Any, indices: Any, indptr: Any, shape: Any, codec: str | None = None
    ) -> None:
        """Store a CSR matrix from its arrays; it reads back as ``scipy.sparse.csr_matrix``."""
        self._check_new(name)
        self._add_composite(
            name, composite.compressed_parts("csr", name, data, indices, indptr, shape), codec
        )

    def add_sparse_coo(
        self, name: str, coords: Any, data: Any, shape: Any, codec: str | None = None
    ) -> None:
        """Store a COO tensor: ``coords`` of shape (ndim, nnz) and ``data`` of nnz values."""
        self._check_new(name)
        self._add_composite(name, composite.coo_parts(name, coords, data, shape), codec)

    def add_quantized(
        self, name: str, blocks: Any, scales: Any, scheme: str, codec: str | None = None
    ) -> None:
        """Store an MXFP4 or NVFP4 weight as its pair: packed FP4 nibbles and block scales.

        ``blocks``: uint8 (two FP4 values a byte) or torch ``float4_e2m1fn_x2``;
        ``scales``: E8M0 as uint8 (``mxfp4``, 32 values a block) or float8_e4m3fn
        (``nvfp4``, 16 values a block). It reads back as the same pair.
        """
        self._check_new(name)
        self._add_composite(name, composite.quantized_parts(name, blocks, scales, scheme), codec)

    def _add_composite(self, name: str, made: composite.Parts, codec: Any) -> None:
        """A sub-group of arrays; committed by its own flag, set last."""
        kind, parts, extra = made
        for part, arr in parts.items():
            try:
                dtype_name(arr.dtype)
            except TypeError as exc:
                raise TypeError(f"tensor {name!r} ({part}): {exc}") from None
        self._flush()
        self._begin_change()
        node = escape(name)
        sub = self._group.create_group(
            node,
            overwrite=True,  # only ever a leftover of a writer that died: names are checked
            attributes={layout.ATTRS_KEY: {"name": name, "layout": kind, "complete": False}},
        )
        for part, arr in parts.items():
            z = sub.create_array(
                part,
                shape=arr.shape,
                dtype=arr.dtype,
                dimension_names=[f"{node}.{part}.{i}" for i in range(arr.ndim)],
                config=layout.ARRAY_CONFIG,
                **layout.chunking(arr.shape, arr.dtype.itemsize, self.chunk_bytes),
                **layout.codec_settings(codec or self.codec),
            )
            arr = np.ascontiguousarray(arr)
            if arr.size:
                z[...] = arr
            z.attrs[layout.ATTRS_KEY] = layout.tensor_records(arr, codec or self.codec)
        sub.attrs[layout.ATTRS_KEY] = {"name": name, "layout": kind, "complete": True, **extra}
        self._names.append(name)
        self._write_group_attrs()

    def _flush(self) -> None:
        """Write the pending tensors, concurrently, then record them in the group."""
        if not self._pending:
            return
        self._begin_change()
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        for name, _, _ in pending:
            if name not in self._names:
                self._names.append(name)
        sync(self._write_all(pending))
        self._write_group_attrs()

    async def _write_all(self, items: list[tuple[str, np.ndarray, str | None]]) -> None:
        # Every write finishes (or fails) before this returns: one that failed must not
        # leave the others running into a temporary that is about to be removed.
        results = await asyncio.gather(
            *(self._write(name, arr, codec) for name, arr, codec in items), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _write(self, name: str, arr: np.ndarray, codec: str | None) -> None:
        node = escape(name)
        z = await self._group._async_group.create_array(
            node,
            shape=arr.shape,
            dtype=arr.dtype,
            dimension_names=[f"{node}.{i}" for i in range(arr.ndim)] if arr.ndim else None,
            attributes={layout.ATTRS_KEY: self._tensor_attrs(name, complete=False)},
            overwrite=True,  # only ever a leftover of a writer that died: names are checked
            config=layout.ARRAY_CONFIG,
            **layout.chunking(arr.shape, arr.dtype.itemsize, self.chunk_bytes, codec or self.codec),
            **layout.codec_settings(codec or self.codec),
        )
        # Large tensors go in slabs of whole shards (or of a few chunks):
        # Zarr holds every encoded chunk of one call until it is stored, so
        # a tensor written at once would hold its whole compressed copy.
        slab = z.shards[0] if z.shards else z.chunks[0] * _SLAB_CHUNKS if arr.ndim else 0
        if arr.size == 0:
            pass  # no chunks: constant time whatever the declared shape
        elif arr.ndim and arr.shape[0] > slab:
            for start in range(0, arr.shape[0], slab):
                await z.setitem(slice(start, start + slab), arr[start : start + slab])
        else:
            await z.setitem(Ellipsis, arr)
        key = f"{node}/{storage.single_chunk_key(arr.ndim)}"
        store = z.store_path.store
        if (
            arr.size
            and (codec or self.codec) == "raw"
            and not (await storage.exist_many(store, [key]))[0]
        ):
            # Zarr skips a chunk that equals the fill value; a raw tensor's
            # chunk is always written so that it can be memory-mapped.
            await storage.set_many(store, {key: arr.tobytes()})
        # Only now is the tensor committed: a reader skips arrays without this.
        attrs = self._tensor_attrs(name, complete=True)
        attrs.update(layout.tensor_records(arr, codec or self.codec))
        await z.update_attributes({layout.ATTRS_KEY: attrs})

    def _tensor_attrs(self, name: str, complete: bool) -> dict[str, Any]:
        return {"name": name, "layout": "dense", "complete": complete}

    def _begin_change(self) -> None:
        """Before the first write after a commit: drop the consolidated metadata at
        the target (one rewrite of the group's zarr.json), so that a Reader of a
        container whose writer dies lists the members instead of trusting it."""
        if self._consolidated:
            self._write_group_attrs()
            self._consolidated = False

    def _check_metadata(self) -> None:
        bad = {
            k: v
            for k, v in self.metadata.items()
            if not (isinstance(k, str) and isinstance(v, str))
        }
        if bad:
            raise TypeError(f"metadata keys and values must be strings, got {bad!r}")

    def _write_group_attrs(self) -> None:
        self._check_metadata()
        attrs = {
            "format": layout.FORMAT,
            "version": layout.VERSION,
            "tensors": [n for n in self._names if n not in self._pending_names()],
            "metadata": dict(self.metadata),
        }
        if self._records:
            attrs["records"] = layout.RECORDS
        self._group.attrs[layout.ATTRS_KEY] = attrs

    def _pending_names(self) -> set[str]:
        return {name for name, _, _ in self._pending}

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the writer is closed")

    def flush(self) -> None:
        """Commit: write the pending tensors, the order and metadata, the consolidated
        metadata, and publish (a new container appears at its path; a zip is
        rewritten and renamed over the target). Once it returns, every tensor
        added so far survives a kill of this process."""
        self._check_open()
        self._check_metadata()
        self._flush()
        self._commit()

    def _commit(self) -> None:
        self._write_group_attrs()
        with warnings.catch_warnings():
            # zarr calls consolidated metadata for Zarr v3 "not yet part of the spec".
            warnings.simplefilter("ignore")
            zarr.consolidate_metadata(self._store)
        self._consolidated = True
        if self._output.commit():  # published: from now on the writes land in place
            self._store = self._output.store
            self._group = zarr.open_group(self._store, mode="a", use_consolidated=False)

    def close(self) -> None:
        """Commit everything (as :meth:`flush`), release the lock, remove the temporaries."""
        if self._closed:
            return
        self._check_metadata()  # (a bad argument: the writer stays open to fix it)
        try:
            self._flush()
            self._commit()
        except BaseException:
            self.abandon()
            raise
        self._closed = True
        self._output.close()

    def abandon(self) -> None:
        """Close without committing what :meth:`flush` has not: the target stays as the
        last commit left it (a new container that was never committed: nothing)."""
        if self._closed:
            return
        self._closed = True
        self._pending, self._pending_bytes = [], 0
        self._output.abandon()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            # An error inside the with block: commit nothing more.
            self.abandon()
            return
        self.close()
