"""Model files <-> containers: detection, compression, and restoring the original.

Readers stream tensor by tensor into a :class:`nncodecs.Writer`; what the
original file needs to come back byte for byte (a safetensors header, a
shard index) travels in the container's metadata under ``source.*``.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import sys
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.container import Reader, Writer
from nncodecs.dtypes import dtype_name, normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.formats.safetensors import (
    SafetensorsFile,
    _raw_bytes,
    safetensors_header,
    write_safetensors,
)
from nncodecs.outputs import atomic_output, check_output, is_url, made_parents

__all__ = [
    "READ_FORMATS",
    "WRITE_FORMATS",
    "compress",
    "convert_file",
    "decompress",
    "detect_format",
    "iter_source",
    "merge_containers",
    "restored_name",
]

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)

INDEX = "model.safetensors.index.json"

#: What nncodecs reads (compress, info, convert): the one list that help, errors and docs show.
READ_FORMATS = ("safetensors", "GGUF", "npz", "torch", "ONNX", "ztensor")
#: What a container is restored to (decompress, convert): the output suffix picks one.
WRITE_FORMATS = {".safetensors": "safetensors", ".npz": "npz", ".gguf": "gguf"}
#: Formats restored byte-identical from a container made from them.
EXACT_FORMATS = ("safetensors", "gguf")
#: Suffixes of model files: never the name of a container nncodecs writes.
MODEL_SUFFIXES = (*WRITE_FORMATS, ".onnx", ".pt", ".pth", ".bin", ".ckpt", ".zt")


def detect_format(path: str | Path) -> str:
    """What a path holds, from its content: ``container``, ``safetensors``,
    ``safetensors-dir`` (shards or a snapshot directory), ``npz``, ``torch``, ``gguf``,
    ``ztensor`` or ``onnx`` (by its suffix: protobuf has no magic).

    Raises ``FileNotFoundError`` for a missing path and ``ValueError`` for
    anything else.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        if (path / "zarr.json").is_file():
            return "container"
        if path.joinpath(INDEX).is_file() or any(path.glob("*.safetensors")):
            return "safetensors-dir"
        raise ValueError(f"{path}: a directory with no container and no .safetensors files")
    if path.name.endswith(".index.json"):
        return "safetensors-dir"
    with path.open("rb") as f:
        head = f.read(16)
    if head[:4] == b"GGUF":
        return "gguf"
    if head[:3] == b"\x89ZT":
        return "ztensor"
    if head[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        except (zipfile.BadZipFile, OSError) as exc:
            raise CorruptDataError(f"{path}: a damaged zip file ({exc})") from None
        if "zarr.json" in names:
            return "container"
        if any(n.endswith("data.pkl") for n in names):
            return "torch"
        if names and all(n.endswith(".npy") for n in names):
            return "npz"
        raise ValueError(f"{path}: a zip file that is not a container, npz or torch file")
    if len(head) >= 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x80":  # a legacy (non-zip) torch pickle
        return "torch"
    if path.suffix == ".onnx":  # protobuf has no magic: the suffix decides
        return "onnx"
    raise ValueError(
        f"{path}: not a format nncodecs reads ({', '.join(READ_FORMATS)}, or a container)"
    )


def plain_name(name: Any, what: str) -> str:
    """A file name taken from a file (a shard index, a container's records): one path
    component, relative, no ``..``; anything else is :class:`CorruptDataError`."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or Path(name).is_absolute()
    ):
        raise CorruptDataError(f"{what}: {name!r} is not a plain file name")
    return name


def inside(path: Path, root: Path) -> Path:
    """``path`` (under the input directory ``root``), refused when it is a link that leads
    outside ``root``, except into the ``blobs/`` of the same Hugging Face cache repository
    (``.../models--org--name/snapshots/REV/file -> ../../blobs/SHA``)."""
    real, real_root = path.resolve(), root.resolve()
    allowed = [real_root]
    if real_root.parent.name == "snapshots":
        allowed.append(real_root.parent.parent / "blobs")
    if not any(real == a or a in real.parents for a in allowed):
        raise ValueError(f"{path}: a link to {real}, outside the input directory {root}: refused")
    return path


def _safetensors_files(path: Path) -> tuple[list[Path], str | None]:
    if path.is_dir():
        index = path / INDEX
        if index.is_symlink():
            inside(index, path)
    elif path.name.endswith(".index.json"):
        index, path = path, path.parent
    else:
        return [path], None  # the file the user named
    if index.is_file():
        text = index.read_text()
        try:
            weight_map = json.loads(text)["weight_map"]
            names = set(weight_map.values())
        except (ValueError, KeyError, TypeError, AttributeError):
            raise CorruptDataError(f"{index}: not a safetensors index (no weight_map)") from None
        files = sorted(plain_name(f, str(index)) for f in names)
        for f in files:
            if not (path / f).is_file():
                raise FileNotFoundError(f"{path / f}: a shard named in {index} is missing")
        return [inside(path / f, path) for f in files], text
    files = sorted(f for f in path.glob("*.safetensors") if f.is_file())
    return [inside(f, path) for f in files], None


def iter_source(path: str | Path, fmt: str | None = None) -> Iterator[tuple[str, Any]]:
    """``(name, array)`` of every tensor of a model file, one at a time."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt in ("safetensors", "safetensors-dir"):
        for file in _safetensors_files(path)[0]:
            yield from SafetensorsFile(file)
    elif fmt == "npz":
        yield from _npz_arrays(path)
    elif fmt == "torch":
        yield from load_torch_weights(path).items()
    elif fmt == "gguf":
        for name, arr, _ in _gguf_tensors(path):
            yield name, arr
    elif fmt == "onnx":
        yield from _onnx_tensors(path)
    elif fmt == "ztensor":
        yield from _ztensor_tensors(path)
    elif fmt == "container":
        with Reader(path) as r:
            for name in r:
                yield name, r.read_tensor(name, check=True)
    else:
        raise ValueError(f"{path}: reading {fmt} is not supported yet")


def _npz_arrays(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """The arrays of an ``.npz``, each header checked against its zip entry's size before
    anything is allocated (a 253-byte file may declare a 373 GiB array)."""
    from numpy.lib import format as npy

    with np.load(path, allow_pickle=False) as npz:
        for name in npz.files:
            info = npz.zip.getinfo(name + ".npy")
            with npz.zip.open(info) as f:
                try:
                    version = npy.read_magic(f)
                    read = npy.read_array_header_1_0 if version == (1, 0) else (
                        npy.read_array_header_2_0)  # fmt: skip
                    shape, _, dtype = read(f)
                except ValueError as exc:
                    raise CorruptDataError(f"{path}: array {name!r}: {exc}") from None
                if dtype.hasobject:
                    raise TypeError(f"{path}: array {name!r} holds Python objects")
                declared = math.prod(shape) * dtype.itemsize
                if f.tell() + declared != info.file_size:
                    raise CorruptDataError(
                        f"{path}: array {name!r} declares {declared} bytes, its entry holds "
                        f"{info.file_size - f.tell()}"
                    )
            try:
                arr = npz[name]
                dtype_name(arr.dtype)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{path}: array {name!r}: {exc}") from None
            yield name, arr


_GGUF_TYPED = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8,
               "I16": np.int16, "I32": np.int32, "I64": np.int64}  # fmt: skip


def _gguf_tensors(path: Path) -> Iterator[tuple[str, np.ndarray, tuple[int, int, str]]]:
    """GGUF tensors in file order: (name, array, (offset, bytes, GGML type)). Float and
    integer types come typed; quantized blocks come as their raw bytes (uint8)."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
    except Exception as exc:  # the gguf package raises plain errors for bad files
        raise CorruptDataError(f"{path}: not a readable GGUF file ({exc})") from None
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    for t in sorted(reader.tensors, key=lambda t: t.data_offset):
        kind = t.tensor_type.name
        start, size = int(t.data_offset), int(t.n_bytes)
        if start + size > raw.size:
            raise CorruptDataError(f"{path}: tensor {t.name!r} runs past the end of the file")
        data = raw[start : start + size]
        if kind in _GGUF_TYPED:
            arr = np.asarray(data).view(_GGUF_TYPED[kind]).reshape(tuple(t.data.shape))
        else:
            arr = np.asarray(data)
        yield t.name, arr, (start, size, kind)


def _onnx_tensors(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """Every tensor of an ONNX model: initializers and ``Constant`` nodes' values, in the
    main graph and in every subgraph (``If`` / ``Loop`` bodies). A tensor nncodecs cannot
    keep (strings, sparse values, an unsupported dtype) refuses the whole model, by name.

    External data files are read only where they lie inside the model's directory.
    """
    try:
        import onnx
        from onnx import external_data_helper, numpy_helper
    except ImportError:
        raise ValueError(
            f"{path}: reading ONNX needs the onnx package (pip install onnx)"
        ) from None
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's errors for a file that is not ONNX
        raise CorruptDataError(f"{path}: not a readable ONNX model ({exc})") from None
    base = path.parent
    for tensor in external_data_helper._get_all_tensors(model):
        if external_data_helper.uses_external_data(tensor):
            info = {e.key: e.value for e in tensor.external_data}
            location = info.get("location", "")
            parts = Path(location).parts
            if not location or Path(location).is_absolute() or ".." in parts:
                raise CorruptDataError(
                    f"{path}: tensor {tensor.name!r} has external data at {location!r}, "
                    "outside the model's directory"
                )
            inside(base / location, base)
    try:
        external_data_helper.load_external_data_for_model(model, str(base))
    except Exception as exc:  # a missing or short external file
        raise CorruptDataError(f"{path}: external data not readable ({exc})") from None

    def to_array(name: str, tensor: Any) -> np.ndarray:
        try:
            arr = numpy_helper.to_array(tensor)
            dtype_name(arr.dtype)
        except Exception as exc:  # strings, complex, int4 ...: not kept, so refused
            raise TypeError(
                f"{path}: tensor {name!r} cannot be stored by nncodecs ({exc}); nothing was written"
            ) from None
        return arr

    def walk(graph: Any, scope: str) -> Iterator[tuple[str, np.ndarray]]:
        # A subgraph's names are its own (two branches of an If may both name a "t"):
        # its tensors are stored under "node.attribute/name", the main graph's as they are.
        for init in graph.initializer:
            yield scope + init.name, to_array(scope + init.name, init)
        for sparse in graph.sparse_initializer:
            raise TypeError(
                f"{path}: sparse initializer {sparse.values.name!r} cannot be stored yet; "
                "nothing was written"
            )
        names = Counter(n.name for n in graph.node)
        for i, node in enumerate(graph.node):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                yield from constant(node, scope)
            # (a node's name where it is one of a kind, else its type and place)
            unique = node.name and names[node.name] == 1
            where = f"{scope}{node.name if unique else f'{node.op_type}_{i}'}"
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from walk(attr.g, f"{where}.{attr.name}/")
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for k, g in enumerate(attr.graphs):
                        yield from walk(g, f"{where}.{attr.name}.{k}/")

    def constant(node: Any, scope: str) -> Iterator[tuple[str, np.ndarray]]:
        name = scope + (node.output[0] if node.output else node.name)
        for attr in node.attribute:
            if attr.name == "value":
                yield name, to_array(name, attr.t)
            elif attr.name in ("value_float", "value_int"):
                value = attr.f if attr.name == "value_float" else attr.i
                yield name, np.array(value, np.float32 if attr.name == "value_float" else np.int64)
            elif attr.name in ("value_floats", "value_ints"):
                floats = attr.name == "value_floats"
                yield name, np.array(attr.floats if floats else attr.ints,
                                     np.float32 if floats else np.int64)  # fmt: skip
            else:
                raise TypeError(
                    f"{path}: Constant {name!r} holds a {attr.name}, which nncodecs cannot "
                    "store yet; nothing was written"
                )

    seen: set[str] = set()
    for name, arr in walk(model.graph, ""):
        if name in seen:
            raise CorruptDataError(f"{path}: two tensors named {name!r}")
        seen.add(name)
        yield name, arr


_ZT_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
               "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "u64": "uint64",
               "u32": "uint32", "u16": "uint16", "u8": "uint8", "bool": "bool"}  # fmt: skip


def _ztensor_tensors(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """The dense tensors of a ztensor ``.zt`` file, through the optional ``ztensor`` package."""
    try:
        import ztensor
    except ImportError:
        raise ValueError(f"{path}: reading ztensor needs the ztensor package") from None
    try:
        source = ztensor.open(str(path))
        items = list(source.items())
    except Exception as exc:  # the package's own errors for a bad file
        raise CorruptDataError(f"{path}: not a readable ztensor file ({exc})") from None
    for name, tensor in items:
        kind = _ZT_DTYPES.get(str(tensor.dtype))
        if kind is None:
            raise TypeError(f"{path}: tensor {name!r} has ztensor dtype {tensor.dtype!r}")
        raw = np.frombuffer(tensor.tobytes(), dtype=normalize_dtype(kind))
        yield name, raw.reshape(tuple(tensor.shape))


def load_torch_weights(path: Path) -> dict[str, Any]:
    """A PyTorch checkpoint's tensors, loaded with ``weights_only=True``: no code runs."""
    import pickle

    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError, EOFError) as exc:
        raise ValueError(
            f"{path}: refused: not a weights-only PyTorch file ({str(exc).splitlines()[0]})"
        ) from None
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        others = sorted(str(k) for k in obj if k != "state_dict")
        if others:  # an optimizer state, an epoch ...: not kept, so refused by name
            raise ValueError(
                f"{path}: the checkpoint holds more than a state dict ({', '.join(others[:8])}"
                f"{', ...' if len(others) > 8 else ''}), which nncodecs would not keep: "
                "save the state dict alone"
            )
        obj = obj["state_dict"]
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: not a state dict of tensors")
    bad = sorted(str(k) for k, v in obj.items() if not isinstance(v, torch.Tensor))
    if bad:
        raise ValueError(
            f"{path}: not a state dict of tensors ({', '.join(bad[:8])} "
            f"{'is' if len(bad) == 1 else 'are'} not tensors), which nncodecs would not keep"
        )
    return obj


