"""Zarr's partial-encode hook of the weights codec (``nncodecs.codecs._direct``).

As an array's only codec, ``Weights`` gets each chunk's part of the values
written and the chunk's byte setter from Zarr, and merges, decides emptiness and
encodes itself. Every scenario here is checked against a NumPy model of the
array (bit for bit), against the exact set of chunk keys Zarr's rule leaves
(``write_empty_chunks``: a chunk of the fill value's bits is deleted), and
against ``encode_weights`` of each stored chunk padded with the fill value.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from harness import np_dtype, random_array, same_bits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.codecs import ShardingCodec, ZstdCodec
from zarr.storage import LocalStore, MemoryStore

from nncodecs import Weights
from nncodecs.codecs._direct import DirectChunks, _covers, _fitted
from nncodecs.dtypes import dtype_name
from nncodecs.frame.weights import encode_weights

DTYPES = ["float32", "bfloat16", "float16", "float8_e4m3fn", "float64", "int16", "uint8", "bool"]


def _bits(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr)
    return arr.view(f"u{arr.dtype.itemsize}") if arr.dtype != bool else arr.view(np.uint8)


def _fill_of(dtype: np.dtype, kind: str) -> Any:
    if dtype.kind == "b":
        return kind == "one"
    if dtype.kind in "iu":
        return {"zero": 0, "one": 1, "nan": 7, "negzero": 0}[kind]
    return {"zero": 0.0, "one": 1.5, "nan": float("nan"), "negzero": -0.0}[kind]


def _region(model: np.ndarray, idx: tuple[int, ...], chunks: tuple[int, ...]) -> np.ndarray:
    return model[tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks, strict=True))]


def _stored_chunks(store: Any) -> dict[str, bytes]:
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    async def collect() -> dict[str, bytes]:
        out = {}
        async for key in store.list_prefix(""):
            if key.startswith("c/"):
                buf = await store.get(key, prototype=default_buffer_prototype())
                out[key] = buf.to_bytes()
        return out

    return sync(collect())


@st.composite
def scenarios(draw: Any) -> dict[str, Any]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, n + 2)) for n in shape)
    writes = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["slices", "int", "list", "all"]))
        sel: list[Any] = []
        for n in shape:
            if kind == "all":
                sel.append(slice(None))
            elif kind == "int" and not any(isinstance(s, int) for s in sel):
                sel.append(draw(st.integers(0, n - 1)))
            elif kind == "list":
                sel.append(sorted(draw(st.sets(st.integers(0, n - 1), min_size=1))))
            else:
                a = draw(st.integers(0, n - 1))
                sel.append(slice(a, draw(st.integers(a + 1, n))))
        value = draw(st.sampled_from(["random", "fill", "scalar", "negzero", "first-fill"]))
        writes.append((kind, tuple(sel), value, draw(st.integers(0, 2**16))))
    return {
        "dtype": draw(st.sampled_from(DTYPES)),
        "shape": shape,
        "chunks": chunks,
        "fill": draw(st.sampled_from(["zero", "one", "nan", "negzero"])),
        "order": draw(st.sampled_from(["C", "F"])),
        "empty": draw(st.booleans()),
        "writes": writes,
    }


def _value(dt: np.dtype, shape: tuple[int, ...], how: str, fill: Any, seed: int) -> Any:
    if how == "scalar":
        return np.asarray(random_array(dtype_name(dt), 1, seed)[0], dt)
    if how == "fill":
        return np.full(shape, fill, dt)
    if how == "negzero" and dt.kind not in "biu":
        return np.full(shape, -0.0, dt)
    arr = random_array(dtype_name(dt), math.prod(shape), seed).reshape(shape)
    if how == "first-fill" and arr.size:  # (the first element alone equal to the fill)
        arr.reshape(-1)[0] = np.asarray(fill, dt)
    return arr


def _run(case: dict[str, Any]) -> None:
    dt = np_dtype(case["dtype"])
    shape, chunks = case["shape"], case["chunks"]
    fill = _fill_of(dt, case["fill"])
    store = MemoryStore()
    a = zarr.create_array(
        store, shape=shape, chunks=chunks, dtype=dt, fill_value=fill,
        serializer=Weights(), compressors=None,
        config={"write_empty_chunks": case["empty"], "order": case["order"]},
    )  # fmt: skip
    model = np.full(shape, fill, dt)
    fill_bits = _bits(np.asarray([fill], dt))[0]
    stored: set[tuple[int, ...]] = set()
    for kind, sel, how, seed in case["writes"]:
        target = model[np.ix_(*sel)] if kind == "list" else model[sel]
        value = _value(dt, target.shape, how, fill, seed)
        if kind == "list":
            a.oindex[sel] = value
            model[np.ix_(*sel)] = value
        else:
            a[sel] = value
            model[sel] = value
        # the chunks this write touched: stored unless of the fill's bits (and dropped)
        axes = [
            sorted({i // c for i in (range(n)[s] if isinstance(s, slice) else np.atleast_1d(s))})
            for s, c, n in zip(sel, chunks, shape, strict=True)
        ]
        for idx in itertools.product(*axes):
            region = _region(model, idx, chunks)
            if case["empty"] or not (_bits(region) == fill_bits).all():
                stored.add(idx)
            else:
                stored.discard(idx)
    assert same_bits(a[...], model)
    got = _stored_chunks(store)
    assert set(got) == {"c/" + "/".join(map(str, idx)) for idx in stored}
    codec = Weights(dtype=dtype_name(dt))
    for idx in stored:
        padded = np.full(chunks, fill, dt)
        region = _region(model, idx, chunks)
        padded[tuple(slice(0, n) for n in region.shape)] = region
        key = "c/" + "/".join(map(str, idx))
        assert got[key] == encode_weights(padded, codec._settings()), key


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # (the same scenarios every run: CI never fails by chance)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_writes_match_a_numpy_model_bit_for_bit(case: dict[str, Any]) -> None:
    _run(case)


def test_the_hook_is_what_zarr_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    # Zarr takes the codec's own merge, not its generic one, and only where the
    # codec is the array's only one (a compressor after it must see whole chunks).
    calls = []
    real = DirectChunks._chunk_frame

    def spy(self: Any, *args: Any) -> Any:
        calls.append(args[-1])
        return real(self, *args)

    monkeypatch.setattr(DirectChunks, "_chunk_frame", spy)
    x = random_array("bfloat16", 64 * 8, 1).reshape(64, 8)
    a = zarr.create_array({}, shape=x.shape, chunks=(16, 8), dtype=x.dtype,
                          serializer=Weights(), compressors=None)  # fmt: skip
    a[...] = x
    a[3:5, 1:3] = x[:2, :2]
    assert calls == [True] * 4 + [False]
    calls.clear()
    b = zarr.create_array({}, shape=x.shape, chunks=(16, 8), dtype=x.dtype,
                          serializer=Weights(), compressors=[ZstdCodec()])  # fmt: skip
    b[...] = x
    assert calls == [] and same_bits(b[...], x)


@pytest.mark.parametrize("name", ["bfloat16", "float32", "float16"])
def test_negative_zero_under_a_zero_fill_is_stored_and_read_back(name: str) -> None:
    dt = np_dtype(name)
    a = zarr.create_array({}, shape=(8, 4), chunks=(4, 4), dtype=dt, fill_value=0.0,
                          serializer=Weights(), compressors=None)  # fmt: skip
    a[...] = np.full((8, 4), -0.0, dt)
    back = a[...]
    assert same_bits(back, np.full((8, 4), -0.0, dt))
    a[...] = np.zeros((8, 4), dt)  # (the fill's own bits: no chunk left)
    assert a.nchunks_initialized == 0


def test_sharded_arrays_take_the_hook_for_their_inner_chunks(tmp_path: Path) -> None:
    x = random_array("bfloat16", 96 * 16, 2).reshape(96, 16)
    shard = ShardingCodec(chunk_shape=(8, 16), codecs=[Weights()])
    a = zarr.create_array(LocalStore(tmp_path / "s.zarr"), shape=x.shape, chunks=(32, 16),
                          dtype=x.dtype, serializer=shard, compressors=None)  # fmt: skip
    a[...] = x
    a[10:12, 3] = x[:2, 0]
    want = x.copy()
    want[10:12, 3] = x[:2, 0]
    a[40:48] = np.zeros((8, 16), x.dtype)  # an inner chunk of the fill: absent from its shard
    want[40:48] = 0
    assert same_bits(zarr.open_array(LocalStore(tmp_path / "s.zarr"))[...], want)


def test_a_value_of_the_wrong_shape_is_refused_as_zarr_refuses_it() -> None:
    a = zarr.create_array({}, shape=(8, 4), chunks=(8, 4), dtype="float32",
                          serializer=Weights(), compressors=None)  # fmt: skip
    with pytest.raises(ValueError):
        a[...] = np.ones((4, 8), np.float32)  # same size, another layout: never reshaped
    assert a.nchunks_initialized == 0


def test_a_row_broadcast_as_zarr_broadcasts_it() -> None:
    # Zarr's merge lets NumPy broadcast a value of length 1 along an axis.
    a = zarr.create_array({}, shape=(8, 4), chunks=(8, 4), dtype="float32",
                          serializer=Weights(), compressors=None)  # fmt: skip
    row = np.arange(4, dtype=np.float32).reshape(1, 4)
    a[...] = row
    assert np.array_equal(a[...], np.broadcast_to(row, (8, 4)))


@pytest.mark.parametrize(
    ("selection", "shape", "covers"),
    [
        ((slice(0, 4, 1), slice(0, 3, 1)), (4, 3), True),
        ((slice(None), slice(0, 3)), (4, 3), True),
        ((slice(0, 3, 1), slice(0, 3, 1)), (4, 3), False),
        ((slice(1, 4, 1), slice(0, 3, 1)), (4, 3), False),
        ((slice(0, 4, 2), slice(0, 3, 1)), (4, 3), False),
        ((0, slice(0, 3, 1)), (1, 3), True),
        ((0, slice(0, 3, 1)), (2, 3), False),
        ((np.arange(4), slice(0, 3, 1)), (4, 3), False),
        ((slice(0, 4, 1),), (4, 3), False),
    ],
)
def test_what_covers_a_chunk(selection: Any, shape: tuple[int, ...], covers: bool) -> None:
    assert _covers(selection, shape) is covers


def test_only_dropped_axes_are_restored() -> None:
    v = np.arange(6).reshape(2, 3)
    assert _fitted(v, (2, 1, 3)).shape == (2, 1, 3)
    assert _fitted(v, (3, 2)) is v  # (another layout: left for NumPy to refuse)
    assert _fitted(np.arange(6), (2, 3)).shape == (6,)
