"""Read a model back from an nncodecs container: whole, by tensor or by slice."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np
import zarr

from nncodecs import _core
from nncodecs.codecs.weights import NumcodecsWeights, Weights
from nncodecs.container import layout
from nncodecs.container._store import CheckedStore, Strict, open_store
from nncodecs.container.names import escape
from nncodecs.container.writer import Writer, check_container, tensor_name
from nncodecs.dtypes import dtype_name, float_layout, to_torch
from nncodecs.errors import CorruptDataError, NotAContainerError
from nncodecs.frame import set_threads

#: Tensors up to this size are read without checking their declared size first.
_SIZE_CHECK_FROM = 64 << 20
#: A tensor that declares more than this many times its stored bytes has its
#: frames' own sizes checked before its output is allocated.
_RATIO_CHECK = 64

__all__ = ["Reader", "TensorInfo", "merge"]


@dataclass(frozen=True)
class TensorInfo:
    """What the container knows of one tensor."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    layout: str
    stored_bytes: int
    nbytes: int
    codec: str


class Reader:
    """Open an nncodecs container for reading.

    ``r["name"]`` is the tensor's Zarr array: slicing it reads only the chunks
    it needs. ``read_tensor`` reads a whole tensor (as NumPy, torch or CuPy).
    ``threads`` sets the codecs' threads, process-wide (``None``: unchanged).
    """

    def __init__(
        self, target: Any, threads: int | None = None, storage_options: dict | None = None
    ) -> None:
        if threads is not None:
            set_threads(threads)
        self._base, self._owned = open_store(target, "r", storage_options)
        where = self._where = _describe(target)
        try:
            self._store = CheckedStore(self._base)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # consolidated metadata for Zarr v3
                self._group = zarr.open_group(self._store, mode="r")
                attrs = check_container(self._group)
                # (no warning for a dead writer's leftovers: they are not members)
                self._open_members(where)
        except (NotAContainerError, CorruptDataError) as exc:
            self.close()
            msg = str(exc)
            raise type(exc)(msg if msg.startswith(where) else f"{where}: {msg}") from None
        except (FileNotFoundError, KeyError, ValueError, TypeError) as exc:
            self.close()
            if "zarr" in type(exc).__module__ or "group" in str(exc).lower():
                raise NotAContainerError(
                    f"{where}: not an nncodecs container (no Zarr group)"
                ) from None
            raise CorruptDataError(f"{where}: unreadable metadata ({exc})") from None
        self.metadata: dict[str, str] = dict(attrs.get("metadata", {}))
        self._records = attrs.get("records") == layout.RECORDS
        self._arrays = {n: e[1] for n, e in self._entries.items()}
        # The recorded order first, then complete tensors written after the
        # last time the order was saved (a writer that did not close).
        order = [n for n in attrs.get("tensors", []) if n in self._arrays]
        self._order = order + sorted(set(self._arrays) - set(order))

    def _open_members(self, where: str) -> None:
        """The complete tensors (name -> layout, node, attributes), their names
        checked against their nodes, and the arrays whose every chunk is recorded."""
        # name -> (layout, the array or the sub-group, its attributes)
        self._entries: dict[str, tuple[str, Any, dict]] = {}
        # name -> how its Zarr metadata contradicts its records (an error on every use)
        self._damaged: dict[str, str] = {}
        nodes: dict[str, str] = {}
        for node, member in self._group.members():
            tattrs = member.attrs.get(layout.ATTRS_KEY)
            if not (isinstance(tattrs, dict) and tattrs.get("complete")):
                continue
            kind = tattrs.get("layout", "dense")
            if (kind == "dense") != isinstance(member, zarr.Array):
                continue
            name = tensor_name(node, tattrs)
            if name in nodes or escape(name) != node:
                other = nodes.get(name, escape(name))
                raise CorruptDataError(
                    f"nodes {other!r} and {node!r} both claim the tensor name {name!r}"
                )
            nodes[name] = node
            self._entries[name] = (kind, member, tattrs)
            arrays = [(member, tattrs)] if kind == "dense" else [
                (a, a.attrs.get(layout.ATTRS_KEY)) for _, a in member.arrays()]  # fmt: skip
            for z, zattrs in arrays:
                problem = layout.shape_problem(z, zattrs)
                if problem is not None and name not in self._damaged:
                    part = "" if z is member else f" ({z.basename})"
                    self._damaged[name] = f"tensor {name!r}{part}: {problem}"
                if isinstance(zattrs, dict) and zattrs.get("chunks") == layout.CHUNKS_ALL:
                    strict = _strict(name, z)
                    if strict is not None:
                        self._store.strict[z.path] = strict

    def keys(self) -> list[str]:
        """Tensor names, in the order they were written."""
        return list(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._arrays

    def __iter__(self) -> Any:
        return iter(self._order)

    def __getitem__(self, name: str) -> Any:
        if name not in self._arrays:
            raise KeyError(f"no tensor {name!r} in the container ({len(self)} tensors)")
        if name in self._damaged:
            raise CorruptDataError(f"{self._where}: {self._damaged[name]}")
        return self._arrays[name]

    def layout(self, name: str) -> str:
        """``dense``, ``csr``, ``csc``, ``coo``, ``mxfp4`` or ``nvfp4``."""
        self[name]
        return self._entries[name][0]

    def info(self, name: str) -> TensorInfo:
        self[name]  # KeyError naming the tensor
        kind, member, attrs = self._entries[name]
        if kind != "dense":
            parts = dict(member.arrays())
            main = parts.get("data", parts.get("blocks"))
            shape = tuple(attrs["shape"]) if "shape" in attrs else tuple(main.shape)
            return TensorInfo(
                name=name,
                dtype=dtype_name(main.dtype),
                shape=shape,
                layout=kind,
                stored_bytes=sum(int(a.nbytes_stored()) for a in parts.values()),
                nbytes=sum(int(a.nbytes) for a in parts.values()),
                codec=_codec_names(main),
            )
        z = member
        return TensorInfo(
            name=name,
            dtype=dtype_name(z.dtype),
            shape=tuple(z.shape),
            layout="dense",
            stored_bytes=int(z.nbytes_stored()),
            nbytes=int(z.nbytes),
            codec=_codec_names(z),
        )

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
        kind = self.layout(name)
        if kind != "dense":
            return self._read_composite(name, kind, to)
        z = self[name]
        if z.size == 0:  # constant time and memory, whatever the declared shape
            return _convert(np.empty(z.shape, z.dtype), to)
        mapped = self._memory_map(name) if to == "numpy" else None
        if mapped is not None:
            if check:
                self._check_crc(name, z, mapped)
            return mapped
        value = self._read_array(name, z)
        self._check_crc(name, z, value)
        return _convert(value, to)

    def _check_crc(self, name: str, z: Any, value: Any, part: str | None = None) -> None:
        """A whole array's bytes against the CRC32C recorded at write (raw, zstd)."""
        try:
            _check_crc(name, z, value, part)
        except CorruptDataError as exc:
            raise self._error(name, exc) from None

    def _read_array(self, name: str, z: Any) -> np.ndarray:
        """A whole array, its declared size checked against what is stored first."""
        if z.size == 0:
            return np.empty(z.shape, z.dtype)
        try:
            _check_size(z, self._store)
            return z[...]
        except CorruptDataError as exc:
            raise self._error(name, exc) from None

    def _error(self, name: str, exc: Exception) -> CorruptDataError:
        """A CorruptDataError saying ``<container>: tensor '<name>': what``."""
        msg = str(exc).removeprefix(f"{self._where}: ")
        if not msg.startswith("tensor "):
            msg = f"tensor {name!r}: {msg}"
        return CorruptDataError(f"{self._where}: {msg}")

    def to_dask(self, name: str | None = None) -> Any:
        """A dense tensor as a dask array over its Zarr array (its chunks read
        and decoded as tasks, on any scheduler); with no name, a dict of every
        dense tensor's."""
        import dask.array as da

        if name is None:
            return {n: self.to_dask(n) for n in self._order if self.layout(n) == "dense"}
        if self.layout(name) != "dense":
            raise ValueError(f"tensor {name!r} is {self.layout(name)}: to_dask takes dense ones")
        return da.from_zarr(self[name])

    def _read_on_device(self, name: str, to: str, device: str) -> Any:
        from nncodecs.gpu.backend import backend_for_device

        backend = backend_for_device(device)
        context = getattr(backend, "device_context", None)
        with context(device) if context is not None else contextlib.nullcontext():
            return self._decode_on_device(backend, name, to)

    def _decode_on_device(self, backend: Any, name: str, to: str) -> Any:
        from nncodecs.gpu.decode import decode_frames

        if self.layout(name) != "dense":
            raise ValueError(
                f"tensor {name!r} is {self.layout(name)}: device reads take dense ones"
            )
        z = self[name]
        target = np.dtype(z.dtype)
        frames = _chunk_frames(z)
        if frames is None:  # not the weights codec: decoded on the host, then one copy
            host = np.ascontiguousarray(self.read_tensor(name, check=True))
            flat = backend.to_device(host.reshape(-1).view(np.uint8))
            return backend.typed(flat, target, tuple(z.shape), to)
        chunk = math.prod(z.chunks) * target.itemsize
        out = backend.empty(chunk * len(frames))
        try:
            decoded = decode_frames(
                backend, frames, max_decoded=[chunk] * len(frames),
                layouts=[float_layout(target)] * len(frames), elements=True,
                planes=[target.itemsize] * len(frames), out=out,
            )  # fmt: skip
            short = [i for i, d in enumerate(decoded) if int(d.size) != chunk]
            if short:
                raise CorruptDataError(f"chunk {short[0]} holds fewer bytes than a chunk")
        except CorruptDataError as exc:
            raise CorruptDataError(f"tensor {name!r}: {exc}") from exc
        return backend.typed(
            out[: math.prod(z.shape) * target.itemsize], target, tuple(z.shape), to
        )

    def _read_composite(self, name: str, kind: str, to: str) -> Any:
        _, group, attrs = self._entries[name]
        parts = {}
        for part, arr in group.arrays():
            parts[part] = self._read_array(name, arr)
            self._check_crc(name, arr, parts[part], part)
        if kind in ("mxfp4", "nvfp4"):
            pair = (parts["blocks"], parts["scales"])
            return tuple(_convert(a, to) for a in pair) if to != "numpy" else pair
        shape = tuple(attrs["shape"])
        if to == "scipy":
            import scipy.sparse

            if kind == "coo":
                return scipy.sparse.coo_matrix((parts["data"], tuple(parts["coords"])), shape=shape)
            make = scipy.sparse.csr_matrix if kind == "csr" else scipy.sparse.csc_matrix
            return make((parts["data"], parts["indices"], parts["indptr"]), shape=shape)
        if to == "numpy":
            return {**parts, "shape": shape}
        raise ValueError(f"tensor {name!r} is {kind}: read it with to='scipy' or to='numpy'")

    def _memory_map(self, name: str) -> np.ndarray | None:
        """A read-only map of a raw, one-chunk tensor's bytes, where the store allows."""
        z = self[name]
        codecs = z.metadata.to_dict()["codecs"]
        raw = len(codecs) == 1 and codecs[0]["name"] == "bytes"
        if not raw or tuple(z.chunks) != tuple(max(1, d) for d in z.shape) or z.size == 0:
            return None
        endian = codecs[0].get("configuration", {}).get("endian", "little")
        if z.dtype.itemsize > 1 and endian != "little":
            return None
        from zarr.storage import LocalStore, ZipStore

        if not isinstance(self._base, LocalStore | ZipStore):
            return None  # (an object store: read, not mapped)
        key = f"{z.path}/{layout.single_chunk_key(z.ndim)}"
        try:
            self._store.check_key(key)  # (a zip entry: its local header checked too)
            located = _locate(self._store, key)
        except CorruptDataError as exc:
            raise self._error(name, exc) from None
        if located is None:
            if z.path in self._store.strict:
                raise self._error(name, CorruptDataError(f"chunk {key} is missing"))
            return None
        path, offset, length = located
        if length != z.nbytes:
            raise self._error(name, CorruptDataError(
                f"its raw chunk holds {length} bytes, its shape says {z.nbytes}"))  # fmt: skip
        return np.memmap(path, dtype=z.dtype, mode="r", offset=offset, shape=tuple(z.shape))

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
        ``read_tensor(name, check=True)`` of each.

        Raises CorruptDataError naming the first bad tensor.
        """
        for name in self._order:
            self.read_tensor(name, check=True)

    def close(self) -> None:
        if self._owned:
            self._base.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _describe(target: Any) -> str:
    from zarr.abc.store import Store

    if isinstance(target, Store):
        return type(target).__name__
    return str(target)


def _strict(name: str, z: Any) -> Strict | None:
    """The chunk geometry of an array laid out as the Writer lays them (chunks along
    the first axis only, in shards or not); ``None`` for any other layout."""
    shape, chunks = tuple(z.shape), tuple(z.chunks)
    if shape and tuple(chunks[1:]) != tuple(max(1, d) for d in shape[1:]):
        return None
    count = -(-shape[0] // chunks[0]) if shape else 1
    if math.prod(shape) == 0:
        count = 0
    per = 0
    if z.shards is not None:
        if tuple(z.shards[1:]) != tuple(chunks[1:]):
            return None
        per = z.shards[0] // chunks[0]
    return Strict(name, count, per)


def _check_crc(name: str, z: Any, value: Any, part: str | None = None) -> None:
    attrs = z.attrs.get(layout.ATTRS_KEY)
    want = attrs.get("crc32c") if isinstance(attrs, dict) else None
    if want is None:
        return
    got = _core.crc32c(np.ascontiguousarray(value).reshape(-1).view(np.uint8))
    if got != want:
        what = f"tensor {name!r}" + (f" ({part})" if part else "")
        raise CorruptDataError(f"{what}: CRC32C {got:#010x}, recorded {want:#010x}")


def _check_size(z: Any, store: CheckedStore) -> None:
    """Before a large array's output is allocated: its declared size against its
    stored chunks (a forged shape in zarr.json must not allocate gigabytes).

    A declared size past _RATIO_CHECK times the stored bytes has the chunks'
    own decoded sizes read from their frames (those bytes are small, by that
    very ratio); an array recorded as fully written must have every chunk.
    """
    nbytes = int(z.nbytes)
    if nbytes <= _SIZE_CHECK_FROM:
        return
    from zarr.core.sync import sync

    stored = int(sync(store.getsize_prefix(f"{z.path}/c")))
    if nbytes <= stored * _RATIO_CHECK:
        return
    strict = store.strict.get(z.path)
    names = [c["name"] for c in z.metadata.to_dict()["codecs"]]
    chunk_nbytes = math.prod(z.chunks) * z.dtype.itemsize
    frames = _chunk_frames(z, missing=None)
    if frames is None:
        raise CorruptDataError(
            f"declares {nbytes} bytes ({'+'.join(names)}) in {stored} stored bytes"
        )
    present = [f for f in frames if f is not None]
    if strict is not None and len(present) != len(frames):
        raise CorruptDataError(f"{len(frames) - len(present)} of {len(frames)} chunks are missing")
    for frame in present:
        got = _decoded_len(frame, chunk_nbytes)
        if got != chunk_nbytes:
            raise CorruptDataError(
                f"declares chunks of {chunk_nbytes} bytes; a stored one decodes to {got}"
            )


def _decoded_len(frame: np.ndarray, limit: int) -> int:
    """The size a weights or zstd frame says it decodes to (-1: it does not say)."""
    if frame[:4].tobytes() == b"\x28\xb5\x2f\xfd":
        import zstandard

        try:
            return int(zstandard.frame_content_size(frame.tobytes()))
        except zstandard.ZstdError:
            return -1
    try:
        info = _core.frame_index(frame, max(limit, 1), int(frame.size))
    except (ValueError, RuntimeError):
        return -1
    return int(info["decoded_len"]) if info else -1


def _convert(arr: np.ndarray, to: str) -> Any:
    if to == "numpy":
        return arr
    if to == "torch":
        return to_torch(arr)
    if to == "cupy":
        import cupy

        return cupy.asarray(arr)
    raise ValueError(f"to must be 'numpy', 'torch' or 'cupy', got {to!r}")


def _chunk_frames(z: Any, missing: str = "fill") -> list[Any] | None:
    """The ``weights`` (or, with ``missing=None``, ``zstd``) frames of an array's
    chunks, in order, as the Writer lays them out (chunks along the first axis
    only, in shards or not); ``None`` for any other codec or layout. A chunk
    never written (all fill value) gets a frame of fill values, encoded here
    (``missing=None``: ``None`` in its place)."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    codecs = list(z.metadata.to_dict()["codecs"])
    sharded = len(codecs) == 1 and codecs[0]["name"] == "sharding_indexed"
    if sharded:
        config = codecs[0]["configuration"]
        index = [c["name"] for c in config["index_codecs"]]
        if config["index_location"] != "end" or index != ["bytes", "crc32c"]:
            return None
        codecs = list(config["codecs"])
    names = [c["name"] for c in codecs]
    if names != [Weights.codec_id] and (missing is not None or names != ["bytes", "zstd"]):
        return None
    shape, chunks = tuple(z.shape), tuple(z.chunks)
    if shape and tuple(chunks[1:]) != tuple(max(1, d) for d in shape[1:]):
        return None
    count = -(-shape[0] // chunks[0]) if shape else 1
    store, prefix = z.store_path.store, z.store_path.path
    proto = default_buffer_prototype()

    def key(coords: tuple[int, ...]) -> str:
        return f"{prefix}/{z.metadata.encode_chunk_key(coords)}" if prefix else (
            z.metadata.encode_chunk_key(coords))  # fmt: skip

    def coords(i: int) -> tuple[int, ...]:
        return (i, *[0] * (len(shape) - 1)) if shape else ()

    async def get_all(keys: list[str]) -> list[Any]:
        return await asyncio.gather(*(store.get(k, prototype=proto) for k in keys))

    filler: list[np.ndarray] = []

    def fill() -> Any:  # the frame of a chunk of fill values
        if missing is None:
            return None
        if not filler:
            data = np.full(chunks, z.fill_value, dtype=z.dtype)
            frame = NumcodecsWeights(**codecs[0]["configuration"]).encode(data)
            filler.append(np.frombuffer(frame, np.uint8))
        return filler[0]

    frames: list[np.ndarray] = []
    if not sharded:
        for buf in sync(get_all([key(coords(i)) for i in range(count)])):
            frames.append(fill() if buf is None else np.frombuffer(buf.to_bytes(), np.uint8))
        return frames
    per = z.shards[0] // chunks[0]
    shard_count = -(-count // per)
    for s, buf in enumerate(sync(get_all([key(coords(s)) for s in range(shard_count)]))):
        inner = min(per, count - s * per)
        if buf is None:
            frames.extend(fill() for _ in range(inner))
            continue
        raw = np.frombuffer(buf.to_bytes(), np.uint8)
        index_len = 16 * per + 4
        index = raw[raw.size - index_len :]
        if raw.size < index_len or _core.crc32c(index[:-4]) != int.from_bytes(index[-4:], "little"):
            raise CorruptDataError(f"shard {s} of {z.path!r}: its chunk index fails its CRC32C")
        spans = index[:-4].view("<u8").reshape(per, 2)
        for offset, length in spans[:inner].tolist():
            if offset == length == 2**64 - 1:
                frames.append(fill())
            elif offset + length > raw.size - index_len:
                raise CorruptDataError(f"shard {s} of {z.path!r}: a chunk passes its end")
            else:
                frames.append(raw[offset : offset + length])
    return frames


def _codec_names(z: Any) -> str:
    """The codecs of an array, naming what is inside shards."""
    names = []
    for c in z.metadata.to_dict()["codecs"]:
        if c["name"] == "sharding_indexed":
            inner = "+".join(i["name"] for i in c["configuration"]["codecs"])
            names.append(f"sharding_indexed({inner})")
        else:
            names.append(c["name"])
    return "+".join(names)


def _locate(checked: CheckedStore, key: str) -> tuple[str, int, int] | None:
    """(file, offset, length) of a key's bytes when they lie uncompressed in a local file
    (a zip entry's span checked against its local header, see ZipEntries)."""
    from zarr.storage import LocalStore, ZipStore

    store = checked._store
    if isinstance(store, LocalStore):
        path = Path(store.root) / key
        return (str(path), 0, path.stat().st_size) if path.is_file() else None
    if isinstance(store, ZipStore) and checked.zip is not None:
        import zipfile

        span = checked.zip.span(key)
        if span is None:
            return None
        if checked.zip.zf.getinfo(key).compress_type != zipfile.ZIP_STORED:
            raise checked.describe_error(key, "a compressed chunk entry (chunk entries are stored)")
        start, length = span
        if start + length > os.path.getsize(store.path):
            raise checked.describe_error(key, "its bytes pass the end of the zip")
        return str(store.path), start, length
    return None


def merge(
    sources: list[Any],
    target: Any,
    codec: str = "auto",
    metadata: dict[str, str] | None = None,
    overwrite: bool = False,
) -> None:
    """Write the tensors of several containers into one (names must not repeat).

    ``metadata``: the merged container's metadata; by default the sources'
    metadata, which must then agree key by key.
    """
    with Writer(target, mode="w", codec=codec, overwrite=overwrite) as w:
        if metadata is not None:
            w.metadata.update(metadata)
        for source in sources:
            with Reader(source) as r:
                for key, value in r.metadata.items() if metadata is None else ():
                    if w.metadata.get(key, value) != value:
                        raise ValueError(f"metadata {key!r} differs between the containers")
                    w.metadata[key] = value
                for name in r:
                    kind = r.layout(name)
                    if kind in ("mxfp4", "nvfp4"):
                        w.add_quantized(name, *r.read_tensor(name, check=True), scheme=kind)
                    else:
                        to = "scipy" if kind != "dense" else "numpy"
                        w.add_tensor(name, r.read_tensor(name, to=to, check=True))
