"""The model container: Writer / Reader over any Zarr store."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from harness import np_dtype, same_bits
from zarr.storage import LocalStore, MemoryStore, WrapperStore

import nncodecs
from nncodecs import CorruptDataError, NotAContainerError, Reader, Writer, merge
from nncodecs.container.names import escape, unescape

DTYPES = ["float32", "bfloat16", "float16", "float8_e4m3fn"]


def targets(tmp_path: Path) -> dict[str, Any]:
    return {
        "directory": tmp_path / "model.zarr",
        "zip": tmp_path / "model.zarr.zip",
        "memory": MemoryStore(),
        "fsspec-url": f"memory://nncodecs-{uuid.uuid4().hex}/model.zarr",
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["directory", "zip", "memory", "fsspec-url"])
def test_real_model_round_trips(real_weights: dict, dtype: str, kind: str, tmp_path: Path) -> None:
    target = targets(tmp_path)[kind]
    model = {
        k: (v.astype(np_dtype(dtype)) if v.dtype.kind == "f" else v)
        for k, v in real_weights.items()
    }
    with Writer(target) as w:
        for name, arr in model.items():
            w.add_tensor(name, arr)
        w.metadata["source"] = "all-MiniLM-L6-v2"
    with Reader(target) as r:
        assert r.keys() == list(model)
        assert len(r) == 104 and "pooler.dense.bias" in r
        assert r.metadata == {"source": "all-MiniLM-L6-v2"}
        for name, arr in model.items():
            got = r.read_tensor(name)
            assert got.dtype == arr.dtype and same_bits(got, arr), name
        big = "embeddings.word_embeddings.weight"
        assert same_bits(r[big][1000:1003], model[big][1000:1003])
        info = r.info(big)
        assert info.shape == (30522, 384) and info.dtype == dtype
        assert info.stored_bytes < info.nbytes
        r.verify()


class CountingStore(WrapperStore):
    """Counts the chunk reads a store serves."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.gets: list[str] = []

    async def get(self, key: str, *args: Any, **kwargs: Any) -> Any:
        self.gets.append(key)
        return await self._store.get(key, *args, **kwargs)

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> Any:
        self.gets.extend(k for k, _ in key_ranges)
        return await self._store.get_partial_values(prototype, key_ranges)


def test_a_slice_reads_only_the_chunks_it_needs(tmp_path: Path) -> None:
    arr = (np.random.default_rng(0).standard_normal((4096, 256)) * 0.02).astype(
        np_dtype("bfloat16")
    )
    path = tmp_path / "m.zarr"
    with Writer(path, chunk_bytes=64 << 10) as w:  # 128 rows a chunk, 32 chunks
        w.add_tensor("w", arr)
    store = CountingStore(LocalStore(path, read_only=True))
    r = Reader(store)
    store.gets.clear()
    assert same_bits(r["w"][1000:1010], arr[1000:1010])
    chunk_reads = [k for k in store.gets if not k.endswith("zarr.json")]
    assert 1 <= len(chunk_reads) <= 3  # one chunk (index + data of its shard)
    store.gets.clear()
    _ = r.read_tensor("w")
    assert len([k for k in store.gets if not k.endswith("zarr.json")]) >= 2


def test_append_after_close(tmp_path: Path) -> None:
    for target in (tmp_path / "a.zarr", tmp_path / "a.zarr.zip"):
        with Writer(target) as w:
            w.add_tensor("first", np.arange(10, dtype=np.float32))
            w.metadata["k"] = "v"
        with Writer(target, mode="a") as w:
            w.add_tensor("second", np.ones((3, 3), np.float16))
            with pytest.raises(ValueError, match="already in the container"):
                w.add_tensor("first", np.zeros(1, np.float32))
        with Reader(target) as r:
            assert r.keys() == ["first", "second"]
            assert r.metadata == {"k": "v"}
            assert same_bits(r.read_tensor("second"), np.ones((3, 3), np.float16))


def test_a_zip_writer_that_fails_leaves_the_old_zip(tmp_path: Path) -> None:
    target = tmp_path / "a.zarr.zip"
    with Writer(target) as w:
        w.add_tensor("kept", np.arange(5, dtype=np.int32))
    before = target.read_bytes()
    with pytest.raises(RuntimeError), Writer(target, mode="a") as w:
        w.add_tensor("lost", np.arange(5, dtype=np.int32))
        raise RuntimeError("killed")
    assert target.read_bytes() == before
    assert not list(tmp_path.glob(".a.zarr.zip.*"))
    with Reader(target) as r:
        assert r.keys() == ["kept"]


