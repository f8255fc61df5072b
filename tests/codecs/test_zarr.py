"""Round trips through real Zarr v3 arrays: every codec chain, dtype and store kind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import zarr
from harness import ALL_DTYPES, FIXTURES, FLOATS, np_dtype, random_array, same_bits
from zarr.codecs import ZstdCodec
from zarr.storage import LocalStore, MemoryStore, ZipStore

from nncodecs import (
    Auto,
    BitReorder,
    CorruptDataError,
    Huffman,
    NumcodecsAuto,
    NumcodecsRans,
    NumcodecsWeights,
    Planes,
    Rans,
    Weights,
)

CHAINS = {
    "reorder+planes": {"filters": [BitReorder()], "serializer": Planes()},
    "planes": {"filters": (), "serializer": Planes()},
    "reorder+bytes": {"filters": [BitReorder()], "serializer": "auto"},
}
SHAPE = (50, 37)


def sample(name: str) -> np.ndarray:
    arr = random_array(name, SHAPE[0] * SHAPE[1], seed=11).reshape(SHAPE)
    if name in FLOATS:  # a weight-like body, so the codecs see realistic exponents too
        rng = np.random.default_rng(5)
        body = (rng.standard_normal(SHAPE) * 0.05).astype(np.float32).astype(arr.dtype)
        arr = np.where(rng.random(SHAPE) < 0.8, body, arr)
    return arr


def open_store(kind: str, tmp_path: Path) -> Any:
    if kind == "local":
        return LocalStore(tmp_path / "a.zarr")
    if kind == "memory":
        return MemoryStore()
    return ZipStore(tmp_path / "a.zarr.zip", mode="w")


@pytest.mark.parametrize("sharded", [False, True], ids=["unsharded", "sharded"])
@pytest.mark.parametrize("store_kind", ["local", "memory", "zip"])
@pytest.mark.parametrize("chain", CHAINS)
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_round_trip(name: str, chain: str, store_kind: str, sharded: bool, tmp_path: Path) -> None:
    arr = sample(name)
    store = open_store(store_kind, tmp_path)
    z = zarr.create_array(
        store,
        shape=SHAPE,
        dtype=arr.dtype,
        chunks=(16, 16),
        shards=(32, 32) if sharded else None,
        compressors=[ZstdCodec(level=3)],
        **CHAINS[chain],
    )
    z[:] = arr
    assert same_bits(z[:], arr)
    assert z[:].dtype == arr.dtype
    # Partial reads that cross chunk and shard edges.
    assert same_bits(z[3:41, 5:30], arr[3:41, 5:30])
    assert same_bits(z[49, :], arr[49, :])
    assert same_bits(z[7, 36], arr[7, 36])
    if store_kind == "zip":
        store.close()
        store = ZipStore(tmp_path / "a.zarr.zip", mode="r")
    again = zarr.open_array(store, mode="r")
    assert same_bits(again[:], arr)
    assert same_bits(again[17:18, 2:35], arr[17:18, 2:35])


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_partial_writes_and_fill_value(name: str) -> None:
    arr = sample(name)
    fill = {"bool": True, "float4_e2m1fn": 1.5}.get(name, 3)
    if name in ("float16", "float32", "float64", "bfloat16", "float8_e5m2", "float8_e4m3fn"):
        fill = float("nan")
    z = zarr.create_array(
        MemoryStore(),
        shape=SHAPE,
        dtype=arr.dtype,
        chunks=(16, 16),
        fill_value=fill,
        filters=[BitReorder()],
        serializer=Planes(),
    )
    z[20:30, 10:20] = arr[20:30, 10:20]
    got = z[:]
    expected = np.full(SHAPE, fill, dtype=np.float64 if name in FLOATS else None).astype(arr.dtype)
    if name == "bool":
        expected = np.full(SHAPE, True)
    expected[20:30, 10:20] = arr[20:30, 10:20]
    assert same_bits(got, expected)


def test_f_order_arrays() -> None:
    arr = np.asfortranarray(sample("bfloat16"))
    z = zarr.create_array(
        MemoryStore(),
        shape=SHAPE,
        dtype=arr.dtype,
        chunks=(16, 16),
        filters=[BitReorder()],
        serializer=Planes(),
        config={"order": "F"},
    )
    z[:] = arr
    assert same_bits(z[:], arr)


def test_metadata_names_the_codecs_and_dtype() -> None:
    z = zarr.create_array(
        MemoryStore(),
        shape=(8,),
        dtype=ml_dtypes.bfloat16,
        filters=[BitReorder()],
        serializer=Planes(),
        compressors=[ZstdCodec()],
    )
    meta = z.metadata.to_dict()
    assert meta["data_type"] == "bfloat16"
    names = [c["name"] for c in meta["codecs"]]
    assert names == ["nncodecs.bitreorder", "nncodecs.planes", "zstd"]
    assert meta["codecs"][0]["configuration"] == {"dtype": "bfloat16"}
    assert meta["codecs"][1]["configuration"] == {"elementsize": 2}


def test_codec_and_dtype_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="configured for float32"):
        zarr.create_array(
            MemoryStore(), shape=(8,), dtype="float16", filters=[BitReorder(dtype="float32")]
        )
    with pytest.raises(ValueError, match="configured for 4-byte elements"):
        zarr.create_array(
            MemoryStore(), shape=(8,), dtype="float16", serializer=Planes(elementsize=4)
        )
    with pytest.raises(TypeError, match="unsupported dtype"):
        zarr.create_array(MemoryStore(), shape=(8,), dtype="complex64", filters=[BitReorder()])


def test_opens_in_a_fresh_process_that_only_imports_zarr(tmp_path: Path) -> None:
    arr = sample("bfloat16")
    path = tmp_path / "w.zarr"
    z = zarr.create_array(
        LocalStore(path),
        shape=SHAPE,
        dtype=arr.dtype,
        chunks=(16, 16),
        filters=[BitReorder()],
        serializer=Planes(),
        compressors=[ZstdCodec()],
    )
    z[:] = arr
    code = (
        "import sys, zarr\n"
        f"z = zarr.open_array({str(path)!r}, mode='r')\n"
        "a = z[:]\n"
        "sys.stdout.write(a.dtype.name + ' ' + a.tobytes().hex())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    dtype, hexbytes = out.split()
    assert dtype == "bfloat16"
    assert bytes.fromhex(hexbytes) == arr.tobytes()


def test_committed_zarr_stores_still_decode() -> None:
    root = FIXTURES / "zarr"
    stores = sorted(root.glob("*.zarr"))
    assert len(stores) == 2
    for path in stores:
        expected_meta = json.loads(path.with_suffix(".json").read_text())
        dt = np_dtype(expected_meta["dtype"])
        expected = np.frombuffer(path.with_suffix(".raw").read_bytes(), dtype=dt)
        expected = expected.reshape(expected_meta["shape"])
        z = zarr.open_array(LocalStore(path, read_only=True), mode="r")
        assert z.dtype == dt
        assert same_bits(z[:], expected), path.name


CODER_CHAINS = {
    "weights": {"filters": (), "serializer": Weights(), "compressors": None},
    "weights-rans": {"filters": (), "serializer": Weights(coder="rans"), "compressors": None},
    "reorder+planes+rans": {
        "filters": [BitReorder()],
        "serializer": Planes(),
        "compressors": [Rans()],
    },
    "reorder+planes+huffman": {
        "filters": [BitReorder()],
        "serializer": Planes(),
        "compressors": [Huffman()],
    },
    "reorder+planes+auto": {
        "filters": [BitReorder()],
        "serializer": Planes(),
        "compressors": [Auto()],
    },
}


@pytest.mark.parametrize("sharded", [False, True], ids=["unsharded", "sharded"])
@pytest.mark.parametrize("store_kind", ["local", "memory", "zip"])
@pytest.mark.parametrize("chain", CODER_CHAINS)
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_coder_round_trip(
    name: str, chain: str, store_kind: str, sharded: bool, tmp_path: Path
) -> None:
    arr = sample(name)
    store = open_store(store_kind, tmp_path)
    z = zarr.create_array(
        store,
        shape=SHAPE,
        dtype=arr.dtype,
        chunks=(16, 16),
        shards=(32, 32) if sharded else None,
        **CODER_CHAINS[chain],
    )
    z[:] = arr
    assert same_bits(z[:], arr)
    assert same_bits(z[3:41, 5:30], arr[3:41, 5:30])
    if store_kind == "zip":
        store.close()
        store = ZipStore(tmp_path / "a.zarr.zip", mode="r")
    again = zarr.open_array(store, mode="r")
    assert same_bits(again[:], arr)
    assert same_bits(again[49, :], arr[49, :])


def test_weights_chunks_equal_the_chain_and_fill_in_the_settings() -> None:
    arr = sample("bfloat16")
    whole = {"shape": SHAPE, "dtype": arr.dtype, "chunks": SHAPE}
    a = zarr.create_array(
        MemoryStore(), serializer=Weights(coder="rans"), compressors=None, **whole
    )
    a[:] = arr
    (codec,) = a.metadata.to_dict()["codecs"]
    assert codec["name"] == "nncodecs.weights"
    assert codec["configuration"] == {
        "coder": "rans",
        "dtype": "bfloat16",
        "precision": 12,
        "subblock_log2": 16,
        "checksum": True,
        "zstd_level": 3,
        "min_gain": 0.05,
    }
    chain = {"filters": [BitReorder()], "serializer": Planes(), "compressors": [Rans()]}
    b = zarr.create_array(MemoryStore(), **chain, **whole)
    b[:] = arr
    # Zarr evolves the coder from the array's data type (before the bit
    # reorder made it uint16): its frame records bfloat16, as Weights' does.
    assert b.metadata.to_dict()["codecs"][2]["configuration"]["planes"] == 2
    assert b.metadata.to_dict()["codecs"][2]["configuration"]["dtype"] == "bfloat16"
    chunk_a = a.store_path.store._store_dict["c/0/0"].to_bytes()
    chunk_b = b.store_path.store._store_dict["c/0/0"].to_bytes()
    assert chunk_a == chunk_b


def test_weights_array_opens_in_a_fresh_process(tmp_path: Path) -> None:
    arr = sample("float8_e4m3fn")
    path = tmp_path / "w.zarr"
    z = zarr.create_array(LocalStore(path), shape=SHAPE, dtype=arr.dtype, chunks=(16, 16),
                          serializer=Weights(), compressors=None)  # fmt: skip
    z[:] = arr
    code = (
        "import sys, zarr\n"
        f"a = zarr.open_array({str(path)!r}, mode='r')[:]\n"
        "sys.stdout.write(a.dtype.name + ' ' + a.tobytes().hex())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dtype, hexbytes = out.stdout.split()
    assert dtype == "float8_e4m3fn"
    assert bytes.fromhex(hexbytes) == arr.tobytes()


# Zarr v2 takes the standard NumPy types only (the ML floats are Zarr v3 types).
V2_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
             "float16", "float32", "float64"]  # fmt: skip
V2_CODECS = {
    "weights-compressor": {"compressors": NumcodecsWeights(), "filters": None},
    "weights-rans-compressor": {"compressors": NumcodecsWeights(coder="rans"), "filters": None},
    "weights-filter": {"filters": [NumcodecsWeights()], "compressors": None},
    "weights-filter+auto": {"filters": [NumcodecsWeights()], "compressors": NumcodecsAuto()},
    "rans-compressor": {"compressors": NumcodecsRans(), "filters": None},
}


@pytest.mark.parametrize("codecs", V2_CODECS)
@pytest.mark.parametrize("name", V2_DTYPES)
def test_zarr_v2_round_trip(name: str, codecs: str, tmp_path: Path) -> None:
    # numcodecs codecs in a Zarr v2 array: written, reopened from the store
    # (the codec rebuilt from its JSON, which holds no dtype) and read back
    # bit-exact: the frames say what they hold.
    arr = sample(name)
    path = tmp_path / "v2.zarr"
    z = zarr.create_array(LocalStore(path), shape=SHAPE, dtype=arr.dtype, chunks=(16, 16),
                          zarr_format=2, **V2_CODECS[codecs])  # fmt: skip
    z[:] = arr
    again = zarr.open_array(LocalStore(path, read_only=True), mode="r")
    assert again.metadata.zarr_format == 2
    assert same_bits(again[:], arr)
    assert same_bits(again[3:41, 5:30], arr[3:41, 5:30])
    meta = json.loads((path / ".zarray").read_text())
    codec = meta["compressor"] or meta["filters"][0]
    assert codec["id"].startswith("nncodecs.")


def test_zarr_v3_decodes_refuse_a_chunk_of_another_dtype() -> None:
    # A consistent edit of the data type in the metadata (bfloat16 -> float16,
    # the same width): the chunks still say bfloat16, and reads fail.
    arr = sample("bfloat16")
    store = MemoryStore()
    z = zarr.create_array(store, shape=SHAPE, dtype=arr.dtype, chunks=(16, 16),
                          serializer=Weights(), compressors=None)  # fmt: skip
    z[:] = arr
    meta = json.loads(store._store_dict["zarr.json"].to_bytes())
    meta["data_type"] = "float16"
    meta["fill_value"] = 0.0
    meta["codecs"][0]["configuration"]["dtype"] = "float16"
    store._store_dict["zarr.json"] = store._store_dict["zarr.json"].from_bytes(
        json.dumps(meta).encode()
    )
    with pytest.raises(CorruptDataError, match="holds bfloat16 elements, expected float16"):
        _ = zarr.open_array(store, mode="r")[:]


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
@pytest.mark.parametrize("chain", ["bytes", "weights"])
def test_a_chunk_of_negative_zeros_or_other_nans_is_not_taken_for_the_fill(
    name: str, chain: str
) -> None:
    # (found by tests/properties/test_properties.py: zarr compared ml_dtypes' values, not bits)
    dtype = np_dtype(name)
    bits = np.dtype(f"u{dtype.itemsize}")
    zero, neg = np.array([0.0, -0.0], np.float32).astype(dtype)
    values = [neg, zero, 1.5]
    if name not in ("float8_e4m3fn", "float4_e2m1fn"):  # (a NaN other than the fill's)
        nan = np.array([float("nan")], dtype)
        values.append(np.array([nan.view(bits)[0] ^ 1], bits).view(dtype)[0])
    arr = np.array(values, dtype)
    kw = {"serializer": Weights()} if chain == "weights" else {}
    fill = float("nan") if name not in ("float8_e4m3fn", "float4_e2m1fn") else 0.0
    for fill_value in (0.0, fill):
        z = zarr.create_array(MemoryStore(), shape=arr.shape, chunks=(1,), dtype=dtype,
                              fill_value=fill_value, **kw)  # fmt: skip
        z[:] = arr
        assert same_bits(z[:], arr)
    z = zarr.create_array(MemoryStore(), shape=(4,), chunks=(1,), dtype=dtype, **kw)
    z[:] = np.array([0.0, 0.0, 1.0, 0.0], np.float32).astype(dtype)
    assert z.nchunks_initialized == 1  # (chunks bit-equal to the fill: still not stored)
