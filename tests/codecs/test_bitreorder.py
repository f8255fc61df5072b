"""nncodecs.bitreorder through the shared harness, plus its own edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from harness import (
    ALL_DTYPES,
    ARRAY_IDS,
    ARRAYS,
    FIXTURES,
    FLOATS,
    bits_dtype,
    check_backwards_compatibility,
    check_config,
    check_encode_decode,
    check_repr,
    check_zarr_config,
    np_dtype,
    same_bits,
)

import nncodecs
from nncodecs.codecs.bitreorder import BitReorder, NumcodecsBitReorder, _reorder_xp, encode_array
from nncodecs.dtypes import dtype_name


@pytest.mark.parametrize(("case", "arr"), ARRAYS, ids=ARRAY_IDS)
def test_round_trip(case: str, arr: np.ndarray) -> None:
    codec = NumcodecsBitReorder(dtype=arr.dtype)
    check_encode_decode(codec, arr)
    enc = codec.encode(arr)
    assert enc.shape == arr.shape
    if dtype_name(arr.dtype) in FLOATS or (arr.dtype.itemsize == 1 and arr.dtype.kind == "V"):
        assert enc.dtype == bits_dtype(arr.dtype)
    else:
        assert enc.dtype == arr.dtype  # integers and bool pass through


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_config_and_repr(name: str) -> None:
    for codec in (NumcodecsBitReorder(dtype=name), NumcodecsBitReorder()):
        check_config(codec)
        check_repr(codec, {"NumcodecsBitReorder": NumcodecsBitReorder})
    for zcodec in (BitReorder(dtype=name), BitReorder()):
        check_zarr_config(zcodec)
        assert eval(repr(zcodec), {"BitReorder": BitReorder}) == zcodec


def test_fixtures_still_decode() -> None:
    assert check_backwards_compatibility(FIXTURES / "bitreorder") == 3 * len(ALL_DTYPES)


@pytest.mark.parametrize("name", FLOATS)
def test_exponent_fills_the_top_bits(name: str) -> None:
    dt = np_dtype(name)
    values = np.array([1.0, -1.0, 2.0, -0.0], dtype=np.float64).astype(dt)
    enc = encode_array(values).astype(np.uint64)
    width = dt.itemsize * 8
    mant = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}.get(name)
    mant = mant if mant is not None else {"float8_e4m3fn": 3, "float8_e5m2": 2}[name]
    exponent = enc >> (mant + 1)
    sign = (enc >> mant) & 1
    assert exponent[0] == exponent[1]  # 1.0 and -1.0 differ only in the sign bit
    assert exponent[2] == exponent[0] + 1
    assert sign.tolist() == [0, 1, 0, 1]
    assert int(enc[3]) == 1 << mant  # -0.0: only the sign, now just below the exponent
    assert exponent.max() < (1 << (width - mant - 1))


@pytest.mark.parametrize("name", FLOATS)
def test_array_operations_path_matches_the_kernel(name: str) -> None:
    # The path CuPy arrays take, run here on NumPy: the same bytes as C++.
    dt = np_dtype(name)
    bits = np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).view(bits_dtype(dt))
    kernel = encode_array(bits.view(dt))
    np.testing.assert_array_equal(_reorder_xp(bits, name, decode=False), kernel)
    np.testing.assert_array_equal(_reorder_xp(kernel, name, decode=True), bits)


def test_big_endian_input() -> None:
    arr = np.array([1.5, -2.25, np.inf], dtype=">f4")
    codec = NumcodecsBitReorder(dtype=">f4")
    assert codec.get_config()["dtype"] == ">f4"
    enc = codec.encode(arr)
    # The reordered words keep the input's byte order, their values those of little-endian input.
    assert enc.dtype == np.dtype(">u4")
    np.testing.assert_array_equal(
        enc, NumcodecsBitReorder(dtype="float32").encode(arr.astype("<f4"))
    )
    for src in (enc, enc.tobytes()):
        dec = codec.decode(src)
        assert dec.dtype == np.dtype(">f4") and dec.tobytes() == arr.tobytes()
    # A little-endian setting refuses big-endian input, naming the setting that fits.
    with pytest.raises(ValueError, match="set dtype='>f4'"):
        NumcodecsBitReorder(dtype="float32").encode(arr)
    with pytest.raises(ValueError, match="configured for >f4, got <f4"):
        codec.encode(arr.astype("<f4"))


def test_torch_tensors_in_and_out(torch: object) -> None:
    import torch as th

    for tdtype in (th.bfloat16, th.float16, th.float32, th.float8_e4m3fn, th.float8_e5m2):
        t = th.randn(64, 33).to(tdtype)
        codec = NumcodecsBitReorder(dtype=tdtype)
        enc = codec.encode(t)
        dec = codec.decode(enc)
        back = nncodecs.to_torch(dec).reshape(t.shape)
        assert back.dtype == tdtype
        assert th.equal(back.view(th.uint8), t.view(th.uint8))
        out = th.empty_like(t)
        codec.decode(enc, out=nncodecs.as_numpy(out))
        assert th.equal(out.view(th.uint8), t.view(th.uint8))


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="encoding needs dtype="):
        NumcodecsBitReorder().encode(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="unsupported dtype complex64"):
        NumcodecsBitReorder(dtype="float32").encode(np.zeros(4, np.complex64))
    with pytest.raises(TypeError, match="object"):
        NumcodecsBitReorder(dtype="float32").encode(np.array([1, "a"], dtype=object))
    with pytest.raises(TypeError, match="string"):
        NumcodecsBitReorder(dtype="float32").encode(np.array(["ab"]))
    with pytest.raises(TypeError, match="unsupported dtype"):
        NumcodecsBitReorder(dtype="complex128")
    with pytest.raises(TypeError, match="not a data type"):
        NumcodecsBitReorder(dtype="bfloat17")
    with pytest.raises(ValueError, match="configured for float32, got float16"):
        NumcodecsBitReorder(dtype="float32").encode(np.zeros(4, np.float16))
    with pytest.raises(ValueError, match="not a whole number of float32"):
        NumcodecsBitReorder(dtype="float32").encode(b"123456")
    with pytest.raises(ValueError, match="not a whole number of bfloat16"):
        NumcodecsBitReorder(dtype="bfloat16").decode(b"123")
    with pytest.raises(ValueError, match="needs dtype="):
        NumcodecsBitReorder().decode(b"1234")
    with pytest.raises(ValueError, match="configured for bfloat16, the array holds float32"):
        BitReorder(dtype="bfloat16").validate(
            shape=(4,), dtype=_zdtype(np.dtype("float32")), chunk_grid=None
        )
    with pytest.raises(TypeError, match="unsupported dtype"):
        BitReorder().validate(shape=(4,), dtype=_zdtype(np.dtype("complex64")), chunk_grid=None)


def _zdtype(dt: np.dtype) -> object:
    from zarr.core.dtype import parse_data_type

    return parse_data_type(dt, zarr_format=3)


@pytest.mark.parametrize("name", [n for n in ALL_DTYPES if np_dtype(n).itemsize <= 2])
def test_every_bit_pattern_through_the_codec(name: str) -> None:
    dt = np_dtype(name)
    count = 1 << (8 * dt.itemsize)
    every = np.arange(count, dtype=np.uint64).astype(bits_dtype(dt))
    if name == "bool":
        every = np.array([0, 1], dtype=np.uint8)
    elif name == "float4_e2m1fn":
        every = np.arange(16, dtype=np.uint8)
    values = every.view(dt)
    codec = NumcodecsBitReorder(dtype=name)
    enc = codec.encode(values)
    assert len(np.unique(enc.view(every.dtype))) == len(every)  # a bijection
    assert same_bits(codec.decode(enc), values)