def test_an_unfinished_tensor_is_never_read(tmp_path: Path) -> None:
    path = tmp_path / "m.zarr"
    with Writer(path) as w:
        w.add_tensor("done", np.arange(4, dtype=np.float32))
    # A tensor whose writer died mid-way: its array exists, its commit flag does not.
    group = zarr.open_group(LocalStore(path), mode="a")
    group.create_array("half", shape=(4,), dtype="float32", attributes={"nncodecs": {
        "name": "half", "layout": "dense", "complete": False}})  # fmt: skip
    with Reader(path) as r:
        assert r.keys() == ["done"]
        with pytest.raises(KeyError, match="no tensor 'half'"):
            r.read_tensor("half")


def test_names_escape_reversibly(tmp_path: Path) -> None:
    names = ["model/layers/0/w", "__init__", "..", ".", "", "a%2Fb", "%5F", "blk.0.attn_q.weight"]
    for name in names:
        assert unescape(escape(name)) == name
        assert "/" not in escape(name) and not escape(name).startswith(("__", "."))
    assert len({escape(n) for n in names}) == len(names)
    with Writer(tmp_path / "n.zarr") as w:
        for i, name in enumerate(names):
            w.add_tensor(name, np.full(2, i, np.int16))
    with Reader(tmp_path / "n.zarr") as r:
        assert r.keys() == names
        for i, name in enumerate(names):
            assert r.read_tensor(name).tolist() == [i, i]


def test_codecs_and_layout_per_tensor(tmp_path: Path) -> None:
    arr = (np.random.default_rng(1).standard_normal((3000, 700)) * 0.02).astype(np.float32)
    with Writer(tmp_path / "m.zarr", codec="rans", chunk_bytes=256 << 10) as w:
        w.add_tensor("a", arr)
        w.add_tensor("raw", arr[:10], codec="raw")
        w.add_tensor("z", arr[:10], codec="zstd")
        w.add_tensor("scalar", np.float32(3.5))
    with Reader(tmp_path / "m.zarr") as r:
        # at most 93 rows (~256 KiB) a chunk: 33 chunks, of 91 rows each (the last
        # one padded by 3 rows only), in shards of 16 chunks
        assert r.info("a").codec == "sharding_indexed(nncodecs.weights)"
        assert r["a"].chunks == (91, 700) and r["a"].shards == (1456, 700)
        assert r.info("raw").codec == "bytes"
        assert r.info("z").codec == "bytes+zstd"
        assert r.read_tensor("scalar").shape == ()
        dims = [tuple(r[n].metadata.dimension_names or ()) for n in r]
        flat = [d for ds in dims for d in ds]
        assert len(flat) == len(set(flat))  # unique, for xarray
        assert same_bits(r.read_tensor("a"), arr)


def test_errors_name_the_tensor(tmp_path: Path) -> None:
    path = tmp_path / "m.zarr"
    with Writer(path) as w:
        w.add_tensor("x", np.zeros(4, np.float32))
        with pytest.raises(ValueError, match="'x' is already"):
            w.add_tensor("x", np.zeros(4, np.float32))
        with pytest.raises(TypeError, match="tensor 'c'"):
            w.add_tensor("c", np.zeros(4, np.complex64))
        with pytest.raises(TypeError, match="metadata keys and values must be strings"):
            w.metadata["n"] = 3  # type: ignore[assignment]
            w.close()
        w.metadata.pop("n")
    with pytest.raises(ValueError, match="closed"):
        w.add_tensor("late", np.zeros(1, np.float32))
    with Reader(path) as r:
        with pytest.raises(KeyError, match="no tensor 'nope'"):
            r.read_tensor("nope")
        with pytest.raises(ValueError, match="out is"):
            r.read_into("x", np.zeros(5, np.float32))
        out = np.empty(4, np.float32)
        assert r.read_into("x", out) is out
    plain = tmp_path / "plain.zarr"
    zarr.open_group(LocalStore(plain), mode="w").create_array("a", shape=(2,), dtype="i4")
    with pytest.raises(NotAContainerError, match="not an nncodecs container"):
        Reader(plain)
    with pytest.raises(FileNotFoundError):
        Reader(tmp_path / "missing.zarr")
    with pytest.raises(ValueError, match="codec must be one of"):
        Writer(tmp_path / "x.zarr", codec="lzma")


