"""Write the committed codec fixtures that do not exist yet (never overwrites).

Run once when a codec or a fixture array is added:
``python tests/make_fixtures.py``. Existing fixtures stay as they were
committed, so a change of format shows up as a failing test.

Frames of the coders and ``weights`` go under ``fixtures/v3/`` (frame
version 3, which records the element type); those under ``fixtures/<codec>``
are versions 1 and 2, written by earlier releases and kept decode-only:
nothing writes them now, so this script never adds to them.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import numpy as np
from harness import (
    FIXTURES,
    FIXTURES_V3,
    fixture_cases,
    row_shift_fixture_cases,
    save_fixtures,
)

from nncodecs import (
    NumcodecsAuto,
    NumcodecsBitReorder,
    NumcodecsHuffman,
    NumcodecsPlanes,
    NumcodecsRans,
    NumcodecsWeights,
)


def main() -> None:
    total = 0
    for name, arr in fixture_cases():
        total += save_fixtures(
            NumcodecsBitReorder(dtype=arr.dtype), FIXTURES / "bitreorder", [(name, arr)]
        )
        size = arr.dtype.itemsize
        total += save_fixtures(
            NumcodecsPlanes(elementsize=size), FIXTURES / "planes", [(name, arr)]
        )
        # The coders see the planes of the reordered array, as in the weights
        # chain, and record the array's dtype, as the chain's coder does in Zarr.
        planes = NumcodecsPlanes(size).encode(NumcodecsBitReorder(arr.dtype).encode(arr))
        for codec_dir, codec in (
            ("rans", NumcodecsRans(planes=size, dtype=arr.dtype)),
            ("huffman", NumcodecsHuffman(planes=size, dtype=arr.dtype)),
            ("auto", NumcodecsAuto(planes=size, dtype=arr.dtype)),
        ):
            total += save_fixtures(codec, FIXTURES_V3 / codec_dir, [(name, planes)])
        total += save_fixtures(
            NumcodecsWeights(dtype=arr.dtype), FIXTURES_V3 / "weights", [(name, arr)]
        )
    # The coders on plain bytes (no dtype: the frames record "bytes").
    rng = np.random.default_rng(40)
    skew = np.minimum(rng.geometric(0.25, 5000), 255).astype(np.uint8)
    text = np.frombuffer(b"the quick brown fox jumps over the lazy dog. " * 40, np.uint8)
    for codec_dir, codec in (
        ("rans", NumcodecsRans(planes=2)),
        ("huffman", NumcodecsHuffman(planes=2)),
        ("auto", NumcodecsAuto(planes=2)),
    ):
        total += save_fixtures(
            codec, FIXTURES_V3 / codec_dir, [("bytes-skewed", skew), ("bytes-text", text)]
        )
    # Row sections (the weights codec's row shift), in a directory of their own.
    for name, arr in row_shift_fixture_cases():
        total += save_fixtures(
            NumcodecsWeights(dtype=arr.dtype), FIXTURES_V3 / "weights-rows", [(name, arr)]
        )
    total += save_zarr_fixtures()
    print(f"wrote {total} new fixtures under {FIXTURES}")


def save_zarr_fixtures() -> int:
    """Two small Zarr v3 stores written with the nncodecs chain (never overwritten)."""
    import json

    import numpy as np
    import zarr
    from harness import special_values, weights_like
    from zarr.codecs import ZstdCodec
    from zarr.storage import LocalStore

    from nncodecs import BitReorder, Planes

    written = 0
    root = FIXTURES / "zarr"
    root.mkdir(parents=True, exist_ok=True)
    cases = {
        "bfloat16-weights": (weights_like("bfloat16", 64 * 48, seed=9).reshape(64, 48), 0.0),
        "float8_e4m3fn-special": (
            np.concatenate([special_values("float8_e4m3fn")] * 4)[:40].reshape(8, 5),
            float("nan"),
        ),
    }
    for name, (arr, fill) in cases.items():
        path = root / f"{name}.zarr"
        if path.exists():
            continue
        z = zarr.create_array(
            LocalStore(path),
            shape=arr.shape,
            dtype=arr.dtype,
            chunks=(32, 16) if arr.shape[0] > 8 else (4, 4),
            fill_value=fill,
            filters=[BitReorder()],
            serializer=Planes(),
            compressors=[ZstdCodec(level=3)],
        )
        z[:] = arr
        path.with_suffix(".raw").write_bytes(arr.tobytes())
        meta = {"dtype": str(arr.dtype), "shape": list(arr.shape)}
        path.with_suffix(".json").write_text(json.dumps(meta) + "\n")
        written += 1
    return written


if __name__ == "__main__":
    main()
