"""A small GPU decode for compute-sanitizer (scripts/gpu_check.sh): CPU frames
of every chunk kind decoded on the device, a corrupt one reported, exits 0."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nncodecs import CorruptDataError, NumcodecsWeights
from nncodecs.gpu.cupy_backend import CupyBackend
from nncodecs.gpu.decode import decode_on


def main() -> None:
    backend = CupyBackend()
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((96, 1024)).astype(np.float32)
    rows *= rng.lognormal(0, 1, 96).astype(np.float32)[:, None] * 0.02
    arr = np.concatenate([rows.astype(ml_dtypes.bfloat16).view(np.uint16),
                          np.full((16, 1024), 0x3F80, np.uint16),
                          rng.integers(0, 2**16, (16, 1024), dtype=np.uint16)])  # fmt: skip
    arr = arr.view(ml_dtypes.bfloat16)
    for coder in ("rans", "auto"):
        frame = np.frombuffer(NumcodecsWeights(coder=coder, dtype="bfloat16").encode(arr), np.uint8)
        out = decode_on(backend, frame, max_decoded=arr.nbytes, layout="bfloat16", elements=True)
        assert backend.to_host(out).tobytes() == arr.tobytes(), coder
    bad = frame.copy()
    bad[len(bad) // 2] ^= 0xFF
    try:
        decode_on(backend, bad, max_decoded=arr.nbytes, layout="bfloat16", elements=True)
    except CorruptDataError as e:
        print("corrupt frame reported:", e)
    else:
        raise SystemExit("a corrupt frame decoded without an error")
    print("small case: exact")


if __name__ == "__main__":
    main()
