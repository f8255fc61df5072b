"""Model files in and out: safetensors byte for byte, shards, npz, torch, hostile pickles."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import same_bits

from nncodecs import CorruptDataError, Reader, _core, as_numpy
from nncodecs.datasets import minilm_path
from nncodecs.dtypes import normalize_dtype
from nncodecs.formats import (
    SafetensorsFile,
    compress,
    decompress,
    detect_format,
    read_safetensors,
    write_safetensors,
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def minilm(real_weights: dict) -> Path:
    return minilm_path()


def test_safetensors_round_trip_is_byte_identical(minilm: Path, tmp_path: Path) -> None:
    assert detect_format(minilm) == "safetensors"
    compress(minilm, tmp_path / "m.zarr.zip")
    assert detect_format(tmp_path / "m.zarr.zip") == "container"
    decompress(tmp_path / "m.zarr.zip", tmp_path / "back.safetensors")
    assert sha256(tmp_path / "back.safetensors") == sha256(minilm)
    with Reader(tmp_path / "m.zarr.zip") as r:
        assert r.metadata["source.format"] == "safetensors"
        assert len(r) == 104


def test_sharded_snapshot_directory_round_trips(minilm: Path, tmp_path: Path) -> None:
    tensors = read_safetensors(minilm)
    names = list(tensors)
    shards = tmp_path / "snapshot"
    shards.mkdir()
    weight_map = {}
    for i, part in enumerate((names[:50], names[50:])):
        file = f"model-0000{i + 1}-of-00002.safetensors"
        write_safetensors(shards / file, ((n, tensors[n]) for n in part), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
    index = json.dumps({"metadata": {"total_size": 1}, "weight_map": weight_map}, indent=2)
    (shards / "model.safetensors.index.json").write_text(index)
    assert detect_format(shards) == "safetensors-dir"
    compress(shards, tmp_path / "s.zarr")
    decompress(tmp_path / "s.zarr", tmp_path / "restored")
    for file in shards.iterdir():
        assert sha256(tmp_path / "restored" / file.name) == sha256(file), file.name
    st = SafetensorsFile(tmp_path / "restored" / "model-00001-of-00002.safetensors")
    assert st.metadata == {"format": "pt"}


def test_npz_in_and_out(tmp_path: Path) -> None:
    arrays = {"a": np.arange(10, dtype=np.float32), "b": np.ones((3, 4), np.int64)}
    np.savez(tmp_path / "m.npz", **arrays)
    assert detect_format(tmp_path / "m.npz") == "npz"
    compress(tmp_path / "m.npz", tmp_path / "m.zarr.zip")
    assert decompress(tmp_path / "m.zarr.zip", tmp_path / "back.npz") == "npz"
    with np.load(tmp_path / "back.npz") as back:
        assert set(back.files) == set(arrays)
        for name, arr in arrays.items():
            assert same_bits(back[name], arr)
    decompress(tmp_path / "m.zarr.zip", tmp_path / "as.safetensors", fmt="safetensors")
    assert same_bits(read_safetensors(tmp_path / "as.safetensors")["b"], arrays["b"])


def test_torch_checkpoint_round_trips(torch: Any, tmp_path: Path) -> None:
    import torch as th

    state = {"w": th.randn(16, 8).to(th.bfloat16), "b": th.zeros(8), "step": th.tensor(3)}
    th.save(state, tmp_path / "model.bin")
    assert detect_format(tmp_path / "model.bin") == "torch"
    compress(tmp_path / "model.bin", tmp_path / "m.zarr")
    decompress(tmp_path / "m.zarr", tmp_path / "m.safetensors")
    back = read_safetensors(tmp_path / "m.safetensors")
    assert back["w"].tobytes() == state["w"].view(th.int16).numpy().tobytes()
    assert back["step"].tolist() == 3


class Evil:
    def __reduce__(self) -> Any:
        import os

        return (os.system, (f"touch {MARKER}",))


MARKER = "/tmp/nncodecs-evil-pickle-ran"


def test_a_malicious_pickle_is_refused_and_runs_nothing(torch: Any, tmp_path: Path) -> None:
    marker = Path(MARKER)
    marker.unlink(missing_ok=True)
    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"w": Evil()}))
    with pytest.raises(ValueError, match="refused"):
        compress(tmp_path / "evil.pt", tmp_path / "e.zarr")
    assert not marker.exists()
    # The same payload inside a torch zip file.
    import torch as th

    # The payload inside a torch zip file (torch.save pickles the object as it is).
    th.save({"w": Evil()}, tmp_path / "evil2.pt")
    with pytest.raises(ValueError, match="refused"):
        compress(tmp_path / "evil2.pt", tmp_path / "e2.zarr")
    assert not marker.exists()


def test_unreadable_inputs_are_clear_errors(tmp_path: Path, minilm: Path) -> None:
    with pytest.raises(FileNotFoundError):
        detect_format(tmp_path / "missing.safetensors")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(ValueError, match="not a format nncodecs reads"):
        detect_format(tmp_path / "x.txt")
    (tmp_path / "t.safetensors").write_bytes(minilm.read_bytes()[:5000])
    with pytest.raises(CorruptDataError, match="does not fit"):
        compress(tmp_path / "t.safetensors", tmp_path / "t.zarr")


def test_gguf_round_trips_byte_identically(real_weights: dict, tmp_path: Path) -> None:
    import gguf
    from gguf import GGMLQuantizationType as Q

    path = tmp_path / "minilm.gguf"
    writer = gguf.GGUFWriter(path, "bert")
    writer.add_string("general.name", "all-MiniLM-L6-v2")
    writer.add_uint32("bert.block_count", 6)
    kinds = []
    for i, (name, arr) in enumerate(real_weights.items()):
        if arr.dtype != np.float32:
            continue
        if i % 5 == 4:
            writer.add_tensor(name, gguf.quants.quantize(arr, Q.BF16), raw_dtype=Q.BF16)
            kinds.append("BF16")
        elif i % 3 == 1:
            writer.add_tensor(name, arr.astype(np.float16))
            kinds.append("F16")
        elif i % 3 == 2 and arr.shape[-1] % 32 == 0:
            writer.add_tensor(name, gguf.quants.quantize(arr, Q.Q8_0), raw_dtype=Q.Q8_0)
            kinds.append("Q8_0")
        else:
            writer.add_tensor(name, arr)
            kinds.append("F32")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert {"F32", "F16", "Q8_0", "BF16"} <= set(kinds)
    assert detect_format(path) == "gguf"
    compress(path, tmp_path / "g.zarr.zip")
    assert decompress(tmp_path / "g.zarr.zip", tmp_path / "back.gguf") == "gguf"
    assert sha256(tmp_path / "back.gguf") == sha256(path)
    with Reader(tmp_path / "g.zarr.zip") as r:
        ranges = json.loads(r.metadata["source.gguf.ranges"])
        types = {name: kind for name, _, _, kind in ranges}
        assert set(types.values()) == {"F32", "F16", "Q8_0", "BF16"}
        quantized = next(n for n, k in types.items() if k == "Q8_0")
        assert r.read_tensor(quantized).dtype == np.uint8  # its blocks, bit-exact
        bf16 = next(n for n, k in types.items() if k == "BF16")  # typed, in its shape
        got = r.read_tensor(bf16)
        assert got.dtype == normalize_dtype("bfloat16") and got.shape == real_weights[bf16].shape
        assert same_bits(got, real_weights[bf16].astype(got.dtype))
        assert r.metadata["source.crc32c"] == f"{_core.crc32c(path.read_bytes()):08x}"
    # a restore that is not the source is refused (a forged record stands in for a bug)
    compress(path, tmp_path / "g.zarr")
    meta_path = tmp_path / "g.zarr" / "zarr.json"
    doc = json.loads(meta_path.read_text())
    doc["attributes"]["nncodecs"]["metadata"]["source.crc32c"] = "00000000"
    meta_path.chmod(0o644)
    meta_path.write_text(json.dumps(doc))
    with pytest.raises(CorruptDataError, match="crc32c differs"):
        decompress(tmp_path / "g.zarr", tmp_path / "forged.gguf")
    assert not (tmp_path / "forged.gguf").exists()
    (tmp_path / "bad.gguf").write_bytes(path.read_bytes()[:2000])
    with pytest.raises((CorruptDataError, ValueError)):
        compress(tmp_path / "bad.gguf", tmp_path / "bad.zarr")


def test_onnx_initializers(tmp_path: Path) -> None:
    from conftest import optional_import

    onnx = optional_import("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    b = np.arange(4, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    onnx.save(helper.make_model(graph), tmp_path / "tiny.onnx")
    assert detect_format(tmp_path / "tiny.onnx") == "onnx"
    compress(tmp_path / "tiny.onnx", tmp_path / "t.zarr")
    with Reader(tmp_path / "t.zarr") as r:
        assert r.keys() == ["w", "b"]
        assert same_bits(r.read_tensor("w"), w) and same_bits(r.read_tensor("b"), b)
    decompress(tmp_path / "t.zarr", tmp_path / "t.npz")  # to another format
    with np.load(tmp_path / "t.npz") as back:
        assert same_bits(back["w"], w)
    (tmp_path / "bad.onnx").write_bytes(b"\xff" * 100)
    with pytest.raises((CorruptDataError, ValueError)):
        compress(tmp_path / "bad.onnx", tmp_path / "bad.zarr")


def test_ztensor_files(tmp_path: Path) -> None:
    from conftest import optional_import

    ztensor = optional_import("ztensor")
    a = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    b = np.arange(9, dtype=np.int16)
    writer = ztensor.Writer(str(tmp_path / "m.zt"))
    writer.add("a", a.view(np.uint8).reshape(-1), list(a.shape), "f32")
    writer.add("b", b.view(np.uint8), list(b.shape), "i16")
    writer.finish()
    assert detect_format(tmp_path / "m.zt") == "ztensor"
    compress(tmp_path / "m.zt", tmp_path / "m.zarr.zip")
    with Reader(tmp_path / "m.zarr.zip") as r:
        assert sorted(r.keys()) == ["a", "b"]
        assert same_bits(r.read_tensor("a"), a) and same_bits(r.read_tensor("b"), b)


def tiny_gguf(path: Path) -> Path:
    import gguf
    from gguf import GGMLQuantizationType as Q

    rng = np.random.default_rng(2)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_string("general.name", "tiny")
    writer.add_tensor("f32", rng.standard_normal((4, 32)).astype(np.float32))
    writer.add_tensor("f16", rng.standard_normal((3, 5)).astype(np.float16))
    q = gguf.quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), Q.Q8_0)
    writer.add_tensor("q8", q, raw_dtype=Q.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_every_source_lists_its_tensors_as_they_read(tmp_path: Path) -> None:
    """What info shows (the header's dtype and shape) is what compress reads, per format."""
    from conftest import optional_import

    from nncodecs.formats import iter_source, open_source

    files = [tiny_gguf(tmp_path / "m.gguf")]
    np.savez(tmp_path / "m.npz", a=np.ones((3, 2), np.float16), s=np.int64(7))
    files.append(tmp_path / "m.npz")
    onnx = optional_import("onnx")
    from onnx import helper, numpy_helper

    node = helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0])
    graph = helper.make_graph(
        [node], "g", [], [], initializer=[numpy_helper.from_array(np.zeros((2, 3), "int8"), "i")]
    )
    onnx.save(helper.make_model(graph), tmp_path / "m.onnx")
    files.append(tmp_path / "m.onnx")
    try:
        import torch as th
    except ImportError:
        pass
    else:
        th.save({"w": th.ones(2, 3, dtype=th.bfloat16)[:, 1:]}, tmp_path / "m.pt")
        files.append(tmp_path / "m.pt")
    for path in files:
        with open_source(path) as source:
            listed = [(t.name, t.dtype, t.shape, t.nbytes) for t in source.tensors()]
        read = [
            (name, np.dtype(as_np.dtype), as_np.shape, as_np.nbytes)
            for name, arr in iter_source(path)
            for as_np in [np.asarray(as_numpy(arr))]
        ]
        assert listed == read, path