def _one_malloc_arena() -> None:
    """glibc: let every thread allocate from one malloc arena.

    Zarr encodes and decodes chunks on a pool of threads, and glibc gives
    each thread an arena of its own that keeps what was freed in it, so a
    model streamed tensor by tensor held several tensors' worth of freed
    memory (measured with a one-off script on the 1 GiB generated model of
    benchmarks/compare.py, largest tensor 32 MiB, before the Writer's slab
    writes: peaks of 106-138 / 118-122 MiB above the start compressing /
    decompressing, 93-103 / 83-88 MiB with one arena, at the same speed;
    returning large blocks to the system instead cost 20-75% of the speed).
    It applies
    to arenas made from now on, for the rest of the process; elsewhere than
    glibc it does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_arena_max = -8
    mallopt(m_arena_max, 1)


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


#: Bytes of a safetensors file outside its tensors (padding, trailing data) kept per file.
MAX_GAP_BYTES = 1 << 20


def source_metadata(path: Path, fmt: str) -> dict[str, str]:
    """What a container records of its source file, so that it comes back whole and checked:
    the format; for safetensors each file's header, tensor order and sha256, the bytes its
    tensors do not cover (and the shard index); for every other format the file's sha256."""
    meta = {"source.format": "safetensors" if fmt.startswith("safetensors") else fmt}
    if fmt.startswith("safetensors"):
        files, index = _safetensors_files(path)
        records, count, held = [], 0, {}
        for file in files:
            st = SafetensorsFile(file)
            rec = {
                "file": file.name,
                "header": st.header_bytes.decode("utf-8"),
                "exact": True,
                "tensors": [e[0] for e in st.entries],
                "sha256": _sha256(file),
            }
            if not st.tiles_exactly():  # padding, trailing bytes or shared offsets: kept
                rec["size"] = st.data_size
                rec["gaps"] = _gaps(st)
            records.append(rec)
            held[file.name] = set(rec["tensors"])
            count += len(st.entries)
        if index is not None:
            _check_index(path, index, held)
        meta["source.files"] = json.dumps(records)
        if index is not None:
            meta["source.index"] = index
        meta["source.layout"] = "directory" if fmt == "safetensors-dir" else "file"
        meta["source.tensors"] = str(count)
    elif path.is_file():
        meta["source.sha256"] = _sha256(path)
    return meta


