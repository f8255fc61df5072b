"""The container on the real model, and on many small tensors.

For all-MiniLM-L6-v2 (every dtype, directory and zip): write and read MB/s,
ratio (original / stored: x smaller, larger is better), time to open, and the
time to read one row of the largest tensor against reading the whole tensor.
Then a model of 5,000 tensors of 1 KiB: time to write and to open.

Usage: ``python benchmarks/container.py [--out DIR]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import nncodecs
from nncodecs.datasets import minilm_weights
from nncodecs.sizes import times_smaller

DTYPES = ["float32", "bfloat16", "float16", "float8_e4m3fn"]
LARGEST = "embeddings.word_embeddings.weight"


def size_on_disk(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def clear(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def bench_model(out: Path) -> None:
    header = (
        f"{'dtype':<14}{'store':<6}{'ratio':>8}{'write MB/s':>12}{'read MB/s':>11}"
        f"{'open ms':>9}{'1 row ms':>10}{'tensor ms':>11}"
    )
    print(header)
    print("-" * len(header))
    for dtype in DTYPES:
        model = minilm_weights(dtype)
        original = sum(a.nbytes for a in model.values())
        for kind, name in (("dir", "m.zarr"), ("zip", "m.zarr.zip")):
            path = out / f"{dtype}-{name}"
            clear(path)
            start = time.perf_counter()
            with nncodecs.Writer(path) as w:
                for tname, arr in model.items():
                    w.add_tensor(tname, arr)
            write_s = time.perf_counter() - start
            start = time.perf_counter()
            r = nncodecs.Reader(path)
            open_s = time.perf_counter() - start
            start = time.perf_counter()
            for tname in r:
                r.read_tensor(tname)
            read_s = time.perf_counter() - start
            start = time.perf_counter()
            row = r[LARGEST][12345]
            row_s = time.perf_counter() - start
            start = time.perf_counter()
            whole = r.read_tensor(LARGEST)
            whole_s = time.perf_counter() - start
            assert np.array_equal(row.view(np.uint8), whole[12345].view(np.uint8))
            r.close()
            print(
                f"{dtype:<14}{kind:<6}{times_smaller(original, size_on_disk(path), 3):>8}"
                f"{original / write_s / 1e6:>12.0f}{original / read_s / 1e6:>11.0f}"
                f"{open_s * 1e3:>9.1f}{row_s * 1e3:>10.2f}{whole_s * 1e3:>11.1f}"
            )


def bench_many(out: Path, count: int = 5000) -> None:
    tensors = [
        np.random.default_rng(i).standard_normal(256).astype(np.float32) for i in range(count)
    ]
    path = out / "many.zarr"
    clear(path)
    start = time.perf_counter()
    with nncodecs.Writer(path) as w:
        for i, arr in enumerate(tensors):
            w.add_tensor(f"t{i}", arr)
    write_s = time.perf_counter() - start
    start = time.perf_counter()
    r = nncodecs.Reader(path)
    open_s = time.perf_counter() - start
    assert len(r) == count
    print(f"\n{count} tensors of 1 KiB: write {write_s:.1f} s, open {open_s:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="nncodecs-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"all-MiniLM-L6-v2, one container per dtype and store kind, in {out}\n")
    bench_model(out)
    bench_many(out)
    print("\nratio = original / stored (x smaller, larger is better), stored = bytes on disk; "
          f"1 row = r[largest][i] (one chunk) against the whole {LARGEST}.")  # fmt: skip


if __name__ == "__main__":
    main()
