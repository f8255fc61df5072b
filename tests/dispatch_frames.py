"""Run by tests/frame/test_dispatch.py in a process per NNCODECS_DISPATCH level.

Encodes a fixed set of arrays with the codecs at this process's dispatch level,
checks that each frame decodes to its input here, re-encodes the committed
version 3 fixtures (which must come out byte for byte), and prints one JSON
line: the level, the kernel variants, and a SHA-256 of every frame and a
CRC32C of every buffer, for the parent to compare across levels.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from harness import (
    FIXTURES_V3,
    check_backwards_compatibility,
    row_scaled,
    same_bits,
    special_values,
    weights_like,
)

from nncodecs import (
    NumcodecsHuffman,
    NumcodecsRans,
    NumcodecsWeights,
    _core,
)

FLOATS = ["float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float64"]


def arrays() -> list[tuple[str, np.ndarray]]:
    """Weights with per-row scales (version 2 frames, several chunks), small
    tensors (zstd trials, sub-blocks in parallel), special values."""
    out = []
    for name in FLOATS:
        out.append((f"{name}-rows", row_scaled(name, 300, 1024, seed=1)))
        out.append((f"{name}-flat", weights_like(name, 700_001, seed=2)))
        out.append((f"{name}-small", weights_like(name, 5_000, seed=3)))
        out.append((f"{name}-special", special_values(name)))
    return out


def byte_streams() -> list[tuple[str, np.ndarray]]:
    """Bytes for the rANS encoders' symbol lookups: within 32, 64 and 128
    values (also at the top of the byte range) and spread over all 256."""
    rng = np.random.default_rng(4)
    out = []
    for width in (32, 64, 128):
        for low in (0, 100, 256 - width):
            data = low + rng.geometric(0.05, 150_001) % min(width, 256 - low)
            out.append((f"bytes-{width}-{low}", data.astype(np.uint8)))
    n = 150_001
    wide = np.where(rng.random(n) < 0.9, rng.integers(0, 4, n), rng.integers(0, 256, n))
    out.append(("bytes-wide", wide.astype(np.uint8)))
    return out


def main() -> None:
    frames: dict[str, str] = {}

    def record(key: str, codec: object, arr: np.ndarray) -> None:
        enc = bytes(codec.encode(arr))  # type: ignore[attr-defined]
        dec = codec.decode(enc)  # type: ignore[attr-defined]
        assert same_bits(np.asarray(dec).reshape(arr.shape), arr), key
        frames[key] = hashlib.sha256(enc).hexdigest()

    for name, arr in arrays():
        for threads in (1, 2):
            codec = NumcodecsWeights(dtype=arr.dtype.name, threads=threads)
            record(f"weights/{name}/t{threads}", codec, arr)
    for name, data in byte_streams():
        for precision in (10, 12):
            record(f"rans/{name}/p{precision}", NumcodecsRans(precision=precision), data)
        record(f"huffman/{name}", NumcodecsHuffman(), data)

    rng = np.random.default_rng(5)
    crcs = {}
    for n in (0, 1, 255, 511, 512, 513, 4096, 12_289, (1 << 20) + 13):
        for off in (0, 3):
            data = rng.integers(0, 256, n + off, dtype=np.uint8)[off:]
            crcs[f"{n}+{off}"] = _core.crc32c(data, 0xDEADBEEF)

    fixtures = {
        d: check_backwards_compatibility(FIXTURES_V3 / d, version=3)
        for d in ("rans", "huffman", "auto", "weights", "weights-rows")
    }
    print(
        json.dumps(
            {
                "level": _core.dispatch_level(),
                "cpu": _core.cpu_dispatch_level(),
                "variants": _core.variants(),
                "rans_variants": _core.rans_variants(),
                "frames": frames,
                "crc32c": crcs,
                "fixtures": fixtures,
            }
        )
    )


if __name__ == "__main__":
    main()
