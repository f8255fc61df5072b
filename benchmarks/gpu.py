"""GPU decode and encode throughput against a device-to-device copy of the same bytes.

``python benchmarks/gpu.py [--sizes-mib 16 256 2048] [--json FILE]`` on a
machine with a CUDA GPU and CuPy. Each case is a bfloat16 "weights" tensor
(rows of 4096 with per-row scales), encoded by the CPU (coder rans, as the GPU
decodes it all), its frame put on the device, then decoded there (best of 5,
CUDA events around the whole call: the host's parse of the header and index,
the launches and the status check), next to ``cupy`` copying the same number
of output bytes device to device. Then the GPU encodes the tensor from device
memory (best of 3, the whole call: its kernels, the host's decisions and the
copies of statistics between), and its frame is compared with the CPU's byte
for byte. GB/s are of bfloat16 (uncompressed) bytes; ratio = original / stored
(x smaller, larger is better; the ``--json`` file's ``ratio`` is stored /
original). A last line decodes and encodes 256 tensors of 384 x 384 in one
batch (decode_frames, encode_frames) and one by one: what launches per tensor
cost.
"""

from __future__ import annotations

import argparse
import json
import time

import ml_dtypes
import numpy as np


def weights(mib: float, seed: int = 0, cols: int = 4096) -> np.ndarray:
    rows = max(1, int(mib * (1 << 20)) // (2 * cols))
    rng = np.random.default_rng(seed)
    out = np.empty((rows, cols), ml_dtypes.bfloat16)
    for r0 in range(0, rows, 4096):  # in slabs: float32 temporaries stay small
        r1 = min(rows, r0 + 4096)
        w = rng.standard_normal((r1 - r0, cols), dtype=np.float32)
        w *= (rng.lognormal(0, 0.35, r1 - r0) * 0.02).astype(np.float32)[:, None]
        out[r0:r1] = w.astype(ml_dtypes.bfloat16)
    return out


def best_ms(cp, fn, repeat: int = 5) -> float:
    fn()  # warm-up (and the kernels' first compile)
    cp.cuda.Device().synchronize()
    best = float("inf")
    for _ in range(repeat):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, end))
    return best


def measure(cp, backend, mib: int) -> dict:
    """One size: the CPU's frame decoded on the device, and a copy of its output bytes."""
    from nncodecs import NumcodecsWeights
    from nncodecs.gpu.decode import decode_on

    arr = weights(mib)
    t = time.perf_counter()
    frame = np.frombuffer(NumcodecsWeights(coder="rans", dtype="bfloat16").encode(arr), np.uint8)
    cpu_s = time.perf_counter() - t
    dev_frame = cp.asarray(frame)
    nbytes = arr.nbytes

    def decode():
        return decode_on(
            backend, frame, max_decoded=nbytes, layout="bfloat16", elements=True,
            device_frame=dev_frame,
        )  # fmt: skip

    exact = bool((cp.asnumpy(decode()) == arr.reshape(-1).view(np.uint8)).all())
    dec_ms = best_ms(cp, decode)
    src = cp.empty(nbytes, cp.uint8)
    dst = cp.empty_like(src)
    copy_ms = best_ms(cp, lambda: cp.copyto(dst, src))

    from nncodecs.gpu.encode import encode_on

    dev_arr = cp.asarray(arr.reshape(-1).view(np.uint8))

    def encode():
        return encode_on(backend, dev_arr, planes=2, coder="rans", elements=True,
                         layout="bfloat16", row_length=arr.shape[1])  # fmt: skip

    same = bool(cp.asnumpy(encode()).tobytes() == frame.tobytes())
    enc_ms = best_ms(cp, encode, repeat=3)
    return {
        "mib": mib,
        "ratio": frame.nbytes / nbytes,
        "decode_GBps": nbytes / dec_ms / 1e6,
        "copy_GBps": nbytes / copy_ms / 1e6,
        "encode_GBps": nbytes / enc_ms / 1e6,
        "cpu_encode_GBps": nbytes / cpu_s / 1e9,
        "exact": exact,
        "same_bytes": same,
    }