def test_verify_finds_a_flipped_byte(tmp_path: Path) -> None:
    path = tmp_path / "m.zarr"
    arr = (np.random.default_rng(2).standard_normal((512, 512)) * 0.02).astype(np_dtype("bfloat16"))
    with Writer(path) as w:
        w.add_tensor("ok", arr)
        w.add_tensor("bad", arr)
    chunk = next(p for p in (path / "bad").rglob("*") if p.is_file() and p.name != "zarr.json")
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    chunk.write_bytes(bytes(raw))
    with Reader(path) as r:
        assert same_bits(r.read_tensor("ok"), arr)
        with pytest.raises(CorruptDataError, match="tensor 'bad'"):
            r.verify()


def test_merge(tmp_path: Path) -> None:
    a, b, ab = tmp_path / "a.zarr.zip", tmp_path / "b.zarr", tmp_path / "ab.zarr.zip"
    with Writer(a) as w:
        w.add_tensor("x", np.arange(3, dtype=np.int64))
        w.metadata["format"] = "pt"
    with Writer(b) as w:
        w.add_tensor("y", np.ones(2, np.float16))
        w.metadata["format"] = "pt"
    merge([a, b], ab)
    with Reader(ab) as r:
        assert r.keys() == ["x", "y"] and r.metadata == {"format": "pt"}
    with pytest.raises(ValueError, match=f"{b}: tensor 'y' is in {b} too"):
        merge([a, b, b], tmp_path / "abb.zarr")
    assert not (tmp_path / "abb.zarr").exists()


def test_merge_keeps_sparse_and_quantized_tensors_as_stored(tmp_path: Path) -> None:
    # (merge went through scipy: a COO tensor of another rank than 2 failed, naming the
    # wrong container, and index dtypes were narrowed to int32)
    import scipy.sparse

    src, out = tmp_path / "s.zarr", tmp_path / "m.zarr.zip"
    csc = scipy.sparse.random(30, 20, density=0.2, format="csc", dtype=np.float32, rng=0)
    csc.indices, csc.indptr = csc.indices.astype(np.int64), csc.indptr.astype(np.int64)
    with Writer(src) as w:
        w.add_sparse_coo("c3", np.array([[0, 1], [2, 0], [3, 4]]), np.array([1.5, 2.0]), (2, 3, 5))
        w.add_sparse_coo("c1", np.array([[4, 7]]), np.array([1, 2], np.int8), (9,))
        w.add_sparse_csr("r", np.array([1.0, 2.0], np.float16), np.array([0, 2], np.int64),
                         np.array([0, 1, 2], np.int64), (2, 3))  # fmt: skip
        w.add_tensor("k", csc)
        w.add_quantized("q", np.arange(32, dtype=np.uint8).reshape(2, 16),
                        np.full((2, 1), 127, np.uint8), "mxfp4")  # fmt: skip
    merge([src], out)
    with Reader(src) as a, Reader(out) as b:
        assert b.keys() == a.keys()
        for name in a:
            assert b.layout(name) == a.layout(name)
            x, y = a.read_tensor(name), b.read_tensor(name)
            if isinstance(x, dict):
                assert x.keys() == y.keys() and x["shape"] == y["shape"]
                for part in x.keys() - {"shape"}:
                    assert x[part].dtype == y[part].dtype, (name, part)
                    np.testing.assert_array_equal(x[part], y[part])
            else:
                for p, q in zip(x, y, strict=True):
                    assert p.dtype == q.dtype and np.array_equal(p, q)


def test_torch_in_and_out(torch: Any, tmp_path: Path) -> None:
    import torch as th

    t = th.randn(64, 32).to(th.bfloat16)
    with Writer(tmp_path / "t.zarr") as w:
        w.add_tensor("t", t)
    with Reader(tmp_path / "t.zarr") as r:
        back = r.read_tensor("t", to="torch")
    assert back.dtype == th.bfloat16 and th.equal(back.view(th.int16), t.view(th.int16))


def test_consolidated_metadata_is_written(tmp_path: Path) -> None:
    path = tmp_path / "m.zarr"
    with Writer(path) as w:
        for i in range(5):
            w.add_tensor(f"t{i}", np.zeros(3, np.float32))
    meta = json.loads((path / "zarr.json").read_text())
    assert set(meta["consolidated_metadata"]["metadata"]) == {f"t{i}" for i in range(5)}
    assert nncodecs.Reader(path).keys() == [f"t{i}" for i in range(5)]


