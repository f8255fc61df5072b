"""Hostile input: every malformed frame is a CorruptDataError, never a crash or wrong data.

The same decoders also run under AddressSanitizer and UBSan (tests/frame/test_sanitizers.py)
and under a fuzzer (fuzz/), which prove the absence of out-of-bounds access.
"""

from __future__ import annotations

import gzip
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
import zstandard
from harness import varint, weights_like
from zarr.storage import MemoryStore

from nncodecs import (
    CorruptDataError,
    NumcodecsAuto,
    NumcodecsHuffman,
    NumcodecsRans,
    NumcodecsWeights,
    Weights,
)
from nncodecs.frame import decode_frame, frame_info


def skewed(n: int, seed: int) -> np.ndarray:
    return np.minimum(np.random.default_rng(seed).geometric(0.3, n), 255).astype(np.uint8)


def sample_frames() -> dict[str, tuple[object, bytes, bytes]]:
    """(codec, original bytes, frame) with every chunk mode between them."""
    text = np.frombuffer((b"lorem ipsum dolor sit amet " * 3000)[:70000], np.uint8)
    planes = np.concatenate(
        [
            skewed(300_000, 1),
            np.full(300_000, 9, np.uint8),
            np.random.default_rng(2).integers(0, 256, 300_000, dtype=np.uint8),
        ]
    )
    cases = {
        "rans": (NumcodecsRans(planes=3), planes),
        "huffman": (NumcodecsHuffman(planes=3), planes),
        "auto": (NumcodecsAuto(planes=2), np.concatenate([skewed(70000, 3), text])),
        "small": (NumcodecsRans(), skewed(5000, 4)),
    }
    out = {}
    for name, (codec, data) in cases.items():
        out[name] = (codec, data.tobytes(), codec.encode(data))
    tiny = np.frombuffer(b"tiny tensors become one zstd frame " * 40, np.uint8)
    out["whole-zstd"] = (NumcodecsAuto(), tiny.tobytes(), NumcodecsAuto().encode(tiny))
    assert out["whole-zstd"][2].startswith(b"NNCW")
    w = weights_like("bfloat16", 70000)
    out["weights"] = (
        NumcodecsWeights(dtype="bfloat16"),
        w.tobytes(),
        NumcodecsWeights(dtype="bfloat16").encode(w),
    )
    return out


FRAMES = sample_frames()


def test_sample_frames_cover_every_mode() -> None:
    seen = set()
    for _, _, frame in FRAMES.values():
        seen |= {c[2] for c in frame_info(frame)["chunks"]}
    assert seen == {"raw", "constant", "rans", "huffman", "zstd"}


def decode_checked(codec: object, frame: bytes, original: bytes) -> None:
    """Either a CorruptDataError, or (a change that does not matter) the original bytes."""
    try:
        got = codec.decode(frame)  # type: ignore[attr-defined]
    except CorruptDataError:
        return
    assert np.asarray(got).tobytes() == original


