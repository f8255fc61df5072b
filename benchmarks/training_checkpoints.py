"""Whole training checkpoints (model and AdamW state) per part, for
``benchmarks/checkpoints.py --full`` (issue 39).

``nncodecs.datasets.minilm_training_checkpoints`` saves ``torch.save({"model", "optimizer",
"step"})`` of all-MiniLM-L6-v2 fine-tuned with AdamW after steps 1..10 and over a later
window of the same run (101..110), the step before each window its reference; weights
float32 or bfloat16, the moments float32. Per window, dtype and part (``model``: the
weights' storages; ``optimizer``: exp_avg, exp_avg_sq and step; ``file``: the whole
``.pt``), over the window's steps:

- ``nncodecs whole``: each step compressed alone (``nncodecs compress``), the part's
  bytes the stored bytes of its tensors (``file``: the container's size);
- ``nncodecs delta``: each step against the previous step's whole container
  (``--reference``); decoded with its reference at hand: its read less the reference's;
- ``ZipNN``: ZipNN 0.5.4 on the part's bytes (the storages one after another, as the
  file holds them; ``file``: the file), alone, and ``ZipNN xor`` against the previous
  step's part (``delta_compressed_type="byte"``);
- ``zstd -3`` and ``zstd -3 --patch-from`` the previous step's part.

Printed: stored MB, ratio (bytes over stored bytes, x smaller), against ZipNN's
independent or XOR delta, and decode MB/s. Every nncodecs step is restored and compared
byte for byte (the ``.pt``), every other system's output decoded and compared.

Then the moments alone (``exp_avg``, ``exp_avg_sq`` of the last step of each window, every
parameter's): float32 as trained, and bfloat16 (rounded, as training that keeps them so
would hold them), each tensor coded alone by nncodecs' weights codec, ZipNN and zstd -3,
beside the order-0 entropy of its exponent-first byte planes (the bound a coder of
planes reaches; ``benchmarks/coders.py``).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PARTS = ("model", "optimizer", "file")
WINDOWS = {"steps 1-10": (1, 10), "steps 101-110": (101, 110)}


def part_bytes(pt: Path) -> dict[str, bytes]:
    """A checkpoint's bytes per part: its storages in file order (named by the first path
    to each), and the file."""
    import torch

    from nncodecs.formats.torch import TorchSource

    out = {"model": bytearray(), "optimizer": bytearray()}
    with TorchSource(pt) as src:
        for t in src.tensors():
            part = t.name.split(".")[0]
            if part in out:
                out[part] += t.read().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
    return {"model": bytes(out["model"]), "optimizer": bytes(out["optimizer"]),
            "file": pt.read_bytes()}  # fmt: skip


def best(fn: Any, repeat: int = 2) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def run_nncodecs(files: list[Path], out: Path) -> dict[str, dict[str, dict[str, float]]]:
    from nncodecs import Reader
    from nncodecs.formats import compress, decompress

    out.mkdir(parents=True, exist_ok=True)
    whole = [out / f"whole-{k}.zarr.zip" for k in range(len(files))]
    delta = [out / f"delta-{k}.zarr.zip" for k in range(len(files))]
    for f, c in zip(files, whole, strict=True):
        compress(f, c, force=True)
    for k in range(1, len(files)):
        compress(files[k], delta[k], force=True, reference=whole[k - 1])
    res: dict[str, dict[str, dict[str, float]]] = {"nncodecs whole": {}, "nncodecs delta": {}}
    for label, conts in (("nncodecs whole", whole), ("nncodecs delta", delta)):
        for part in PARTS:
            res[label][part] = {"stored": 0, "decode_s": 0.0, "exact": 1}
        for k in range(1, len(files)):
            back = out / "back.pt"
            decompress(conts[k], back, force=True)
            exact = back.read_bytes() == files[k].read_bytes()
            with Reader(conts[k]) as r, Reader(whole[k - 1]) as ref:
                for part in PARTS:
                    names = [n for n in r if part == "file" or n.split(".")[0] == part]
                    rec = res[label][part]
                    rec["exact"] &= exact
                    if part == "file":
                        rec["stored"] += conts[k].stat().st_size
                    else:
                        rec["stored"] += sum(r.info(n).stored_bytes for n in names)
                    if part == "file":  # (its tensors: the two parts' reads)
                        rec["decode_s"] = (
                            res[label]["model"]["decode_s"] + res[label]["optimizer"]["decode_s"]
                        )
                        continue
                    t = best(lambda r=r, names=names: [r.read_tensor(n) for n in names])
                    if label == "nncodecs delta":  # (its reference's read is not its own)
                        held = [n for n in names if n in ref]  # (step 0 has no moments)
                        t -= best(lambda held=held: [ref.read_tensor(n) for n in held])
                    rec["decode_s"] += max(t, 1e-6)
    return res


def run_zipnn(parts: list[dict[str, bytes]], dtype: str) -> dict[str, dict[str, dict[str, float]]]:
    import zipnn

    res: dict[str, dict[str, dict[str, float]]] = {"ZipNN": {}, "ZipNN xor": {}}
    for part in PARTS:
        kind = "float32" if part == "optimizer" else dtype
        alone = zipnn.ZipNN(input_format="byte", bytearray_dtype=kind)
        xor = zipnn.ZipNN(input_format="byte", bytearray_dtype=kind, delta_compressed_type="byte")
        for label in res:
            res[label][part] = {"stored": 0, "decode_s": 0.0, "exact": 1}
        for prev, cur in itertools.pairwise(parts):
            a, b = prev[part], cur[part]  # (bytes: ZipNN gets a fresh copy each call,
            blob = alone.compress(bytearray(b))  # as it may reorder its input in place)
            t0 = time.perf_counter()
            back = alone.decompress(blob)
            dec = time.perf_counter() - t0
            exact = bytes(back) == b
            if len(a) == len(b):  # (else stored alone: ZipNN's XOR needs equal lengths)
                delta = xor.compress(bytearray(b), delta_second_data=bytearray(a))
                base = bytearray(a)
                t0 = time.perf_counter()
                back = xor.decompress(delta, delta_second_data=base)
                xdec = time.perf_counter() - t0
                xexact = bytes(back) == b
            else:
                delta, xdec, xexact = blob, dec, exact
            for label, size, t, ok in (("ZipNN", len(blob), dec, exact),
                                       ("ZipNN xor", len(delta), xdec, xexact)):  # fmt: skip
                res[label][part]["stored"] += size
                res[label][part]["decode_s"] += t
                res[label][part]["exact"] &= ok
    return res


def run_zstd(parts: list[dict[str, bytes]], tmp: Path) -> dict[str, dict[str, dict[str, float]]]:
    res: dict[str, dict[str, dict[str, float]]] = {"zstd -3": {}, "zstd -3 --patch-from": {}}
    tmp.mkdir(parents=True, exist_ok=True)
    prev_f, cur_f, blob, back = (tmp / n for n in ("prev", "cur", "z.zst", "back"))
    for part in PARTS:
        for label in res:
            res[label][part] = {"stored": 0, "decode_s": 0.0, "exact": 1}
        for prev, cur in itertools.pairwise(parts):
            prev_f.write_bytes(prev[part])
            cur_f.write_bytes(cur[part])
            patch = [f"--patch-from={prev_f}"]
            for label, extra in (("zstd -3", []), ("zstd -3 --patch-from", patch)):
                subprocess.run(["zstd", "-3", "-q", "-f", *extra, str(cur_f), "-o", str(blob)],
                               check=True)  # fmt: skip
                t0 = time.perf_counter()
                decode = ["zstd", "-d", "-q", "-f", "--memory=2048MB"]  # (a patch's window)
                subprocess.run([*decode, *extra, str(blob), "-o", str(back)], check=True)
                res[label][part]["decode_s"] += time.perf_counter() - t0
                res[label][part]["stored"] += blob.stat().st_size
                res[label][part]["exact"] &= back.read_bytes() == cur[part]
    return res


def main(work: Path) -> None:
    """Make the checkpoints (once), then print both tables."""
    from nncodecs.datasets import minilm_training_checkpoints
    from nncodecs.sizes import times_smaller

    where = work / "training"
    done = where / "done"
    if not done.exists():
        shutil.rmtree(where, ignore_errors=True)
        minilm_training_checkpoints(where, tuple(WINDOWS.values()))
        done.write_text("ok")
    head = (f"{'window':14s} {'dtype':9s} {'part':10s} {'system':21s} {'stored MB':>10s} "
            f"{'ratio':>8s} {'vs ZipNN':>9s} {'vs ZipNN xor':>12s} {'dec MB/s':>9s} "
            f"{'exact':>6s}")  # fmt: skip
    print("\nWhole training checkpoints (model + AdamW state), per part\n" + head)
    print("-" * len(head))
    for window, (first, last) in WINDOWS.items():
        for dtype in ("float32", "bfloat16"):
            files = [where / f"step-{k:03d}.{dtype}.pt" for k in range(first - 1, last + 1)]
            parts = [part_bytes(f) for f in files]
            res = run_nncodecs(files, work / "out" / f"{first}-{dtype}")
            try:
                res.update(run_zipnn(parts, dtype))
            except ImportError:
                print("ZipNN: not installed (pip install zipnn==0.5.4)")
            if shutil.which("zstd"):
                res.update(run_zstd(parts, work / "out" / "zstd"))
            for part in PARTS:
                raw = sum(len(p[part]) for p in parts[1:])  # (steps 1..N of the window)
                for system, by_part in res.items():
                    r = by_part[part]
                    ratio = times_smaller(raw, int(r["stored"]), 3)
                    vs = {k: f"{r['stored'] / res[k][part]['stored'] - 1:+.1%}"
                          if k in res else "-" for k in ("ZipNN", "ZipNN xor")}  # fmt: skip
                    print(f"{window:14s} {dtype:9s} {part:10s} {system:21s} "
                          f"{r['stored'] / 1e6:10.2f} {ratio:>8s} {vs['ZipNN']:>9s} "
                          f"{vs['ZipNN xor']:>12s} {raw / r['decode_s'] / 1e6:9.0f} "
                          f"{'yes' if r['exact'] else 'NO':>6s}")  # fmt: skip
    moments_table(where)


def moments_table(where: Path) -> None:
    import numpy as np
    import torch
    import zipnn
    import zstandard

    sys.path.insert(0, str(Path(__file__).parent))
    from coders import order0_bounds

    from nncodecs import NumcodecsWeights
    from nncodecs.dtypes import normalize_dtype
    from nncodecs.sizes import times_smaller

    head = (f"{'step':>5s} {'moment':11s} {'dtype':9s} {'MB':>7s} {'nncodecs':>9s} "
            f"{'ZipNN':>9s} {'zstd -3':>9s} {'order-0 bound':>14s} "
            f"{'sign plane':>11s}")  # fmt: skip
    print("\nAdamW moments, each tensor alone (ratio, x smaller)\n" + head)
    print("-" * len(head))
    for _, last in WINDOWS.values():
        state = torch.load(where / f"step-{last:03d}.float32.pt", weights_only=True)["optimizer"]
        for moment in ("exp_avg", "exp_avg_sq"):
            for dtype in ("float32", "bfloat16"):
                held = normalize_dtype(dtype)
                bits = torch.int16 if held.itemsize == 2 else torch.int32
                arrays = {  # (torch's bfloat16 to NumPy's, through its bits)
                    str(i): st[moment].to(getattr(torch, dtype)).view(bits).numpy().view(held)
                    for i, st in state["state"].items()
                }
                raw = sum(a.nbytes for a in arrays.values())
                codec = NumcodecsWeights(dtype=dtype)
                ours = sum(len(codec.encode(a)) for a in arrays.values())
                z = zipnn.ZipNN(input_format="byte", bytearray_dtype=dtype)
                theirs = sum(len(z.compress(bytearray(a.tobytes()))) for a in arrays.values())
                zs = zstandard.ZstdCompressor(level=3)
                plain = sum(len(zs.compress(a.tobytes())) for a in arrays.values())
                bound = order0_bounds(arrays)[0]
                signs = np.concatenate([a.view(np.uint8).reshape(-1, a.itemsize)[:, -1] >> 7
                                        for a in arrays.values()])  # fmt: skip
                sign = "constant" if signs.min() == signs.max() else "mixed"
                cells = [times_smaller(raw, int(n), 3) for n in (ours, theirs, plain, bound)]
                print(f"{last:5d} {moment:11s} {dtype:9s} {raw / 1e6:7.2f} {cells[0]:>9s} "
                      f"{cells[1]:>9s} {cells[2]:>9s} {cells[3]:>14s} {sign:>11s}")  # fmt: skip