@pytest.mark.parametrize("kind", ["directory", "zip"])
def test_raw_tensors_read_as_a_read_only_memory_map(kind: str, tmp_path: Path) -> None:
    target = tmp_path / ("m.zarr" if kind == "directory" else "m.zarr.zip")
    arr = np.arange(4096, dtype=np.float32).reshape(64, 64)
    with Writer(target) as w:
        w.add_tensor("raw", arr, codec="raw")
        w.add_tensor("zeros", np.zeros(100, np.int16), codec="raw")  # a fill-value chunk too
        w.add_tensor("coded", arr)
    with Reader(target) as r:
        mapped = r.read_tensor("raw")
        assert isinstance(mapped, np.memmap) and not mapped.flags.writeable
        assert same_bits(mapped, arr)
        file = Path(mapped.filename)
        raw_bytes = file.read_bytes()[mapped.offset : mapped.offset + arr.nbytes]
        assert raw_bytes == arr.tobytes()  # the map is the file's own bytes
        with pytest.raises(ValueError, match="read-only"):
            mapped[0, 0] = 1
        assert isinstance(r.read_tensor("zeros"), np.memmap)
        assert not isinstance(r.read_tensor("coded"), np.memmap)


KILL_SCRIPT = """
import sys, time, numpy as np, nncodecs
target = sys.argv[1]
with nncodecs.Writer(target, mode="a") as w:
    for i in range(10_000):
        w.add_tensor(f"new{i}", np.full((512, 512), i, np.float32))
        if i == 3:
            print("ready", flush=True)
        time.sleep(0.01)
"""


@pytest.mark.parametrize("kind", ["directory", "zip"])
def test_a_killed_append_loses_nothing_committed(kind: str, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    target = tmp_path / ("m.zarr" if kind == "directory" else "m.zarr.zip")
    kept = {
        f"kept{i}": np.random.default_rng(i).standard_normal((64, 32)).astype(np.float32)
        for i in range(3)
    }
    with Writer(target) as w:
        for name, arr in kept.items():
            w.add_tensor(name, arr)
    child = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(target)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGKILL)
    child.wait()
    with Reader(target) as r:
        for name, arr in kept.items():
            assert same_bits(r.read_tensor(name), arr)
        appended = [n for n in r if n.startswith("new")]
        for name in appended:  # whatever was committed before the kill is whole
            assert (r.read_tensor(name) == int(name[3:])).all()
        if kind == "zip":
            assert appended == []  # the zip is replaced only on close
        r.verify()
    # And the container still takes appends.
    with Writer(target, mode="a") as w:
        w.add_tensor("after", np.ones(3, np.float32))
    with Reader(target) as r:
        assert "after" in r and all(name in r for name in kept)


def test_sparse_csr_csc_coo_round_trip_into_scipy(tmp_path: Path) -> None:
    import scipy.sparse as sp

    rng = np.random.default_rng(4)
    csr = sp.random(300, 200, density=0.03, format="csr", dtype=np.float32, random_state=rng)
    csc = sp.random(50, 70, density=0.1, format="csc", dtype=np.float64, random_state=rng)
    coo = sp.random(40, 30, density=0.2, format="coo", dtype=np.int32, random_state=rng)
    path = tmp_path / "s.zarr.zip"
    with Writer(path) as w:
        w.add_tensor("csr", csr)
        w.add_tensor("csc", csc)
        w.add_tensor("coo", coo)
        w.add_sparse_csr("adj", csr.data, csr.indices, csr.indptr, csr.shape)
        w.add_sparse_csc("cols", csc.data, csc.indices, csc.indptr, csc.shape)
        coords = np.vstack([coo.row, coo.col])
        w.add_sparse_coo("graph", coords, coo.data, coo.shape)
        w.add_tensor("lil", sp.lil_matrix(csr))  # other formats go in as CSR
        with pytest.raises(ValueError, match="indptr"):
            w.add_sparse_csr("bad", csr.data, csr.indices, csr.indptr[:-1], csr.shape)
        with pytest.raises(ValueError, match="outside the shape"):
            w.add_sparse_coo("bad", coords + 100, coo.data, coo.shape)
    with Reader(path) as r:
        assert [r.layout(n) for n in r] == ["csr", "csc", "coo", "csr", "csc", "coo", "csr"]
        for name, ref in (("csr", csr), ("csc", csc), ("coo", coo), ("adj", csr), ("cols", csc),
                          ("graph", coo), ("lil", csr)):  # fmt: skip
            got = r.read_tensor(name, to="scipy")
            assert got.format == r.layout(name) and got.shape == ref.shape
            assert got.dtype == ref.dtype and (got != ref).nnz == 0
        parts = r.read_tensor("adj")
        assert set(parts) == {"data", "indices", "indptr", "shape"}
        info = r.info("csr")
        assert info.layout == "csr" and info.shape == (300, 200) and info.dtype == "float32"
        r.verify()