@pytest.mark.parametrize("name", FRAMES)
def test_every_truncation_is_detected(name: str) -> None:
    codec, _original, frame = FRAMES[name]
    cuts = list(range(0, min(len(frame), 400))) + list(
        range(400, len(frame), max(1, len(frame) // 300))
    )
    for cut in cuts:
        with pytest.raises(CorruptDataError):
            codec.decode(frame[:cut])  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", FRAMES)
def test_flipped_bytes_are_detected(name: str) -> None:
    codec, original, frame = FRAMES[name]
    rng = np.random.default_rng(len(frame))
    positions = list(range(min(len(frame), 200))) + list(rng.integers(0, len(frame), 400))
    for pos in positions:
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(frame)
            bad[pos] ^= mask
            decode_checked(codec, bytes(bad), original)


def test_trailing_bytes_and_lengths_past_the_end() -> None:
    codec, _, frame = FRAMES["rans"]
    with pytest.raises(CorruptDataError, match="after its last chunk"):
        codec.decode(frame + b"\0")
    info = frame_info(frame)
    chunk = next(c for c in info["chunks"] if c[2] == "rans")
    # Rewrite that chunk's payload length (a varint in the index) to something huge.
    bad = bytearray(frame)
    index_at = frame.index(bytes([2]) + varint(chunk[4]), 8)
    bad[index_at + 1 : index_at + 1 + len(varint(chunk[4]))] = varint(chunk[4] + 10**9)[
        : len(varint(chunk[4]))
    ]
    with pytest.raises(CorruptDataError):
        codec.decode(bytes(bad))


def test_declared_size_larger_than_expected() -> None:
    codec, original, frame = FRAMES["small"]
    with pytest.raises(CorruptDataError, match="expected at most"):
        decode_frame(frame, max_decoded=len(original) - 1)
    with pytest.raises(CorruptDataError, match="expected at most"):
        codec.decode(frame, out=bytearray(len(original) - 1))
    whole_codec, whole_original, whole = FRAMES["whole-zstd"]
    with pytest.raises(CorruptDataError, match="expected at most"):
        whole_codec.decode(whole, out=bytearray(len(whole_original) - 1))
    # A tiny frame claiming an enormous size is refused before any allocation.
    header = bytearray(frame[:7]) + varint(1 << 60)
    with pytest.raises(CorruptDataError, match="expected at most"):
        codec.decode(bytes(header) + b"\0" * 8)


@pytest.mark.parametrize(
    "junk",
    [
        b"",
        b"NNCF",
        b"NNCF\x01",
        b"\x00" * 64,
        zstandard.ZstdCompressor().compress(b"hello world" * 10),
        gzip.compress(b"hello world" * 10),
        struct.pack("<Q", 12) + b'{"a": "b"}  ',
        np.random.default_rng(5).integers(0, 256, 4096, dtype=np.uint8).tobytes(),
        b"NNCF\x02\x01\x01\x00",  # version 2, truncated
        b"NNCF\x05\x01\x01\x00\x00",  # a future version
        b"NNCF\x04\x01\x01\x42\x00",  # version 4: big-endian uint8 (one byte an element)
        b"NNCF\x03\x01\x04\x46\x00",  # version 3 with the byte-order bit (version 4's)
        b"NNCF\x01\x00\x01\x00",  # coder 0
        b"NNCF\x03\x01\x01\x11\x00",  # element code 17
        b"NNCF\x03\x01\x01\x0d\x00",  # bfloat16 (2 bytes) in one plane
        b"NNCW",
        b"NNCW\x3f" + zstandard.ZstdCompressor().compress(b"x" * 100)[4:],
        b"NNCZ",
        b"NNCZ" + zstandard.ZstdCompressor().compress(b"x" * 100)[4:] + b"junk",
        b"NNCZ" + b"\x00" * 40,
    ],
    ids=[
        "empty",
        "magic",
        "magic+version",
        "zeros",
        "zstd",
        "gzip",
        "safetensors",
        "random",
        "v2",
        "v5",
        "v4-big-endian-bytes",
        "v3-byte-order-bit",
        "coder0",
        "element17",
        "element-width",
        "nncw",
        "nncw-code63",
        "nncz",
        "nncz+junk",
        "nncz-zeros",
    ],
)
def test_frames_of_something_else(junk: bytes) -> None:
    for codec in (
        NumcodecsRans(),
        NumcodecsHuffman(),
        NumcodecsAuto(),
        NumcodecsWeights(dtype="float32"),
    ):
        with pytest.raises(CorruptDataError):
            codec.decode(junk)


@pytest.mark.parametrize("name", ["weights", "small", "rans"])
def test_forged_element_bytes_are_corrupt(name: str) -> None:
    # Version 3's element byte (after the plane count): codes past the table,
    # the reserved bit, a type whose width is not the plane count, or another
    # type of the right width (the checksum covers the code) all raise, with
    # or without a dtype from the caller; never a crash.
    codec, _, frame = FRAMES[name]
    planes = frame[6]
    assert frame[4] == 3
    for byte in list(range(256)):
        if byte == frame[7]:
            continue
        bad = frame[:7] + bytes([byte]) + frame[8:]
        for decoder in (codec, NumcodecsWeights(), NumcodecsWeights(dtype="bfloat16")):
            if decoder is codec or planes == 2:
                # (a frame that says "bytes" gives the dtype-less weights decoder nothing
                # to decode to: a ValueError asking for one)
                untyped = byte in (0x00, 0x80) and decoder.dtype is None
                with pytest.raises(ValueError if untyped else CorruptDataError):
                    decoder.decode(bad)  # type: ignore[attr-defined]
    code = frame[7] & 0x3F
    with pytest.raises(CorruptDataError, match="element type code 17"):
        codec.decode(frame[:7] + bytes([17 | (frame[7] & 0x80)]) + frame[8:])  # type: ignore[attr-defined]
    assert code < 17


def test_forged_element_code_of_the_whole_input_kind() -> None:
    codec, _, frame = FRAMES["whole-zstd"]
    for code in (17, 63, 200, 255):
        with pytest.raises(CorruptDataError, match=f"element type code {code}"):
            codec.decode(frame[:4] + bytes([code]) + frame[5:])  # type: ignore[attr-defined]
    float32 = NumcodecsWeights(dtype="float32").encode(np.arange(10, dtype=np.float32))
    assert float32.startswith(b"NNCW\x0b")
    with pytest.raises(CorruptDataError, match="holds float32 elements, expected int32"):
        NumcodecsWeights(dtype="int32").decode(float32)


def test_corrupt_chunk_in_a_zarr_array_raises() -> None:
    store = MemoryStore()
    w = weights_like("bfloat16", 64 * 64).reshape(64, 64)
    z = zarr.create_array(
        store, shape=w.shape, chunks=(32, 64), dtype=w.dtype, serializer=Weights(), compressors=None
    )
    z[:] = w
    key = "c/0/0"
    raw = bytearray(store._store_dict[key].to_bytes())
    raw[len(raw) // 2] ^= 0x40
    store._store_dict[key] = store._store_dict[key].from_bytes(bytes(raw))
    with pytest.raises(CorruptDataError):
        _ = zarr.open_array(store, mode="r")[:]
    # The other chunk still reads.
    assert zarr.open_array(store, mode="r")[32:].tobytes() == w[32:].tobytes()


def test_a_junk_chunk_index_is_refused_before_it_is_held(tmp_path: Path) -> None:
    """(issue 36) A 40 MiB frame whose index claims 20 million constant chunks, one byte
    too long: refused after a walk that holds nothing (it once reserved 1 GiB of chunk
    records first). Measured in a fresh process by its peak resident size."""
    chunks = 20_000_000
    head = b"NNCF\x03\x01\x01\x00" + varint(chunks << 18)  # rans, no checksum, 1 plane, bytes
    frame = head + b"\x01\x07" * chunks + b"!"
    (tmp_path / "junk.bin").write_bytes(frame)
    code = (
        "import resource, sys\n"
        "from nncodecs import NumcodecsRans, CorruptDataError\n"
        f"data = open({str(tmp_path / 'junk.bin')!r}, 'rb').read()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        "    NumcodecsRans().decode(data)\n"
        "except CorruptDataError as exc:\n"
        "    assert 'after its last chunk' in str(exc), exc\n"
        "else:\n"
        "    sys.exit('decoded junk')\n"
        "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(grown // 1024)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) < 100, f"peak grew by {r.stdout.strip()} MiB"
