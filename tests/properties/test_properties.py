"""Property tests (hypothesis): any array of any supported dtype, shape, chunking and
setting round-trips bit-exactly through every codec, through numcodecs and through Zarr.

The arrays are drawn as bytes of every kind a codec meets: arbitrary bit patterns
(NaN payloads, negative zeros, subnormals, infinities), weight-like values (normal,
row-scaled), constants and a handful of distinct values; with any shape of up to three
axes, empty ones included, and any chunk shape. The settings are drawn over their whole
checked ranges. Hypothesis runs derandomized (``tests/conftest.py``: the ``ci`` profile,
the default), so a run never fails by chance; ``HYPOTHESIS_PROFILE=explore`` draws new
examples, more of them.
"""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
from harness import ALL_DTYPES, np_dtype, same_bits
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes
from zarr.codecs import ZstdCodec
from zarr.storage import MemoryStore

from nncodecs import (
    Auto,
    BitReorder,
    Huffman,
    NumcodecsAuto,
    NumcodecsBitReorder,
    NumcodecsHuffman,
    NumcodecsPlanes,
    NumcodecsRans,
    NumcodecsWeights,
    Planes,
    Rans,
    Weights,
)

KINDS = ("bits", "weights", "rows", "constant", "few")


@st.composite
def arrays(draw: Any, max_side: int = 24) -> Any:
    """An array of a drawn dtype and shape, its bytes of a drawn kind."""
    name = draw(st.sampled_from(ALL_DTYPES))
    dtype = np_dtype(name)
    shape = draw(array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=max_side))
    kind, seed = draw(st.sampled_from(KINDS)), draw(st.integers(0, 2**32 - 1))
    return name, _fill(dtype, shape, kind, seed)


