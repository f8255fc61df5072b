"""Model files <-> containers: detection, compression, and restoring the original.

Readers stream tensor by tensor into a :class:`nncodecs.Writer`; what the
original file needs to come back byte for byte (a safetensors header, a
shard index) travels in the container's metadata under ``source.*``.
"""

from __future__ import annotations

import ctypes
import json
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nncodecs.container import Reader, Writer
from nncodecs.dtypes import normalize_dtype
from nncodecs.errors import CorruptDataError
from nncodecs.formats.safetensors import SafetensorsFile, safetensors_header, write_safetensors

__all__ = ["compress", "decompress", "detect_format", "iter_source"]

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)

INDEX = "model.safetensors.index.json"


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
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
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
    raise ValueError(f"{path}: not a format nncodecs reads (safetensors, npz, torch, container)")


def _safetensors_files(path: Path) -> tuple[list[Path], str | None]:
    if path.is_dir():
        index = path / INDEX
    elif path.name.endswith(".index.json"):
        index, path = path, path.parent
    else:
        return [path], None
    if index.is_file():
        text = index.read_text()
        files = sorted(set(json.loads(text)["weight_map"].values()))
        return [path / f for f in files], text
    return sorted(path.glob("*.safetensors")), None


def iter_source(path: str | Path, fmt: str | None = None) -> Iterator[tuple[str, Any]]:
    """``(name, array)`` of every tensor of a model file, one at a time."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt in ("safetensors", "safetensors-dir"):
        for file in _safetensors_files(path)[0]:
            yield from SafetensorsFile(file)
    elif fmt == "npz":
        with np.load(path, allow_pickle=False) as npz:
            for name in npz.files:
                yield name, npz[name]
    elif fmt == "torch":
        yield from load_torch_weights(path).items()
    elif fmt == "gguf":
        for name, arr, _ in _gguf_tensors(path):
            yield name, arr
    elif fmt == "onnx":
        yield from _onnx_initializers(path)
    elif fmt == "ztensor":
        yield from _ztensor_tensors(path)
    elif fmt == "container":
        with Reader(path) as r:
            for name in r:
                yield name, r.read_tensor(name)
    else:
        raise ValueError(f"{path}: reading {fmt} is not supported yet")


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


def _onnx_initializers(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """The initializers (weights) of an ONNX model, through the optional ``onnx`` package."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise ValueError(
            f"{path}: reading ONNX needs the onnx package (pip install onnx)"
        ) from None
    try:
        model = onnx.load(str(path), load_external_data=True)
    except Exception as exc:  # protobuf's errors for a file that is not ONNX
        raise CorruptDataError(f"{path}: not a readable ONNX model ({exc})") from None
    for init in model.graph.initializer:
        yield init.name, numpy_helper.to_array(init)


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
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"{path}: not a state dict of tensors")
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


def compress(
    source: str | Path,
    target: Any,
    codec: str = "auto",
    threads: int | None = None,
    chunk_bytes: int | None = None,
    progress: Progress | None = None,
) -> str:
    """Compress a model file (or a directory of shards) into one container. Returns its format.

    Tensors stream one at a time: the peak memory is about the largest
    tensor's size times 1.5 plus Zarr's working set (see docs/formats.md).
    """
    _one_malloc_arena()
    source = Path(source)
    fmt = detect_format(source)
    if fmt == "container":
        raise ValueError(f"{source}: already a container")
    kwargs: dict[str, Any] = {"codec": codec, "threads": threads}
    if chunk_bytes:
        kwargs["chunk_bytes"] = chunk_bytes
    with Writer(target, **kwargs) as w:
        w.metadata["source.format"] = "safetensors" if fmt.startswith("safetensors") else fmt
        if fmt.startswith("safetensors"):
            files, index = _safetensors_files(source)
            total = sum(f.stat().st_size for f in files)
            done = 0
            records = []
            for file in files:
                st = SafetensorsFile(file)
                records.append({
                    "file": file.name,
                    "header": st.header_bytes.decode("utf-8"),
                    "exact": st.tiles_exactly(),
                    "tensors": [e[0] for e in st.entries],
                })  # fmt: skip
                for name, arr in st:
                    w.add_tensor(name, arr)
                    done += arr.nbytes
                    del arr  # before the next one is read: one tensor at a time
                    if progress:
                        progress(done, total)
            w.metadata["source.files"] = json.dumps(records)
            if index is not None:
                w.metadata["source.index"] = index
            w.metadata["source.layout"] = "directory" if fmt == "safetensors-dir" else "file"
        elif fmt == "gguf":
            _compress_gguf(source, w, progress)
        else:
            total = source.stat().st_size
            done = 0
            for name, arr in iter_source(source, fmt):
                w.add_tensor(name, arr)
                done += int(arr.nbytes)
                del arr
                if progress:
                    progress(min(done, total), total)
    return fmt


