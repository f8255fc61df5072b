"""Write the conformance corpus (tests/conformance): inputs an implementation of the
format must accept, each with the SHA-256 of what it decodes to, and inputs it must
reject, each with the error class it raises. ``tests/conformance/test_corpus.py`` runs them.

Usage: ``python scripts/make_conformance.py`` (rewrites tests/conformance/; the inputs
are made from fixed seeds, so a rerun writes the same files, except containers, whose
zip entries carry the time they were written, and where zstd's own output changed
between its releases). It exits non-zero on a finding: a hostile input that decodes to
something else without an error, or raises anything but a clear error (``ERRORS``).

Kinds (``decode`` in manifest.json) and what their SHA-256 is taken of:

- ``frame``: a frame decoded as bytes (``nncodecs.frame.decode_frame``);
- ``weights``: a frame decoded by the weights codec to the element type it records
  (the tensor's bytes, little-endian, C order);
- ``container``: a ``.zarr.zip`` container read by ``nncodecs.Reader``;
- ``model``: a model file (safetensors, GGUF, NumPy .npz, ONNX, PyTorch) read by
  ``nncodecs.formats.iter_source``.

A container or model file digests as :func:`digest`: for each tensor in name order,
its name, dtype, shape and bytes (a sparse or quantized tensor: each of its parts).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import struct
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "conformance"
sys.path.insert(0, str(ROOT / "tests"))


def digest(tensors: Iterator[tuple[str, Any]]) -> str:
    """SHA-256 over ``(name, tensor)`` pairs in name order: name, dtype, shape, bytes,
    each ending in a NUL; a sparse tensor (a dict) or quantized pair (a tuple) as its
    parts, by key or position; a SciPy matrix as its CSR parts (indices as int64)."""
    h = hashlib.sha256()
    for name, value in sorted(tensors, key=lambda kv: kv[0]):
        if hasattr(value, "tocsr"):  # (a SciPy matrix: a ztensor file's CSR tensor)
            m = value.tocsr()
            value = {"data": m.data, "indices": m.indices.astype(np.int64),
                     "indptr": m.indptr.astype(np.int64), "shape": m.shape}  # fmt: skip
        if isinstance(value, dict):
            parts = sorted(value.items())
        elif isinstance(value, tuple):  # (a quantized pair: blocks, scales)
            parts = [(str(i), v) for i, v in enumerate(value)]
        else:
            parts = [("", value)]
        for part, arr in parts:
            if part == "shape":
                h.update(f"{name}/shape\0{list(arr)}\0".encode())
                continue
            arr = np.ascontiguousarray(np.asarray(arr))
            h.update(f"{name}/{part}\0{arr.dtype}\0{list(arr.shape)}\0".encode())
            h.update(arr.reshape(-1).view(np.uint8).tobytes())
    return h.hexdigest()


def decode(kind: str, path: Path) -> str:
    """The SHA-256 an accepted input decodes to (raises what a rejected one raises)."""
    if kind == "frame":
        from nncodecs.frame import decode_frame

        return hashlib.sha256(decode_frame(path.read_bytes()).tobytes()).hexdigest()
    if kind == "weights":
        from nncodecs.frame.weights import decode_weights

        out = decode_weights(path.read_bytes(), None, None)
        return hashlib.sha256(np.ascontiguousarray(out).view(np.uint8).tobytes()).hexdigest()
    if kind == "container":
        from nncodecs import Reader

        with Reader(path) as r:
            return digest((n, r.read_tensor(n, check=True)) for n in r)
    if kind == "model":
        from nncodecs.formats import iter_source

        return digest(iter_source(path))
    raise ValueError(f"unknown kind {kind!r}")


# -- must-accept inputs --------------------------------------------------------------


def _weights(dtype: Any, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * 0.05).astype(np.float32).astype(dtype)


def accept_frames() -> Iterator[tuple[str, str, bytes]]:
    """(name, kind, bytes): frames of every version, coder, chunk mode and layout."""
    import ml_dtypes
    from harness import to_old_version

    from nncodecs.frame import encode_frame
    from nncodecs.frame.params import frame_settings
    from nncodecs.frame.weights import encode_weights

    bf16 = _weights(ml_dtypes.bfloat16, 6000, 1).view(np.uint8)
    f32 = _weights(np.float32, 3000, 2).view(np.uint8)
    rand = np.random.default_rng(3).integers(0, 256, 5000, dtype=np.uint8)
    const = np.full(4096, 7, np.uint8)
    for coder in ("rans", "huffman", "auto"):
        yield f"frame-{coder}-bf16", "frame", encode_frame(bf16, planes=2, coder=coder)
        yield f"frame-{coder}-f32", "frame", encode_frame(f32, planes=4, coder=coder)
        yield (
            f"frame-{coder}-subblocks",
            "frame",
            encode_frame(bf16, planes=2, coder=coder, subblock_log2=12),
        )
    yield "frame-raw-chunks", "frame", encode_frame(rand, planes=1, coder="rans")
    yield "frame-constant-chunks", "frame", encode_frame(const, planes=1, coder="rans")
    yield "frame-empty", "frame", encode_frame(np.empty(0, np.uint8), planes=1, coder="rans")
    yield "frame-no-checksum", "frame", encode_frame(bf16, planes=2, coder="rans", checksum=False)
    for p in (10, 11):
        yield (
            f"frame-precision-{p}",
            "frame",
            encode_frame(bf16, planes=2, coder="rans", precision=p),
        )
    yield "frame-zstd-whole", "frame", encode_frame(rand[:300], planes=1, coder="auto")
    v3 = encode_frame(bf16, planes=2, coder="rans", dtype="bfloat16")
    yield "frame-version-1", "frame", to_old_version(v3)
    yield "frame-version-3", "frame", v3
    for name, dtype in (
        ("float32", np.float32),
        ("bfloat16", ml_dtypes.bfloat16),
        ("float16", np.float16),
        ("float8_e4m3fn", ml_dtypes.float8_e4m3fn),
        ("float8_e5m2", ml_dtypes.float8_e5m2),
        ("float64", np.float64),
    ):
        arr = _weights(dtype, 4000, 4)
        settings = {
            "coder": "auto",
            "precision": 12,
            "subblock_log2": 16,
            "checksum": True,
            "zstd_level": 3,
            "min_gain": 0.05,
        }
        yield f"weights-{name}", "weights", encode_weights(arr, settings)
    rows = (
        np.random.default_rng(5).standard_normal((64, 256))
        * np.exp(np.random.default_rng(6).normal(0, 2, (64, 1)))
    ).astype(ml_dtypes.bfloat16)
    fs = frame_settings(
        {
            "coder": "rans",
            "precision": 12,
            "subblock_log2": 16,
            "checksum": True,
            "zstd_level": 3,
            "min_gain": 0.05,
        },
        rows.dtype,
    )
    rowed = encode_frame(rows.view(np.uint8).reshape(-1), row_length=256, **fs)
    yield "weights-rows-version-3", "weights", rowed
    yield "frame-rows-version-2", "frame", to_old_version(rowed)
    # Version 4 (issue 36): big-endian elements, their order recorded (and the
    # whole-input kind's element byte with it)
    coded = {**settings, "coder": "rans"}
    yield (
        "weights-big-endian-version-4",
        "weights",
        encode_weights(_weights(">f4", 70_000, 7), coded),
    )
    small = _weights(">f8", 40, 8)
    yield "weights-big-endian-whole-zstd", "weights", encode_weights(small, settings)


def accept_containers(work: Path) -> Iterator[tuple[str, str, bytes]]:
    """(name, kind, bytes): containers of every layout, as .zarr.zip files."""
    import ml_dtypes

    from nncodecs import Writer

    rng = np.random.default_rng(7)
    w = _weights(ml_dtypes.bfloat16, 64 * 48, 8).reshape(64, 48)

    def make(name: str, fill: Callable[[Any], None], **kw: Any) -> tuple[str, str, bytes]:
        path = work / f"{name}.zarr.zip"
        with Writer(path, **kw) as wr:
            fill(wr)
        return name, "container", path.read_bytes()

    yield make(
        "container-dense",
        lambda wr: [wr.add_tensor("w", w), wr.add_tensor("b", _weights(np.float32, 48, 9))],
    )
    yield make(
        "container-codecs",
        lambda wr: [
            wr.add_tensor("rans", w, codec="rans"),
            wr.add_tensor("huffman", w, codec="huffman"),
            wr.add_tensor("raw", np.arange(100, dtype=np.int64), codec="raw"),
            wr.add_tensor("zstd", np.arange(100, dtype=np.int32), codec="zstd"),
        ],
    )
    yield make("container-sharded", lambda wr: wr.add_tensor("w", w), chunk_bytes=512)
    yield make(
        "container-scalars-and-empty",
        lambda wr: [
            wr.add_tensor("scalar", np.array(1.5, np.float32)),
            wr.add_tensor("empty", np.empty((0, 4), np.float16)),
            wr.add_tensor("flags", np.array([True, False, True])),
        ],
    )
    dense = np.where(rng.random((30, 20)) < 0.1, rng.standard_normal((30, 20)), 0).astype(
        np.float32
    )
    nz = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int64)
    yield make(
        "container-sparse",
        lambda wr: [
            wr.add_sparse_csr("csr", dense[nz], nz[1].astype(np.int64), indptr, dense.shape),
            wr.add_sparse_coo("coo", np.stack(nz).astype(np.int64), dense[nz], dense.shape),
        ],
    )
    blocks = rng.integers(0, 256, (8, 16), dtype=np.uint8)
    yield make(
        "container-mxfp4",
        lambda wr: wr.add_quantized(
            "q", blocks, rng.integers(100, 140, (8, 1), dtype=np.uint8), "mxfp4"
        ),
    )
    yield make(
        "container-kept-file",
        lambda wr: [wr.add_tensor("w", w), wr.add_file("config.json", b'{"a": 1}')],
    )


def model_tensors() -> dict[str, np.ndarray]:
    """The tensors of the model files."""
    import ml_dtypes

    return {
        "a.weight": _weights(ml_dtypes.bfloat16, 32 * 16, 10).reshape(32, 16),
        "a.bias": _weights(np.float32, 16, 11),
        "steps": np.arange(5, dtype=np.int64),
    }


def accept_models(work: Path) -> Iterator[tuple[str, str, bytes]]:
    """(name, kind, bytes): small model files of every format nncodecs reads."""
    import ml_dtypes

    from nncodecs.formats.npz import write_npz
    from nncodecs.formats.safetensors import write_safetensors

    tensors = model_tensors()
    path = work / "m.safetensors"
    write_safetensors(path, tensors.items())
    yield "model-safetensors", "model", path.read_bytes()
    path = work / "m.npz"
    write_npz(path, [(k, v) for k, v in tensors.items() if v.dtype != ml_dtypes.bfloat16])
    yield "model-npz", "model", path.read_bytes()
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        onnx = None
    if onnx is not None:
        inits = [
            numpy_helper.from_array(np.asarray(v), k)
            for k, v in tensors.items()
            if v.dtype != ml_dtypes.bfloat16
        ]
        graph = helper.make_graph([], "g", [], [], initializer=inits)
        path = work / "m.onnx"
        onnx.save(helper.make_model(graph), str(path))
        yield "model-onnx", "model", path.read_bytes()
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        path = work / "m.pt"
        torch.save(
            {
                k: torch.from_numpy(np.asarray(v, np.float32))
                for k, v in tensors.items()
                if v.dtype != np.int64
            },
            path,
        )
        yield "model-torch", "model", path.read_bytes()
    try:
        import gguf
    except ImportError:
        return
    path = work / "m.gguf"
    g = gguf.GGUFWriter(str(path), "llama")
    g.add_tensor("t.f32", _weights(np.float32, 64, 12))
    g.add_tensor("t.f16", _weights(np.float16, 64, 13))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
    yield "model-gguf", "model", path.read_bytes()


def ztensor_model(work: Path) -> Iterator[tuple[str, str, bytes]]:
    """A ztensor file (where the ztensor package is): a float32, a bfloat16 and an int64
    tensor, and a CSR matrix. Not in the corpus (ztensor aligns each part to 64 KiB: 460
    KB); the seed of the fuzz target ``ztensor`` (fuzz/targets.py)."""
    try:
        import ztensor
    except ImportError:
        return

    def part(arr: np.ndarray, kind: str) -> dict:
        return {"dtype": kind, "data": np.ascontiguousarray(arr).view(np.uint8)}

    csr = {"values": part(_weights(np.float32, 3, 14), "f32"),
           "indices": part(np.array([0, 3, 1], np.uint64), "u64"),
           "indptr": part(np.array([0, 2, 2, 3, 3], np.uint64), "u64")}  # fmt: skip
    tensors = model_tensors()
    path = work / "m.zt"
    writer = ztensor.Writer(str(path))
    for name in sorted([*tensors, "b.sparse"]):  # (ztensor wants its names in order)
        if name == "b.sparse":
            writer.add_object(name, [4, 4], csr, layout="zt.sparse_csr/1")
            continue
        arr = tensors[name]
        kind = {"bfloat16": "bf16", "float32": "f32", "int64": "i64"}[arr.dtype.name]
        writer.add(
            name, np.ascontiguousarray(arr).view(np.uint8).reshape(-1), list(arr.shape), kind
        )
    writer.finish()
    yield "model-ztensor", "model", path.read_bytes()


# -- must-reject inputs --------------------------------------------------------------


def mutations(data: bytes, seed: int, flips: int, cuts: int) -> Iterator[tuple[str, bytes]]:
    """Truncations and flipped bytes of ``data`` (a frame, file or zip entry)."""
    rng = np.random.default_rng(seed)
    n = len(data)
    for at in sorted({int(x) for x in rng.integers(1, n, cuts)} | {4, n // 2, n - 1}):
        if 0 < at < n:
            yield f"cut-{at}", data[:at]
    for at in sorted({int(x) for x in rng.integers(0, n, flips)}):
        yield f"flip-{at}", data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :]


def _zip_edit(data: bytes, member: str, change: Callable[[bytes], bytes]) -> bytes:
    """A zip's bytes with one member's content changed (the others copied as stored)."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            body = src.read(info)
            dst.writestr(info, change(body) if info.filename == member else body)
    return out.getvalue()