def test_an_archived_gguf_restores_byte_identically(tmp_path: Path) -> None:
    import nncodecs

    path = tiny_gguf(tmp_path / "m.gguf")
    nncodecs.archive(path, tmp_path / "m.zarr", scheduler="sync", progress=False)
    assert decompress(tmp_path / "m.zarr", tmp_path / "back.gguf") == "gguf"
    assert sha256(tmp_path / "back.gguf") == sha256(path)


def test_a_source_changed_while_it_compresses_is_refused(tmp_path: Path) -> None:
    """Its digest is computed ahead, while the tensors encode; a change in between (size
    or modification time) is an error, not a container whose records fit neither."""
    from nncodecs.formats.digests import file_digests, hash_ahead

    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 100_000)
    hash_ahead([path])
    path.write_bytes(b"y" * 100_001)
    with pytest.raises(RuntimeError, match="changed while"):
        file_digests(path)
    hash_ahead([path])  # unchanged: the result computed ahead
    assert file_digests(path) == {"crc32c": f"{_core.crc32c(b'y' * 100_001):08x}"}


def _safetensors_bytes(entries: list[Any], data: bytes, pad: bytes = b"") -> bytes:
    """A safetensors file made by hand: header entries (name, dtype, shape, begin, end)."""
    header = {n: {"dtype": d, "shape": s, "data_offsets": [b, e]} for n, d, s, b, e in entries}
    text = json.dumps(header).encode() + pad
    return len(text).to_bytes(8, "little") + text + data