def _gaps(st: SafetensorsFile) -> list[list[Any]]:
    """The data section's bytes no tensor covers, as [offset, base64] pairs in order."""
    import base64

    spans, at = [], 0
    for _, _, _, begin, end in st.entries:
        if begin > at:
            spans.append((at, begin))
        at = max(at, end)
    if st.data_size > at:
        spans.append((at, st.data_size))
    if sum(b - a for a, b in spans) > MAX_GAP_BYTES:
        raise ValueError(
            f"{st.path}: {sum(b - a for a, b in spans)} bytes outside its tensors; nncodecs "
            f"keeps at most {MAX_GAP_BYTES} of them, so it would not come back whole"
        )
    gaps = []
    with st.path.open("rb") as f:
        for a, b in spans:
            f.seek(st.data_start + a)
            gaps.append([a, base64.b64encode(f.read(b - a)).decode("ascii")])
    return gaps


def _check_index(path: Path, index: str, held: dict[str, set[str]]) -> None:
    """The shard index must describe the shards: every tensor in the file it names, every
    tensor of every shard named, no other shard in the directory (it would be dropped)."""
    root = path if path.is_dir() else path.parent
    weight_map = json.loads(index)["weight_map"]
    unlisted = sorted(
        f.name for f in root.glob("*.safetensors") if f.is_file() and f.name not in held
    )
    if unlisted:
        raise ValueError(
            f"{root}: {', '.join(unlisted[:4])} not in {INDEX}; it would be dropped "
            "(compress the file on its own, or list it in the index)"
        )
    for name, file in weight_map.items():
        if name not in held.get(file, ()):
            raise CorruptDataError(f"{root / INDEX}: tensor {name!r} is not in {file}")
    missing = sorted(n for names in held.values() for n in names if n not in weight_map)
    if missing:
        raise CorruptDataError(
            f"{root / INDEX}: tensors {', '.join(map(repr, missing[:4]))} of the shards are "
            "not in the index"
        )


