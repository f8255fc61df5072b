"""The entropy coders (rans, huffman, auto) and the fused weights codec."""

from __future__ import annotations

import json

import numcodecs
import numpy as np
import pytest
import zstandard
from harness import (
    ALL_DTYPES,
    ARRAY_IDS,
    ARRAYS,
    FIXTURES,
    FIXTURES_V3,
    check_backwards_compatibility,
    check_config,
    check_encode_decode,
    check_repr,
    check_zarr_config,
    np_dtype,
    random_array,
    same_bits,
    special_values,
    to_old_version,
    weights_like,
)

import nncodecs
from nncodecs import (
    Auto,
    Huffman,
    NumcodecsAuto,
    NumcodecsBitReorder,
    NumcodecsHuffman,
    NumcodecsPlanes,
    NumcodecsRans,
    NumcodecsWeights,
    Rans,
    Weights,
)
from nncodecs.errors import CorruptDataError
from nncodecs.frame import frame_info

CODERS = {"rans": NumcodecsRans, "huffman": NumcodecsHuffman, "auto": NumcodecsAuto}
SIZES = [0, 1, 31, 32, 33, (1 << 14) - 1, (1 << 14) + 1, (1 << 18) - 1, (1 << 18) + 1, 3 << 18]


def modes(frame: bytes) -> set[str]:
    return {c[2] for c in frame_info(frame)["chunks"]}


