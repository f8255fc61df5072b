"""A checkpoint series stored against the previous step: nncodecs against ZipNN, PTWM
and zstd's patch mode (issue 19).

The series is made here from the shipped model (``nncodecs.datasets.minilm_checkpoints``:
all-MiniLM-L6-v2 fine-tuned on the CPU for ``--steps`` AdamW steps at lr 2e-5, saved
as safetensors after each step, float32 and bfloat16), once with every parameter
training and once with the embeddings and the first two layers frozen. Step 0 (the
shipped model) is every system's first reference, stored whole and not counted; each
of steps 1..N is stored against the step before it:

- ``nncodecs whole``: independent containers (``nncodecs compress``), the baseline;
- ``nncodecs delta``: ``compress(..., reference=previous, dedup=False)``;
- ``nncodecs delta+dedup``: the same with duplicates found by hash (the default);
- ``ZipNN xor``: ZipNN 0.5.4, ``delta_compressed_type="byte"`` on the whole file,
  against the previous file's bytes;
- ``PTWM xor``: PTWM 1.1.0's ``Compressor`` with ``delta_compressed_type="file"`` (its
  own ``ptwm compress --delta`` passes the path where the API wants bytes and fails),
  run under ``--python312`` with a stand-in ``torch`` module (it imports torch for
  tensor inputs only; there is no CPU torch for 3.12 here);
- ``zstd -3 --patch-from``: the zstd command line, against the previous file.

Printed per series and dtype: the stored bytes of steps 1..N, their ratio (the files'
bytes over the stored bytes: x smaller, larger is better), each delta's size against
ZipNN's, compress and decompress MB/s per step (a delta decoded with its reference at
hand: nncodecs' as the time one more step of chain adds to reading a step whole, the
least-squares slope of the whole-read times of steps 0..N over their chain depths), the
time to restore step N from the series (every system decodes its whole chain: ZipNN,
PTWM and zstd step after step from step 0, nncodecs' Reader down the chain), and the time
to read one tensor of step N (nncodecs alone reads a tensor without the rest; its chain
depth shown).
Every step of every system is restored and compared byte for byte (sha256).

Usage: ``python benchmarks/checkpoints.py [--work DIR] [--steps 10] [--max-chain 10]``;
``--full``: whole training checkpoints (model and AdamW state) per part instead
(``benchmarks/training_checkpoints.py``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import hashlib
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SERIES = ("full", "frozen")
DTYPES = ("float32", "bfloat16")
TENSOR = "encoder.layer.5.output.dense.weight"

_PTWM = r"""
import hashlib, json, sys, time, types
t = types.ModuleType("torch")
def _any(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (), {})
t.__getattr__ = _any
sys.modules["torch"] = t  # (imported for tensor inputs only; bytes go in here)
from ptwm import CompressionConfig, Compressor, DecompressionConfig, Decompressor, Method
files, dtype = json.loads(sys.argv[1]), sys.argv[2]
out = []
for prev, cur in zip(files, files[1:]):
    a, b = open(prev, "rb").read(), open(cur, "rb").read()
    c = Compressor(CompressionConfig(bytearray_dtype=dtype, delta_compressed_type="file",
                                     method=Method("HUFFMAN")))
    t0 = time.perf_counter(); blob = c.compress(b, delta_second_data=a)
    enc = time.perf_counter() - t0
    d = Decompressor(DecompressionConfig(delta_second_data=a))
    t0 = time.perf_counter(); back = d.decompress(blob); dec = time.perf_counter() - t0
    out.append({"stored": len(blob), "encode_s": enc, "decode_s": dec,
                "exact": hashlib.sha256(back).digest() == hashlib.sha256(b).digest()})
