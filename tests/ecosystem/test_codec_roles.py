"""Every codec in every role it has, as an outside Zarr user meets it (issue 36).

numcodecs classes as Zarr v2 compressor and filter, in C and F order,
little- and big-endian; Zarr v3 classes as serializer, filter or compressor
as their kind allows, F order through ``config={"order": "F"}`` and
big-endian through ``BytesCodec(endian="big")`` ahead of a byte codec.
Values and bytes must be exact. Also: arrays written before the byte-order
rule read back right through the recipe in docs/format.md.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec

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

ROOT = Path(__file__).resolve().parents[2]
DTYPES = ["<f4", ">f4", "<f8", ">f8", "<i2", ">i2", "<u4", ">u4", "|i1"]


def values(dtype: str, shape: tuple[int, ...] = (12, 10)) -> np.ndarray:
    """Weights-like values of ``dtype`` (special values included for floats)."""
    rng = np.random.default_rng(36)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = (rng.standard_normal(shape) * 0.05).astype(dt)
        a.flat[:5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
        return a
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dt)


def same(a: Any, b: np.ndarray) -> bool:
    a = np.asarray(a)
    return a.shape == b.shape and a.tobytes() == np.ascontiguousarray(b).astype(a.dtype).tobytes()


def v2_compressors(dtype: np.dtype) -> list[Any]:
    return [
        NumcodecsRans(),
        NumcodecsHuffman(),
        NumcodecsAuto(),
        NumcodecsWeights(),
        NumcodecsWeights(coder="rans", dtype=dtype),
    ]


def v2_filters(dtype: np.dtype) -> list[list[Any]]:
    ordered = dtype.str if dtype.byteorder == ">" else dtype.name
    return [
        [NumcodecsPlanes(elementsize=dtype.itemsize)],
        [NumcodecsBitReorder(dtype=ordered)],
        [NumcodecsBitReorder(dtype=ordered), NumcodecsPlanes(elementsize=dtype.itemsize)],
    ]


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_zarr_v2_every_numcodecs_codec_in_every_role(order: str, dtype: str) -> None:
    dt = np.dtype(dtype)
    a = values(dtype)
    pipelines = [(None, c) for c in v2_compressors(dt)]
    pipelines += [(f, NumcodecsRans()) for f in v2_filters(dt)]
    pipelines += [(f, None) for f in v2_filters(dt)[:1]]  # (planes alone: bytes of its own)
    for filters, compressor in pipelines:
        z = zarr.create_array(
            {},
            shape=a.shape,
            chunks=(5, 4),
            dtype=dt,
            zarr_format=2,
            order=order,
            filters=filters,
            compressors=compressor,
        )
        z[:] = a
        got = z[:]
        assert got.dtype == dt, (filters, compressor)
        assert got.tobytes() == a.tobytes(), (order, dtype, filters, compressor)
        assert same(z[1:7, 2:9], a[1:7, 2:9])
        assert same(z[:, 3], a[:, 3]), (order, dtype, filters, compressor)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["<f4", ">f4", ">i2"])
def test_numcodecs_chunk_bytes_are_memory_bytes(order: str, dtype: str) -> None:
    """A chunk decoded by the codec alone is the chunk's bytes as they lay in memory."""
    a = np.asarray(values(dtype, (6, 5)), order=order)
    for codec in [*v2_compressors(a.dtype), *(f[0] for f in v2_filters(a.dtype))]:
        back = codec.decode(codec.encode(a))
        assert np.asarray(back).tobytes(order="A") == a.tobytes(order="A"), (codec, order, dtype)
        out = np.empty_like(a)  # F-ordered where a is: filled in its memory order
        codec.decode(codec.encode(a), out=out)
        assert out.tobytes(order="A") == a.tobytes(order="A") and same(out, a), codec


def test_strings_void_and_raw_bytes_through_the_byte_coders() -> None:
    for codec in (NumcodecsRans(), NumcodecsHuffman(), NumcodecsAuto()):
        for arr in (
            np.array(["abc", "de", ""], "U3"),
            np.array([b"ab", b"c"], "S2"),
            np.frombuffer(b"0123456789ab", "V4"),
            np.array([(1, 2.5)], [("a", "<i4"), ("b", ">f8")]),
        ):
            assert np.asarray(codec.decode(codec.encode(arr))).tobytes() == arr.tobytes()
        z = zarr.create_array(
            {}, shape=(3,), chunks=(2,), dtype="U3", zarr_format=2, compressors=codec
        )
        z[:] = np.array(["abc", "de", ""])
        assert z[:].tolist() == ["abc", "de", ""]
        with pytest.raises(TypeError, match="object"):
            codec.encode(np.array(["a", 1], dtype=object))


