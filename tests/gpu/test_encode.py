"""The GPU encode kernels write the CPU encoder's bytes.

``nncodecs.gpu.encode.encode_on`` runs kernels/encode.cu (on the SIMT
emulator everywhere, on CuPy where a GPU is present) and must return,
byte for byte, what ``encode_frame`` writes on the CPU for the same input
and settings: every float layout and coder, version 3 frames with their
element type (and row sections), raw,
constant, Huffman and zstd chunks, tails under 32 symbols, random sizes and
empty input. GPU bytes then decode on the CPU, and on the GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from harness import has_rows, np_dtype, row_scaled, same_bits, weights_like

from nncodecs import _core
from nncodecs.dtypes import dtype_name, float_layout
from nncodecs.frame import decode_frame, encode_frame
from nncodecs.gpu.decode import decode_on
from nncodecs.gpu.encode import encode_frames, encode_on


def _both(backend: Any, data: np.ndarray, **settings: Any) -> tuple[bytes, bytes]:
    """(CPU frame, GPU frame) of the same bytes and settings."""
    flat = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    cpu = encode_frame(flat, **settings)
    host_below = settings.pop("host_below", 0)
    settings.pop("threads", None)
    dev = encode_on(backend, backend.to_device(flat), host_below=host_below, **settings)
    return cpu, backend.to_host(dev).tobytes()


def _weights_settings(arr: np.ndarray, coder: str, row_length: int = 0) -> dict[str, Any]:
    return {
        "planes": arr.dtype.itemsize,
        "coder": coder,
        "elements": True,
        "layout": float_layout(arr.dtype),
        "row_length": row_length,
        "dtype": dtype_name(arr.dtype),
    }


def _launched(backend: Any) -> list[str]:
    return [name for name, _, _ in getattr(backend, "launches", [])]


@pytest.mark.parametrize(
    "dtype", ["bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"]
)
@pytest.mark.parametrize("coder", ["rans", "auto", "huffman"])
def test_same_bytes_as_the_cpu(backend: Any, dtype: str, coder: str) -> None:
    # 270,001 elements: a whole chunk and a tail of 7,857 a plane, over the
    # 256 KiB up to which auto encodes on the host.
    arr = weights_like(dtype, 270_001, seed=11)
    cpu, gpu = _both(backend, arr, **_weights_settings(arr, coder))
    assert cpu[:5] == b"NNCF\x03" and cpu[7] & 0x3F == _core.element_types().index(
        (dtype, arr.itemsize)
    )  # version 3, recording the dtype
    assert gpu == cpu
    back = decode_frame(gpu, elements=True, layout=float_layout(arr.dtype), planes=arr.itemsize)
    assert same_bits(back.view(arr.dtype), arr)


def test_kernels_do_the_work(backend: Any) -> None:
    # Not a copy of the CPU's frame: the device split, counted, coded,
    # checksummed and assembled it.
    if hasattr(backend, "launches"):
        backend.launches.clear()
    arr = weights_like("bfloat16", 300_000, seed=2)
    cpu, gpu = _both(backend, arr, **_weights_settings(arr, "rans"))
    assert gpu == cpu
    if hasattr(backend, "launches"):
        ran = _launched(backend)
        for kernel in ("split_planes", "chunk_stats", "rans_encode_chunks", "crc_chunks",
                       "assemble_frame"):  # fmt: skip
            assert kernel in ran, kernel


def test_row_shift_of_version_3(backend: Any) -> None:
    arr = row_scaled("bfloat16", 300, 512, seed=4)
    cpu, gpu = _both(backend, arr, **_weights_settings(arr, "rans", row_length=512))
    assert has_rows(cpu)  # the plan keeps the shift: the row section
    assert gpu == cpu
    # and where it does not pay, none from both
    flat = weights_like("bfloat16", 300 * 512, seed=4)
    cpu, gpu = _both(backend, flat, **_weights_settings(flat, "auto", row_length=512))
    assert cpu[4] == 3 and not has_rows(cpu)
    assert gpu == cpu
    # planes of bytes (no element type) too
    cpu, gpu = _both(backend, flat, **{**_weights_settings(flat, "rans"), "dtype": "bytes"})
    assert cpu[7] == 0 and gpu == cpu


@pytest.mark.parametrize("dtype", ["float32", "float8_e4m3fn"])
def test_row_shift_other_layouts(backend: Any, dtype: str) -> None:
    arr = row_scaled(dtype, 160, 1024, seed=7, spread=3.0)
    cpu, gpu = _both(backend, arr, **_weights_settings(arr, "rans", row_length=1024))
    assert gpu == cpu


def test_raw_constant_and_planes_input(backend: Any) -> None:
    # Planes as input: plane 0 random (raw), 1 skewed (rANS), 2 constant.
    rng = np.random.default_rng(5)
    n = 300_000
    planes = np.concatenate(
        [
            rng.integers(0, 256, n, dtype=np.uint8),
            np.minimum(rng.geometric(0.3, n), 255).astype(np.uint8),
            np.full(n, 7, np.uint8),
        ]
    )
    for coder in ("rans", "auto"):
        cpu, gpu = _both(backend, planes, planes=3, coder=coder, subblock_log2=12)
        assert gpu == cpu, coder
        modes = {c[2] for c in _core.frame_info(gpu, n * 3)["chunks"]}
        assert {"raw", "constant", "rans" if coder == "rans" else "huffman"} <= modes


def test_zstd_and_huffman_chunks_come_from_the_cpu(backend: Any) -> None:
    # A plane of long repeats (auto gives it to zstd) and a skewed one.
    rng = np.random.default_rng(8)
    n = 300_000
    pattern = rng.integers(0, 256, 4096, dtype=np.uint8)
    planes = np.concatenate([np.resize(pattern, n), rng.geometric(0.5, n).astype(np.uint8)])
    cpu, gpu = _both(backend, planes, planes=2, coder="auto")
    assert gpu == cpu
    assert "zstd" in {c[2] for c in _core.frame_info(gpu, 2 * n)["chunks"]}
    cpu, gpu = _both(backend, planes, planes=2, coder="huffman")
    assert gpu == cpu
    assert "huffman" in {c[2] for c in _core.frame_info(gpu, 2 * n)["chunks"]}


@pytest.mark.parametrize("count", [1, 5, 31, 32, 33, 4097, 65_537])
def test_small_sizes_and_tails(backend: Any, count: int) -> None:
    arr = weights_like("bfloat16", count, seed=count)
    for coder in ("rans", "huffman"):
        cpu, gpu = _both(backend, arr, **_weights_settings(arr, coder))
        assert gpu == cpu, coder


def test_random_sizes_and_settings(backend: Any) -> None:
    rng = np.random.default_rng(12)
    for trial in range(4):
        dtype = ["bfloat16", "float16", "float32", "float8_e5m2"][trial]
        count = int(rng.integers(1, 300_000))
        arr = weights_like(dtype, count, seed=trial)
        settings = _weights_settings(arr, "rans")
        settings["precision"] = int(rng.integers(10, 13))
        settings["subblock_log2"] = int(rng.integers(12, 17))
        settings["checksum"] = bool(trial % 2)
        cpu, gpu = _both(backend, arr, **settings)
        assert gpu == cpu, (dtype, count, settings)


def test_empty_and_small_inputs_on_the_host(backend: Any) -> None:
    empty = np.zeros(0, np_dtype("bfloat16"))
    cpu, gpu = _both(backend, empty, **_weights_settings(empty, "auto"))
    assert gpu == cpu
    small = weights_like("bfloat16", 1000, seed=1)  # auto's whole-input zstd range
    if hasattr(backend, "launches"):
        backend.launches.clear()
    cpu, gpu = _both(backend, small, **_weights_settings(small, "auto"))
    assert gpu == cpu
    assert "rans_encode_chunks" not in _launched(backend)


def test_gpu_bytes_decode_on_the_gpu(backend: Any) -> None:
    arr = row_scaled("bfloat16", 300, 512, seed=9)
    _, gpu = _both(backend, arr, **_weights_settings(arr, "auto", row_length=512))
    out = decode_on(
        backend, np.frombuffer(gpu, np.uint8), max_decoded=arr.nbytes, layout="bfloat16",
        elements=True,
    )  # fmt: skip
    assert same_bits(backend.to_host(out).view(arr.dtype).reshape(arr.shape), arr)


def test_bad_settings_raise_as_on_the_cpu(backend: Any) -> None:
    data = backend.to_device(np.zeros(300_000, np.uint8))
    with pytest.raises(ValueError, match="coder"):
        encode_on(backend, data, planes=2, coder="lz4")
    with pytest.raises(ValueError, match="precision"):
        encode_on(backend, data, planes=2, coder="rans", precision=13)
    with pytest.raises(ValueError, match="equal planes"):
        encode_on(backend, backend.to_device(np.zeros(301, np.uint8)), planes=2, coder="rans")
    with pytest.raises(ValueError, match="layout"):
        encode_on(backend, data, planes=4, coder="rans", elements=True, layout="bf16")


def test_sample_and_probe_decide_as_on_the_cpu(backend: Any) -> None:
    # Plane 0 repeats with a period of 40,961 bytes: zstd would win, but the
    # probe's hash table forgets that far back, so the CPU never tries it
    # (raw). Plane 1 is skewed but random where the sample looks (16 x 1 KiB
    # at multiples of m / 16), so the CPU keeps it raw without a histogram.
    rng = np.random.default_rng(1)
    m = 1 << 18
    repeats = np.resize(rng.integers(0, 256, 40_961, dtype=np.uint8), m)
    skewed = np.minimum(rng.geometric(0.2, m), 255).astype(np.uint8)
    for i in range(16):
        skewed[i * (m // 16) : i * (m // 16) + 1024] = rng.integers(0, 256, 1024, dtype=np.uint8)
    planes = np.concatenate([repeats, skewed])
    cpu, gpu = _both(backend, planes, planes=2, coder="auto")
    assert [c[2] for c in _core.frame_info(cpu, 2 * m)["chunks"]] == ["raw", "raw"]
    assert gpu == cpu


def test_plan_chunks_of_one_chunk_leaves_shared_bytes_alone() -> None:
    # One chunk: one-byte results, which must be new objects (CPython shares
    # the bytes objects of one character; writing one corrupted b"\x00").
    counts = np.zeros((1, 256), np.uint32)
    counts[0, 5] = 100  # a constant chunk of 5s
    kinds, values = _core.plan_chunks(counts, counts, [100], [-1], "rans", 11, 16, 50)
    assert (kinds, values) == (b"\x01", b"\x05")
    assert np.zeros(1, np.uint8).tobytes() == b"\x00"
    assert np.full(1, 5, np.uint8).tobytes() == b"\x05"


def test_many_tensors_in_one_launch_each(backend: Any) -> None:
    # Tensors of every kind in one batch: row-shifted ones (kept and not),
    # float32 and float8, a flat one, small ones (encoded on the host), an
    # empty one. Each equals its CPU frame; each kernel runs once.
    tensors = [
        row_scaled("bfloat16", 300, 512, seed=4),
        weights_like("float32", 70_001, seed=5),
        row_scaled("float8_e4m3fn", 160, 1024, seed=7, spread=3.0),
        weights_like("bfloat16", 300 * 512, seed=4).reshape(300, 512),  # no shift pays
        weights_like("float16", 1000, seed=6),  # small: the host
        weights_like("float64", 0),
        row_scaled("float32", 160, 1024, seed=8, spread=3.0),
    ]
    rows = [t.shape[1] if t.ndim == 2 else 0 for t in tensors]
    for coder in ("rans", "auto"):
        cpu = [
            encode_frame(t.reshape(-1).view(np.uint8), planes=t.itemsize, coder=coder,
                         elements=True, layout=float_layout(t.dtype), row_length=r,
                         dtype=dtype_name(t.dtype))
            for t, r in zip(tensors, rows, strict=True)
        ]  # fmt: skip
        assert [has_rows(c) for c in cpu if c[:4] == b"NNCF"].count(True) >= 2  # row sections
        if hasattr(backend, "launches"):
            backend.launches.clear()
        gpu = encode_frames(
            backend, [backend.to_device(t.reshape(-1).view(np.uint8)) for t in tensors],
            planes=[t.itemsize for t in tensors], coder=coder, elements=True,
            layouts=[float_layout(t.dtype) for t in tensors], row_lengths=rows,
            dtypes=[dtype_name(t.dtype) for t in tensors],
        )  # fmt: skip
        for i, (c, g) in enumerate(zip(cpu, gpu, strict=True)):
            assert backend.to_host(g).tobytes() == c, (coder, i)
        if hasattr(backend, "launches"):
            names = _launched(backend)
            assert len(names) == len(set(names)), names
            assert {"row_stats", "split_planes", "chunk_stats", "crc_chunks"} <= set(names)
