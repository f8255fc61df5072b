"""The GPU decode kernels, run on the CPU under the SIMT emulator.

Frames written by the CPU encoder are decoded by kernels/decode.cu (through
nncodecs.gpu.decode, the host side a GPU run uses too) and compared with
the original bytes: every float layout, every frame version (3, and 1 and
2 as earlier releases wrote them), row offsets, many
sub-blocks a chunk, tails under 32 symbols, raw / constant / Huffman / zstd
chunks, empty input, and corrupt rANS payloads reported per chunk. On a
machine with a GPU, scripts/gpu_check.sh runs the same kernels on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from harness import has_rows, np_dtype, row_scaled, same_bits, to_old_version, weights_like

from nncodecs import CorruptDataError, NumcodecsAuto, NumcodecsRans, NumcodecsWeights
from nncodecs.codecs.planes import split_array
from nncodecs.dtypes import float_layout
from nncodecs.gpu.decode import decode_frames, decode_on
from nncodecs.gpu.plan import fused_chunks, plan_decode


def _gpu_elements(backend: Any, frame: bytes, arr: np.ndarray) -> np.ndarray:
    host = np.frombuffer(frame, np.uint8)
    out = decode_on(
        backend, host, max_decoded=arr.nbytes, layout=float_layout(arr.dtype), elements=True
    )
    return backend.to_host(out).view(arr.dtype)


@pytest.mark.parametrize(
    "dtype", ["bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"]
)
def test_cpu_frames_decode_on_the_gpu(backend: Any, dtype: str) -> None:
    arr = weights_like(dtype, 70_001, seed=3)  # one chunk a plane, a tail of 17 symbols
    for coder in ("rans", "auto"):
        frame = NumcodecsWeights(coder=coder, dtype=dtype).encode(arr)
        assert frame[:4] == b"NNCF"  # too large for the whole-input zstd kind
        assert same_bits(_gpu_elements(backend, frame, arr), arr), coder


def test_row_offsets_of_versions_3_and_2(backend: Any) -> None:
    arr = row_scaled("bfloat16", 300, 512, seed=4)
    frame = NumcodecsWeights(coder="rans", dtype="bfloat16").encode(arr)
    assert has_rows(frame)
    for version in (frame, to_old_version(frame)):
        assert same_bits(_gpu_elements(backend, version, arr).reshape(arr.shape), arr)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float8_e5m2"])
def test_every_version_decodes_and_the_element_type_is_checked(backend: Any, dtype: str) -> None:
    # Version 3 and the version 1 frame of the same bytes decode alike; a
    # version 3 frame decoded as another element type of its width is
    # CorruptDataError naming both (the GPU host checks the plan's type).
    from nncodecs.gpu.device import decode_weights_on_device, stated_dtype_on

    arr = weights_like(dtype, 70_001, seed=5)
    frame = NumcodecsWeights(coder="rans", dtype=dtype).encode(arr)
    old = to_old_version(frame)
    assert old[4] == 1
    for f in (frame, old):
        assert same_bits(_gpu_elements(backend, f, arr), arr)
    other = {"bfloat16": "float16", "float32": "int32", "float8_e5m2": "float8_e4m3fn"}[dtype]
    for f in (frame, backend.to_device(np.frombuffer(frame, np.uint8))):
        with pytest.raises(CorruptDataError, match=f"holds {dtype} elements, expected {other}"):
            decode_weights_on_device(backend, [f], other, [None])
        assert stated_dtype_on(backend, f) == dtype
        (back,) = decode_weights_on_device(backend, [f], dtype, [None])
        assert same_bits(backend.to_host(back).view(arr.dtype), arr)
    assert stated_dtype_on(backend, backend.to_device(np.frombuffer(old, np.uint8))) is None
    # In a batch, the frame is named.
    with pytest.raises(CorruptDataError, match=f"frame 1: the frame holds {dtype}"):
        decode_frames(
            backend, [np.frombuffer(frame, np.uint8)] * 2, max_decoded=[arr.nbytes] * 2,
            layouts=[float_layout(arr.dtype)] * 2, elements=True, dtypes=[dtype, other],
        )  # fmt: skip


def test_many_subblocks_raw_constant_and_planes_output(backend: Any) -> None:
    # Sub-blocks of 2^12: 32 a chunk over 4 warps. Plane 0 random (raw),
    # plane 1 skewed (rANS), plane 2 constant; planes written as planes.
    rng = np.random.default_rng(5)
    n = (1 << 17) + 5
    planes = np.concatenate(
        [
            rng.integers(0, 256, n, np.uint8),
            (rng.geometric(0.3, n) % 40).astype(np.uint8),
            np.full(n, 7, np.uint8),
        ]
    )
    frame = NumcodecsRans(planes=3, subblock_log2=12).encode(planes)
    plan = plan_decode(np.frombuffer(frame, np.uint8), planes.nbytes)
    assert len(plan.rans) == 1 and plan.sources["kind"].tolist() == [0, 2, 1]
    out = decode_on(backend, np.frombuffer(frame, np.uint8), max_decoded=planes.nbytes)
    assert backend.to_host(out).tobytes() == planes.tobytes()


def test_huffman_and_zstd_chunks_come_from_the_cpu(backend: Any) -> None:
    text = np.frombuffer(b"abcabcabd" * 29000, np.uint8)
    skew = (np.random.default_rng(6).geometric(0.4, text.size) % 9).astype(np.uint8)
    planes = np.concatenate([text, skew])
    frame = NumcodecsAuto(planes=2).encode(planes)
    plan = plan_decode(np.frombuffer(frame, np.uint8), planes.nbytes)
    assert plan.external
    out = decode_on(backend, np.frombuffer(frame, np.uint8), max_decoded=planes.nbytes)
    assert backend.to_host(out).tobytes() == planes.tobytes()


def test_elements_equal_the_planes_merged(backend: Any) -> None:
    arr = weights_like("float32", 40_000, seed=7)
    frame = NumcodecsWeights(coder="rans", dtype="float32").encode(arr)
    host = np.frombuffer(frame, np.uint8)
    planes = decode_on(backend, host, max_decoded=arr.nbytes)
    assert backend.to_host(planes).tobytes() == np.asarray(split_array(arr, reorder=True)).tobytes()


def test_empty_input(backend: Any) -> None:
    frame = NumcodecsRans(planes=2, checksum=False).encode(np.zeros(0, np.uint8))
    assert frame[:4] == b"NNCF"
    out = decode_on(backend, np.frombuffer(frame, np.uint8), max_decoded=0)
    assert backend.to_host(out).size == 0


def _rans_frame() -> tuple[bytearray, dict, np.ndarray]:
    arr = weights_like("bfloat16", 50_000, seed=8)
    frame = bytearray(NumcodecsWeights(coder="rans", dtype="bfloat16").encode(arr))
    plan = plan_decode(np.frombuffer(bytes(frame), np.uint8), arr.nbytes)
    assert len(plan.rans) == 1
    return frame, plan.rans[0], arr


@pytest.mark.parametrize(
    ("where", "why"),
    [
        (lambda r: int(r["payload"]) + 3, "malformed rANS table"),  # presence map
        (lambda r: int(r["payload"]) + int(r["length"]) - 1, "corrupt rANS stream"),  # last word
        (lambda r: int(r["payload"]) + int(r["length"]) // 2, "rANS stream|CRC32C mismatch"),
        (lambda r: int(r["payload"]) - 1000, "CRC32C mismatch"),  # the raw mantissa plane
    ],
    ids=["table", "last-word", "middle", "raw-chunk"],
)
def test_corrupt_frames_are_reported(backend: Any, where, why) -> None:
    frame, record, arr = _rans_frame()
    frame[where(record)] ^= 0x5A
    host = np.frombuffer(bytes(frame), np.uint8)
    with pytest.raises(CorruptDataError, match=why):
        decode_on(backend, host, max_decoded=arr.nbytes, layout="bfloat16", elements=True)


def test_the_checksum_covers_the_row_offsets(backend: Any) -> None:
    arr = row_scaled("bfloat16", 300, 512, seed=10)
    frame = bytearray(NumcodecsWeights(coder="rans", dtype="bfloat16").encode(arr))
    assert plan_decode(np.frombuffer(bytes(frame), np.uint8), arr.nbytes).row_length == 512
    frame[_row_offsets_at(bytes(frame), arr.nbytes) + 100] ^= 0x08  # row 100's offset
    with pytest.raises(CorruptDataError, match="CRC32C mismatch"):
        _gpu_elements(backend, bytes(frame), arr)


def _row_offsets_at(frame: bytes, max_decoded: int) -> int:
    from nncodecs.frame import frame_info

    return int(frame_info(frame, max_decoded)["row_offsets_at"])


def test_sub_block_headers_must_add_up(backend: Any) -> None:
    # One word fewer declared for sub-block 0: the payload has bytes left over.
    frame, record, arr = _rans_frame()
    payload = int(record["payload"])
    present = sum(bin(b).count("1") for b in frame[payload : payload + 32])
    bits = NumcodecsWeights().get_config()["precision"]  # (the frame's P, its default)
    counts_at = payload + 32 + (present * bits + 7) // 8
    words = int.from_bytes(frame[counts_at : counts_at + 4], "little")
    frame[counts_at : counts_at + 4] = (words - 1).to_bytes(4, "little")
    with pytest.raises(CorruptDataError, match="sub-block headers do not add up"):
        decode_on(
            backend,
            np.frombuffer(bytes(frame), np.uint8),
            max_decoded=arr.nbytes,
            layout="bfloat16",
            elements=True,
        )


def _every_chunk_kind() -> np.ndarray:
    """bfloat16 rows whose last plane holds every chunk kind (as in
    test_rowshift): row-scaled rows (rANS), rows of 1.0 (constant, row offset
    127), random bits (raw), repeated rows (zstd, from the CPU), 8 chunks."""
    rng = np.random.default_rng(7)
    bits = np.concatenate(
        [
            row_scaled("bfloat16", 768, 1024, seed=8).view(np.uint16),
            np.full((256, 1024), 0x3F80, np.uint16),
            rng.integers(0, 2**16, (256, 1024), dtype=np.uint16),
            np.tile(row_scaled("bfloat16", 16, 1024, seed=9).view(np.uint16), (48, 1)),
        ]
    )
    return bits.view(np_dtype("bfloat16"))


def test_row_offsets_on_every_chunk_kind_of_the_last_plane(backend: Any) -> None:
    arr = _every_chunk_kind()
    frame = NumcodecsWeights(dtype="bfloat16").encode(arr)
    assert has_rows(frame)
    kinds = set(
        plan_decode(np.frombuffer(frame, np.uint8), arr.nbytes).sources["kind"][8:].tolist()
    )
    assert kinds == {0, 1, 2, 3}  # frame, constant, planes, external
    assert same_bits(_gpu_elements(backend, frame, arr).reshape(arr.shape), arr)


def test_the_exponent_plane_decodes_fused(backend: Any) -> None:
    # bfloat16 weights: the exponent plane is the only rANS plane of every
    # chunk, so rans_decode_merge writes the elements and no merge runs; a
    # chunk with two rANS planes (float32 below) goes through the planes.
    arr = weights_like("bfloat16", 300_000, seed=11)  # 2 chunks a plane
    frame = NumcodecsWeights(coder="rans", dtype="bfloat16").encode(arr)
    plan = plan_decode(np.frombuffer(frame, np.uint8), arr.nbytes)
    assert fused_chunks(plan).tolist() == [1, 1]
    launches = getattr(backend, "launches", None)
    if launches is not None:
        launches.clear()
    assert same_bits(_gpu_elements(backend, frame, arr), arr)
    if launches is not None:
        assert [name for name, _, _ in launches] == ["rans_decode_merge", "crc_chunks"]
    skewed = (np.random.default_rng(12).geometric(0.2, (70_000, 4)) % 16).astype(np.uint8)
    skewed[:, 3] += 60  # two skewed planes (bytes 2 and 3) and two more
    f32 = skewed.view(np.float32).reshape(-1)
    frame = NumcodecsWeights(coder="rans", dtype="float32").encode(f32)
    plan = plan_decode(np.frombuffer(frame, np.uint8), f32.nbytes)
    assert fused_chunks(plan).tolist() == [0]
    assert same_bits(_gpu_elements(backend, frame, f32), f32)


def test_many_frames_in_one_launch_each(backend: Any) -> None:
    # Tensors of every kind in one batch: fused bf16, float32 through the
    # planes, a frame with a row section, a frame with Huffman chunks, an empty one,
    # a whole-input zstd one (decoded on the CPU).
    # Each kernel runs once for all of them.
    two_rans_planes = [
        (np.random.default_rng(seed).geometric(0.2, (70_000, 4)) % 16 + [0, 0, 0, 60])
        .astype(np.uint8)
        .view(np.float32)
        .reshape(-1)
        for seed in (12, 13)
    ]
    arrays = [
        weights_like("bfloat16", 70_001, seed=21),
        two_rans_planes[0],
        row_scaled("bfloat16", 300, 512, seed=4),
        weights_like("float8_e4m3fn", 5_000, seed=22),
        weights_like("float16", 0),
        two_rans_planes[1],
        _every_chunk_kind(),
        weights_like("float64", 33, seed=23),
    ]
    coders = ["rans", "rans", "rans", "huffman", "rans", "rans", "auto", "auto"]
    frames = [
        np.frombuffer(NumcodecsWeights(coder=c, dtype=a.dtype).encode(a), np.uint8)
        for a, c in zip(arrays, coders, strict=True)
    ]
    launches = getattr(backend, "launches", None)
    if launches is not None:
        launches.clear()
    outs = decode_frames(
        backend, frames, max_decoded=[a.nbytes for a in arrays],
        layouts=[float_layout(a.dtype) for a in arrays], elements=True,
        planes=[a.itemsize for a in arrays],
    )  # fmt: skip
    for a, out in zip(arrays, outs, strict=True):
        assert same_bits(backend.to_host(out).view(a.dtype).reshape(a.shape), a)
    if launches is not None:
        names = [name for name, _, _ in launches]
        assert sorted(names) == sorted(set(names)), names  # each kernel once
        assert {"rans_decode_chunks", "rans_decode_merge", "merge_chunks", "crc_chunks"} <= set(
            names
        )


def test_a_corrupt_frame_of_a_batch_is_named(backend: Any) -> None:
    arr = weights_like("bfloat16", 70_001, seed=21)
    good = NumcodecsWeights(coder="rans", dtype="bfloat16").encode(arr)
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x10
    frames = [np.frombuffer(f, np.uint8) for f in (good, bytes(bad), good)]
    with pytest.raises(CorruptDataError, match="frame 1: "):
        decode_frames(
            backend, frames, max_decoded=[arr.nbytes] * 3, layouts=["bfloat16"] * 3,
            elements=True,
        )  # fmt: skip


def test_frames_on_the_device(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A frame already on the device: its header and index come to the host
    # from a prefix, grown until they fit (64 bytes to start with here).
    import nncodecs.gpu.plan as gpu_plan

    monkeypatch.setattr(gpu_plan, "PREFIX_BYTES", 64)
    arr = row_scaled("bfloat16", 300, 512, seed=4)
    frame = NumcodecsWeights(coder="rans", dtype="bfloat16").encode(arr)
    dev = backend.to_device(np.frombuffer(frame, np.uint8))
    out = decode_on(backend, None, max_decoded=arr.nbytes, layout="bfloat16", elements=True,
                    device_frame=dev)  # fmt: skip
    assert same_bits(backend.to_host(out).view(arr.dtype).reshape(arr.shape), arr)
    with pytest.raises(CorruptDataError):  # truncated: the whole frame, then its error
        decode_on(backend, None, max_decoded=arr.nbytes, layout="bfloat16", elements=True,
                  device_frame=dev[: len(frame) - 1])  # fmt: skip


def test_crc32c_join_equals_the_crc_of_the_whole() -> None:
    # The host joins the device's chunk CRCs: a table for the common length
    # (many pieces), the matrix product for the others, in any mix.
    from nncodecs import _core

    rng = np.random.default_rng(0)
    for count in (0, 1, 5, 300, 700):
        lens = np.full(count, 1 << 12, np.uint64)
        if count:
            lens[-1] = 777
        if count > 3:
            lens[count // 2] = 5
        data = [rng.integers(0, 256, int(n), dtype=np.uint8) for n in lens]
        crcs = np.array([_core.crc32c(d) for d in data], np.uint32)
        whole = _core.crc32c(np.concatenate(data)) if count else 0
        assert _core.crc32c_join(crcs, lens) == whole, count


def test_flipped_bytes_are_corrupt_data_never_a_fault(backend: Any) -> None:
    # Any byte of a frame flipped: the exact tensor back (never: every byte
    # is covered by a check or the CRC) or CorruptDataError, from the kernels'
    # checks or the host's, never another error or a fault.
    arr = row_scaled("bfloat16", 300, 512, seed=4)
    frame = np.frombuffer(NumcodecsWeights(coder="rans", dtype="bfloat16").encode(arr), np.uint8)
    rng = np.random.default_rng(99)
    for at in [*rng.choice(frame.size, 24, replace=False).tolist(), 0, 5, 7, frame.size - 1]:
        bad = frame.copy()
        bad[at] ^= 1 << int(rng.integers(0, 8))
        with pytest.raises(CorruptDataError):
            decode_on(backend, bad, max_decoded=arr.nbytes, layout="bfloat16", elements=True)


@pytest.mark.parametrize("dtype", [">f4", ">f2", ">f8"])
def test_big_endian_frames_of_version_4_decode_back_big_endian(backend: Any, dtype: str) -> None:
    """A version 4 frame (big-endian elements) decodes on the GPU to the bytes that
    came in, as on the CPU; asked for its planes, it is refused, as on the CPU."""
    arr = (np.random.default_rng(6).standard_normal(70_001) * 0.02).astype(dtype)
    for coder in ("rans", "auto"):
        frame = NumcodecsWeights(coder=coder).encode(arr)
        assert frame[:5] == b"NNCF\x04"
        host = np.frombuffer(frame, np.uint8)
        out = decode_on(
            backend, host, max_decoded=arr.nbytes, layout=float_layout(arr.dtype), elements=True
        )
        assert backend.to_host(out).tobytes() == arr.tobytes(), coder
        with pytest.raises(ValueError, match="big-endian"):
            decode_on(backend, host, max_decoded=arr.nbytes)


@pytest.mark.parametrize("n", [70_001, 40])  # (chunked, and the whole-input zstd kind)
def test_big_endian_frames_decode_to_right_values_in_device_arrays(backend: Any, n: int) -> None:
    """Device arrays have no big-endian types: a version 4 frame decodes into a typed
    device array of the native order holding the right values."""
    from nncodecs.gpu.device import decode_weights_on_device

    arr = (np.random.default_rng(9).standard_normal(n) * 0.02).astype(">f4")
    frame = NumcodecsWeights().encode(arr)
    (back,) = decode_weights_on_device(backend, [frame], "float32", [None])
    got = np.asarray(backend.to_host(back)).view(np.uint8).view("<f4")
    assert np.array_equal(got, arr.astype("<f4"))