def _compress_gguf(source: Path, w: Writer, progress: Progress | None) -> None:
    """Tensors into the container; every other byte of the file (header, key-value
    metadata, tensor infos, alignment padding) kept verbatim, so it comes back exact."""
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


def _write_gguf(r: Reader, out: Path) -> None:
    import base64

    ranges = json.loads(r.metadata["source.gguf.ranges"])
    gaps = [base64.b64decode(g) for g in json.loads(r.metadata["source.gguf.gaps"])]
    with out.open("wb") as f:
        for gap, (name, start, size, _) in zip(gaps, ranges, strict=False):
            f.write(gap)
            data = np.asarray(r.read_tensor(name)).tobytes()
            if f.tell() != start or len(data) != size:
                raise CorruptDataError(f"tensor {name!r} does not fit its place in the GGUF file")
            f.write(data)
        f.write(gaps[-1])


def decompress(
    container: Any, out: str | Path, fmt: str | None = None, progress: Progress | None = None
) -> str:
    """Restore a container as a model file: ``fmt``, else the one ``out``'s suffix names,
    else the source's own format (byte for byte for safetensors and GGUF). Returns the format.

    Tensors stream one at a time into the file (npz excepted: NumPy writes it
    from a dict of every tensor).
    """
    _one_malloc_arena()
    out = Path(out)
    with Reader(container) as r:
        source = r.metadata.get("source.format")
        by_suffix = {".npz": "npz", ".gguf": "gguf", ".safetensors": "safetensors"}.get(out.suffix)
        fmt = (
            fmt
            or by_suffix
            or (source if source in ("safetensors", "npz", "gguf") else "safetensors")
        )
        if fmt == "gguf":
            if source != "gguf":
                raise ValueError("only a container made from a GGUF file can be written as GGUF")
            _write_gguf(r, out)
            return fmt
        total = sum(r.info(n).nbytes for n in r)
        done = 0

        def tensors(names: list[str]) -> Iterator[tuple[str, Any]]:
            nonlocal done
            for name in names:
                arr = r.read_tensor(name)
                done += arr.nbytes
                if progress:
                    progress(done, total)
                yield name, arr
                del arr  # before the next one is read: one tensor at a time

        if fmt == "safetensors":
            if source == "safetensors":
                records = json.loads(r.metadata["source.files"])
                if r.metadata.get("source.layout") == "directory":
                    out.mkdir(parents=True, exist_ok=True)
                    if "source.index" in r.metadata:
                        (out / INDEX).write_text(r.metadata["source.index"])
                    paths = [out / rec["file"] for rec in records]
                else:
                    paths = [out]
                for rec, path in zip(records, paths, strict=True):
                    header = rec["header"].encode("utf-8") if rec["exact"] else None
                    write_safetensors(path, tensors(rec["tensors"]), header_bytes=header)
            else:  # a header from the tensors' infos, so that they stream
                infos = [r.info(name) for name in r]
                header = safetensors_header(
                    (i.name, normalize_dtype(i.dtype), i.shape) for i in infos
                )
                write_safetensors(out, tensors(r.keys()), header_bytes=header)
        elif fmt == "npz":
            with out.open("wb") as f:
                np.savez(f, **dict(tensors(r.keys())))
        else:
            raise ValueError(f"cannot write {fmt!r}: choose safetensors, npz or gguf")
    return fmt