@pytest.mark.parametrize(
    "layout", ["tiled", "padded-header", "gap-and-tail", "shared-bytes", "empty-tensor"]
)
def test_the_sources_crc32c_comes_from_its_tensors_reads(
    tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A safetensors source's CRC32C is combined from each tensor's as compression reads
    it, plus the bytes between tensors: it must equal the whole file's, whatever the
    layout (bytes outside every tensor; tensors sharing bytes: the file read whole)."""
    from nncodecs.formats import digests

    data = np.random.default_rng(3).integers(0, 256, 4096, np.uint8).tobytes()
    entries = {
        "tiled": [("a", "F32", [16, 16], 0, 1024), ("b", "BF16", [1536], 1024, 4096)],
        "padded-header": [("a", "F32", [1024], 0, 4096)],
        "gap-and-tail": [("a", "F32", [8], 0, 32), ("b", "F16", [100], 100, 300)],
        "shared-bytes": [("a", "F32", [64], 0, 256), ("b", "F32", [64], 0, 256)],
        "empty-tensor": [("e", "F32", [0], 0, 0), ("a", "F32", [1024], 0, 4096)],
    }[layout]
    pad = b" " * (7 if layout == "padded-header" else 0)
    path = tmp_path / "m.safetensors"
    path.write_bytes(_safetensors_bytes(entries, data, pad))
    whole: list[Path] = []
    real = digests._digests
    monkeypatch.setattr(digests, "_digests", lambda p, daemon=False: whole.append(p) or real(p))
    compress(path, tmp_path / "m.zarr.zip")
    with Reader(tmp_path / "m.zarr.zip") as r:
        (record,) = json.loads(r.metadata["source.files"])
    assert record["crc32c"] == f"{_core.crc32c(path.read_bytes()):08x}"
    assert whole == ([path] if layout == "shared-bytes" else [])  # (no second read)
    assert decompress(tmp_path / "m.zarr.zip", tmp_path / "back.safetensors") == "safetensors"
    assert sha256(tmp_path / "back.safetensors") == sha256(path)


def test_a_safetensors_source_holds_one_tensor_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each tensor is dropped before the next is read (peak memory: one tensor; found by
    the e2e run: holding the previous one raised compressing gen1g from 107 to 139 MiB)."""
    import weakref

    from nncodecs.formats import open_source
    from nncodecs.formats.safetensors import write_safetensors
    from nncodecs.formats.source import FileRows

    path = tmp_path / "m.safetensors"
    write_safetensors(path, ((f"t{i}", np.full(1000, i, np.float32)) for i in range(4)))
    alive: list[Any] = []
    held = []
    real = FileRows.__call__

    def reading(self: Any, start: int, stop: int) -> Any:
        held.append([r for r in alive if r() is not None])
        arr = real(self, start, stop)
        alive.append(weakref.ref(arr))
        return arr

    monkeypatch.setattr(FileRows, "__call__", reading)
    with open_source(path) as src:
        for _, arr in src.arrays():
            del arr  # (as compress does)
    assert held == [[], [], [], []]


def test_a_safetensors_file_changed_while_it_compresses_is_refused(tmp_path: Path) -> None:
    from nncodecs.formats import open_source
    from nncodecs.formats.safetensors import write_safetensors

    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"a": np.ones(1000, np.float32), "b": np.zeros(9, np.float32)}.items())
    with open_source(path) as src, pytest.raises(RuntimeError, match="changed while"):
        for name, _ in src.arrays():
            if name == "a":  # (read; the file then changes before its digest is taken)
                with path.open("ab") as f:
                    f.write(b"\0")
        src.metadata()
    # (found by review) a file replaced by another of the same size and time: a new inode
    write_safetensors(path, {"a": np.ones(1000, np.float32), "b": np.zeros(9, np.float32)}.items())
    other = tmp_path / "other.safetensors"
    write_safetensors(other, {"a": np.zeros(1000, np.float32), "b": np.ones(9, np.float32)}.items())
    with open_source(path) as src, pytest.raises(RuntimeError, match="changed while"):
        for name, _ in src.arrays():
            if name == "a":
                st = path.stat()
                os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
                os.replace(other, path)
        src.metadata()


