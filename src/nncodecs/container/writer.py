"""Write named tensors into a Zarr group: the nncodecs container."""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from nncodecs.container import composite, kept, layout, records
from nncodecs.container.adopting import adopted
from nncodecs.container.arrays import to_host_array
from nncodecs.container.composite_writes import composite_arrays
from nncodecs.container.delta import MAX_CHAIN
from nncodecs.container.delta_writes import DeltaWriter
from nncodecs.container.names import check_tensor_name, escape
from nncodecs.dtypes import array_kind, dtype_name
from nncodecs.frame import set_threads
from nncodecs.store import documents
from nncodecs.store.batches import ObjectQueue
from nncodecs.store.output import Output, StoreOutput
from nncodecs.store.target import open_output

__all__ = ["Writer"]

# Objects are queued and written in batches (concurrently, on a Zarr store):
# a model of 5,000 tiny tensors must not pay a store round trip per object.
_BATCH_BYTES = 16 << 20
_BATCH_COUNT = 256
# A tensor from this size on is written out before add_tensor returns (in a
# directory container that exists already, it is then committed).
_ALONE_BYTES = 1 << 20


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
    reference : path or URL, or a list of them, optional
        Containers this one may store tensors against (a checkpoint's previous
        one, a fine-tune's base): a tensor with the bits of one of theirs is
        stored as a reference to it, and one close to the first reference's
        tensor of the same name as its difference from it, where that is
        smaller (see docs/container.md, "Checkpoint series"). A Reader needs
        the references to read those tensors.
    max_chain : int
        Longest chain of references: a tensor whose reference is this many
        differences deep is stored whole (a keyframe).
    hashes : bool
        Record each dense tensor's SHA-256 (always, with ``reference``), so
        that later containers can find its duplicates.
    dedup : bool
        With ``reference``: store a tensor with the same bits as one the
        references record as a reference to it, without reading either.

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
        reference: Any = None,
        max_chain: int = MAX_CHAIN,
        hashes: bool = False,
        dedup: bool = True,
    ) -> None:
        if threads is not None:
            set_threads(threads)
        if mode not in ("w", "a"):
            raise ValueError(f"mode must be 'w' or 'a', got {mode!r}")
        self.codec = layout.check_codec(codec)
        self.chunk_bytes = int(chunk_bytes)
        if overwrite and mode != "w":
            raise ValueError("overwrite goes with mode 'w'")
        self._closed = True  # until the output is open
        self._names: list[str] = []  # committed and written, in order
        self._known: set[str] = set()  # (the same, to look up)
        self._docs: dict[str, dict[str, Any]] = {}  # every node's zarr.json, by path
        self._kept: dict[str, str] = {}  # kept files' nodes, by name (kept.py)
        self.metadata: dict[str, str] = {}
        # Whether this container records every chunk written and CRCs (all its tensors do).
        self._records = True
        # (what stores tensors against references: deltas and duplicates)
        self._deltas = DeltaWriter(target, reference, max_chain, hashes, dedup, self.chunk_bytes)
        self._output: Output = open_output(target, mode, bool(overwrite), storage_options)
        # (queued and written in batches, in order, on a thread)
        self._objects = ObjectQueue(self._output.put, _BATCH_BYTES, _BATCH_COUNT)
        try:  # (right after the output is open: any exception abandons it, lock and all)
            if mode == "a":
                self._adopt(self._output.store)
            elif isinstance(self._output, StoreOutput):
                self._output.check_replaceable(target, bool(overwrite))
        except BaseException:
            self._output.abandon()
            raise
        # The consolidated metadata at the target lists every committed tensor;
        # before the first change in place it is dropped (a Reader then lists
        # the members), and written anew at the next commit.
        self._consolidated = mode == "a"
        self._closed = False

    def _adopt(self, store: Any) -> None:
        """Mode "a": the container's tensors, metadata and documents, kept as they are."""
        found = adopted(store)
        self._names, self.metadata, self._records = found.names, found.metadata, found.records
        self._known, self._kept, self._docs = set(found.names), found.kept, found.docs
        self._output.adopt(found.nodes)

    def add_tensor(self, name: str, tensor: Any, codec: str | None = None) -> None:
        """Store one tensor (NumPy, torch CPU/CUDA, CuPy) under ``name``.

        Raises ``ValueError`` for a name already there and ``TypeError`` for a
        dtype nncodecs does not support. The tensor is encoded at once, a chunk
        (or shard) at a time; small tensors' objects are written out in batches,
        a tensor of 1 MiB or more before this returns.
        """
        self._check_new(name)
        if array_kind(tensor) == "scipy.sparse":
            self._add_composite(name, composite.scipy_parts(name, tensor), codec)
            return
        if isinstance(tensor, composite.Records):  # (a format's quantized blocks)
            self._add_composite(name, composite.records_parts(name, *tensor), codec)
            return
        arr = np.asarray(to_host_array(tensor), order="C")  # (ascontiguousarray makes 0-d 1-d)
        try:
            dtype_name(arr.dtype)
        except TypeError as exc:
            raise TypeError(f"tensor {name!r}: {exc}") from None
        codec = layout.check_codec(codec or self.codec)
        self._begin_change()
        node = escape(name)
        self._output.discard(node)  # (only ever a leftover of a writer that died)
        attrs = {"name": name, "layout": "dense", "complete": True}
        dims = [f"{node}.{i}" for i in range(arr.ndim)] if arr.ndim else None
        self._deltas.tensor_hash(arr, attrs)
        try:
            found = self._deltas.against_reference(name, node, arr, codec, attrs, dims)
            if found is None:
                self._write_array(node, arr, codec, attrs, dims, raw_one_chunk=True)
            else:
                for key, data in found[0]:
                    self._objects.object(key, data)
                self._queue_doc(node, found[1])
        except BaseException:  # (none of its chunks still queued: a retry starts afresh)
            self._objects.forget(f"{node}/")
            raise
        self._names.append(name)
        self._known.add(name)
        if arr.nbytes >= _ALONE_BYTES:
            self._objects.drain()
            if self._output.in_place:  # (committed by its document: written before returning)
                self._objects.wait()

    def add_sparse_csr(
        self, name: str, data: Any, indices: Any, indptr: Any, shape: Any, codec: str | None = None
    ) -> None:
        """Store a CSR matrix from its arrays; it reads back as ``scipy.sparse.csr_matrix``."""
        self._check_new(name)
        made = composite.compressed_parts("csr", name, data, indices, indptr, shape)
        self._add_composite(name, made, codec)

    def add_sparse_csc(
        self, name: str, data: Any, indices: Any, indptr: Any, shape: Any, codec: str | None = None
    ) -> None:
        """Store a CSC matrix from its arrays; it reads back as ``scipy.sparse.csc_matrix``."""
        self._check_new(name)
        made = composite.compressed_parts("csc", name, data, indices, indptr, shape)
        self._add_composite(name, made, codec)

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

    def add_records(self, name: str, data: Any, fields: Any, codec: str | None = None) -> None:
        """Store bytes made of fixed-size records (a quantized format's blocks) field by
        field: each field's values of every record form one array of its own dtype, coded
        apart (float scales through the float path, packed quants as bytes).

        ``data``: the bytes (bytes-like or 1-D uint8), a whole number of records;
        ``fields``: ``[(field, dtype, count), ...]`` in record order, packed (a GGML
        ``Q4_0`` block: ``[("d", "float16", 1), ("qs", "uint8", 16)]``). The tensor
        reads back as the very bytes (1-D uint8); its layout is ``records``.
        """
        self._check_new(name)
        self._add_composite(name, composite.records_parts(name, data, fields), codec)

    def _add_composite(self, name: str, made: composite.Parts, codec: Any) -> None:
        """A sub-group of arrays; committed by its own flag, in its document written last."""
        arrays, doc = composite_arrays(name, made)
        codec = layout.check_codec(codec or self.codec)
        self._begin_change()
        node = escape(name)
        self._output.discard(node)  # (only ever a leftover of a writer that died)
        for path, arr, dims, tuning in arrays:
            self._write_array(path, arr, codec, {}, dims, False, tuning)
        self._queue_doc(node, doc)
        self._names.append(name)
        self._known.add(name)
        self._objects.drain()

    def _check_new(self, name: Any) -> None:
        self._check_open()
        if check_tensor_name(name) in self._known:
            raise ValueError(f"tensor {name!r} is already in the container")

    def add_file(self, name: str, data: Any) -> None:
        """Keep a file's bytes (``data``, bytes-like) beside the tensors under ``name``, a
        relative path: a model's config or tokenizer, for ``Reader.read_file``."""
        self._keep(name, data, hidden=False)

    def add_hidden_file(self, name: str, data: Any) -> None:
        """Keep bytes nncodecs itself needs (a source file's bytes around its tensors) as
        the kept file ``name``, under ``.nncodecs/``: read by ``Reader.read_file``, listed
        by ``Reader.files(hidden=True)`` only."""
        self._keep(name, data, hidden=True)

    def _keep(self, name: str, data: Any, hidden: bool) -> None:
        self._check_open()
        kept.check_new_file(name, hidden, self._kept)
        self._begin_change()
        if not self._kept:
            self._queue_doc(kept.FILES_NODE, documents.group_doc({}))
        node = f"{kept.FILES_NODE}/{len(self._kept)}"
        arr = np.frombuffer(memoryview(data).cast("B"), np.uint8)
        # (text, mostly: a GGUF's vocabulary, a tokenizer; zstd's high levels pay there)
        tuning = layout.KEPT_TUNING if arr.nbytes <= layout.KEPT_TUNED_BYTES else ()
        self._write_array(node, arr, self.codec, {"file": name}, None, True, tuning)
        self._kept[name] = node
        self._objects.drain()

    def _write_array(
        self,
        path: str,
        arr: np.ndarray,
        codec: str,
        attrs: dict[str, Any],
        dims: list[str] | None,
        raw_one_chunk: bool,
        tuning: tuple = (),
    ) -> None:
        """Queue an array's objects (encoded now), then its document (``tuning``: the
        weights codec's settings other than its defaults, see ``documents.template``)."""
        objects, doc = records.array_objects(
            path, arr, codec, self.chunk_bytes, attrs, dims, raw_one_chunk, tuning
        )
        for key, data in objects:
            self._objects.object(key, data)
        self._queue_doc(path, doc)

    def _queue_doc(self, path: str, doc: dict[str, Any]) -> None:
        self._docs[path] = doc
        self._objects.doc(f"{path}/zarr.json", documents.dumps(doc))

    def _begin_change(self) -> None:
        """Before the first write after a commit: drop the consolidated metadata at
        the target (one rewrite of the group's zarr.json), so that a Reader of a
        container whose writer dies lists the members instead of trusting it."""
        if self._consolidated and self._output.in_place:
            self._objects.wait()
            self._output.put(
                {"zarr.json": documents.dumps(documents.group_doc(self._group_attrs()))}
            )
        self._consolidated = False

    def _group_attrs(self) -> dict[str, Any]:
        return layout.root_attrs(self._names, self.metadata, self._records, self._kept)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the writer is closed")

    def flush(self) -> None:
        """Commit: write what is queued, the order and metadata, the consolidated
        metadata, and publish (a new container appears at its path; a zip is
        closed and a copy renamed over the target). Once it returns, every
        tensor added so far survives a kill of this process."""
        self._check_open()
        layout.check_metadata(self.metadata)
        self._commit(final=False)

    def _commit(self, final: bool) -> None:
        self._objects.drain()
        self._objects.wait()
        root = documents.group_doc(self._group_attrs(), self._docs)
        self._output.commit(documents.dumps(root), final=final)
        self._consolidated = True

    def close(self) -> None:
        """Commit everything (as :meth:`flush`), release the lock, remove the temporaries."""
        if self._closed:
            return
        layout.check_metadata(self.metadata)  # (a bad argument: the writer stays open to fix it)
        try:
            self._commit(final=True)
        except BaseException:
            self.abandon()
            raise
        self._closed = True
        try:  # (an interrupt while the thread stops: the lock is released all the same)
            self._objects.stop()
        finally:
            self._deltas.close()
            self._output.close()

    def abandon(self) -> None:
        """Close without committing what :meth:`flush` has not: the target stays as the
        last commit left it (a new container that was never committed: nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._objects.stop(drop=True)
        finally:
            self._deltas.close()
            self._output.abandon()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            # An error inside the with block: commit nothing more.
            self.abandon()
            return
        self.close()