def reject_inputs(accepted: dict[str, tuple[str, bytes]]) -> Iterator[tuple[str, str, bytes]]:
    """(name, kind, bytes) of hostile inputs: each must raise a clear error."""
    for base in (
        "frame-rans-bf16",
        "frame-huffman-f32",
        "frame-auto-subblocks",
        "frame-version-1",
        "frame-rows-version-2",
        "weights-float32",
        "weights-rows-version-3",
        "frame-zstd-whole",
    ):
        kind, data = accepted[base]
        for label, bad in mutations(data, len(base), flips=5, cuts=4):
            yield f"{base}-{label}", kind, bad
    kind, frame = accepted["frame-rans-bf16"]
    yield "frame-bad-magic", "frame", b"XXXX" + frame[4:]
    yield "frame-version-9", "frame", frame[:4] + b"\x09" + frame[5:]
    yield "frame-huge-length", "frame", frame[:8] + b"\xff" * 10 + frame[8:]
    yield "frame-trailing-bytes", "frame", frame + b"\0" * 7
    yield "frame-nothing", "frame", b""
    yield "weights-no-element-type", "weights", accepted["frame-rans-bf16"][1]
    # Containers: the zip, its metadata, a chunk.
    _, cont = accepted["container-dense"]
    for label, bad in mutations(cont, 99, flips=0, cuts=6):
        yield f"container-dense-{label}", "container", bad
    names = zipfile.ZipFile(io.BytesIO(cont)).namelist()
    chunk = next(n for n in names if "/c/" in n or n.startswith("w/c"))
    yield (
        "container-chunk-flipped",
        "container",
        _zip_edit(cont, chunk, lambda b: b[:-3] + bytes([b[-3] ^ 1]) + b[-2:]),
    )
    yield "container-chunk-emptied", "container", _zip_edit(cont, chunk, lambda b: b"")
    yield (
        "container-root-not-json",
        "container",
        _zip_edit(cont, "zarr.json", lambda b: b[: len(b) // 2]),
    )

    def forged(change: Callable[[dict], None]) -> Callable[[bytes], bytes]:
        def edit(body: bytes) -> bytes:
            doc = json.loads(body)
            change(doc)
            return json.dumps(doc).encode()

        return edit

    def node(doc: dict, name: str = "w") -> dict:
        return doc["consolidated_metadata"]["metadata"][name]

    for label, change in (
        ("shape-larger", lambda d: node(d)["shape"].__setitem__(0, 1 << 40)),
        ("shape-negative", lambda d: node(d)["shape"].__setitem__(0, -3)),
        ("dtype-other", lambda d: node(d).__setitem__("data_type", "float32")),
        (
            "chunk-shape-tiny",
            lambda d: node(d)["chunk_grid"]["configuration"].__setitem__("chunk_shape", [1, 1]),
        ),
        ("codec-unknown", lambda d: node(d)["codecs"][0].__setitem__("name", "nope")),
        ("node-type-other", lambda d: node(d).__setitem__("node_type", "group")),
        ("attributes-damaged", lambda d: node(d).__setitem__("attributes", {"nncodecs": 5})),
    ):
        yield f"container-forged-{label}", "container", _zip_edit(cont, "zarr.json", forged(change))
    _, sharded = accepted["container-sharded"]
    shard = next(n for n in zipfile.ZipFile(io.BytesIO(sharded)).namelist() if "/c" in n)
    yield (
        "container-shard-index-damaged",
        "container",
        _zip_edit(sharded, shard, lambda b: b[:-20] + b"\xff" * 16 + b[-4:]),
    )
    yield "container-not-a-zip", "container", b"PK\x03\x04" + b"\0" * 60
    # Model files.
    _, st = accepted["model-safetensors"]
    head = struct.unpack("<Q", st[:8])[0]
    yield "model-safetensors-header-huge", "model", struct.pack("<Q", 1 << 60) + st[8:]
    yield "model-safetensors-header-past-end", "model", struct.pack("<Q", len(st)) + st[8:]
    yield "model-safetensors-truncated", "model", st[: len(st) - 10]
    meta = json.loads(st[8 : 8 + head])
    for label, change in (
        ("offsets-past-end", lambda m: m["a.bias"].__setitem__("data_offsets", [0, 1 << 40])),
        ("offsets-reversed", lambda m: m["a.bias"].__setitem__("data_offsets", [64, 0])),
        ("dtype-unknown", lambda m: m["a.bias"].__setitem__("dtype", "F7")),
        ("shape-mismatch", lambda m: m["a.bias"].__setitem__("shape", [17])),
        ("shape-negative", lambda m: m["a.bias"].__setitem__("shape", [-16])),
    ):
        doc = json.loads(json.dumps(meta))
        change(doc)
        body = json.dumps(doc).encode()
        body += b" " * (-len(body) % 8)
        yield (
            f"model-safetensors-{label}",
            "model",
            struct.pack("<Q", len(body)) + body + st[8 + head :],
        )
    yield ("model-safetensors-header-not-json", "model", st[:8] + b"{" * head + st[8 + head :])
    if "model-gguf" in accepted:
        _, gg = accepted["model-gguf"]
        yield "model-gguf-bad-version", "model", gg[:4] + struct.pack("<I", 99) + gg[8:]
        yield "model-gguf-tensor-count-huge", "model", gg[:8] + struct.pack("<Q", 1 << 50) + gg[16:]
        yield "model-gguf-kv-count-huge", "model", gg[:16] + struct.pack("<Q", 1 << 50) + gg[24:]
        yield "model-gguf-truncated", "model", gg[: len(gg) // 3]
    _, npz = accepted["model-npz"]
    yield "model-npz-truncated", "model", npz[: len(npz) // 2]
    if "model-onnx" in accepted:
        _, ox = accepted["model-onnx"]
        for label, bad in mutations(ox, 5, flips=0, cuts=3):
            yield f"model-onnx-{label}", "model", bad
    if "model-torch" in accepted:
        _, pt = accepted["model-torch"]
        for label, bad in mutations(pt, 6, flips=0, cuts=3):
            yield f"model-torch-{label}", "model", bad


def reject_findings(accepted: dict[str, tuple[str, bytes]]) -> Iterator[tuple[str, str, bytes]]:
    """(name, kind, bytes) of the hostile inputs fuzzing and review found (docs/development.md,
    "Fuzzing"), remade here from the accepted inputs: each once crashed, hung, allocated
    without bound or decoded wrong."""
    _, cont = accepted["container-dense"]
    yield "container-root-null", "container", _zip_edit(cont, "zarr.json", lambda b: b"null")
    deep = b'{"a":' * 50000 + b"1" + b"}" * 50000  # (beyond Python's recursion limit)
    yield "container-root-nested-deep", "container", _zip_edit(cont, "zarr.json", lambda b: deep)
    _, mx = accepted["container-mxfp4"]
    for member in zipfile.ZipFile(io.BytesIO(mx)).namelist():
        if member.count("/") == 1 and member.endswith("/zarr.json"):  # (the pair's node)
            yield (
                "container-mxfp4-node-zarr-v2",
                "container",
                _zip_edit(mx, member, lambda b: b.replace(b'"zarr_format":3', b'"zarr_format":2')),
            )
    yield "model-safetensors-header-nested-deep", "model", struct.pack("<Q", len(deep)) + deep
    # (issue 36) the byte-order bit where it cannot be: in version 3, on one-byte
    # elements, or flipped under the checksum that covers it
    _, v4 = accepted["weights-big-endian-version-4"]
    yield "weights-big-endian-version-4-as-version-3", "weights", v4[:4] + b"\x03" + v4[5:]
    yield (
        "weights-big-endian-version-4-order-flipped",
        "weights",
        v4[:7] + bytes([v4[7] ^ 0x40]) + v4[8:],
    )
    _, one = accepted["frame-constant-chunks"]
    yield (
        "frame-version-4-big-endian-bytes",
        "frame",
        one[:4] + b"\x04" + one[5:7] + bytes([one[7] | 0x40]) + one[8:],
    )
    _, whole = accepted["weights-big-endian-whole-zstd"]
    yield (
        "weights-big-endian-whole-zstd-code-past-table",
        "weights",
        whole[:4] + bytes([whole[4] | 0x3F]) + whole[5:],
    )
    yield from _npz_findings()
    if "model-gguf" in accepted:
        _, gg = accepted["model-gguf"]
        yield "model-gguf-big-endian", "model", gg[:4] + struct.pack(">I", 3) + gg[8:]
        name = b"t.f32"
        at = gg.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
        offset_at = at + 4 + 8 * struct.unpack_from("<I", gg, at)[0] + 4
        wrapped = gg[:offset_at] + struct.pack("<Q", (1 << 64) - 32) + gg[offset_at + 8 :]
        yield "model-gguf-tensor-offset-wraps", "model", wrapped
    if "model-torch" in accepted:
        import torch

        _, pt = accepted["model-torch"]
        data = next(n for n in zipfile.ZipFile(io.BytesIO(pt)).namelist() if n.endswith("/data/0"))
        yield "model-torch-storage-short", "model", _zip_edit(pt, data, lambda b: b[: len(b) // 2])
        sparse = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.ones(2), (2, 2))
        buf = io.BytesIO()
        torch.save({"s": sparse, "d": torch.ones(3)}, buf)
        yield "model-torch-sparse", "model", buf.getvalue()


def _npz_findings() -> Iterator[tuple[str, str, bytes]]:
    """npz files of a damaged bzip2 / LZMA entry, one whose entry size and array header
    are forged alike to about 4 GiB (read in steps, it ends short: nothing that large is
    allocated), and one whose array header is an unbalanced literal."""
    rng = np.random.default_rng(20)
    npy = io.BytesIO()
    np.save(npy, rng.random(1000).astype(np.float32))
    for label, method in (("bzip2", zipfile.ZIP_BZIP2), ("lzma", zipfile.ZIP_LZMA)):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", method) as z:
            z.writestr("x.npy", npy.getvalue())
        data = bytearray(out.getvalue())
        start = 30 + len("x.npy")
        for k in range(start + 4, start + 200):  # (inside the compressed stream)
            data[k] ^= 0x5A
        yield f"model-npz-{label}-damaged", "model", bytes(data)
    small = io.BytesIO()
    np.save(small, np.zeros(16, np.uint8))
    body = bytearray(small.getvalue())
    end = body.index(b"\n") + 1
    fake = 0xFFFFFF00
    header = f"{{'descr': '|u1', 'fortran_order': False, 'shape': ({fake - end},), }}"
    body[10:end] = (header + " " * (end - 11 - len(header)) + "\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("x.npy", bytes(body))
    data = bytearray(out.getvalue())
    struct.pack_into("<I", data, 22, fake)  # (the local header's size)
    struct.pack_into("<I", data, data.index(b"PK\x01\x02") + 24, fake)  # (the directory's)
    yield "model-npz-entry-size-forged", "model", bytes(data)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,"  # (unbalanced: NumPy's
    body = small.getvalue()  # tokenizer's TokenError, a fuzz finding)
    end = body.index(b"\n") + 1
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(
            "x.npy",
            body[:10] + (header + " " * (end - 11 - len(header)) + "\n").encode() + body[end:],
        )
    yield "model-npz-header-unbalanced", "model", out.getvalue()


#: The error classes a rejected input may raise: nncodecs' own (CorruptDataError for
#: damaged or forged bytes, NotAContainerError), ValueError for a caller's mistake (a
#: dtype a frame does not state), TypeError for a dtype nncodecs does not read.
ERRORS = (
    "CorruptDataError",
    "NotAContainerError",
    "ReferenceProblemError",
    "ValueError",
    "TypeError",
)

SUFFIX = {"frame": ".bin", "weights": ".bin", "container": ".zarr.zip"}
MODEL_SUFFIX = {
    "safetensors": ".safetensors",
    "gguf": ".gguf",
    "npz": ".npz",
    "onnx": ".onnx",
    "torch": ".pt",
    "ztensor": ".zt",
}


def suffix(name: str, kind: str) -> str:
    if kind == "model":
        return next(s for k, s in MODEL_SUFFIX.items() if f"model-{k}" in name)
    return SUFFIX[kind]


def main() -> None:
    from nncodecs import NNCodecsError

    for old in ("accept", "reject", "_work"):  # (its README stays)
        shutil.rmtree(CORPUS / old, ignore_errors=True)
    (CORPUS / "accept").mkdir(parents=True)
    (CORPUS / "reject").mkdir()
    work = CORPUS / "_work"
    work.mkdir()
    manifest: dict[str, Any] = {"accept": {}, "reject": {}}
    accepted: dict[str, tuple[str, bytes]] = {}
    for name, kind, data in [*accept_frames(), *accept_containers(work), *accept_models(work)]:
        path = CORPUS / "accept" / (name + suffix(name, kind))
        path.write_bytes(data)
        manifest["accept"][path.name] = {"decode": kind, "sha256": decode(kind, path)}
        if name.startswith("model-torch"):
            manifest["accept"][path.name]["needs"] = "torch"
        accepted[name] = (kind, data)
    shutil.rmtree(work)
    skipped, findings = [], 0
    for name, kind, data in [*reject_inputs(accepted), *reject_findings(accepted)]:
        path = CORPUS / "reject" / (name + suffix(name, kind))
        path.write_bytes(data)
        try:
            decode(kind, path)
        except (NNCodecsError, ValueError, TypeError) as exc:  # (clear errors: ERRORS)
            manifest["reject"][path.name] = {"decode": kind, "error": type(exc).__name__}
            if name.startswith("model-torch"):
                manifest["reject"][path.name]["needs"] = "torch"
            if type(exc).__name__ not in ERRORS:
                print(f"FINDING {path.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                findings += 1
            continue
        except Exception as exc:  # (a finding: a crash of some other kind)
            print(f"FINDING {path.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            findings += 1
            continue
        base = max((a for a in accepted if name.startswith(a + "-")), key=len, default=None)
        got = decode(kind, path)
        if base is None or got != manifest["accept"][base + suffix(base, kind)]["sha256"]:
            print(
                f"FINDING {path.name}: decoded to something else, without an error", file=sys.stderr
            )
            findings += 1
        skipped.append(path.name)  # (the same result: a byte nothing reads, or padding)
        path.unlink()
    (CORPUS / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(
        f"{len(manifest['accept'])} accept, {len(manifest['reject'])} reject; "
        f"{len(skipped)} mutations decoded anyway, left out: {', '.join(skipped) or '-'}"
    )
    if findings:
        sys.exit(f"{findings} findings: each must become a clear error (and a regression case)")


if __name__ == "__main__":
    main()