def _fill(dtype: np.dtype, shape: tuple[int, ...], kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if kind == "bits" or (dtype.kind in "biu" and kind in ("weights", "rows")):
        raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
        arr = raw.view(dtype) if dtype.kind != "b" else (raw & 1).astype(bool)
        return arr.reshape(shape)
    if kind == "constant":
        return np.full(shape, rng.integers(0, 256, dtype.itemsize, dtype=np.uint8).view(dtype)[0])
    if kind == "few":
        pool = rng.integers(0, 256, 5 * dtype.itemsize, dtype=np.uint8)
        pool = pool.view(dtype) if dtype.kind != "b" else (pool[:5] & 1).astype(bool)
        return pool[rng.integers(0, len(pool), n)].reshape(shape)
    body = rng.standard_normal(n) * 0.05
    if kind == "rows" and len(shape) >= 2 and n:
        body = body.reshape(shape[0], -1) * np.exp(rng.normal(0, 2, (shape[0], 1)))
    return body.astype(np.float32).astype(dtype).reshape(shape)


def _bytes(buf: Any) -> bytes:
    return bytes(np.ascontiguousarray(np.asarray(buf)).reshape(-1).view(np.uint8))


def _round_trip(codec: Any, arr: np.ndarray) -> None:
    """Encode, decode into ``out`` and without it, and through the codec's config."""
    enc = codec.encode(arr)
    out = np.empty_like(arr)
    codec.decode(enc, out=out)
    assert same_bits(out, arr)
    again = numcodecs.get_codec(codec.get_config())
    assert _bytes(again.encode(arr)) == _bytes(enc)
    back = np.asarray(again.decode(enc, out=np.empty_like(arr)))
    assert same_bits(back.reshape(arr.shape), arr)


precision = st.integers(10, 12)
subblock = st.integers(12, 16)
checksum = st.booleans()
zstd_level = st.integers(1, 9)
min_gain = st.sampled_from([0.0, 0.01, 0.05, 0.5, 1.0])
threads = st.sampled_from([None, 1, 2, 5])


@st.composite
def coder_settings(draw: Any, name: str, arr: np.ndarray) -> dict[str, Any]:
    width = arr.dtype.itemsize
    out: dict[str, Any] = {"checksum": draw(checksum), "subblock_log2": draw(subblock),
                           "threads": draw(threads)}  # fmt: skip
    if name != "huffman":
        out["precision"] = draw(precision)
    if name == "auto":
        out["zstd_level"], out["min_gain"] = draw(zstd_level), draw(min_gain)
    if draw(st.booleans()):
        out["planes"] = width
    return out


@given(data=st.data(), case=arrays())
def test_bitreorder_and_planes_round_trip(data: Any, case: Any) -> None:
    name, arr = case
    # (both need their setting: without it they refuse to encode what no read could undo)
    _round_trip(NumcodecsBitReorder(dtype=name), arr)
    _round_trip(NumcodecsPlanes(elementsize=arr.itemsize), arr)


@pytest.mark.parametrize("coder", ["rans", "huffman", "auto"])
@given(data=st.data(), case=arrays())
def test_entropy_coders_round_trip(coder: str, data: Any, case: Any) -> None:
    _, arr = case
    cls = {"rans": NumcodecsRans, "huffman": NumcodecsHuffman, "auto": NumcodecsAuto}[coder]
    settings = data.draw(coder_settings(coder, arr))
    _round_trip(cls(**settings), arr)


@given(data=st.data(), case=arrays())
def test_weights_round_trips(data: Any, case: Any) -> None:
    name, arr = case
    codec = NumcodecsWeights(
        coder=data.draw(st.sampled_from(["auto", "rans", "huffman"])),
        dtype=data.draw(st.sampled_from([None, name])),
        precision=data.draw(precision),
        subblock_log2=data.draw(subblock),
        checksum=data.draw(checksum),
        zstd_level=data.draw(zstd_level),
        min_gain=data.draw(min_gain),
        threads=data.draw(threads),
    )
    _round_trip(codec, arr)


def _chain(kind: str, data: Any, name: str, arr: np.ndarray) -> dict[str, Any]:
    """The keywords of ``zarr.create_array`` for a drawn chain of nncodecs' Zarr codecs."""
    if kind == "weights":
        coder = data.draw(st.sampled_from(["auto", "rans", "huffman"]))
        return {"serializer": Weights(coder=coder, checksum=data.draw(checksum))}
    filters = [BitReorder()] if name != "bool" and data.draw(st.booleans()) else []
    coder = {"rans": Rans, "huffman": Huffman, "auto": Auto, "zstd": None}[kind]
    settings = data.draw(coder_settings(kind, arr)) if coder is not None else {}
    settings.pop("planes", None)
    settings.pop("threads", None)
    compressor = coder(**settings) if coder is not None else ZstdCodec(level=1)
    return {"filters": filters, "serializer": Planes(), "compressors": [compressor]}


@pytest.mark.parametrize("kind", ["weights", "rans", "huffman", "auto", "zstd"])
@given(data=st.data(), case=arrays(max_side=20))
def test_zarr_arrays_round_trip_any_chunking(kind: str, data: Any, case: Any) -> None:
    name, arr = case
    chunks = tuple(data.draw(st.integers(1, max(1, side))) for side in arr.shape)
    shards = None
    if arr.ndim and data.draw(st.booleans()):
        shards = tuple(c * data.draw(st.integers(1, 3)) for c in chunks)
    z = zarr.create_array(
        MemoryStore(), shape=arr.shape, dtype=arr.dtype, chunks=chunks,
        shards=shards, fill_value=None if arr.dtype.kind != "b" else False,
        **_chain(kind, data, name, arr),
    )  # fmt: skip
    z[...] = arr
    assert same_bits(z[...], arr)
    if arr.ndim and arr.shape[0] > 1:  # a partial read across chunk boundaries
        cut = data.draw(st.integers(1, arr.shape[0] - 1))
        assert same_bits(z[cut:], arr[cut:])
