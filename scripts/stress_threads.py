"""Encode and decode mixed tensors from many Python threads at once, as Zarr does.

Every worker thread takes tensors of every dtype the weights codec accepts,
1 KiB to 4 MiB (log-uniform), encodes each with a random coder and sub-block
size, decodes the frame and compares it bit for bit with its input. The
kernels' thread setting is raised above the core count (``set_threads``), so
small tensors split into rANS sub-block tasks: the nested ``parallel_for``
calls where a waiting thread once ran other callers' tasks over its own
scratch (issue 15). ``make stress`` runs 100,000 encodes with
``MALLOC_MMAP_THRESHOLD_=131072``, so that a scratch buffer freed under a
running task is unmapped and faults at once.

Prints one table row (encodes, decodes, corrupt frames, wall time) and exits
1 on any corrupt frame.

Usage: ``python scripts/stress_threads.py [--count 100000] [--workers 8]
[--threads 16] [--seed 0] [--spread log|linear] [--coders auto,rans,huffman]
[--subblocks 12,16] [--json FILE]``
"""

from __future__ import annotations

import os

# The codec threads are the subject here; idle BLAS threads would only add noise.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import sys
import threading
import time

import ml_dtypes
import numpy as np

import nncodecs
from nncodecs import NumcodecsWeights

# Every dtype the weights codec takes (its float layouts and plain bytes).
DTYPES = [
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1fn",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
]
MIN_BYTES, MAX_BYTES = 1 << 10, 4 << 20
# Settings per encode: the coders, and sub-blocks of 4 KiB (many nested tasks) or 64 KiB.
CODERS = ["auto", "rans", "huffman"]
SUBBLOCKS = [12, 16]


def np_dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def make_tensor(name: str, nbytes: int, rng: np.random.Generator) -> np.ndarray:
    """Weight-like values (coded planes: rANS and Huffman run), 2-D when whole rows fit
    (version 2 frames: the row shift), with a little noise in the bits."""
    dt = np_dtype(name)
    count = max(1, nbytes // dt.itemsize)
    if name == "bool":
        arr = rng.random(count) < 0.1
    elif name == "float4_e2m1fn":
        arr = np.minimum(rng.geometric(0.4, count), 15).astype(np.uint8).view(dt)
    elif dt.kind in "iu":
        arr = np.clip(rng.normal(0, 6, count), -100, 100).astype(dt)
    else:
        scale = 1.0 if dt.itemsize == 1 else 0.02
        arr = (rng.standard_normal(count) * scale).astype(np.float32).astype(dt)
    cols = 256
    if count % cols == 0 and count >= 4 * cols:
        arr = arr.reshape(-1, cols)
    return arr


def make_inputs(seed: int, per_dtype: int, spread: str = "log") -> list[np.ndarray]:
    """``per_dtype`` tensors of every dtype, 1 KiB .. 4 MiB: the two extremes, the
    rest uniform in the log of the size ("log": mostly small, as a model's tensors
    are) or in the size ("linear": mostly large, several chunks each)."""
    rng = np.random.default_rng(seed)
    inputs = []
    for name in DTYPES:
        for i in range(per_dtype):
            frac = i / (per_dtype - 1) if i < 2 else rng.random()
            if spread == "log":
                nbytes = MIN_BYTES * (MAX_BYTES / MIN_BYTES) ** frac
            else:
                nbytes = MIN_BYTES + (MAX_BYTES - MIN_BYTES) * frac
            inputs.append(make_tensor(name, int(nbytes), rng))
    return inputs


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.encodes = self.decodes = self.corrupt = 0
        self.examples: list[str] = []

    def add(self, encodes: int, decodes: int, corrupt: list[str]) -> None:
        with self.lock:
            self.encodes += encodes
            self.decodes += decodes
            self.corrupt += len(corrupt)
            self.examples.extend(corrupt[: max(0, 10 - len(self.examples))])


def worker(
    inputs: list[np.ndarray],
    count: int,
    seed: int,
    tally: Tally,
    coders: list[str],
    subblocks: list[int],
) -> None:
    rng = np.random.default_rng(seed)
    codecs = {
        (name, coder, sb): NumcodecsWeights(coder=coder, dtype=name, subblock_log2=sb)
        for name in DTYPES
        for coder in coders
        for sb in subblocks
    }
    encodes = decodes = 0
    corrupt: list[str] = []
    for _ in range(count):
        arr = inputs[rng.integers(len(inputs))]
        key = (
            str(arr.dtype),
            coders[rng.integers(len(coders))],
            subblocks[rng.integers(len(subblocks))],
        )
        what = f"{key[0]} {arr.shape} coder={key[1]} subblock_log2={key[2]}"
        codec = codecs[key]
        try:
            frame = codec.encode(arr)
        except Exception as e:  # any failure is a finding here
            corrupt.append(f"{what}: encode raised {type(e).__name__}: {e}")
            continue
        finally:
            encodes += 1
        try:
            out = codec.decode(frame)
        except Exception as e:  # CorruptDataError is the usual one
            corrupt.append(f"{what}: decode raised {type(e).__name__}: {e}")
            continue
        finally:
            decodes += 1
        got, want = np.asarray(out).view(np.uint8), arr.reshape(-1).view(np.uint8)
        if not np.array_equal(got, want):
            corrupt.append(f"{what}: decoded bytes differ")
    tally.add(encodes, decodes, corrupt)


def run(
    count: int,
    workers: int = 8,
    threads: int = 16,
    seed: int = 0,
    spread: str = "log",
    coders: list[str] = CODERS,
    subblocks: list[int] = SUBBLOCKS,
) -> dict:
    inputs = make_inputs(seed, per_dtype=6, spread=spread)
    nncodecs.set_threads(threads)
    tally = Tally()
    per = [count // workers + (i < count % workers) for i in range(workers)]
    pool = [
        threading.Thread(
            target=worker, args=(inputs, n, seed * 1000 + i + 1, tally, coders, subblocks)
        )
        for i, n in enumerate(per)
    ]
    start = time.perf_counter()
    try:
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        nncodecs.set_threads(None)
    return {
        "encodes": tally.encodes,
        "decodes": tally.decodes,
        "corrupt": tally.corrupt,
        "seconds": round(time.perf_counter() - start, 2),
        "workers": workers,
        "threads": threads,
        "malloc_mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_", ""),
        "examples": tally.examples,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="encodes in all")
    parser.add_argument("--workers", type=int, default=8, help="Python threads")
    parser.add_argument("--threads", type=int, default=16, help="nncodecs.set_threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spread", choices=["log", "linear"], default="log", help="of sizes")
    parser.add_argument("--coders", default=",".join(CODERS), help="comma-separated")
    parser.add_argument("--subblocks", default="12,16", help="sub-block log2s, comma-separated")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()
    result = run(
        args.count,
        args.workers,
        args.threads,
        args.seed,
        args.spread,
        args.coders.split(","),
        [int(x) for x in args.subblocks.split(",")],
    )
    print(f"{'encodes':>9} {'decodes':>9} {'corrupt':>8} {'seconds':>9}  (workers, threads)")
    print(
        f"{result['encodes']:>9} {result['decodes']:>9} {result['corrupt']:>8} "
        f"{result['seconds']:>9.1f}  ({result['workers']}, {result['threads']})"
    )
    for line in result["examples"]:
        print("  corrupt:", line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if result["encodes"] != args.count:  # a worker thread died
        print(f"only {result['encodes']} of {args.count} encodes ran", file=sys.stderr)
        return 1
    return 1 if result["corrupt"] else 0


if __name__ == "__main__":
    sys.exit(main())