def skewed(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.minimum(rng.geometric(0.25, n), 255).astype(np.uint8)


@pytest.mark.parametrize("coder", CODERS)
@pytest.mark.parametrize(("case", "arr"), ARRAYS, ids=ARRAY_IDS)
def test_round_trip_every_array(coder: str, case: str, arr: np.ndarray) -> None:
    check_encode_decode(CODERS[coder](planes=arr.dtype.itemsize), arr)


@pytest.mark.parametrize("coder", CODERS)
@pytest.mark.parametrize("n", SIZES)
def test_sizes_and_chunk_edges(coder: str, n: int) -> None:
    for planes in (1, 2, 4):
        data = np.concatenate([skewed(n, seed=planes + k) for k in range(planes)])
        codec = CODERS[coder](planes=planes)
        frame = codec.encode(data)
        assert bytes(codec.decode(frame)) == data.tobytes()
        info = frame_info(frame)
        assert info["decoded_len"] == data.nbytes
        if info["kind"] == "chunked":  # auto may write a small input as one zstd frame
            assert len(info["chunks"]) == planes * -(-n // (1 << 18))
        else:
            assert coder == "auto" and data.nbytes <= 1 << 18
        if n >= 1 << 14:
            assert len(frame) < 0.6 * data.nbytes  # about 2.4 bits of entropy a byte


@pytest.mark.parametrize("coder", CODERS)
def test_constant_and_incompressible_data(coder: str) -> None:
    codec = CODERS[coder](planes=1)
    const = np.full(3 << 18, 7, np.uint8)
    frame = codec.encode(const)
    assert modes(frame) == {"constant"}
    assert len(frame) < 40
    assert bytes(codec.decode(frame)) == const.tobytes()
    noise = np.random.default_rng(0).integers(0, 256, 3 << 18, dtype=np.uint8)
    frame = codec.encode(noise)
    assert modes(frame) == {"raw"}
    assert len(frame) <= noise.nbytes + 32
    assert bytes(codec.decode(frame)) == noise.tobytes()


def test_each_coder_is_used_where_it_wins() -> None:
    data = skewed(1 << 18)
    assert modes(NumcodecsRans().encode(data)) == {"rans"}
    assert modes(NumcodecsHuffman().encode(data)) == {"huffman"}
    # Repetitive text: only zstd finds the matches (above the whole-input zstd size).
    sentence = b"the quick brown fox jumps over the lazy dog. "
    long_text = np.frombuffer((sentence * 9000)[:300_000], np.uint8)
    assert modes(NumcodecsAuto().encode(long_text)) == {"zstd"}
    text = long_text[: 1 << 18]
    auto = NumcodecsAuto(planes=3)
    mixed = np.concatenate([data, text, np.full(1 << 18, 3, np.uint8)])
    frame = auto.encode(mixed)
    assert modes(frame) == {"rans", "zstd", "constant"}
    assert bytes(auto.decode(frame)) == mixed.tobytes()


def test_auto_offers_zstd_only_chunks_with_long_repeats() -> None:
    from nncodecs import _core

    rng = np.random.default_rng(7)
    rows = rng.integers(0, 256, (16, 384), np.uint8)
    repeated = rows[rng.integers(0, 16, (1 << 18) // 384 + 1)].reshape(-1)[: 1 << 18]
    skew, noise = skewed(1 << 18), rng.integers(0, 256, 1 << 18, np.uint8)
    small = skewed(1000)
    for data, offered in ((repeated, True), (skew, False), (noise, False), (small, True)):
        # With probe_zstd, a frame when no chunk is worth a zstd trial, else
        # the plan: the plane bytes of those chunks (None for the others).
        got = _core.frame_encode(data, planes=1, coder="auto", probe_zstd=True)
        assert isinstance(got, list) == offered
        if offered:
            assert got == [data.tobytes()]
        else:
            assert got == _core.frame_encode(data, planes=1, coder="auto")
    # Fused elements: the pieces are the split planes, as the frame codes them.
    elems = np.stack([repeated, noise], axis=1).reshape(-1)
    pieces = _core.frame_encode(elems, planes=2, coder="auto", elements=True, probe_zstd=True)
    assert pieces[0] == repeated.tobytes() and pieces[1] is None
    frame = NumcodecsAuto(planes=2).encode(np.concatenate([repeated, noise]))
    assert [c[2] for c in frame_info(frame)["chunks"]] == ["zstd", "raw"]


def test_large_chunks_run_only_the_coder_that_wins() -> None:
    # Above 2^15 symbols auto picks from size estimates: the chosen coder must
    # be the one that is smaller when both run (here by a wide margin), and a
    # plane that cannot gain stays raw without being coded.
    rng = np.random.default_rng(3)
    dyadic = rng.choice(4, 1 << 17, p=[0.5, 0.25, 0.125, 0.125]).astype(np.uint8)
    skew = skewed(1 << 17)
    noise = rng.integers(0, 256, 1 << 17, np.uint8)
    for data in (dyadic, skew):
        sizes = {
            c: len(cls().encode(data))
            for c, cls in (("rans", NumcodecsRans), ("huffman", NumcodecsHuffman))
        }
        frame = NumcodecsAuto().encode(data)
        assert modes(frame) == {min(sizes, key=sizes.get)}
        assert len(frame) <= min(sizes.values())
        assert bytes(NumcodecsAuto().decode(frame)) == data.tobytes()
    for codec in (NumcodecsAuto(), NumcodecsRans(), NumcodecsHuffman()):
        assert modes(codec.encode(noise)) == {"raw"}


def test_rans_is_close_to_the_entropy() -> None:
    data = skewed(1 << 20)
    p = np.bincount(data, minlength=256) / data.size
    p = p[p > 0]
    bound = -(p * np.log2(p)).sum() / 8 * data.size
    size = len(NumcodecsRans().encode(data))
    # Measured 0.71% over: the 32 lane states of each 2^16-symbol sub-block
    # (128 bytes, ~0.016 bits a symbol) dominate at 2.4 bits of entropy.
    assert size < bound * 1.01


@pytest.mark.parametrize("coder", CODERS)
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_weights_equals_the_composable_chain(coder: str, name: str) -> None:
    # The chain's coder records the array's element type from its dtype
    # setting (Zarr fills it in from the array): then its frame is the fused
    # codec's, byte for byte. Without it, it records "bytes": the element
    # byte is the only difference.
    for arr in (weights_like(name, 300_001, seed=3), random_array(name, 1000, seed=4)):
        size = arr.dtype.itemsize
        fused = NumcodecsWeights(coder=coder, dtype=name).encode(arr)
        planes = NumcodecsPlanes(size).encode(NumcodecsBitReorder(name).encode(arr))
        chain = CODERS[coder](planes=size, dtype=name).encode(planes)
        assert fused == chain
        assert CODERS[coder](dtype=name).get_config()["planes"] == size
        untyped = CODERS[coder](planes=size).encode(planes)
        if fused.startswith(b"NNCF"):
            # The element byte differs, and the CRC field (which folds in its code).
            a, b = frame_info(untyped), frame_info(fused)
            assert (a["element"], b["element"]) == ("bytes", name)
            assert {k: v for k, v in a.items() if k != "element"} == {
                k: v for k, v in b.items() if k != "element"
            }
            diff = [i for i in range(len(fused)) if fused[i] != untyped[i]]
            assert len(untyped) == len(fused) and diff[0] == 7 and diff[-1] < 7 + 1 + 10 + 4
        else:
            assert fused[:4] == untyped[:4] == b"NNCW" and untyped[5:] == fused[5:]
        for frame in (fused, chain):
            assert same_bits(NumcodecsWeights(coder=coder, dtype=name).decode(frame), arr)
            assert same_bits(NumcodecsWeights().decode(frame), arr)  # its own dtype
        assert bytes(CODERS[coder](dtype=name).decode(fused)) == planes.tobytes()


@pytest.mark.parametrize(("case", "arr"), ARRAYS, ids=ARRAY_IDS)
def test_weights_round_trip(case: str, arr: np.ndarray) -> None:
    codec = NumcodecsWeights(dtype=arr.dtype)
    check_encode_decode(codec, arr)
    out = np.empty_like(arr)
    NumcodecsWeights().decode(codec.encode(arr), out=out)  # dtype from out=
    assert same_bits(out, arr)


def test_out_decodes_without_a_copy() -> None:
    from nncodecs.frame import decode_frame

    arr = weights_like("bfloat16", 100_000)
    frame = NumcodecsWeights(dtype="bfloat16").encode(arr)
    out = np.empty_like(arr)
    result = NumcodecsWeights(dtype="bfloat16").decode(frame, out=out)
    assert result is out
    assert same_bits(out, arr)
    # The decoder writes straight into a contiguous out: what it returns is out's memory.
    planes = NumcodecsRans(planes=2).encode(np.zeros(4096, np.uint8))
    target = np.full(4096, 7, np.uint8)
    decoded = decode_frame(planes, out=target)
    assert np.shares_memory(decoded, target) and not target.any()
    # A strided out cannot be written directly: the result is copied into it.
    strided = np.full(8192, 7, np.uint8)[::2]
    decoded = decode_frame(planes, out=strided)
    assert not np.shares_memory(decoded, strided) and not strided.any()


def test_checksum_can_be_turned_off() -> None:
    data = skewed(1000)
    on, off = NumcodecsRans(checksum=True).encode(data), NumcodecsRans(checksum=False).encode(data)
    assert len(on) == len(off) + 4
    assert frame_info(on)["checksum"] is not None and frame_info(off)["checksum"] is None
    assert bytes(NumcodecsRans().decode(off)) == data.tobytes()


@pytest.mark.parametrize(
    ("dtype", "n", "sb"),
    [("float32", 1 << 20, 16), ("bfloat16", 200_001, 16), ("bfloat16", 150_000, 12),
     ("float8_e4m3fn", 70_000, 14)],
)  # fmt: skip
def test_threads_give_the_same_bytes(dtype: str, n: int, sb: int) -> None:
    # Many chunks split over threads; a chunk or two split by sub-blocks
    # (fewer chunks than threads): the bytes never depend on the threads.
    arr = weights_like(dtype, n)
    for coder in ("auto", "rans"):
        frames = {
            NumcodecsWeights(dtype=dtype, coder=coder, subblock_log2=sb, threads=t).encode(arr)
            for t in (1, 2, 3, 4)
        }
        assert len(frames) == 1
        (frame,) = frames
        for t in (1, 2, 3):
            assert same_bits(NumcodecsWeights(dtype=dtype, threads=t).decode(frame), arr)


def test_small_tensor_decode_merges_every_chunk_kind() -> None:
    # Fewer chunks than threads (the fine-grained decoder): a chunk whose
    # planes are all raw (merged by a task of its own), one with two coded
    # planes and a constant one (merged after every task), under every
    # thread count and decoder variant.
    from nncodecs import _core

    rng = np.random.default_rng(5)
    noise = rng.integers(0, 2**32, 1 << 18, dtype=np.uint64).astype(np.uint32)
    # Exponent and top mantissa byte skewed, the two low bytes zero.
    shaped = (rng.geometric(0.3, 100_000).astype(np.uint32) % 8 + 120) << 24
    shaped |= (rng.geometric(0.2, 100_000).astype(np.uint32) % 16) << 16
    arr = np.concatenate([noise, shaped]).view(np.float32)
    frame = NumcodecsWeights(dtype="float32").encode(arr)
    modes = {(c[0], c[1]): c[2] for c in frame_info(frame)["chunks"]}
    assert {modes[(j, 0)] for j in range(4)} == {"raw"}
    assert sum(modes[(j, 1)] in ("rans", "huffman") for j in range(4)) >= 2
    assert "constant" in {modes[(j, 1)] for j in range(4)}
    try:
        for variant in _core.rans_variants():
            _core._set_rans_variant(variant)
            for t in (1, 2, 3, 4):
                # Into a filled array: every element must be written.
                out = np.full(arr.size, np.nan, np.float32)
                NumcodecsWeights(dtype="float32", threads=t).decode(frame, out=out)
                assert same_bits(out, arr), (variant, t)
    finally:
        _core._set_rans_variant("auto")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float64", "float8_e4m3fn"])
def test_every_merge_variant_decodes_every_element_size(dtype: str) -> None:
    # The decoder's plane merge (scalar, AVX2, AVX-512) for 1, 2 and 8-byte
    # elements (4-byte ones above), on many chunks and on few, into a filled
    # array: the widest variant is the default, so the others run only here.
    from nncodecs import _core

    for n in (200_001, 3 * (1 << 18) + 77):
        arr = weights_like(dtype, n)
        frame = NumcodecsWeights(dtype=dtype).encode(arr)
        try:
            for variant in _core.rans_variants():
                _core._set_rans_variant(variant)
                for t in (1, 2):
                    out = np.zeros_like(arr)
                    out.view(np.uint8)[:] = 0xA5
                    NumcodecsWeights(dtype=dtype, threads=t).decode(frame, out=out)
                    assert same_bits(out, arr), (variant, n, t)
        finally:
            _core._set_rans_variant("auto")


CONFIG_CASES = [
    NumcodecsRans(),
    NumcodecsRans(planes=4, precision=12, subblock_log2=14, checksum=False),
    NumcodecsRans(dtype="bfloat16"),
    NumcodecsHuffman(planes=2, subblock_log2=12),
    NumcodecsHuffman(dtype="float8_e4m3fn"),
    NumcodecsAuto(planes=2, precision=10, zstd_level=5),
    NumcodecsAuto(planes=8, dtype="int64"),
    NumcodecsWeights(),
    NumcodecsWeights(coder="rans", dtype="bfloat16", checksum=False),
]


@pytest.mark.parametrize("codec", CONFIG_CASES, ids=repr)
def test_config_and_repr(codec: object) -> None:
    check_config(codec)
    check_repr(codec, vars(nncodecs))


@pytest.mark.parametrize(
    "codec",
    [
        Rans(),
        Rans(planes=2, precision=12),
        Huffman(planes=4),
        Auto(zstd_level=9),
        Auto(dtype="float32"),
        Weights(),
        Weights(coder="huffman", dtype="float16"),
    ],
    ids=repr,
)
def test_zarr_config(codec: object) -> None:
    check_zarr_config(codec)
    assert eval(repr(codec), vars(nncodecs)) == codec


@pytest.mark.parametrize("codec_dir", ["rans", "huffman", "auto", "weights"])
def test_fixtures_still_decode(codec_dir: str) -> None:
    # Frames of the earlier versions (1, and the first whole-input zstd
    # kind): decode-only, to the same bytes.
    assert check_backwards_compatibility(FIXTURES / codec_dir, version=1) == 3 * len(ALL_DTYPES)


@pytest.mark.parametrize("codec_dir", ["rans", "huffman", "auto", "weights"])
def test_version_3_is_version_1_with_the_element_byte(codec_dir: str) -> None:
    # Today's encoders, less the element byte (and its code in the CRC), write
    # exactly the committed version 1 frames: the new field is all that changed.
    checked = 0
    for meta_path in sorted((FIXTURES / codec_dir).glob("*.json")):
        enc = meta_path.with_suffix(".enc").read_bytes()
        if not enc.startswith(b"NNCF") or "zstd" in modes(enc):  # (zstd's output may change)
            continue
        meta = json.loads(meta_path.read_text())
        arr = np.frombuffer(meta_path.with_suffix(".raw").read_bytes(), np_dtype(meta["dtype"]))
        if codec_dir != "weights" and "dtype" in meta["config"]:
            continue
        codec = numcodecs.get_codec(dict(meta["config"]))
        again = codec.encode(arr.reshape(meta["shape"]))
        assert to_old_version(again) == enc, meta_path.name
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("codec_dir", ["rans", "huffman", "auto", "weights"])
def test_version_3_fixtures_decode_and_encode_the_same(codec_dir: str) -> None:
    # Every dtype; the coders as in the chain (dtype set) and on plain bytes.
    extra = 2 if codec_dir != "weights" else 0
    count = check_backwards_compatibility(FIXTURES_V3 / codec_dir, version=3)
    assert count == 3 * len(ALL_DTYPES) + extra
    for path in (FIXTURES_V3 / codec_dir).glob("*.enc"):
        dtype = json.loads(path.with_suffix(".json").read_text())["config"]["dtype"]
        assert frame_info(path.read_bytes())["element"] == (dtype or "bytes"), path.name


@pytest.mark.parametrize("codec_id", ["nncodecs.rans", "nncodecs.huffman", "nncodecs.auto"])
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_byte_coders_round_trip_without_arguments(codec_id: str, name: str) -> None:
    # numcodecs' registry, no settings: bytes in, the same bytes out (a flat
    # uint8 array, as numcodecs' byte codecs give); the frame records "bytes".
    arr = weights_like(name, 3001, seed=1).reshape(3001)
    codec = numcodecs.get_codec({"id": codec_id})
    frame = codec.encode(arr)
    assert frame_info(frame)["element"] == "bytes"
    dec = codec.decode(frame)
    assert dec.dtype == np.uint8 and dec.ndim == 1 and dec.tobytes() == arr.tobytes()


@pytest.mark.parametrize("name", ALL_DTYPES)
@pytest.mark.parametrize("coder", CODERS)
def test_weights_round_trips_without_arguments(name: str, coder: str) -> None:
    # get_codec with nothing but the id (and the coder): the frame records
    # the dtype, and decoding gives a flat array of it (numcodecs' way; Zarr
    # v2 reshapes it), for chunked frames and the whole-input zstd kind.
    for arr in (weights_like(name, 300_006, seed=2).reshape(-1, 6), special_values(name)):
        frame = numcodecs.get_codec({"id": "nncodecs.weights", "coder": coder}).encode(arr)
        dec = numcodecs.get_codec({"id": "nncodecs.weights"}).decode(frame)
        assert dec.dtype == arr.dtype and dec.shape == (arr.size,)
        assert same_bits(dec, arr.reshape(-1))
        assert frame_info(frame)["element"] == name


def _other_dtype(name: str) -> str:
    """A dtype of the same width as ``name`` (a consistent edit of a dtype)."""
    width = np_dtype(name).itemsize
    return next(d for d in ALL_DTYPES if d != name and np_dtype(d).itemsize == width)


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_a_frame_decoded_as_another_dtype_is_corrupt(name: str) -> None:
    other = _other_dtype(name)
    small, large = special_values(name), weights_like(name, 200_001, seed=3)
    for arr in (small, large):
        frame = NumcodecsWeights(dtype=name).encode(arr)
        with pytest.raises(CorruptDataError, match=f"holds {name} elements, expected {other}"):
            NumcodecsWeights(dtype=other).decode(frame)
        with pytest.raises(CorruptDataError, match=f"holds {name} elements, expected {other}"):
            NumcodecsWeights(dtype=other).decode(frame, out=np.empty(arr.size, np_dtype(other)))
        planes = NumcodecsPlanes(arr.dtype.itemsize).encode(NumcodecsBitReorder(name).encode(arr))
        chain = NumcodecsAuto(dtype=name).encode(planes)
        with pytest.raises(CorruptDataError, match="expected"):
            NumcodecsAuto(dtype=other).decode(chain)
        # With nothing configured, a typed out= is the expectation; a byte buffer takes it,
        # and a frame of bytes (uint8, int8: raw bytes encoded) fills any out (numcodecs'
        # check_encode_decode decodes the frame of array.array("b") input into its array).
        if name in ("uint8", "int8"):
            out = NumcodecsWeights().decode(frame, out=np.empty(arr.size, np_dtype(other)))
            assert out.tobytes() == arr.tobytes()
        else:
            with pytest.raises(CorruptDataError, match=f"holds {name} elements, out is {other}"):
                NumcodecsWeights().decode(frame, out=np.empty(arr.size, np_dtype(other)))
        raw = NumcodecsWeights().decode(frame, out=np.empty(arr.nbytes, np.uint8))
        assert raw.tobytes() == arr.tobytes()
    # A frame of an earlier version states nothing: it decodes as asked.
    old = to_old_version(NumcodecsWeights(dtype=name, coder="rans").encode(large))
    assert same_bits(NumcodecsWeights(dtype=name).decode(old), large)


def test_small_tensors_cost_little() -> None:
    # A frame's own bytes: a few dozen at most.
    tiny = np.arange(8, dtype=np.float32)
    frame = NumcodecsWeights(dtype="float32").encode(tiny)
    # (version 3: 8 fixed bytes, the element byte among them)
    assert len(frame) <= tiny.nbytes + 8 + 1 + 4 + 4 * 1
    assert len(NumcodecsWeights(dtype="float32").encode(np.zeros(0, np.float32))) <= 13


def test_bad_settings_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="precision must be between 10 and 12"):
        NumcodecsRans(precision=13)
    with pytest.raises(ValueError, match="subblock_log2 must be between 12 and 16"):
        Rans(subblock_log2=11)
    with pytest.raises(ValueError, match="planes must be between 1 and 255"):
        NumcodecsAuto(planes=0)
    with pytest.raises(ValueError, match="coder must be one of"):
        NumcodecsWeights(coder="lzma")
    with pytest.raises(TypeError, match="checksum must be True or False"):
        NumcodecsRans(checksum="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not 2 equal planes"):
        NumcodecsRans(planes=2).encode(b"abc")
    # (numcodecs' rule, issue 36: a dtype with no float layout is coded as its bytes)
    complex_frame = NumcodecsWeights().encode(np.arange(3, dtype=np.complex64))
    assert (
        NumcodecsWeights().decode(complex_frame).tobytes()
        == np.arange(3, dtype=np.complex64).tobytes()
    )
    with pytest.raises(TypeError, match="unsupported dtype"):
        NumcodecsWeights(dtype="complex64")
    with pytest.raises(ValueError, match=r"states no element type.*needs dtype="):
        NumcodecsWeights().decode(NumcodecsRans(planes=4).encode(np.zeros(3, np.float32)))
    with pytest.raises(ValueError, match="has 2-byte elements, planes is 4"):
        NumcodecsRans(planes=4, dtype="bfloat16")
    with pytest.raises(TypeError, match="unsupported dtype"):
        NumcodecsAuto(dtype="complex64")


def test_zstd_chunks_hold_no_redundant_bytes() -> None:
    text = np.frombuffer(b"abcabcabd" * 29000, np.uint8)  # one chunk (< 2^18 bytes)
    planes = np.concatenate([text, np.random.default_rng(1).integers(0, 256, text.size, np.uint8)])
    frame = NumcodecsAuto(planes=2).encode(planes)  # above the whole-input zstd size
    chunk = frame_info(frame)["chunks"][0]
    assert chunk[2] == "zstd"
    payload = frame[chunk[3] : chunk[3] + chunk[4]]
    assert not payload.startswith(b"\x28\xb5\x2f\xfd")  # no zstd magic: the index says it
    plain = zstandard.ZstdCompressor(level=3).compress(text.tobytes())
    assert len(payload) < len(plain)


def test_small_inputs_can_be_one_zstd_frame() -> None:
    text = np.frombuffer(b"abcabcabd" * 1000, np.uint8)
    codec = NumcodecsAuto()
    frame = codec.encode(text)
    assert frame.startswith(b"NNCW\x00")  # the whole-input kind with its element type (bytes)
    assert frame_info(frame) == {
        "kind": "zstd",
        "decoded_len": text.nbytes,
        "element": "bytes",
        "big_endian": False,
        "chunks": [],
    }
    # The first whole-input kind ('NNCZ', no element type) still decodes.
    assert bytes(codec.decode(b"NNCZ" + frame[5:])) == text.tobytes()
    assert bytes(codec.decode(frame)) == text.tobytes()
    # The rans and huffman codecs read it too: every decoder reads every frame.
    assert bytes(NumcodecsRans().decode(frame)) == text.tobytes()
    out = bytearray(text.nbytes)
    codec.decode(frame, out=out)
    assert bytes(out) == text.tobytes()
    # With the checksum, zstd's own content checksum guards it.
    assert (
        len(NumcodecsAuto(checksum=True).encode(text))
        == len(NumcodecsAuto(checksum=False).encode(text)) + 4
    )


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8_e4m3fn"])
def test_tiny_tensors_store_no_larger_than_zstd(real_weights: dict, dtype: str) -> None:
    # The small tensors of a real model (biases, norms: at most 1,536 elements):
    # never larger than zstd-3 of their raw bytes without the checksum, and
    # at most the checksum's 4 bytes larger with it (measured: one all-zero
    # float32 bias, by 2 bytes).
    z = zstandard.ZstdCompressor(level=3)
    small = [a.astype(np_dtype(dtype)) for a in real_weights.values() if a.size <= 1536]
    assert len(small) == 65
    for arr in small:
        zstd3 = len(z.compress(arr.tobytes()))
        plain = NumcodecsWeights(dtype=dtype, checksum=False).encode(arr)
        checked = NumcodecsWeights(dtype=dtype).encode(arr)
        assert len(plain) <= zstd3
        assert len(checked) <= zstd3 + 4
        assert NumcodecsWeights(dtype=dtype).decode(checked).tobytes() == arr.tobytes()


def test_rans_simd_variants_write_and_read_the_same_bytes() -> None:
    # Every encoder and decoder variant this CPU runs (scalar, AVX2, AVX-512)
    # against the scalar one: the same frames, the same decoded bytes, over
    # sub-block tails, all precisions and sub-block sizes.
    from nncodecs import _core

    rng = np.random.default_rng(11)
    cases = []
    for size in (1, 31, 32, 33, 4095, 70_001, 300_000):
        for precision in (10, 11, 12):
            data = (rng.geometric(0.2 + 0.1 * (precision - 10), size) % 256).astype(np.uint8)
            cases.append((data, precision, 12 + size % 5))
    # Symbols within 32, 64 or 128 values (AVX-512 looks them up by
    # permutations, also near the top of the byte range) and spread wide
    # (it hands them to the AVX2 kernel, which loads a 64-bit word a lane).
    for width in (32, 64, 128):
        for low in (0, 100, 256 - width, 250):
            span = min(width, 256 - low)
            narrow = low + rng.geometric(0.05, 200_000) % span
            cases.append((narrow.astype(np.uint8), 11, 16))
    wide = np.where(
        rng.random(200_000) < 0.9, rng.integers(0, 4, 200_000), rng.integers(0, 256, 200_000)
    )
    cases.append((wide.astype(np.uint8), 11, 16))
    try:
        _core._set_rans_variant("scalar")
        reference = [NumcodecsRans(precision=p, subblock_log2=sb).encode(d) for d, p, sb in cases]
        for variant in _core.rans_variants():
            _core._set_rans_variant(variant)
            for (data, precision, sb), ref in zip(cases, reference, strict=True):
                codec = NumcodecsRans(precision=precision, subblock_log2=sb)
                assert codec.encode(data) == ref, (variant, data.size, precision, sb)
                assert bytes(codec.decode(ref)) == data.tobytes(), (variant, data.size)
    finally:
        _core._set_rans_variant("auto")


@pytest.mark.parametrize(
    "cls",
    [
        nncodecs.Weights, nncodecs.NumcodecsWeights, nncodecs.Auto, nncodecs.NumcodecsAuto,
        nncodecs.Rans, nncodecs.NumcodecsRans, nncodecs.Huffman, nncodecs.NumcodecsHuffman,
    ],
)  # fmt: skip
def test_a_bad_argument_names_the_codec(cls):
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\(\): .*'bogus'"):
        cls(bogus=1)
    if not cls.__name__.startswith("Numcodecs"):  # Zarr codecs: keyword-only settings
        with pytest.raises(TypeError, match=rf"^{cls.__name__}\(\): .*positional"):
            cls(11)
