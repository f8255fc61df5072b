"""How fast could any Python process decompress a container? A lower bound, not a product.

    python benchmarks/decompress_floor.py CONTAINER.zarr.zip ZSTD_FILE [--repeat 5]

Times three whole processes, best of ``--repeat``: ``zstd -d`` of ``ZSTD_FILE`` (the same
model through zstd), ``nncodecs decompress`` of the container, and this script's own
``--floor`` mode: no NumPy, no Zarr, no checks: the zip directory from ``zipfile``, the
consolidated metadata from ``json``, every chunk's frame decoded by ``nncodecs._core``
straight into one buffer per tensor and written out (raw tensor bytes, no header, nothing
verified). Containers as ``nncodecs compress`` writes them (chunks along the first axis,
sharded or not, dtypes of fixed size). What the floor costs over ``zstd -d`` is what a
Python process pays before and around the codec (issue 17's MiniLM decompression target).
Times vary by 10-20% between runs on a shared machine.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import zipfile

LAYOUTS = {"bfloat16": "bfloat16", "float32": "float32", "float16": "float16"}
SIZES = {"bfloat16": 2, "float16": 2, "float32": 4, "int64": 8, "int32": 4, "uint8": 1}


def floor(container: str, out: str) -> None:
    with zipfile.ZipFile(container) as z, open(container, "rb") as f, open(out, "wb") as w:
        from nncodecs import _core  # (imports no NumPy)

        group = json.loads(z.read("zarr.json"))
        meta = group["consolidated_metadata"]["metadata"]
        entries = {i.filename: i for i in z.infolist()}
        for name in group["attributes"]["nncodecs"]["tensors"]:
            m = meta[name]
            dtype, shape = m["data_type"], m["shape"]
            if dtype not in SIZES:
                raise SystemExit(f"{name}: not a dtype this lower bound handles")
            outer = m["chunk_grid"]["configuration"]["chunk_shape"][0] if shape else 1
            codec = m["codecs"][0]
            sharded = codec["name"] == "sharding_indexed"
            inner = codec["configuration"]["chunk_shape"][0] if sharded and shape else outer
            row = SIZES[dtype] * (math.prod(shape[1:]) if shape else 1)
            total = row * (shape[0] if shape else 1)
            buf = bytearray(total)
            view = memoryview(buf)
            for k, start in enumerate(range(0, total, outer * row)):
                rest = "/0" * (len(shape) - 1)
                info = entries[f"{name}/c/{k}{rest}" if shape else f"{name}/c"]
                f.seek(info.header_offset + 26)
                skip = int.from_bytes(f.read(2), "little") + int.from_bytes(f.read(2), "little")
                f.seek(info.header_offset + 30 + skip)
                entry = f.read(info.compress_size)
                if not sharded:
                    spans = [(0, len(entry))]
                else:  # index at the end: (offset, length) per inner chunk, then a CRC32C
                    n = outer // inner
                    tail = entry[len(entry) - 16 * n - 4 : len(entry) - 4]
                    words = [int.from_bytes(tail[i : i + 8], "little") for i in range(0, 16 * n, 8)]
                    spans = list(zip(words[::2], words[1::2], strict=True))
                step = inner * row
                for j, (off, length) in enumerate(spans):
                    at = start + j * step
                    if off == 2**64 - 1 or at >= total:
                        continue
                    want = min(step, total - at)
                    dest = view[at : at + want] if want == step else bytearray(step)
                    _core.decode(
                        entry[off : off + length],
                        step,
                        layout=LAYOUTS.get(dtype, "none"),
                        elements=True,
                        planes=SIZES[dtype],
                        threads=2,
                        element=dtype,
                        out=dest,
                    )
                    if want != step:
                        view[at : at + want] = memoryview(dest)[:want]
            w.write(buf)


def best(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        for out in cmd[-1:]:
            if os.path.basename(out) in "zfn.safetensors" and os.path.exists(out):
                os.unlink(out)
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--floor":
        floor(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and sys.argv[3] != "--repeat"):
        raise SystemExit(__doc__)
    container, zst = sys.argv[1], sys.argv[2]
    repeat = int(sys.argv[4]) if len(sys.argv) == 5 else 5
    tmp = os.path.join(os.path.dirname(os.path.abspath(container)), f".floor-{os.getpid()}")
    os.makedirs(tmp)
    try:
        runs = {
            "zstd -d": ["zstd", "-q", "-d", "-f", zst, "-o", f"{tmp}/z"],
            "python -c pass": [sys.executable, "-c", "pass"],
            "floor (no NumPy, no Zarr, no checks)": [
                sys.executable,
                __file__,
                "--floor",
                container,
                f"{tmp}/f",
            ],
            "nncodecs decompress": [
                sys.executable,
                "-m",
                "nncodecs",
                "decompress",
                container,
                "-o",
                f"{tmp}/n.safetensors",
            ],
        }
        zstd = best(runs["zstd -d"], repeat)
        print(f"| process (best of {repeat}) | wall s | x zstd -d |\n|---|---|---|")
        for label, cmd in runs.items():
            s = zstd if label == "zstd -d" else best(cmd, repeat)
            print(f"| {label} | {s:.3f} | {s / zstd:.2f} |")
    finally:
        for p in os.listdir(tmp):
            os.unlink(os.path.join(tmp, p))
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
