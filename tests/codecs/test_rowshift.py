"""The row shift: per-row exponent offsets (docs/format.md), the row section of
version 3 frames (bit 7 of the element byte) and of version 2 ones (read only).

The weights codec subtracts each row's offset from the exponent plane where
its estimates say that pays, and every decoder path adds it back: the
fine-grained one (few chunks), the chunk-per-task one (many), the plane
decoder of the composable chain, under every SIMD variant.
"""

from __future__ import annotations

import numpy as np
import pytest
from harness import (
    FIXTURES,
    FIXTURES_V3,
    check_backwards_compatibility,
    has_rows,
    np_dtype,
    random_array,
    row_scaled,
    row_shift_fixture_cases,
    same_bits,
    to_old_version,
    varint,
    weights_like,
)

from nncodecs import CorruptDataError, NumcodecsAuto, NumcodecsWeights, _core
from nncodecs.codecs.planes import split_array
from nncodecs.frame import frame_info

FLOATS = ["bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"]


def _version(frame: bytes) -> int:
    """2 for a frame with the row section, 1 without (the versions that said
    so before version 3, which says it with bit 7 of its element byte)."""
    assert frame[:5] == b"NNCF\x03"
    return 2 if has_rows(frame) else 1


def _decode_everywhere(frame: bytes, arr: np.ndarray, threads=(1, 2, 3, 4)) -> None:
    """Bit-exact under every decoder variant and thread count, into a filled array."""
    dtype = arr.dtype.name if arr.dtype.kind != "V" else str(arr.dtype)
    try:
        for variant in _core.rans_variants():
            _core._set_rans_variant(variant)
            for t in threads:
                out = np.zeros(arr.size, arr.dtype)
                out.view(np.uint8)[:] = 0xA5
                NumcodecsWeights(dtype=arr.dtype, threads=t).decode(frame, out=out)
                assert same_bits(out, arr.reshape(-1)), (dtype, variant, t)
                back = NumcodecsWeights(dtype=arr.dtype, threads=t).decode(frame)
                assert same_bits(back, arr.reshape(-1)), (dtype, variant, t)
    finally:
        _core._set_rans_variant("auto")


@pytest.mark.parametrize("dtype", FLOATS)
def test_row_scaled_weights_get_version_2_and_decode_exactly(dtype: str) -> None:
    arr = row_scaled(dtype, 600, 512, seed=3)
    frame = NumcodecsWeights(dtype=dtype).encode(arr)
    flat = NumcodecsWeights(dtype=dtype).encode(arr.reshape(-1))  # no rows: version 1
    assert _version(flat) == 1
    if dtype == "float64":
        # Its exponent plane holds 8 of 11 bits and the mantissa planes dominate:
        # whichever version the estimates pick, never larger than version 1.
        assert len(frame) <= len(flat)
    else:
        assert _version(frame) == 2
        assert frame_info(frame)["row_length"] == 512
        # The offsets (one byte a row) are paid for: the frame is smaller by more.
        assert len(frame) < len(flat) - 600, (len(frame), len(flat))
    _decode_everywhere(frame, arr)


def test_rows_are_every_axis_but_the_first() -> None:
    # A conv kernel (out, in, kh, kw): one offset per output channel.
    arr = row_scaled("bfloat16", 256, 64 * 9, seed=4).reshape(256, 64, 3, 3)
    frame = NumcodecsWeights(dtype="bfloat16").encode(arr)
    assert _version(frame) == 2
    assert frame_info(frame)["row_length"] == 64 * 9
    _decode_everywhere(frame, arr, threads=(1, 2))


@pytest.mark.parametrize(
    "arr",
    [
        # No scale of its own per row: nothing to gain.
        weights_like("bfloat16", 512 * 512, seed=1).reshape(512, 512),
        # Rows below the minimum length (128) never get offsets.
        row_scaled("bfloat16", 4096, 64, seed=2),
        # Below 2^16 elements: not tried.
        row_scaled("bfloat16", 100, 600, seed=2),
        # Integers and random bit patterns.
        np.arange(300 * 400, dtype=np.int32).reshape(300, 400),
        random_array("float32", 300 * 400, seed=3).reshape(300, 400),
    ],
    ids=["no-row-scales", "short-rows", "small", "int32", "random-bits"],
)
def test_version_1_where_the_shift_cannot_pay(arr: np.ndarray) -> None:
    frame = NumcodecsWeights(dtype=arr.dtype).encode(arr)
    assert _version(frame) == 1  # (asserts a chunked frame too)
    assert same_bits(NumcodecsWeights(dtype=arr.dtype).decode(frame), arr.reshape(-1))


def test_every_chunk_kind_of_the_shifted_plane_decodes() -> None:
    # 2048 rows of 1024 bfloat16, 8 chunks a plane: row-scaled rows (coded),
    # rows of 1.0 (a constant chunk, row offset 127), random bit patterns (a raw chunk) and a
    # block of rows repeated (zstd wins there). Threads 1 and 2 take a chunk
    # a task, 4 the fine-grained path.
    rng = np.random.default_rng(7)
    scaled = row_scaled("bfloat16", 768, 1024, seed=8).view(np.uint16)
    ones = np.full((256, 1024), 0x3F80, np.uint16)  # 1.0: row offset 127
    noise = rng.integers(0, 2**16, (256, 1024), dtype=np.uint16)
    repeated = np.tile(row_scaled("bfloat16", 16, 1024, seed=9).view(np.uint16), (48, 1))
    bits = np.concatenate([scaled, ones, noise, repeated])
    arr = bits.view(np_dtype("bfloat16"))
    frame = NumcodecsWeights(dtype="bfloat16").encode(arr)
    assert _version(frame) == 2
    modes = {c[2] for c in frame_info(frame)["chunks"] if c[0] == 1}
    assert {"constant", "raw", "zstd"} <= modes, modes
    assert modes & {"rans", "huffman"}, modes
    _decode_everywhere(frame, arr, threads=(1, 2, 4))