def test_mxfp4_and_nvfp4_read_back_as_the_pair(tmp_path: Path) -> None:
    import ml_dtypes

    rng = np.random.default_rng(5)
    blocks = rng.integers(0, 256, (64, 128), dtype=np.uint8)  # 256 fp4 values a row
    e8m0 = rng.integers(110, 130, (64, 8), dtype=np.uint8)  # one scale per 32
    fp8 = (rng.random((64, 16)) + 0.5).astype(ml_dtypes.float8_e4m3fn)  # one per 16
    with Writer(tmp_path / "q.zarr") as w:
        w.add_quantized("mx", blocks, e8m0, scheme="mxfp4")
        w.add_quantized("nv", blocks, fp8, scheme="nvfp4")
        with pytest.raises(ValueError, match="do not cover"):
            w.add_quantized("bad", blocks, e8m0[:, :4], scheme="mxfp4")
        with pytest.raises(TypeError, match="needs uint8 blocks and float8_e4m3fn scales"):
            w.add_quantized("bad", blocks, e8m0, scheme="nvfp4")
    merge([tmp_path / "q.zarr"], tmp_path / "q2.zarr")
    for path in (tmp_path / "q.zarr", tmp_path / "q2.zarr"):
        with Reader(path) as r:
            assert r.layout("mx") == "mxfp4" and r.layout("nv") == "nvfp4"
            b, s = r.read_tensor("mx")
            assert same_bits(b, blocks) and same_bits(s, e8m0)
            b, s = r.read_tensor("nv")
            assert same_bits(b, blocks) and same_bits(s, fp8)


def test_xarray_and_dask_read_a_container(tmp_path: Path) -> None:
    import dask.array as da
    import xarray as xr

    path = tmp_path / "m.zarr"
    w_arr = (np.random.default_rng(6).standard_normal((1000, 64)) * 0.02).astype(np.float32)
    with Writer(path, chunk_bytes=64 << 10) as w:
        w.add_tensor("encoder.weight", w_arr)
        w.add_tensor("encoder.bias", np.arange(64, dtype=np.float32))
    ds = xr.open_zarr(path, consolidated=True)
    assert set(ds.data_vars) == {"encoder.weight", "encoder.bias"}
    assert same_bits(ds["encoder.weight"].values, w_arr)
    tree = xr.open_datatree(path, engine="zarr")
    assert set(tree.data_vars) == {"encoder.weight", "encoder.bias"}
    lazy = da.from_zarr(str(path), component="encoder.weight")
    assert lazy.chunks[0][0] == 250  # Zarr's own chunks (4 of 250 rows), read lazily
    assert same_bits(lazy[10:20].compute(), w_arr[10:20])


def test_threads_setting(tmp_path: Path) -> None:
    arr = np.arange(100_000, dtype=np.float32)
    try:
        with Writer(tmp_path / "t.zarr", threads=1) as w:
            w.add_tensor("a", arr)
        assert nncodecs.get_threads() == 1
        with Reader(tmp_path / "t.zarr", threads=2) as r:
            assert nncodecs.get_threads() == 2
            assert same_bits(r.read_tensor("a"), arr)
    finally:
        nncodecs.set_threads(None)


@pytest.mark.parametrize("suffix", [".zarr", ".zarr.zip"])
def test_stored_bytes_are_each_tensors_own_from_one_listing(tmp_path, suffix):
    # "s" is a prefix of "sp": the stored bytes of one must not count the other's
    # (zarr's prefix listing of a zip did). A tensor's arrays count their zarr.json
    # and chunks as stored (in a zip, the metadata deflated).
    import zipfile

    import scipy.sparse as sps

    rng = np.random.default_rng(3)
    target = tmp_path / f"m{suffix}"
    with Writer(target) as w:
        w.add_tensor("s", np.float32(3.0))
        w.add_tensor("sp", sps.random(50, 40, density=0.1, format="csr", random_state=0))
        w.add_tensor("w", rng.standard_normal((40000, 64)).astype(np.float32))
    if suffix == ".zarr.zip":
        with zipfile.ZipFile(target) as z:
            sizes = {i.filename: i.compress_size for i in z.infolist()}
    else:
        sizes = {
            p.relative_to(target).as_posix(): p.stat().st_size
            for p in target.rglob("*")
            if p.is_file()
        }

    def under(*prefixes: str) -> int:
        return sum(n for key, n in sizes.items() if key.startswith(prefixes))

    with Reader(target) as r:
        assert r.info("s").stored_bytes == under("s/")
        assert r.info("w").stored_bytes == under("w/")
        assert r.info("sp").stored_bytes == under("sp/data/", "sp/indices/", "sp/indptr/")
