"""The C++ kernels: every variant against the scalar reference and an independent NumPy model."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from nncodecs import _core

LAYOUTS = {  # layout: (width in bytes, mantissa bits)
    "float64": (8, 52),
    "float32": (4, 23),
    "float16": (2, 10),
    "bfloat16": (2, 7),
    "float8_e4m3fn": (1, 3),
    "float8_e5m2": (1, 2),
}
VARIANTS = _core.variants()
# Lengths around every SIMD block size (32 and 64 elements) and the threading threshold.
LENGTHS = [0, 1, 7, 31, 32, 33, 63, 64, 65, 100, 1000, 4099]


def numpy_reorder(bits: np.ndarray, m: int, decode: bool = False) -> np.ndarray:
    """Independent model of FORMAT.md's table: S E M <-> E S M, in Python integers."""
    width = bits.dtype.itemsize * 8
    out = []
    for x in bits.tolist():
        mant = x & ((1 << m) - 1)
        if not decode:
            sign, exp = x >> (width - 1), (x >> m) & ((1 << (width - 1 - m)) - 1)
            out.append((exp << (m + 1)) | (sign << m) | mant)
        else:
            sign, exp = (x >> m) & 1, x >> (m + 1)
            out.append((sign << (width - 1)) | (exp << m) | mant)
    return np.array(out, dtype=bits.dtype)


def random_bits(width: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, n * width, dtype=np.uint8).view(f"<u{width}")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reorder_matches_the_format_table(layout: str) -> None:
    width, m = LAYOUTS[layout]
    bits = random_bits(width, 333, seed=width)
    expected = numpy_reorder(bits, m)
    for variant in VARIANTS:
        out = np.empty_like(bits)
        _core.reorder_encode(out.view(np.uint8), bits.view(np.uint8), layout, variant)
        np.testing.assert_array_equal(out, expected)
        back = np.empty_like(bits)
        _core.reorder_decode(back.view(np.uint8), out.view(np.uint8), layout, variant)
        np.testing.assert_array_equal(back, bits)
        np.testing.assert_array_equal(numpy_reorder(expected, m, decode=True), bits)


@pytest.mark.parametrize("layout", [k for k, v in LAYOUTS.items() if v[0] <= 2])
def test_every_bit_pattern_of_8_and_16_bit_floats(layout: str) -> None:
    width, _ = LAYOUTS[layout]
    every = np.arange(1 << (8 * width), dtype=np.uint64).astype(f"<u{width}")
    for variant in VARIANTS:
        enc = np.empty_like(every)
        _core.reorder_encode(enc.view(np.uint8), every.view(np.uint8), layout, variant)
        assert len(np.unique(enc)) == len(every)  # a bijection
        dec = np.empty_like(every)
        _core.reorder_decode(dec.view(np.uint8), enc.view(np.uint8), layout, variant)
        np.testing.assert_array_equal(dec, every)
        # The fused split + merge agrees too.
        planes = np.empty(every.nbytes, np.uint8)
        _core.planes_split(planes, every.view(np.uint8), width, layout, variant)
        np.testing.assert_array_equal(planes.reshape(width, -1).T.reshape(-1), enc.view(np.uint8))
        merged = np.empty_like(every)
        _core.planes_merge(merged.view(np.uint8), planes, width, layout, variant)
        np.testing.assert_array_equal(merged, every)


SPLIT_CASES = [("none", size) for size in (1, 2, 3, 4, 8, 16)] + [
    (layout, width) for layout, (width, _) in LAYOUTS.items()
]


