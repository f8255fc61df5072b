"""Read a model back from an nncodecs container: whole, by tensor or by slice."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, Self

import numpy as np

from nncodecs.container import layout
from nncodecs.container.arrays import convert, dask_array
from nncodecs.container.checks import check_crc, check_size, member_problems, named_error
from nncodecs.container.composite import assemble
from nncodecs.container.declared import Declared, declared
from nncodecs.container.decoding import read_on_device, read_weights, tensor_pieces
from nncodecs.container.delta_reads import DeltaReader
from nncodecs.container.kept import HIDDEN, check_pieces, kept_key
from nncodecs.container.tensor_info import TensorInfo, info_from_doc, info_from_node
from nncodecs.errors import CorruptDataError, raised_by_nncodecs
from nncodecs.frame import set_threads
from nncodecs.gcpause import collector_paused
from nncodecs.store.reading import OpenedTarget

__all__ = ["Reader", "TensorInfo"]


class Reader:
    """Open an nncodecs container for reading.

    ``r["name"]`` is the tensor's Zarr array: slicing it reads only the chunks
    it needs. ``read_tensor`` reads a whole tensor (as NumPy, torch or CuPy).
    ``threads``: the codecs' threads, process-wide (``None``: unchanged). ``references``:
    containers outside this one's directory that its tensors may be stored against
    (paths or URLs, or {recorded place: place now}; docs/container.md).

    A container in a local directory or zip file is read without Zarr: whole
    reads of the weights codec's tensors never import it; Zarr's store and
    arrays are made on first use of a Zarr object.
    """

    def __init__(
        self,
        target: Any,
        threads: int | None = None,
        storage_options: dict | None = None,
        references: Any = None,
        *,
        _chain: tuple[str, ...] = (),
    ) -> None:
        if threads is not None:
            set_threads(threads)
        self._closed = False
        # (what follows the references of tensors stored against other containers)
        self._deltas = DeltaReader(self, target, references, _chain)
        # (collections paused: a zip's directory made opening 5,000 tensors 0.17-0.35 s, not 0.1)
        with collector_paused():
            self._open(target, storage_options)
        # name -> how its Zarr metadata contradicts its records (an error on every use);
        # each tensor is checked at its first use (a model of thousands opens at once)
        self._damaged: dict[str, str] = {}
        self._checked: set[str] = set()
        self._declared: dict[str, Declared | None] = {}

    def _open(self, target: Any, storage_options: dict | None) -> None:
        self._io = OpenedTarget(target, storage_options, self._check_open)
        self._where = self._io.where  # (in every message)
        try:
            root = self._io.root()
            _, attrs, self._entries = layout.open_container(self.zarr_store, self._where, root)
        except BaseException:
            self.close()
            raise
        self.metadata: dict[str, str] = dict(attrs.get("metadata", {}))
        self._order = layout.tensor_order(attrs, self._entries)
        self._records = attrs.get("records") == layout.RECORDS  # (every array records them)

    def zarr_store(self) -> Any:
        """The Zarr store every Zarr object of this Reader reads through (a CheckedStore
        sharing this Reader's checks), made on first use."""
        return self._io.zarr_store()

    # ---- what the Reader gives nncodecs' own modules (its delta reader, a reference's
    # reader, a Writer reading its references, the device path): no private attribute
    # of a Reader is read from outside it (ruff's SLF001) ----

    @property
    def chunk_reads(self) -> Any:
        """What whole reads read chunks through: the local files, else the Zarr store."""
        return self._io.chunk_reads

    def member(self, name: Any) -> Any:
        """A tensor's (or kept file's) entry: its node, layout, document, attributes."""
        return self._entries[name]

    def tensor_attrs(self, name: Any) -> Any:
        """A tensor's (or kept file's) nncodecs attributes, as its document records them."""
        return self._entries[name].attrs

    def is_strict(self, path: str) -> bool:
        """Whether every chunk of the array at ``path`` is recorded (none may be missing)."""
        return path in self._io.files.strict

    @property
    def reference_roots(self) -> Any:
        """Where this Reader's tensors may find their references (the ``references`` it
        was given, as :func:`allowed_references` reads them)."""
        return self._deltas.allowed

    def read_link(self, tensor: str, check: bool) -> Any:
        """A tensor read as the reference of another's delta: a delta itself is read as a
        link of its chain (its records checked; its result is checked at the top)."""
        further = self._deltas.config(tensor)
        if further is None:
            return self.read_tensor(tensor, check=check)
        self._check(tensor)
        return self._deltas.read(tensor, further, "numpy", check, top=False)

    def references(self) -> dict[str, dict[str, Any]]:
        """Each tensor stored against another container's: {name: {"container",
        "tensor", "transform", "depth"}} (the container as recorded)."""
        return self._deltas.references()

    def _declared_of(self, name: str) -> Declared | None:
        """A dense weights tensor's array as its document declares it (see
        :mod:`nncodecs.container.declared`): ``None`` where Zarr's array serves."""
        if name not in self._declared:
            member = self._entries[name]
            found = None
            whole = not self._deltas.config(name)  # (a delta's document declares its coded bits)
            if member.layout == "dense" and member.doc is not None and whole:
                try:
                    found = declared(self.chunk_reads, member.path, member.doc)
                except CorruptDataError as exc:
                    raise self.corrupt(name, exc) from None
            self._declared[name] = found
        return self._declared[name]

    def _check_member(self, name: str) -> None:
        """Whether a tensor's Zarr metadata contradicts its records, and the arrays
        whose every chunk is recorded (for the store's checks)."""
        member = self._entries[name]
        own = self._declared_of(name) or self._deltas.as_declared(name)
        arrays = member.arrays if own is None else [(own, member.attrs)]
        problem, strict = member_problems(name, member.layout, arrays, self._records)
        if problem is not None:
            self._damaged.setdefault(name, problem)
        self._io.files.strict.update(strict)
        self._checked.add(name)

    def keys(self) -> list[str]:
        """Tensor names, in the order they were written."""
        return list(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Any:
        return iter(self._order)

    def __getitem__(self, name: str) -> Any:
        self._check(name)
        if (config := self._deltas.config(name)) is not None:  # (Zarr's cannot add the reference)
            return self._deltas.array(name, config)
        if "\\" in self._entries[name].path:  # (a node of an older container: Zarr reads
            raise CorruptDataError(  # its backslash as "/", and would read fill values)
                f"{self._where}: tensor {name!r} lies under a node Zarr cannot address "
                "(a backslash, as older nncodecs wrote it): only a whole read of a tensor "
                "of the weights codec works there (read_tensor, merge)"
            )
        try:
            return self._entries[name].node
        except CorruptDataError as exc:  # (Zarr's parser refused its document)
            raise self.corrupt(name, exc) from None

    def _check(self, name: str) -> None:
        """KeyError for a name not in the container; CorruptDataError for a tensor whose
        metadata contradicts its records (checked on first use); ValueError once closed."""
        self._check_open()
        if name not in self._entries:
            raise KeyError(f"no tensor {name!r} in the container ({len(self)} tensors)")
        if name not in self._checked:
            try:
                self._check_member(name)
            except CorruptDataError as exc:
                raise self.corrupt(name, exc) from None
        if name in self._damaged:
            raise CorruptDataError(f"{self._where}: {self._damaged[name]}")

    def layout(self, name: str) -> str:
        """``dense``, ``csr``, ``csc``, ``coo``, ``mxfp4``, ``nvfp4`` or ``records``."""
        self._check(name)
        return self._entries[name].layout

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{self._where}: the container is closed")

    def info(self, name: str) -> TensorInfo:
        self._check_open()
        member = self._entries.get(name)
        if member is not None and member.doc is not None:
            try:  # (no Zarr array made: a model's thousands of tensors listed at once)
                return info_from_doc(name, member.doc, member.attrs, self._io.stored(member.path))
            except CorruptDataError as exc:
                raise self.corrupt(name, exc) from None
        self[name]  # KeyError naming the tensor
        member = self._entries[name]
        with self.as_corrupt(name):
            return info_from_node(name, member.layout, member.node, member.attrs, self._io.stored)

    def read_tensor(
        self, name: str, to: str = "numpy", device: str = "cpu", *, check: bool = False
    ) -> Any:
        """The whole tensor as ``"numpy"``, ``"torch"`` or ``"cupy"``.

        A raw tensor in a directory or zip store comes back as a read-only
        memory map of the file (no copy); writing to it raises. A sparse
        tensor comes back as a SciPy matrix with ``to="scipy"``, as a dict of
        its NumPy arrays (and ``shape``) otherwise; an MXFP4 / NVFP4 weight as
        its pair ``(blocks, scales)``.

        Every tensor read into memory is checked whole: the weights codecs'
        frames carry their own CRC32C, and tensors stored raw or with zstd
        are checked against the CRC32C recorded at write (where recorded).
        ``check=True`` also checks a memory-mapped raw tensor (reading it
        once, whole); without it the map stays lazy. A mismatch is a
        :class:`CorruptDataError` naming the tensor and the container.

        ``device="cuda"`` (or ``"cuda:N"``; dense tensors, ``to="torch"`` or
        ``"cupy"``) decodes on the GPU: the frames of all the tensor's chunks
        go to the device and decode there in one batch, straight into the
        tensor's memory (a CuPy array holds bfloat16 and float8 as their
        bits). Tensors stored raw or with zstd are read on the host, checked
        and copied.
        """
        if device != "cpu":
            return self._read_on_device(name, to, device)
        self._check(name)
        if (config := self._deltas.config(name)) is not None:
            return self._deltas.read(name, config, to, check)
        own = self._declared_of(name)
        if own is not None:  # (no Zarr array made: the weights codec's frames, read here)
            value = self._read_array(name, own)
            self._check_crc(name, own, value)
            return convert(value, to, owned=True)
        kind = self.layout(name)
        if kind != "dense":
            return self._read_composite(name, kind, to)
        z = self[name]
        if math.prod(z.shape) == 0:  # constant time and memory, whatever the declared shape
            return convert(np.empty(z.shape, z.dtype), to)
        mapped = self._memory_map(name) if to == "numpy" else None
        if mapped is not None:
            if check:
                self._check_crc(name, z, mapped)
            return mapped
        value = self._read_array(name, z)
        self._check_crc(name, z, value)
        return convert(value, to, owned=True)

    def _check_crc(self, name: str, z: Any, value: Any, part: str | None = None) -> None:
        """A whole array's bytes against the CRC32C recorded at write (raw, zstd)."""
        try:
            check_crc(name, z, value, part)
        except CorruptDataError as exc:
            raise self.corrupt(name, exc) from None

    def _read_array(self, name: str, z: Any) -> np.ndarray:
        """A whole array, its declared size checked against what is stored first."""
        if math.prod(z.shape) == 0:  # (zarr's z.size: a NumPy reduction, 14 us)
            return np.empty(z.shape, z.dtype)
        with self.as_corrupt(name):
            check_size(z, self.chunk_reads)
            value = read_weights(z, self.is_strict(z.path))
            return z[...] if value is None else value

    @contextlib.contextmanager
    def as_corrupt(self, name: str) -> Iterator[None]:
        """Errors of reading a tensor as CorruptDataError naming it and the container."""
        try:
            yield
        except CorruptDataError as exc:
            raise self.corrupt(name, exc) from None
        except (ValueError, ArithmeticError, RuntimeError) as exc:  # (Zarr's and its codecs')
            if isinstance(exc, RuntimeError) and raised_by_nncodecs(exc):
                raise
            self._check_open()  # (a read begun before close(): the user's error, not data)
            why = CorruptDataError(f"unreadable as stored ({type(exc).__name__}: {exc})")
            raise self.corrupt(name, why) from None

    def read_pieces(self, name: str) -> Iterator[np.ndarray]:
        """A dense tensor's bytes in order, as uint8 arrays, checked as ``read_tensor(name,
        check=True)`` checks them: a weights tensor's a window of chunks at a time as
        they are asked for (so a model written out never holds a whole tensor), any
        other's whole, read here."""
        if self.layout(name) != "dense":
            raise ValueError(f"tensor {name!r} is {self.layout(name)}, not dense")
        return tensor_pieces(self, name, self._declared_of(name))

    def corrupt(self, name: Any, exc: Exception) -> CorruptDataError:
        """``exc`` as this container's error about tensor ``name``."""
        return named_error(self._where, name, exc)

    def to_dask(self, name: str | None = None) -> Any:
        """A dense tensor as a dask array over its Zarr array (its chunks read
        and decoded as tasks, on any scheduler); with no name, a dict of every
        dense tensor's."""
        if name is None:
            return {n: self.to_dask(n) for n in self._order if self.layout(n) == "dense"}
        if self.layout(name) != "dense":
            raise ValueError(f"tensor {name!r} is {self.layout(name)}: to_dask takes dense ones")
        node = self[name]
        return dask_array(node, self._deltas.config(name) is not None)

    def _read_on_device(self, name: str, to: str, device: str) -> Any:
        if self.layout(name) != "dense":
            raise ValueError(
                f"tensor {name!r} is {self.layout(name)}: device reads take dense ones"
            )
        if self._deltas.config(name) is not None:  # (its reference added on the host, then copied)
            return self._deltas.to_device(name, to, device)
        return read_on_device(self, name, self[name], to, device)

    def _read_composite(self, name: str, kind: str, to: str) -> Any:
        parts = {}
        for part, arr in self._entries[name].node.arrays():
            parts[part] = self._read_array(name, arr)
            self._check_crc(name, arr, parts[part], part)
        with self.as_corrupt(name):  # (a forged record: named, with the container)
            return assemble(name, kind, parts, self._entries[name].attrs, to)

    def _memory_map(self, name: str) -> np.ndarray | None:
        """A read-only map of a raw, one-chunk tensor's bytes, where the store allows."""
        with self.as_corrupt(name):
            return self.zarr_store().memory_map(self[name])

    def read_into(self, name: str, out: np.ndarray) -> np.ndarray:
        """Read a dense tensor into ``out`` (same shape and dtype)."""
        if self.layout(name) != "dense":
            raise ValueError(f"tensor {name!r} is {self.layout(name)}, not dense")
        z = self[name]
        if tuple(out.shape) != tuple(z.shape) or out.dtype != z.dtype:
            raise ValueError(
                f"tensor {name!r} is {z.dtype}{tuple(z.shape)}, "
                f"out is {out.dtype}{tuple(out.shape)}"
            )
        out[...] = self.read_tensor(name, check=True)
        return out

    def verify(self) -> None:
        """Decode every tensor, checking every frame's CRC32C and, for tensors
        stored raw or with zstd, the CRC32C of the whole tensor (where recorded):
        ``read_tensor(name, check=True)`` of each; then every kept file.

        Raises CorruptDataError naming the first bad tensor.
        """
        for name in self._order:
            self.read_tensor(name, check=True)
        for file in self.files(hidden=True):
            check_pieces(self.read_pieces(kept_key(file)))  # type: ignore[arg-type]

    def files(self, hidden: bool = False) -> list[str]:
        """The names of the files kept beside the tensors (``Writer.add_file``), in order;
        ``hidden``: nncodecs' own under ``.nncodecs/`` too (``Writer.add_hidden_file``)."""
        names = [k[1] for k in self._entries if not isinstance(k, str)]
        return names if hidden else [n for n in names if not n.startswith(HIDDEN)]

    def read_file(self, name: str) -> bytes:
        """A kept file's bytes, checked as ``read_tensor(..., check=True)`` checks."""
        if kept_key(name) not in self._entries:
            raise KeyError(f"no kept file {name!r} in the container")
        return self.read_tensor(kept_key(name), check=True).tobytes()  # type: ignore[arg-type]

    def close(self) -> None:
        self._closed = True
        if (deltas := getattr(self, "_deltas", None)) is not None:
            deltas.close()
        if (opened := getattr(self, "_io", None)) is not None:  # (absent: opening failed)
            opened.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
