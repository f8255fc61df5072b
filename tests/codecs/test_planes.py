"""nncodecs.planes through the shared harness, plus its own edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from harness import (
    ALL_DTYPES,
    ARRAY_IDS,
    ARRAYS,
    FIXTURES,
    FLOATS,
    check_backwards_compatibility,
    check_config,
    check_encode_decode,
    check_repr,
    check_zarr_config,
    np_dtype,
    random_array,
    same_bits,
)

from nncodecs.codecs.bitreorder import encode_array
from nncodecs.codecs.planes import (
    NumcodecsPlanes,
    Planes,
    _merge_xp,
    _split_xp,
    merge_array,
    split_array,
)
from nncodecs.errors import CorruptDataError


@pytest.mark.parametrize(("case", "arr"), ARRAYS, ids=ARRAY_IDS)
def test_round_trip(case: str, arr: np.ndarray) -> None:
    codec = NumcodecsPlanes(elementsize=arr.dtype.itemsize)
    check_encode_decode(codec, arr)
    planes = codec.encode(arr)
    size = arr.dtype.itemsize
    # The bytes as they lie in memory (numcodecs' rule: F order for an F-ordered array).
    memory = np.frombuffer(arr.tobytes(order="A"), np.uint8)
    np.testing.assert_array_equal(planes, memory.reshape(-1, size).T.reshape(-1))
    # Without its element size the codec refuses to encode what no read could undo.
    with pytest.raises(ValueError, match="encoding needs elementsize="):
        NumcodecsPlanes().encode(arr)


@pytest.mark.parametrize(("case", "arr"), ARRAYS, ids=ARRAY_IDS)
def test_fused_split_equals_reorder_then_split(case: str, arr: np.ndarray) -> None:
    fused = split_array(arr, reorder=True)
    two_pass = split_array(encode_array(arr))
    np.testing.assert_array_equal(fused, two_pass)
    back = merge_array(fused, arr.dtype, arr.shape, reorder=True)
    assert same_bits(back, arr)


@pytest.mark.parametrize("name", FLOATS)
def test_array_operations_path_matches_the_kernel(name: str) -> None:
    arr = random_array(name, 1000, seed=2)
    size = arr.dtype.itemsize
    raw = arr.view(np.uint8)
    for fuse in (False, True):
        layout = name if fuse else "none"
        planes = split_array(arr, reorder=fuse)
        np.testing.assert_array_equal(_split_xp(raw, size, layout), planes)
        np.testing.assert_array_equal(_merge_xp(planes, size, layout), raw)


@pytest.mark.parametrize("size", [1, 2, 4, 8, 3, 16])
def test_config_and_repr(size: int) -> None:
    for codec in (NumcodecsPlanes(elementsize=size), NumcodecsPlanes()):
        check_config(codec)
        check_repr(codec, {"NumcodecsPlanes": NumcodecsPlanes})
    for zcodec in (Planes(elementsize=size), Planes()):
        check_zarr_config(zcodec)
        assert eval(repr(zcodec), {"Planes": Planes}) == zcodec


def test_fixtures_still_decode() -> None:
    assert check_backwards_compatibility(FIXTURES / "planes") == 3 * len(ALL_DTYPES)


def test_exponent_plane_is_last_for_reordered_floats() -> None:
    w = (np.random.default_rng(0).standard_normal(4096) * 0.02).astype(np_dtype("bfloat16"))
    planes = split_array(w, reorder=True).reshape(2, -1)
    # A narrow band of exponents: the last plane has few distinct symbols.
    assert len(np.unique(planes[1])) < 40
    assert len(np.unique(planes[0])) > 200


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not a whole number of 4-byte elements"):
        NumcodecsPlanes(elementsize=4).encode(b"123456")
    with pytest.raises(ValueError, match="configured for 4-byte elements, got float16"):
        NumcodecsPlanes(elementsize=4).encode(np.zeros(4, np.float16))
    with pytest.raises(CorruptDataError, match="cannot be 4 equal planes"):
        NumcodecsPlanes(elementsize=4).decode(b"123456")
    with pytest.raises(ValueError, match="needs elementsize="):
        NumcodecsPlanes().decode(b"1234")
    with pytest.raises(ValueError, match="between 1 and 255"):
        NumcodecsPlanes(elementsize=0)
    with pytest.raises(TypeError, match="must be an int"):
        NumcodecsPlanes(elementsize=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="object"):
        NumcodecsPlanes(elementsize=8).encode(np.array([None, 1], dtype=object))
    with pytest.raises(CorruptDataError, match="expected 8 bytes"):
        merge_array(np.zeros(6, np.uint8), np.float32, (2,))