@pytest.mark.parametrize(("layout", "elemsize"), SPLIT_CASES)
def test_split_and_merge_variants_agree_with_scalar(layout: str, elemsize: int) -> None:
    for n in LENGTHS:
        src = random_bits(1, n * elemsize, seed=n).view(np.uint8)
        reference = np.empty_like(src)
        _core.planes_split(reference, src, elemsize, layout, "scalar")
        if layout == "none":
            expected = src.reshape(n, elemsize).T.reshape(-1)
        else:
            width, m = LAYOUTS[layout]
            expected = numpy_reorder(src.view(f"<u{width}"), m).view(np.uint8)
            expected = expected.reshape(n, elemsize).T.reshape(-1)
        np.testing.assert_array_equal(reference, expected)
        for variant in VARIANTS:
            for offset in (0, 1):  # unaligned buffers too
                buf = np.empty(src.nbytes + offset, np.uint8)[offset:]
                buf[:] = src
                planes = np.empty(src.nbytes + offset, np.uint8)[offset:]
                _core.planes_split(planes, buf, elemsize, layout, variant)
                np.testing.assert_array_equal(planes, reference)
                merged = np.empty(src.nbytes + offset, np.uint8)[offset:]
                _core.planes_merge(merged, planes, elemsize, layout, variant)
                np.testing.assert_array_equal(merged, src)


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("layout", ["float32", "bfloat16", "float64", "float8_e4m3fn"])
def test_many_threads_give_the_same_bytes(threads: int, layout: str) -> None:
    width, _ = LAYOUTS[layout]
    src = random_bits(width, (3 << 20) // width + 13, seed=threads).view(np.uint8)
    one = np.empty_like(src)
    _core.planes_split(one, src, width, layout, "scalar", 1)
    for variant in VARIANTS:
        many = np.empty_like(src)
        _core.planes_split(many, src, width, layout, variant, threads)
        np.testing.assert_array_equal(many, one)
        back = np.empty_like(src)
        _core.planes_merge(back, many, width, layout, variant, threads)
        np.testing.assert_array_equal(back, src)
        reo = np.empty_like(src)
        _core.reorder_encode(reo, src, layout, variant, threads)
        _core.reorder_decode(reo, reo, layout, variant, threads)  # in place
        np.testing.assert_array_equal(reo, src)


def test_concurrent_callers_share_the_pool() -> None:
    # Zarr decodes chunks from many Python threads at once: results must not mix.
    src = [random_bits(4, (2 << 20) // 4, seed=s).view(np.uint8) for s in range(6)]
    expected = []
    for s in src:
        e = np.empty_like(s)
        _core.planes_split(e, s, 4, "float32", "scalar", 1)
        expected.append(e)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(3):
                out = np.empty_like(src[i])
                _core.planes_split(out, src[i], 4, "float32", "auto", 0)
                np.testing.assert_array_equal(out, expected[i])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(src))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_bad_arguments_raise_clear_errors() -> None:
    src = np.zeros(10, np.uint8)
    with pytest.raises(ValueError, match="bad argument"):
        _core.planes_split(np.empty(10, np.uint8), src, 4)  # 10 bytes, 4-byte elements
    with pytest.raises(ValueError, match="bad argument"):
        _core.planes_split(np.empty(10, np.uint8), src, 0)
    with pytest.raises(ValueError, match="bad argument"):
        _core.planes_split(np.empty(10, np.uint8), src, 2, "float32")  # width mismatch
    with pytest.raises(ValueError, match="too small"):
        _core.planes_merge(np.empty(9, np.uint8), src, 2)
    with pytest.raises(ValueError, match="overlaps"):
        _core.planes_split(src, src, 2)
    with pytest.raises(ValueError, match="overlaps"):
        _core.reorder_encode(src[1:], src[:-1], "float8_e4m3fn")
    with pytest.raises(ValueError, match="bad argument"):
        _core.reorder_encode(np.empty(10, np.uint8), src, "float32")
    with pytest.raises(ValueError, match="unknown layout"):
        _core.reorder_encode(np.empty(10, np.uint8), src, "float7")
    with pytest.raises(ValueError, match="unknown variant"):
        _core.reorder_encode(np.empty(10, np.uint8), src, "float16", "neon")
    with pytest.raises(TypeError, match="writable"):
        _core.reorder_encode(b"0123456789", src, "float16")
    with pytest.raises(TypeError, match="C-contiguous"):
        _core.reorder_encode(np.empty(10, np.uint8), np.zeros(20, np.uint8)[::2], "float16")
    with pytest.raises(TypeError):
        _core.reorder_encode(np.empty(10, np.uint8), object(), "float16")


def test_variants_report() -> None:
    assert "scalar" in VARIANTS
    assert _core.best_variant() in VARIANTS
    assert _core.hardware_threads() >= 1


def test_crc32c_kernels_agree() -> None:
    # The check value of the CRC-32C catalogue, then the carry-less folding
    # kernel (where the CPU has VPCLMULQDQ) against the crc32-instruction
    # one, over lengths around its 256-byte window, offsets and start values.
    assert _core.crc32c(b"123456789") == 0xE3069283
    rng = np.random.default_rng(5)
    sizes = [*range(0, 1100, 9), 4095, 12289, (1 << 16) + 13, (1 << 20) + 255]
    try:
        for n in sizes:
            for off in (0, 1, 3):
                data = rng.integers(0, 256, n + off, dtype=np.uint8)[off:]
                for start in (0, 0xDEADBEEF):
                    _core._set_crc_narrow(False)
                    wide = _core.crc32c(data, start)
                    _core._set_crc_narrow(True)
                    assert _core.crc32c(data, start) == wide, (n, off, start)
    finally:
        _core._set_crc_narrow(False)
    parts = rng.integers(0, 256, 3000, dtype=np.uint8)
    whole = _core.crc32c(parts)
    assert (
        _core.crc32c_combine(_core.crc32c(parts[:1234]), _core.crc32c(parts[1234:]), 1766) == whole
    )