def test_the_plane_decoder_reads_version_2() -> None:
    # The composable chain's coder decodes a weights frame to the planes of
    # the reordered array, the offsets undone.
    arr = row_scaled("bfloat16", 600, 512, seed=5)
    frame = NumcodecsWeights(dtype="bfloat16").encode(arr)
    assert _version(frame) == 2
    planes = np.asarray(split_array(arr.reshape(-1), reorder=True)).reshape(-1)
    for t in (1, 2, 4):
        back = NumcodecsAuto(planes=2, threads=t).decode(frame)
        assert np.asarray(back).view(np.uint8).tobytes() == planes.tobytes()


def test_the_plan_does_not_depend_on_threads() -> None:
    # The same bytes from any thread count (and so from any other encoder).
    arr = row_scaled("bfloat16", 3000, 1000, seed=6)
    frames = {NumcodecsWeights(dtype="bfloat16", threads=t).encode(arr) for t in (1, 2, 3)}
    assert len(frames) == 1
    assert _version(frames.pop()) == 2


def _shifted_frame() -> tuple[bytes, dict, np.ndarray]:
    arr = row_scaled("bfloat16", 300, 512, seed=10)
    frame = NumcodecsWeights(dtype="bfloat16").encode(arr)
    info = frame_info(frame)
    assert _version(frame) == 2 and info["row_length"] == 512
    return frame, info, arr


def test_a_corrupt_row_offset_is_caught_by_the_checksum() -> None:
    frame, info, _ = _shifted_frame()
    # The 300 offsets (one a row) follow the checksum and the row length (512: 2 bytes).
    at = 8 + len(varint(info["decoded_len"])) + 4
    assert frame[at : at + 2] == varint(512)
    raw = bytearray(frame)
    raw[at + 2 + 150] ^= 0x08
    for t in (1, 2, 4):
        with pytest.raises(CorruptDataError, match="CRC32C mismatch"):
            NumcodecsWeights(dtype="bfloat16", threads=t).decode(bytes(raw))


def test_malformed_row_sections_are_clear_errors() -> None:
    frame, info, _ = _shifted_frame()
    at = 8 + len(varint(info["decoded_len"])) + 4  # the row length varint
    assert frame[at : at + 2] == varint(512)
    # Row length 0 (a one-byte varint; the frame is a byte shorter).
    zero = frame[:at] + b"\x00" + frame[at + 2 :]
    with pytest.raises(CorruptDataError, match="row length 0"):
        NumcodecsWeights(dtype="bfloat16").decode(zero)
    # Row length 1 in a frame cut short: more offsets than it holds.
    one = frame[:at] + b"\x01" + frame[at + 2 : at + 2000]
    with pytest.raises(CorruptDataError, match="row offsets cannot fit"):
        NumcodecsWeights(dtype="bfloat16").decode(one)
    # Cut inside the offsets, or inside the varint.
    for cut in (at + 1, at + 100):
        with pytest.raises(CorruptDataError):
            NumcodecsWeights(dtype="bfloat16").decode(frame[:cut])
    # Without the row flag the section is not read: its bytes are taken for
    # the index and fail its checks.
    flagless = frame[:7] + bytes([frame[7] & 0x7F]) + frame[8:]
    with pytest.raises(CorruptDataError):
        NumcodecsWeights(dtype="bfloat16").decode(flagless)
    # Versions past 4 are refused by name.
    v5 = frame[:4] + b"\x05" + frame[5:]
    with pytest.raises(CorruptDataError, match="frame version 5"):
        NumcodecsWeights(dtype="bfloat16").decode(v5)
    # The same section in a version 2 frame (what earlier releases wrote) reads.
    old = to_old_version(frame)
    assert old[4] == 2
    _decode_everywhere(old, _shifted_frame()[2], threads=(1, 4))
    v2_zero = old[: at - 1] + b"\x00" + old[at + 1 :]
    with pytest.raises(CorruptDataError, match="row length 0"):
        NumcodecsWeights(dtype="bfloat16").decode(v2_zero)


def test_version_2_fixtures_still_decode() -> None:
    directory = FIXTURES / "weights-rows"
    assert check_backwards_compatibility(directory, version=2) == len(row_shift_fixture_cases())


def test_version_3_row_fixtures_decode_and_encode_the_same() -> None:
    directory = FIXTURES_V3 / "weights-rows"
    assert check_backwards_compatibility(directory, version=3) == len(row_shift_fixture_cases())
    for path in directory.glob("*.enc"):
        assert has_rows(path.read_bytes()), path.name
        # byte for byte the committed version 2 frame, but for the element byte
        old = (FIXTURES / "weights-rows" / path.name).read_bytes()
        assert to_old_version(path.read_bytes()) == old