def test_a_file_record_without_its_exact_header_still_restores(tmp_path: Path) -> None:
    """Found by review: a record without ``exact`` (a header built from the tensors)
    must take whole tensors, not the pieces a kept header streams."""
    from nncodecs.formats import compress, decompress, read_safetensors, write_safetensors

    src = tmp_path / "m.safetensors"
    tensors = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(5, np.int64)}
    write_safetensors(src, tensors.items())
    target = tmp_path / "m.zarr"
    compress(src, target)
    root = json.loads((target / "zarr.json").read_text())
    meta = root["attributes"]["nncodecs"]["metadata"]
    records = json.loads(meta["source.files"])
    for rec in records:
        rec.pop("exact", None)
    meta["source.files"] = json.dumps(records)
    (target / "zarr.json").write_text(json.dumps(root))
    out = tmp_path / "back.safetensors"
    decompress(target, out)
    back = read_safetensors(out)
    assert set(back) == set(tensors)
    for name, arr in tensors.items():
        assert back[name].tobytes() == arr.tobytes()


def test_ztensor_csr_tensors(tmp_path: Path) -> None:
    from conftest import optional_import

    ztensor = optional_import("ztensor")
    sparse = optional_import("scipy.sparse")
    rng = np.random.default_rng(4)
    dense = rng.standard_normal((40, 30)).astype(np.float32) * (rng.random((40, 30)) < 0.1)
    csr = sparse.csr_matrix(dense)
    a = np.arange(6, dtype=np.float32)
    writer = ztensor.Writer(str(tmp_path / "s.zt"))
    writer.add("a", a.view(np.uint8), [6], "f32")

    def part(arr: np.ndarray, kind: str) -> dict:
        return {"dtype": kind, "data": np.ascontiguousarray(arr).view(np.uint8)}

    writer.add_object("adj", [40, 30], {"values": part(csr.data, "f32"),
                      "indices": part(csr.indices.astype(np.uint64), "u64"),
                      "indptr": part(csr.indptr.astype(np.uint64), "u64")},
                      layout="zt.sparse_csr/1")  # fmt: skip
    writer.finish()
    compress(tmp_path / "s.zt", tmp_path / "s.zarr.zip")
    with Reader(tmp_path / "s.zarr.zip") as r:
        assert r.layout("adj") == "csr" and same_bits(r.read_tensor("a"), a)
        back = r.read_tensor("adj", to="scipy")
        assert (back != csr).nnz == 0 and back.shape == (40, 30)
    bad = ztensor.Writer(str(tmp_path / "bad.zt"))  # a column index out of range
    bad.add_object("m", [4, 4], {"values": part(np.ones(2, np.float32), "f32"),
                   "indices": part(np.array([0, 7], np.uint32), "u32"),
                   "indptr": part(np.array([0, 1, 2, 2, 2], np.uint32), "u32")},
                   layout="zt.sparse_csr/1")  # fmt: skip
    bad.finish()
    with pytest.raises(CorruptDataError, match="CSR tensor 'm'"):
        compress(tmp_path / "bad.zt", tmp_path / "bad.zarr")
    assert not (tmp_path / "bad.zarr").exists()