def test_weights_takes_dtypes_it_has_no_layout_for_as_their_bytes() -> None:
    """(numcodecs' rule: any buffer) complex, strings, void: coded as their bytes."""
    codec = NumcodecsWeights()
    for arr in (
        np.arange(12, dtype="<c8").reshape(3, 4, order="F"),
        np.array(["ab", "c"]),
        np.frombuffer(b"12345678", "V4"),
        np.arange(6, dtype=">c16"),
    ):
        back = codec.decode(codec.encode(arr))
        assert np.asarray(back).tobytes() == arr.tobytes(order="A"), arr.dtype
    z = zarr.create_array(
        {}, shape=(4, 3), chunks=(2, 3), dtype="c8", zarr_format=2, order="F", compressors=codec
    )
    z[:] = np.arange(12).reshape(4, 3) * (1 + 2j)
    assert np.array_equal(z[:], np.arange(12).reshape(4, 3) * (1 + 2j))
    with pytest.raises(TypeError, match="object"):
        codec.encode(np.array([1, "a"], dtype=object))


def test_raw_bytes_of_any_kind_for_a_dtype_codec() -> None:
    import array

    a = np.array([1.5, -2.0, 3.25], "<f4")
    for codec in (NumcodecsWeights(dtype="float32"), NumcodecsBitReorder(dtype="float32")):
        ref = np.asarray(codec.encode(a)).tobytes()
        for raw in (
            a.tobytes(),
            bytearray(a.tobytes()),
            array.array("b", a.tobytes()),
            a.view(np.int8),
            a.view(np.uint8),
        ):
            assert np.asarray(codec.encode(raw)).tobytes() == ref, (codec, type(raw))
        with pytest.raises(ValueError, match="configured for float32, got int16"):
            codec.encode(np.zeros(4, np.int16))


def test_transforms_refuse_to_encode_without_their_setting() -> None:
    """A filter without the setting its decoder needs would write arrays no read undoes."""
    with pytest.raises(ValueError, match="encoding needs elementsize="):
        zarr.create_array({}, shape=(4,), dtype="f4", zarr_format=2, filters=[NumcodecsPlanes()])[
            :
        ] = np.ones(4, "f4")
    with pytest.raises(ValueError, match="encoding needs dtype="):
        zarr.create_array(
            {}, shape=(4,), dtype="f4", zarr_format=2, filters=[NumcodecsBitReorder()]
        )[:] = np.ones(4, "f4")


def test_weights_big_endian_frames_are_version_4_and_decode_back() -> None:
    from nncodecs.frame import frame_info

    a = values(">f4", (300, 200))
    frame = NumcodecsWeights().encode(a)
    info = frame_info(frame)
    assert (info["version"], info["element"], info["big_endian"]) == (4, "float32", True)
    little = NumcodecsWeights().encode(a.astype("<f4"))
    assert frame_info(little)["version"] == 3  # little-endian data: the bytes of before
    back = NumcodecsWeights().decode(frame)
    assert back.dtype == np.dtype(">f4") and back.tobytes() == a.tobytes()
    # A byte coder asked for the planes of big-endian elements refuses them.
    with pytest.raises(ValueError, match="big-endian float32 elements"):
        NumcodecsRans().decode(frame)
    # Small inputs (the whole-input zstd kind) record the order too.
    small = np.arange(5, dtype=">f8")
    enc = NumcodecsWeights().encode(small)
    assert enc[:4] == b"NNCW" and enc[4] & 0x40
    assert NumcodecsWeights().decode(enc).tobytes() == small.tobytes()


V3_CHAINS = {
    "weights": lambda: {"serializer": Weights(), "compressors": None},
    "planes+rans": lambda: {"serializer": Planes(), "compressors": [Rans()]},
    "bitreorder+planes+auto": lambda: {
        "filters": [BitReorder()],
        "serializer": Planes(),
        "compressors": [Auto()],
    },
    "bytes-little+huffman": lambda: {
        "serializer": BytesCodec(endian="little"),
        "compressors": [Huffman()],
    },
    "bytes-big+rans": lambda: {"serializer": BytesCodec(endian="big"), "compressors": [Rans()]},
    "bytes-big+auto": lambda: {"serializer": BytesCodec(endian="big"), "compressors": [Auto()]},
    "bitreorder+bytes-big+rans": lambda: {
        "filters": [BitReorder()],
        "serializer": BytesCodec(endian="big"),
        "compressors": [Rans()],
    },
}