def batch(cp, backend, count: int = 256) -> dict:
    """Many small tensors: one batch against a decode call each."""
    from nncodecs import NumcodecsWeights
    from nncodecs.gpu.decode import decode_frames, decode_on

    codec = NumcodecsWeights(coder="rans", dtype="bfloat16")
    tensors = [weights(384 * 384 * 2 / (1 << 20), seed=i, cols=384) for i in range(count)]
    frames = [np.frombuffer(codec.encode(t), np.uint8) for t in tensors]
    devs = [cp.asarray(f) for f in frames]
    nbytes = sum(t.nbytes for t in tensors)
    kw = {"layout": "bfloat16", "elements": True}

    def one_batch():
        return decode_frames(backend, [None] * count, max_decoded=[t.nbytes for t in tensors],
                             layouts=["bfloat16"] * count, elements=True, device_frames=devs,
                             planes=[2] * count)  # fmt: skip

    def each():
        return [decode_on(backend, f, max_decoded=t.nbytes, device_frame=d, **kw)
                for f, t, d in zip(frames, tensors, devs, strict=True)]  # fmt: skip

    outs = one_batch()
    exact = all(cp.asnumpy(o).tobytes() == t.tobytes() for o, t in zip(outs, tensors, strict=True))

    from nncodecs.gpu.encode import encode_frames, encode_on

    devs_in = [cp.asarray(t.reshape(-1).view(np.uint8)) for t in tensors]
    settings = {"coder": "rans", "elements": True}

    def encode_batch():
        return encode_frames(backend, devs_in, planes=[2] * count, layouts=["bfloat16"] * count,
                             row_lengths=[384] * count, **settings)  # fmt: skip

    def encode_each():
        return [encode_on(backend, d, planes=2, layout="bfloat16", row_length=384, **settings)
                for d in devs_in]  # fmt: skip

    same = all(cp.asnumpy(g).tobytes() == f.tobytes()
               for g, f in zip(encode_batch(), frames, strict=True))  # fmt: skip
    return {"tensors": count, "exact": exact and same,
            "batch_GBps": nbytes / best_ms(cp, one_batch, 3) / 1e6,
            "each_GBps": nbytes / best_ms(cp, each, 3) / 1e6,
            "encode_batch_GBps": nbytes / best_ms(cp, encode_batch, 3) / 1e6,
            "encode_each_GBps": nbytes / best_ms(cp, encode_each, 3) / 1e6}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[16, 256, 2048])
    parser.add_argument("--json")
    args = parser.parse_args()
    import cupy as cp

    from nncodecs.gpu.cupy_backend import CupyBackend
    from nncodecs.sizes import times_smaller

    backend = CupyBackend()
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    head = (
        f"{'MiB':>6}{'ratio':>8}{'decode GB/s':>13}{'d2d copy GB/s':>15}{'decode/copy':>13}"
        f"{'encode GB/s':>13}{'CPU encode GB/s':>17}  exact  same bytes"
    )
    print(head)
    print("-" * len(head))
    rows = []
    for mib in args.sizes_mib:
        row = measure(cp, backend, mib)
        rows.append(row)
        print(
            f"{mib:>6}{times_smaller(1, row['ratio'], 3):>8}{row['decode_GBps']:>13.1f}"
            f"{row['copy_GBps']:>15.1f}"
            f"{row['decode_GBps'] / row['copy_GBps']:>13.3f}{row['encode_GBps']:>13.1f}"
            f"{row['cpu_encode_GBps']:>17.2f}  {row['exact']!s:>5}  {row['same_bytes']}"
        )
        cp.get_default_memory_pool().free_all_blocks()
    many = batch(cp, backend)
    print(f"{many['tensors']} tensors of 384 x 384 bfloat16: decode in one batch "
          f"{many['batch_GBps']:.1f} GB/s, a call each {many['each_GBps']:.1f} GB/s; encode in "
          f"one batch {many['encode_batch_GBps']:.1f} GB/s, a call each "
          f"{many['encode_each_GBps']:.1f} GB/s; exact and same bytes {many['exact']}")  # fmt: skip
    rows.append(many)
    print(
        "ratio = original / stored (x smaller, larger is better); copy GB/s counts the bytes "
        "copied once (a copy reads and writes them: twice that moves)."
    )
    big = [r for r in rows if r.get("mib", 0) >= 2048]
    if big:
        verdict = "MET" if big[0]["decode_GBps"] >= 500 else "NOT MET"
        print(f"target: decode >= 500 GB/s of bfloat16 output at 2 GiB: "
              f"{big[0]['decode_GBps']:.0f} ({verdict})")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