def test_npz_arrays_read_in_steps_as_numpy_reads_them(tmp_path: Path) -> None:
    """The npz reader reads each entry itself, in steps (its memory grows only as bytes
    arrive): Fortran order, big-endian, 0-d, empty and every compression zip offers come
    back as ``np.load`` gives them."""
    import zipfile

    from nncodecs.formats import iter_source

    rng = np.random.default_rng(3)
    arrays = {
        "fortran": np.asfortranarray(rng.standard_normal((5, 7)).astype(np.float32)),
        "big": rng.standard_normal(9).astype(">f8"),
        "scalar": np.array(3, np.int16),
        "empty": np.zeros((0, 4), np.float16),
    }
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        path = tmp_path / f"m{method}.npz"
        with zipfile.ZipFile(path, "w", method) as z:
            for name, arr in arrays.items():
                with z.open(name + ".npy", "w") as f:
                    np.lib.format.write_array(f, arr)
        got = dict(iter_source(path))
        for name, arr in arrays.items():
            assert got[name].dtype == arr.dtype and got[name].shape == arr.shape
            assert np.array_equal(got[name], arr), (method, name)
    for version in (b"\x02\x00", b"\x03\x00", b"\x09\x09"):  # (NumPy reads 1.0-3.0 alone)
        body = bytearray(_npy_bytes(np.arange(4, dtype=np.float32), version=(2, 0)))
        body[6:8] = version
        path = tmp_path / "v.npz"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("x.npy", bytes(body))
        if version == b"\x09\x09":
            with pytest.raises(CorruptDataError, match="format version"):
                dict(iter_source(path))
        else:
            assert np.array_equal(dict(iter_source(path))["x"], np.arange(4, dtype=np.float32))