def _local_output(target: Any) -> Path | None:
    """The local path of an output, ``None`` for a URL or a store object."""
    if isinstance(target, str | os.PathLike) and not is_url(str(target)):
        return Path(str(target).removeprefix("file://"))
    return None


def _container_name(path: Path) -> None:
    """A container is never written under a model file's name (``-o m.safetensors`` would
    make a Zarr directory a user takes for a model file)."""
    if path.suffix.lower() in MODEL_SUFFIXES:
        kind = WRITE_FORMATS.get(path.suffix.lower())
        hint = (
            f"use `nncodecs convert` to write {kind}"
            if kind
            else f"nncodecs writes model files as {', '.join(WRITE_FORMATS)} only"
        )
        raise ValueError(f"{path}: a model file's name, not a container's ({hint})")


def _model_file_name(path: Path) -> None:
    """A restored model file is never written under a container's name, nor under the
    suffix of a format nncodecs does not write (``-o y.onnx`` would hold safetensors)."""
    name = path.name.lower()
    if name.endswith((".zarr", ".zip")) or (
        path.suffix.lower() in MODEL_SUFFIXES and path.suffix.lower() not in WRITE_FORMATS
    ):
        raise ValueError(
            f"{path}: not a name for a restored model file (nncodecs writes "
            f"{', '.join(WRITE_FORMATS)})"
        )


