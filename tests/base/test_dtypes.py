"""ML data types in Zarr (bfloat16, float8, float4) and bit-exact torch conversion."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import zarr
from harness import same_bits, special_values
from zarr.storage import MemoryStore

import nncodecs
from nncodecs.codecs.zarr_dtypes import BFloat16, Float4E2M1FN, Float8E4M3FN, Float8E5M2
from nncodecs.dtypes import dtype_name, normalize_dtype

ZARR_NAMES = {
    "bfloat16": "bfloat16",
    "float8_e4m3fn": "nncodecs.float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "float4_e2m1fn": "float4_e2m1fn",
}


@pytest.mark.parametrize("name", ZARR_NAMES)
def test_create_array_with_ml_dtype(name: str) -> None:
    dt = np.dtype(getattr(ml_dtypes, name))
    for spec in (dt, getattr(ml_dtypes, name), name):
        z = zarr.create_array(MemoryStore(), shape=(20,), chunks=(8,), dtype=spec)
        assert z.metadata.to_dict()["data_type"] == ZARR_NAMES[name]
        values = special_values(name)[:20]
        z[: len(values)] = values
        assert z[:].dtype == dt
        assert same_bits(z[: len(values)], values)


def test_ml_dtype_names_work_in_a_process_that_only_imports_zarr() -> None:
    # The data types load without ml_dtypes; "float8_e4m3fn", a NumPy name only
    # once ml_dtypes is imported, is taken as the JSON name of its Zarr type.
    code = (
        "import zarr\n"
        "for name in ['bfloat16', 'float8_e4m3fn', 'float8_e5m2', 'float4_e2m1fn']:\n"
        "    a = zarr.create_array({}, shape=(2,), dtype=name, fill_value=1.5)\n"
        "    print(a.metadata.data_type.to_json(3), a[:].dtype, a[:].tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        f"{zarr_name} {name} [1.5, 1.5]" for name, zarr_name in ZARR_NAMES.items()
    ]


@pytest.mark.parametrize(
    ("cls", "fill", "json_fill"),
    [
        (BFloat16, 1.5, 1.5),
        (BFloat16, math.nan, "NaN"),
        (BFloat16, -math.inf, "-Infinity"),
        (Float8E5M2, math.inf, "Infinity"),
        (Float8E4M3FN, math.nan, "NaN"),
        (Float8E4M3FN, -448.0, -448.0),
        (Float4E2M1FN, -6.0, -6.0),
    ],
)
def test_fill_values_round_trip_through_json(cls: type, fill: float, json_fill: object) -> None:
    zdt = cls()
    encoded = zdt.to_json_scalar(fill, zarr_format=3)
    assert encoded == json_fill
    back = zdt.from_json_scalar(json.loads(json.dumps(encoded)), zarr_format=3)
    assert same_bits(np.array(back), np.array(zdt.cast_scalar(fill)))


def test_nan_payload_fill_value_is_kept_as_hex() -> None:
    zdt = BFloat16()
    payload = np.array([0x7FC1], dtype=np.uint16).view(ml_dtypes.bfloat16)[0]
    assert zdt.to_json_scalar(payload, zarr_format=3) == "0x7fc1"
    back = zdt.from_json_scalar("0x7fc1", zarr_format=3)
    assert np.array(back).view(np.uint16) == 0x7FC1
    z = zarr.create_array(MemoryStore(), shape=(4,), dtype=ml_dtypes.bfloat16, fill_value=payload)
    assert (z[:].view(np.uint16) == 0x7FC1).all()
    with pytest.raises(ValueError, match="4 hex digits"):
        zdt.from_json_scalar("0x7fc", zarr_format=3)
    with pytest.raises(TypeError, match="invalid fill value"):
        zdt.from_json_scalar("nan-ish", zarr_format=3)


def test_zarr_v2_is_refused_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="Zarr v3"):
        BFloat16().to_json(2)
    with pytest.raises(ValueError, match="Zarr v3"):
        zarr.create_array(MemoryStore(), shape=(4,), dtype=ml_dtypes.bfloat16, zarr_format=2)


def test_big_endian_bfloat16_is_refused() -> None:
    with pytest.raises(ValueError, match="big-endian"):
        BFloat16(endianness="big").to_native_dtype()


def test_dtype_names() -> None:
    assert normalize_dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    assert dtype_name(np.dtype(">f4")) == "float32"
    with pytest.raises(TypeError, match="unsupported dtype"):
        dtype_name(np.dtype("complex64"))


TORCH_DTYPES = ["bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2",
                "int8", "int16", "int32", "int64", "uint8", "bool"]  # fmt: skip


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_round_trip_is_bit_exact(torch: object, name: str) -> None:
    import torch as th

    tdtype = getattr(th, name)
    for shape in ((), (0,), (7, 5)):
        raw = th.randint(0, 256, (*shape, th.empty(0, dtype=tdtype).element_size()), dtype=th.uint8)
        t = raw.view(tdtype).reshape(shape) if shape != () else raw.view(tdtype)[0]
        if name == "bool":
            t = raw[..., 0] % 2 == 1
        arr = nncodecs.as_numpy(t)
        assert arr.shape == tuple(t.shape)
        assert dtype_name(arr.dtype) == name
        back = nncodecs.to_torch(arr)
        assert back.dtype == tdtype
        assert back.shape == t.shape
        same_size = {1: th.uint8, 2: th.int16, 4: th.int32, 8: th.int64}[t.element_size()]
        if name != "bool":  # views of the same width keep 0-d shapes (no NaN != NaN)
            assert th.equal(back.view(same_size), t.view(same_size))
        else:
            assert th.equal(back, t)


def test_torch_tensors_through_zarr(torch: object) -> None:
    import torch as th

    t = th.randn(33, 17).to(th.bfloat16)
    z = zarr.create_array(
        MemoryStore(),
        shape=tuple(t.shape),
        dtype=normalize_dtype(t.dtype),
        filters=[nncodecs.BitReorder()],
        serializer=nncodecs.Planes(),
    )
    z[:] = nncodecs.as_numpy(t)
    back = nncodecs.to_torch(z[:])
    assert back.dtype == th.bfloat16
    assert th.equal(back.view(th.int16), t.view(th.int16))


def test_to_torch_shares_memory_only_when_told_and_writable(tmp_path) -> None:
    """A decoded tensor becomes a torch tensor without a copy; a caller's array, or
    a read-only one (a memory map), is copied."""
    th = pytest.importorskip("torch")
    from nncodecs.dtypes import to_torch

    arr = np.arange(6, dtype=np.float32)
    copied, shared = to_torch(arr), to_torch(arr, copy=False)
    arr[0] = 42
    assert copied[0] == 0 and shared[0] == 42
    frozen = np.arange(4, dtype=ml_dtypes.bfloat16)
    frozen.flags.writeable = False
    t = to_torch(frozen, copy=False)
    assert t.dtype == th.bfloat16 and t.data_ptr() != frozen.ctypes.data
    # Reader.read_tensor hands its fresh array over: two reads never share memory
    with nncodecs.Writer(tmp_path / "m.zarr") as w:
        w.add_tensor("w", np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64))
    with nncodecs.Reader(tmp_path / "m.zarr") as r:
        a, b = r.read_tensor("w", to="torch"), r.read_tensor("w", to="torch")
        a.zero_()
        assert th.equal(b, th.from_numpy(r.read_tensor("w"))) and b.abs().sum() > 0