#: Known defect, listed rather than skipped: zarr writes a bfloat16 array under
#: BytesCodec(endian="big") (ml_dtypes' bfloat16 has no big-endian twin, so zarr's
#: byte swap is a no-op) and nncodecs' data type then refuses every read of it.
#: It should be refused when the array is created; strict, so a fix shows.
_BF16_BIG = pytest.mark.xfail(
    strict=True,
    raises=ValueError,
    reason="bfloat16 under BytesCodec(endian='big'): written, unread",
)
_V3_CASES = [
    pytest.param(dtype, chain, marks=_BF16_BIG)
    if dtype == "bfloat16" and chain.startswith("bytes-big")
    else (dtype, chain)
    for dtype in ("float32", "float16", "int16", "bfloat16")
    for chain in sorted(V3_CHAINS)
]


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(("dtype", "chain"), _V3_CASES)
def test_zarr_v3_every_codec_in_every_role(order: str, chain: str, dtype: str) -> None:
    import ml_dtypes

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    a = values("<f4").astype(dt) if dt.kind in "fV" else values("<i2")
    z = zarr.create_array(
        {}, shape=a.shape, chunks=(5, 4), dtype=dt, config={"order": order}, **V3_CHAINS[chain]()
    )
    z[:] = a
    assert z[:].tobytes() == np.ascontiguousarray(a).tobytes(), (chain, order, dtype)
    assert z[2:9, 1:3].tobytes() == np.ascontiguousarray(a[2:9, 1:3]).tobytes()


def test_big_endian_v3_bytes_are_what_a_big_endian_reader_expects() -> None:
    """BytesCodec(endian="big") then a byte codec: the coder sees (and gives back) the
    big-endian bytes, so the same array read with zarr's own BytesCodec+zstd agrees."""
    a = values("<f4", (8, 8))
    store: dict[str, Any] = {}
    z = zarr.create_array(
        store,
        shape=a.shape,
        chunks=a.shape,
        dtype="float32",
        serializer=BytesCodec(endian="big"),
        compressors=[Rans()],
    )
    z[:] = a
    frame = store["c/0/0"].to_bytes()
    assert bytes(NumcodecsRans().decode(frame)) == a.astype(">f4").tobytes()


def _recipe() -> Any:
    """The function docs/format.md gives for arrays written before the rule."""
    text = (ROOT / "docs" / "format.md").read_text()
    section = text.split("## Reading arrays written before the byte-order rule", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "docs/format.md lost its recipe"
    namespace: dict[str, Any] = {}
    exec(code.group(1), namespace)
    return namespace["relabel_before_byte_order_rule"]


def test_arrays_written_before_the_rule_read_back_right_through_the_docs_recipe(
    tmp_path: Path,
) -> None:
    src = ROOT / "tests" / "fixtures" / "zarr-v2-before-byte-order-rule"
    store = tmp_path / "old.zarr"
    shutil.copytree(src, store)
    expected = np.load(store / "expected.npy")
    names = [
        "f_order_auto",
        "big_endian_weights",
        "big_endian_planes",
        "f_order_big_endian_weights",
    ]
    for name in names:  # as written: wrong values, no error (what the rule fixed)
        assert not np.array_equal(zarr.open_array(store / name, mode="r")[:], expected), name
    relabel = _recipe()
    for name in names:
        relabel(store / name)
        got = zarr.open_array(store / name, mode="r")[:]
        assert np.array_equal(got, expected), name
    # Arrays of other codecs are left as they are.
    plain = tmp_path / "plain.zarr"
    zarr.create_array(plain, shape=(3,), dtype=">f4", zarr_format=2, order="F")[:] = [1, 2, 3]
    before = (plain / ".zarray").read_text()
    relabel(plain)
    assert (plain / ".zarray").read_text() == before


def test_weights_decodes_into_an_out_of_any_dtype() -> None:
    """(numcodecs' rule) out receives the bytes, whatever it holds: strings, void too."""
    for arr in (
        np.array(["ab", "cde"]),
        np.frombuffer(b"12345678", "V4"),
        np.zeros(3, [("a", "<i4"), ("b", ">f8")]),
        np.arange(4, dtype=">f4"),
    ):
        codec = NumcodecsWeights()
        out = np.empty_like(arr)
        codec.decode(codec.encode(arr), out=out)
        assert out.tobytes() == arr.tobytes(), arr.dtype
    with pytest.raises(TypeError, match="object"):
        NumcodecsWeights().decode(
            NumcodecsWeights().encode(np.arange(3)), out=np.empty(3, dtype=object)
        )
