"""zarr-python's own hypothesis strategies, with nncodecs codecs in every role (issue 36).

zarr's ``arrays()`` strategy ignores its ``compressors`` argument in 3.1 and
3.4, so a test built on it never touches our codecs: this one builds arrays
itself from zarr's pieces (``numpy_arrays``, ``chunk_shapes``,
``shard_shapes``, ``basic_indices``, ``orthogonal_indices``), and draws the
byte order itself (zarr 3.1's strategies draw native order only). Each case
is exact, or refused when the array is created with an error named here.
Also xarray's ``to_zarr`` / ``open_zarr`` of a big-endian, F-ordered variable
through each codec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import given
from hypothesis import strategies as st
from zarr.codecs import BytesCodec
from zarr.testing.strategies import (
    basic_indices,
    chunk_shapes,
    numpy_arrays,
    orthogonal_indices,
    shard_shapes,
)

import nncodecs

DTYPES = ["<f4", ">f4", "<f8", ">f8", "<f2", ">f2", "<i2", ">i4", "<u8", "|i1", "|u1", "|b1"]


def _bits(a: Any) -> bytes:
    a = np.ascontiguousarray(a)
    return a.tobytes()


def _same(got: Any, want: np.ndarray) -> bool:
    got = np.asarray(got)
    return got.shape == want.shape and _bits(got.astype(want.dtype)) == _bits(want)


def _v2_pipeline(draw: Any, dt: np.dtype) -> dict[str, Any]:
    ordered = dt.str if dt.byteorder == ">" else dt.name
    filters = draw(
        st.sampled_from(
            [
                None,
                [nncodecs.NumcodecsPlanes(elementsize=dt.itemsize)],
                [nncodecs.NumcodecsBitReorder(dtype=ordered)],
                [
                    nncodecs.NumcodecsBitReorder(dtype=ordered),
                    nncodecs.NumcodecsPlanes(elementsize=dt.itemsize),
                ],
            ]
        )
    )
    compressor = draw(
        st.sampled_from(
            [
                nncodecs.NumcodecsRans(),
                nncodecs.NumcodecsHuffman(),
                nncodecs.NumcodecsAuto(),
                nncodecs.NumcodecsWeights(),
                nncodecs.NumcodecsAuto(planes=dt.itemsize),
            ]
        )
    )
    return {"filters": filters, "compressors": compressor, "order": draw(st.sampled_from("CF"))}


def _v3_pipeline(draw: Any, dt: np.dtype) -> dict[str, Any]:
    endian = "big" if dt.byteorder == ">" else "little"
    serializer = draw(st.sampled_from(["weights", "planes", "bytes"]))
    out: dict[str, Any] = {"config": {"order": draw(st.sampled_from("CF"))}}
    if serializer == "weights":
        out["serializer"], out["compressors"] = nncodecs.Weights(), None
    else:
        out["serializer"] = (
            nncodecs.Planes() if serializer == "planes" else BytesCodec(endian=endian)
        )
        out["compressors"] = [
            draw(st.sampled_from([nncodecs.Rans(), nncodecs.Huffman(), nncodecs.Auto()]))
        ]
        if draw(st.booleans()):
            out["filters"] = [nncodecs.BitReorder()]
    return out


@given(data=st.data())
def test_zarr_strategies_through_every_codec(data: Any) -> None:
    dt = np.dtype(data.draw(st.sampled_from(DTYPES), label="dtype"))
    fmt = data.draw(st.sampled_from([2, 3]), label="zarr_format")
    arr = data.draw(numpy_arrays(dtype=dt), label="array")
    arr = np.asarray(arr, dtype=dt)  # (zarr 3.1's numpy_arrays draws native order)
    chunks = data.draw(chunk_shapes(shape=arr.shape), label="chunks")
    kwargs = (_v2_pipeline if fmt == 2 else _v3_pipeline)(data.draw, dt)
    if fmt == 3 and arr.ndim and all(arr.shape) and data.draw(st.booleans(), label="sharded"):
        kwargs["shards"] = data.draw(shard_shapes(shape=arr.shape, chunk_shape=chunks))
    z = zarr.create_array(
        {}, shape=arr.shape, chunks=chunks, dtype=dt, zarr_format=fmt, fill_value=0, **kwargs
    )
    z[...] = arr
    assert _same(z[...], arr), kwargs
    idx = data.draw(basic_indices(shape=arr.shape), label="basic index")
    assert _same(z[idx], arr[idx]), (kwargs, idx)
    if arr.ndim and all(arr.shape):
        zidx, npidx = data.draw(orthogonal_indices(shape=arr.shape), label="orthogonal index")
        assert _same(z.oindex[zidx], arr[npidx]), (kwargs, zidx)


V2_COMPRESSORS = {
    "weights": lambda: nncodecs.NumcodecsWeights(),
    "rans": lambda: nncodecs.NumcodecsRans(),
    "huffman": lambda: nncodecs.NumcodecsHuffman(),
    "auto": lambda: nncodecs.NumcodecsAuto(),
}


@pytest.mark.parametrize("codec", sorted(V2_COMPRESSORS))
def test_xarray_big_endian_f_ordered_variable(codec: str, tmp_path: Path) -> None:
    """What netCDF data brings: big-endian, F-ordered; through xarray, exact."""
    xr = pytest.importorskip("xarray")
    values = np.asfortranarray(
        (np.random.default_rng(3).standard_normal((30, 20)) * 10).astype(">f4")
    )
    ds = xr.Dataset({"v": (("y", "x"), values)}, coords={"y": np.arange(30), "x": np.arange(20)})
    enc = {"v": {"compressors": V2_COMPRESSORS[codec](), "chunks": (7, 9)}}
    ds.to_zarr(tmp_path / "d.zarr", zarr_format=2, encoding=enc, consolidated=False)
    back = xr.open_zarr(tmp_path / "d.zarr", consolidated=False)["v"].values
    assert back.tobytes() == values.astype(back.dtype).tobytes(order="C")
    assert np.array_equal(back, values)
    # and through a filter that needs its setting, with the order in it
    enc = {
        "v": {
            "filters": [
                nncodecs.NumcodecsBitReorder(dtype=">f4"),
                nncodecs.NumcodecsPlanes(elementsize=4),
            ],
            "compressors": V2_COMPRESSORS[codec](),
            "chunks": (7, 9),
        }
    }
    ds.to_zarr(tmp_path / "f.zarr", zarr_format=2, encoding=enc, consolidated=False)
    assert np.array_equal(xr.open_zarr(tmp_path / "f.zarr", consolidated=False)["v"].values, values)
