"""A small GPU case for compute-sanitizer (scripts/gpu_check.sh): CPU frames of
every chunk kind decoded on the device, alone and in one batch; the same
tensors encoded on the device (bytes equal to the CPU's, with and without the
row shift); a corrupt frame reported. Exits 0."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nncodecs import CorruptDataError, NumcodecsWeights
from nncodecs.gpu.cupy_backend import CupyBackend
from nncodecs.gpu.decode import decode_frames, decode_on
from nncodecs.gpu.encode import encode_frames, encode_on


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
    frames = [np.frombuffer(NumcodecsWeights(coder=c, dtype="bfloat16").encode(arr), np.uint8)
              for c in ("rans", "auto", "huffman")]  # fmt: skip
    outs = decode_frames(backend, frames, max_decoded=[arr.nbytes] * 3, layouts=["bfloat16"] * 3,
                         elements=True, planes=[2] * 3)  # fmt: skip
    assert all(backend.to_host(o).tobytes() == arr.tobytes() for o in outs), "batch"
    dev = backend.cp.asarray(arr.view(np.uint8).reshape(-1))
    for coder in ("rans", "auto"):
        for rows in (0, arr.shape[1]):
            cpu = NumcodecsWeights(coder=coder, dtype="bfloat16").encode(
                arr if rows else arr.reshape(-1)
            )
            gpu = encode_on(backend, dev, planes=2, coder=coder, elements=True, layout="bfloat16",
                            row_length=rows, host_below=0)  # fmt: skip
            assert backend.to_host(gpu).tobytes() == cpu, (coder, rows)
    batch = encode_frames(backend, [dev, dev[: 2 * 70_001]], planes=[2, 2], coder="rans",
                          layouts=["bfloat16"] * 2, row_lengths=[arr.shape[1], 0], elements=True,
                          host_below=0)  # fmt: skip
    flat = arr.reshape(-1)[:70_001]
    assert backend.to_host(batch[0]).tobytes() == NumcodecsWeights(
        coder="rans", dtype="bfloat16"
    ).encode(arr)
    assert backend.to_host(batch[1]).tobytes() == NumcodecsWeights(
        coder="rans", dtype="bfloat16"
    ).encode(flat)
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