print(json.dumps(out))
"""


def sha(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def make_series(work: Path, steps: int) -> dict[str, list[dict[str, Path]]]:
    from nncodecs.datasets import minilm_checkpoints

    out = {}
    for name in SERIES:
        where = work / name
        done = where / f"done-{steps}"
        if not done.exists():
            shutil.rmtree(where, ignore_errors=True)
            minilm_checkpoints(where, steps=steps, frozen=name == "frozen")
            done.write_text("ok")
        out[name] = [
            {d: where / f"step-{k:02d}.{d}.safetensors" for d in DTYPES} for k in range(steps + 1)
        ]
    return out


def run_nncodecs(files: list[Path], out: Path, mode: str, max_chain: int) -> dict[str, Any]:
    """Steps 1..N into containers (whole, or each against the previous one); each read
    back whole in memory and restored to a file checked by sha256."""
    from nncodecs import Reader
    from nncodecs.formats import compress, decompress

    out.mkdir(parents=True, exist_ok=True)
    conts = [out / f"step-{k:02d}.zarr.zip" for k in range(len(files))]
    compress(files[0], conts[0], force=True)
    enc, stored, reads, exact = [], [], [], True
    for k in range(1, len(files)):
        kw: dict[str, Any] = {}
        if mode != "whole":
            kw = {"reference": conts[k - 1], "max_chain": max_chain, "dedup": mode == "dedup"}
        t0 = time.perf_counter()
        compress(files[k], conts[k], force=True, **kw)
        enc.append(time.perf_counter() - t0)
        stored.append(size(conts[k]))
    depths = []
    for k in range(len(files)):  # whole reads: best of 3 each
        best = float("inf")
        with Reader(conts[k]) as r:
            depths.append(max(r.info(n).depth for n in r))
            for _ in range(3):
                t0 = time.perf_counter()
                for n in r:
                    r.read_tensor(n)
                best = min(best, time.perf_counter() - t0)
        reads.append(best)
    for k in range(1, len(files)):
        back = out / "back.safetensors"
        decompress(conts[k], back, force=True)
        exact &= sha(back) == sha(files[k])
        back.unlink()
    with Reader(conts[-1]) as r:
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            r2 = Reader(conts[-1])
            r2.read_tensor(TENSOR)
            r2.close()
            best = min(best, time.perf_counter() - t0)
        depth = r.info(TENSOR).depth
    # Decoding a step with its reference at hand: what one more step of chain adds to a
    # whole read (the least-squares slope of read time over chain depth, all steps at
    # once: steadier than a difference of two timings); for independent containers, its
    # read.
    if mode == "whole" or len(set(depths)) < 2:
        dec = reads[1:]
    else:
        import numpy as np

        dec = [float(np.polyfit(depths, reads, 1)[0])] * (len(files) - 1)
    return {"stored": stored, "encode_s": enc, "decode_s": [max(d, 1e-9) for d in dec],
            "restore_s": reads[-1], "tensor_s": best, "depth": depth, "exact": exact}  # fmt: skip


def run_zipnn(files: list[Path], dtype: str) -> dict[str, Any]:
    import zipnn

    z = zipnn.ZipNN(input_format="byte", bytearray_dtype=dtype, delta_compressed_type="byte")
    enc, dec, stored, exact = [], [], [], True
    for prev, cur in itertools.pairwise(files):
        a, b = prev.read_bytes(), cur.read_bytes()
        t0 = time.perf_counter()
        blob = z.compress(bytearray(b), delta_second_data=bytearray(a))
        enc.append(time.perf_counter() - t0)
        stored.append(len(blob))
        t0 = time.perf_counter()
        back = z.decompress(blob, delta_second_data=bytearray(a))
        dec.append(time.perf_counter() - t0)
        exact &= bytes(back) == b
    return {"stored": stored, "encode_s": enc, "decode_s": dec, "restore_s": sum(dec),
            "exact": exact}  # fmt: skip


def run_zstd(files: list[Path], tmp: Path) -> dict[str, Any]:
    enc, dec, stored, exact = [], [], [], True
    for prev, cur in itertools.pairwise(files):
        blob, back = tmp / "d.zst", tmp / "back"
        t0 = time.perf_counter()
        subprocess.run(["zstd", "-3", "-q", "-f", f"--patch-from={prev}", str(cur), "-o",
                        str(blob)], check=True)  # fmt: skip
        enc.append(time.perf_counter() - t0)
        stored.append(blob.stat().st_size)
        t0 = time.perf_counter()
        subprocess.run(["zstd", "-d", "-q", "-f", f"--patch-from={prev}", str(blob), "-o",
                        str(back)], check=True)  # fmt: skip
        dec.append(time.perf_counter() - t0)
        exact &= sha(back) == sha(cur)
    return {"stored": stored, "encode_s": enc, "decode_s": dec, "restore_s": sum(dec),
            "exact": exact}  # fmt: skip


def run_ptwm(files: list[Path], dtype: str, python: str) -> dict[str, Any] | None:
    if not python or not Path(python).exists():
        return None
    done = subprocess.run([python, "-c", _PTWM, json.dumps([str(f) for f in files]), dtype],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        print(f"PTWM: not run ({done.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return None
    steps = json.loads(done.stdout)
    return {"stored": [s["stored"] for s in steps], "encode_s": [s["encode_s"] for s in steps],
            "decode_s": [s["decode_s"] for s in steps],
            "restore_s": sum(s["decode_s"] for s in steps),
            "exact": all(s["exact"] for s in steps)}  # fmt: skip


def table(label: str, raw: int, results: dict[str, dict[str, Any]], per: int) -> None:
    from nncodecs.sizes import times_smaller

    zipnn = results.get("ZipNN xor")
    print(f"\n{label}: steps 1..{len(next(iter(results.values()))['stored'])}, "
          f"{raw / 1e6:.1f} MB of files")  # fmt: skip
    head = (f"{'system':22s} {'stored MB':>10s} {'ratio':>8s} {'vs ZipNN':>9s} {'comp MB/s':>10s} "
            f"{'dec MB/s':>9s} {'dec vs ZipNN':>12s} {'restore last':>13s} {'one tensor':>11s} "
            f"{'exact':>6s}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for name, r in results.items():
        stored = sum(r["stored"])
        enc = raw / sum(r["encode_s"]) / 1e6
        dec = raw / sum(r["decode_s"]) / 1e6
        vs = f"{stored / sum(zipnn['stored']) - 1:+.1%}" if zipnn else "-"
        dvs = f"{sum(zipnn['decode_s']) / sum(r['decode_s']):.2f}x" if zipnn else "-"
        one = f"{r['tensor_s'] * 1e3:.0f} ms ({r['depth']})" if "tensor_s" in r else "-"
        ratio = times_smaller(raw, stored, 3)
        print(f"{name:22s} {stored / 1e6:10.2f} {ratio:>8s} {vs:>9s} {enc:10.0f} "
              f"{dec:9.0f} {dvs:>12s} {r['restore_s']:12.2f}s {one:>11s} "
              f"{'yes' if r['exact'] else 'NO':>6s}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "nncodecs-ckpt"))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--max-chain", type=int, default=None,
                        help="nncodecs' chain bound (default: --steps, no keyframe)")  # fmt: skip
    parser.add_argument("--series", nargs="+", default=list(SERIES), choices=SERIES)
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    default312 = Path(__file__).resolve().parents[1] / ".venv" / "py312" / "bin" / "python"
    parser.add_argument("--python312", default=str(default312), help="a Python with PTWM")
    parser.add_argument("--full", action="store_true",
                        help="whole training checkpoints (model + AdamW state) per part instead "
                        "(benchmarks/training_checkpoints.py)")  # fmt: skip
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.full:
        sys.path.insert(0, str(Path(__file__).parent))
        import training_checkpoints

        training_checkpoints.main(work)
        return
    chain = args.max_chain or args.steps
    made = make_series(work, args.steps)
    for series_name in args.series:
        for dtype in args.dtypes:
            files = [step[dtype] for step in made[series_name]]
            raw = sum(size(f) for f in files[1:])
            out = work / "out" / f"{series_name}-{dtype}"
            results: dict[str, dict[str, Any]] = {}
            for mode, label in (("whole", "nncodecs whole"), ("delta", "nncodecs delta"),
                                ("dedup", "nncodecs delta+dedup")):  # fmt: skip
                results[label] = run_nncodecs(files, out / mode, mode, chain)
            try:
                results["ZipNN xor"] = run_zipnn(files, dtype)
            except ImportError:
                print("ZipNN: not installed (pip install zipnn==0.5.4)", file=sys.stderr)
            ptwm = run_ptwm(files, dtype, args.python312)
            if ptwm is not None:
                results["PTWM xor"] = ptwm
            if shutil.which("zstd"):
                results["zstd -3 --patch-from"] = run_zstd(files, out)
            table(f"{series_name} series, {dtype}", raw, results, args.steps)
    print(f"\nratio = original / stored (x smaller, larger is better); 'vs ZipNN': stored "
          f"bytes against ZipNN's; nncodecs' chain bound: {chain} (a keyframe after {chain} "
          f"differences); 'one tensor': {TENSOR} of the last step, a fresh Reader, (its chain "
          f"depth)")  # fmt: skip


if __name__ == "__main__":
    main()