def _npy_bytes(arr: np.ndarray, version: tuple[int, int]) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version)
    return buf.getvalue()


def test_only_other_packages_failures_are_called_damage(tmp_path: Path) -> None:
    """``damaged_file`` makes what another package's parser raises a CorruptDataError; a
    KeyError raised in nncodecs' own code is a gap of nncodecs and passes as it is (a
    valid file is never called damaged for it); an OSError of the system passes too."""
    import errno

    from nncodecs.formats.source import damaged_file

    ours: dict[str, Any] = {"__name__": "nncodecs.formats.example"}
    exec("def lookup():\n    return {}['field']\n", ours)
    with pytest.raises(KeyError), damaged_file(tmp_path / "m.npz", "npz"):
        ours["lookup"]()
    damaged = pytest.raises(CorruptDataError, match="a damaged npz file")
    with damaged, damaged_file(tmp_path / "m.npz", "npz"):
        {}["field"]  # (raised here: outside nncodecs, as zipfile's would be)
    for damage in (OSError("Invalid data stream"), OSError(errno.EINVAL, "Invalid argument")):
        with pytest.raises(CorruptDataError), damaged_file(tmp_path / "m.npz", "npz"):
            raise damage
    with pytest.raises(OSError, match="No space"), damaged_file(tmp_path / "m.npz", "npz"):
        raise OSError(errno.ENOSPC, "No space left on device")