def compress(
    source: str | Path,
    target: Any,
    codec: str = "auto",
    threads: int | None = None,
    chunk_bytes: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> str:
    """Compress a model file (or a directory of shards) into one container. Returns its format.

    Tensors stream one at a time: the peak memory is about the largest
    tensor's size times 1.5 plus Zarr's working set (see docs/formats.md).
    An existing ``target`` is refused unless ``force`` (and a directory is
    replaced only when it is a container); the container appears at
    ``target`` only once complete.
    """
    _one_malloc_arena()
    source = Path(source)
    fmt = detect_format(source)
    if fmt == "container":
        raise ValueError(f"{source}: already a container")
    local = _local_output(target)
    if local is not None:
        _container_name(local)
        check_output(local, force, inputs=(source,))
    kwargs: dict[str, Any] = {"codec": codec, "threads": threads}
    if chunk_bytes:
        kwargs["chunk_bytes"] = chunk_bytes
    meta = source_metadata(source, fmt)
    with made_parents(local), Writer(target, overwrite=force, **kwargs) as w:
        w.metadata.update(meta)
        if fmt.startswith("safetensors"):
            files, _ = _safetensors_files(source)
            total = sum(f.stat().st_size for f in files)
            done = 0
            for file in files:
                for name, arr in SafetensorsFile(file):
                    w.add_tensor(name, arr)
                    done += arr.nbytes
                    del arr  # before the next one is read: one tensor at a time
                    if progress:
                        progress(done, total)
        elif fmt == "gguf":
            count = _compress_gguf(source, w, progress)
            w.metadata["source.tensors"] = str(count)
        else:
            total = source.stat().st_size
            done = count = 0
            for name, arr in iter_source(source, fmt):
                w.add_tensor(name, arr)
                done += int(arr.nbytes)
                count += 1
                del arr
                if progress:
                    progress(min(done, total), total)
            w.metadata["source.tensors"] = str(count)
        if progress:
            progress(1, 1)  # the bar ends at 100% (sizes on disk and in memory differ)
    return fmt


def _compress_gguf(source: Path, w: Writer, progress: Progress | None) -> int:
    """Tensors into the container; every other byte of the file (header, key-value
    metadata, tensor infos, alignment padding) kept verbatim, so it comes back exact.
    Returns the number of tensors."""
    import base64

    raw = np.memmap(source, dtype=np.uint8, mode="r")
    gaps, ranges, at = [], [], 0
    for name, arr, (start, size, kind) in _gguf_tensors(source):
        if start < at:
            raise CorruptDataError(f"{source}: tensor {name!r} overlaps the one before it")
        gaps.append(bytes(raw[at:start]))
        ranges.append([name, start, size, kind])
        w.add_tensor(name, arr)
        at = start + size
        if progress:
            progress(at, raw.size)
    gaps.append(bytes(raw[at:]))
    w.metadata["source.gguf.ranges"] = json.dumps(ranges)
    w.metadata["source.gguf.gaps"] = json.dumps([base64.b64encode(g).decode() for g in gaps])
    return len(ranges)


def _write_gguf(r: Reader, out: Path) -> None:
    import base64

    try:
        ranges = json.loads(r.metadata["source.gguf.ranges"])
        gaps = [base64.b64decode(g) for g in json.loads(r.metadata["source.gguf.gaps"])]
        if len(gaps) != len(ranges) + 1:
            raise ValueError("one gap more than tensors expected")
    except (KeyError, ValueError, TypeError) as exc:
        raise CorruptDataError(f"the container's GGUF records are damaged ({exc})") from None
    with out.open("wb") as f:
        for gap, item in zip(gaps, ranges, strict=False):
            if not (isinstance(item, list) and len(item) == 4 and item[0] in r):
                raise CorruptDataError(f"the container's GGUF record {item!r} is damaged")
            name, start, size, _ = item
            f.write(gap)
            if f.tell() != start or r.info(name).nbytes != size:
                raise CorruptDataError(f"tensor {name!r} does not fit its place in the GGUF file")
            f.write(np.asarray(r.read_tensor(name, check=True)).tobytes())
        f.write(gaps[-1])


def _file_records(r: Reader, where: str) -> list[dict[str, Any]]:
    """The container's safetensors file records, every field checked: file names are data
    (plain, no duplicates), tensors are the container's, headers tile their tensors."""
    try:
        records = json.loads(r.metadata["source.files"])
    except (KeyError, ValueError) as exc:
        raise CorruptDataError(
            f"{where}: the container's file records are damaged ({exc})"
        ) from None
    if not isinstance(records, list) or not records:
        raise CorruptDataError(f"{where}: the container's file records are not a list of files")
    seen: set[str] = set()
    for rec in records:
        if not isinstance(rec, dict) or not isinstance(rec.get("tensors"), list):
            raise CorruptDataError(f"{where}: the container's file record {rec!r:.80} is damaged")
        name = plain_name(rec.get("file"), f"{where}: the container's file records")
        if name == INDEX:
            raise CorruptDataError(f"{where}: a file record takes the shard index's name")
        if name in seen:
            raise CorruptDataError(f"{where}: the container's file records name {name!r} twice")
        seen.add(name)
        for t in rec["tensors"]:
            if not isinstance(t, str) or t not in r:
                raise CorruptDataError(f"{where}: file {name!r} lists {t!r}, not in the container")
        if rec.get("exact") and "gaps" not in rec:  # (a kept layout is checked as written)
            _check_header(r, rec, where)
        elif "gaps" in rec and not (
            isinstance(rec.get("size"), int) and isinstance(rec["gaps"], list)
        ):
            raise CorruptDataError(f"{where}: file {name!r}: the stored layout is damaged")
    if r.metadata.get("source.layout") != "directory" and len(records) != 1:
        raise CorruptDataError(f"{where}: a single-file container records several files")
    return records


def _check_header(r: Reader, rec: dict[str, Any], where: str) -> None:
    """A stored header must place each tensor right after the one before (no holes, no
    offsets past the data: a forged offset cannot make a huge sparse file)."""
    try:
        header = json.loads(rec["header"])
        at = 0
        for t in rec["tensors"]:
            begin, end = header[t]["data_offsets"]
            if begin != at or end - begin != r.info(t).nbytes:
                raise ValueError(f"tensor {t!r} at {begin}..{end}, expected at {at}")
            at = end
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptDataError(
            f"{where}: file {rec['file']!r}: stored header damaged ({exc})"
        ) from None


def default_format(metadata: dict[str, str]) -> str:
    """The format a container is restored to when nothing else says: its source's, where it
    has the records for it; else safetensors."""
    source = metadata.get("source.format")
    if source == "safetensors" and "source.files" in metadata:
        return "safetensors"
    if source == "gguf" and "source.gguf.ranges" in metadata:
        return "gguf"
    if source == "npz":
        return "npz"
    return "safetensors"


def restored_name(container: Path, metadata: dict[str, str]) -> Path:
    """Where ``decompress`` writes by default: the container's name without ``.zarr.zip``
    / ``.zarr`` when the source comes back in its own format, else with the suffix of the
    format it is restored to (``model.onnx.zarr.zip`` -> ``model.safetensors``): never
    a name that would replace a source of another format."""
    name = container.name
    for suffix in (".zarr.zip", ".zarr", ".zip"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    else:
        raise ValueError(f"{container}: name an output with -o")
    fmt = default_format(metadata)
    if metadata.get("source.layout") == "directory":
        return container.with_name(name)
    stem = Path(name)
    want = {v: k for k, v in WRITE_FORMATS.items()}[fmt]
    if stem.suffix != want:
        source = metadata.get("source.format")
        keep = source == fmt or stem.suffix not in (".onnx", ".pt", ".pth", ".bin", ".zt", ".ckpt")
        stem = Path(name + want) if keep and stem.suffix != want else stem.with_suffix(want)
    return container.with_name(stem.name)


def decompress(
    container: Any,
    out: str | Path,
    fmt: str | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> str:
    """Restore a container as a model file: ``fmt``, else the one ``out``'s suffix names,
    else the source's own format (byte for byte for safetensors and GGUF, checked against
    the source's sha256). Returns the format.

    The output is written under a temporary name and appears at ``out`` only
    once complete and checked; an existing ``out`` is refused unless
    ``force``. Tensors stream one at a time into the file (npz excepted:
    NumPy writes it from a dict of every tensor).
    """
    _one_malloc_arena()
    if is_url(str(out)):
        raise ValueError(f"{out}: restored files are written to a local path, not a URL")
    out = Path(str(out).removeprefix("file://"))
    _model_file_name(out)
    with Reader(container) as r:
        source = r.metadata.get("source.format")
        fmt = fmt or WRITE_FORMATS.get(out.suffix.lower()) or default_format(r.metadata)
        if fmt not in WRITE_FORMATS.values():
            raise ValueError(f"cannot write {fmt!r}: choose {', '.join(WRITE_FORMATS.values())}")
        if fmt == "gguf" and (source != "gguf" or "source.gguf.ranges" not in r.metadata):
            raise ValueError("only a container made from a GGUF file can be written as GGUF")
        own = fmt == source and fmt in EXACT_FORMATS and "source.files" in r.metadata
        records = _file_records(r, str(container)) if own and fmt == "safetensors" else None
        directory = records is not None and r.metadata.get("source.layout") == "directory"
        local = _local_output(container)
        inputs = (local,) if local is not None else ()
        with atomic_output(out, force, directory=directory, inputs=inputs) as tmp:
            if fmt == "gguf":
                _write_gguf(r, tmp)
                _check_sha256(tmp, r.metadata.get("source.sha256"), out)
            elif fmt == "safetensors":
                _write_safetensors_from(r, tmp, records, progress)
            else:
                with tmp.open("wb") as f:
                    np.savez(f, **dict(_stream(r, r.keys(), progress)))
    return fmt


def _stream(r: Reader, names: list[str], progress: Progress | None) -> Iterator[tuple[str, Any]]:
    total = sum(r.info(n).nbytes for n in r) or 1
    done = 0
    for name in names:
        arr = r.read_tensor(name, check=True)
        done += arr.nbytes
        if progress:
            progress(min(done, total), total)
        yield name, arr
        del arr  # before the next one is read: one tensor at a time


def _write_safetensors_from(
    r: Reader, tmp: Path, records: list[dict[str, Any]] | None, progress: Progress | None
) -> None:
    if records is None:  # a header from the tensors' infos, so that they stream
        infos = [r.info(name) for name in r]
        header = safetensors_header((i.name, normalize_dtype(i.dtype), i.shape) for i in infos)
        write_safetensors(tmp, _stream(r, r.keys(), progress), header_bytes=header)
        return
    directory = r.metadata.get("source.layout") == "directory"
    if directory and "source.index" in r.metadata:
        (tmp / INDEX).write_bytes(r.metadata["source.index"].encode("utf-8"))
    for rec in records:
        path = tmp / rec["file"] if directory else tmp
        header = rec["header"].encode("utf-8") if rec.get("exact") else None
        if "gaps" in rec:  # the file's own layout: gaps and shared offsets as they were
            _write_layout(r, path, rec, progress)
        else:
            write_safetensors(path, _stream(r, rec["tensors"], progress), header_bytes=header)
        if header is not None:
            _check_sha256(path, rec.get("sha256"), rec["file"])


def _write_layout(r: Reader, path: Path, rec: dict[str, Any], progress: Progress | None) -> None:
    """A safetensors file whose tensors do not tile its data section: the header as it was,
    then every byte in order, from the tensors or from the kept gaps (each checked to fill
    exactly the span no tensor covers, so forged records cannot leave holes)."""
    import base64
    import struct

    header_bytes = rec["header"].encode("utf-8")
    header = json.loads(header_bytes)
    size = rec["size"]
    gaps = list(rec["gaps"])
    bad = CorruptDataError(f"file {rec['file']!r}: the stored layout does not fit")
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes)
        at = 0

        def gap_to(stop: int) -> None:
            nonlocal at
            if not gaps or gaps[0][0] != at:
                raise bad
            data = base64.b64decode(gaps.pop(0)[1])
            if at + len(data) != stop:
                raise bad
            f.write(data)
            at = stop

        for name, arr in _stream(r, rec["tensors"], progress):
            begin, end = header[name]["data_offsets"]
            raw = _raw_bytes(arr)
            if end - begin != raw.nbytes or not 0 <= begin <= end <= size:
                raise bad
            if begin > at:
                gap_to(begin)
            if end > at:  # (a tensor sharing bytes with the one before: only the rest)
                f.write(raw[at - begin :])
                at = end
        if size > at:
            gap_to(size)
        if gaps:
            raise bad


def _check_sha256(path: Path, expected: Any, what: Any) -> None:
    """A restored file must be the source byte for byte (containers that recorded it)."""
    if isinstance(expected, str) and _sha256(path) != expected:
        raise CorruptDataError(
            f"{what}: the restored file's sha256 differs from the source's; nothing was written"
        )


def convert_file(
    source: str | Path, out: str | Path, fmt: str | None = None, force: bool = False
) -> str:
    """A model file to another model file (the suffix of ``out`` picks the format, or
    ``fmt``): tensors stream through, no container. Returns the format written."""
    if is_url(str(out)):
        raise ValueError(f"{out}: model files are written to a local path, not a URL")
    source, out = Path(source), Path(str(out).removeprefix("file://"))
    _model_file_name(out)
    fmt = fmt or WRITE_FORMATS.get(out.suffix.lower())
    if fmt not in ("safetensors", "npz"):
        raise ValueError(f"{out}: a model file is converted to .safetensors or .npz")
    with atomic_output(out, force, inputs=(source,)) as tmp:
        if fmt == "safetensors":
            write_safetensors(tmp, iter_source(source))
        else:
            with tmp.open("wb") as f:
                np.savez(f, **dict(iter_source(source)))
    return fmt


def merged_metadata(metadatas: list[dict[str, str]]) -> dict[str, str]:
    """The metadata of containers merged into one: keys they agree on kept; the file records
    of safetensors sources joined (restored as a directory of those files; a name that two
    sources share gets the source's number, ``2-model.safetensors``); the tensor counts
    added; any other key that differs dropped."""
    if len(metadatas) == 1:
        return dict(metadatas[0])
    out = {k: v for k, v in metadatas[0].items() if all(m.get(k) == v for m in metadatas)}
    counts = [_int(m.get("source.tensors")) for m in metadatas]
    if all(c is not None for c in counts):
        out["source.tensors"] = str(sum(c for c in counts if c is not None))
    if all(m.get("source.format") == "safetensors" and "source.files" in m for m in metadatas):
        per_source = [json.loads(m["source.files"]) for m in metadatas]
        names = [rec.get("file") for recs in per_source for rec in recs]
        records = []
        for i, recs in enumerate(per_source, 1):
            for rec in recs:  # (every model is model.safetensors: a shared name gets "N-")
                if names.count(rec.get("file")) > 1:
                    rec = {**rec, "file": f"{i}-{rec['file']}"}
                records.append(rec)
        if len({rec["file"] for rec in records}) != len(records):
            raise ValueError("the containers' files cannot be given distinct names")
        out.update({"source.format": "safetensors", "source.files": json.dumps(records),
                    "source.layout": "directory"})  # fmt: skip
        out.pop("source.index", None)  # each index described one model's shards
    return out


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def merge_containers(
    sources: list[Any], target: Any, codec: str = "auto", force: bool = False
) -> None:
    """Merge containers into one (tensor names must not repeat); their source records are
    merged too (:func:`merged_metadata`), so the result restores as the files it holds."""
    from nncodecs.container import merge

    local = _local_output(target)
    inputs = tuple(p for p in (_local_output(s) for s in sources) if p is not None)
    if local is not None:
        _container_name(local)
        check_output(local, force, inputs=inputs)
    metas = []
    for source in sources:
        with Reader(source) as r:
            metas.append(dict(r.metadata))
    with made_parents(local):
        merge(sources, target, codec=codec, metadata=merged_metadata(metas), overwrite=force)
