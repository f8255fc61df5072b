"""The worker processes that benchmarks/e2e.py times, and its in-process measurements.

As a script it is one worker process, timed whole by e2e.py:

- ``zipnn-compress IN OUT DTYPE THREADS``, ``zipnn-decompress IN OUT DTYPE THREADS``:
  ZipNN's file flow, as its ``scripts/zipnn_compress_file.py`` and
  ``zipnn_decompress_file.py`` do it: read the whole file, one streaming ZipNN
  (1 MiB chunks), write the result.
- ``nncodecs-load CONTAINER - - THREADS``, ``zipnn-load ZPN - DTYPE THREADS``,
  ``raw-load SAFETENSORS - - THREADS``: every tensor into torch
  (``nncodecs.integrations.torch.load_state_dict``; ZipNN's decompress then
  ``safetensors.torch.load``; ``safetensors.torch.load_file``), then a CRC-32
  of every tensor's bytes (so nothing stays lazy), printed as ``CHECKSUM CRC COUNT``.

For e2e.py: ``build_input`` and ``header`` (the input files); in-process,
``zarr_path`` (one bf16 array through Zarr with the Weights codec against ZipNN
on the same bytes) and ``small_tensors`` (5,000 tensors of 1 KiB through Writer
and Reader).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

MIB = 1 << 20
ZARR_COLS = 8192
ZARR_CHUNKS = (256, ZARR_COLS)


def zipnn_codec(dtype: str, threads: int) -> Any:
    """ZipNN as its file scripts configure it: streaming, 1 MiB chunks."""
    import zipnn

    return zipnn.ZipNN(
        is_streaming=True, streaming_chunk=MIB, threads=threads, bytearray_dtype=dtype
    )


def checksum(tensors: dict[str, Any]) -> int:
    """CRC-32 of every tensor's bytes, by name: each one is read, so nothing stays lazy."""
    import zlib

    import torch

    crc = 0
    for name in sorted(tensors):
        raw = tensors[name].contiguous().reshape(-1).view(torch.uint8).numpy()
        crc = zlib.crc32(raw, zlib.crc32(name.encode(), crc))
    return crc


def worker(command: str, src: str, dst: str, dtype: str, threads: str) -> None:
    n = int(threads)
    if command in ("zipnn-compress", "zipnn-decompress"):
        z = zipnn_codec(dtype, n)
        data = Path(src).read_bytes()
        Path(dst).write_bytes(
            z.compress(data) if command == "zipnn-compress" else z.decompress(data)
        )
        return
    import torch

    torch.set_num_threads(n)
    if command == "zipnn-load":
        import safetensors.torch

        raw = zipnn_codec(dtype, n).decompress(Path(src).read_bytes())
        tensors = safetensors.torch.load(bytes(raw))
        del raw
    elif command == "raw-load":
        import safetensors.torch

        tensors = safetensors.torch.load_file(src)
    elif command == "nncodecs-load":
        import nncodecs
        from nncodecs.integrations.torch import load_state_dict

        nncodecs.set_threads(n)
        tensors = load_state_dict(src)
    else:
        raise SystemExit(f"unknown worker command {command!r}")
    print(f"CHECKSUM {checksum(tensors)} {len(tensors)}", flush=True)


# -- inputs ------------------------------------------------------------------------


def build_input(name: str, work: Path) -> Path:
    """The input's safetensors file (kept when it exists: ``--work`` reuses it)."""
    path = work / f"{name}.safetensors"
    if path.exists():
        return path
    import numpy as np
    import safetensors.torch as st
    import torch
    from compare import synthetic_model

    from nncodecs.datasets import minilm_path

    if name == "f32":
        shutil.copyfile(minilm_path(), path)
        return path
    if name == "gen1g":
        bf16 = torch.bfloat16
        model = synthetic_model(1024)
        tensors = {k: torch.from_numpy(v.view(np.int16)).view(bf16) for k, v in model.items()}
    else:
        base = st.load_file(minilm_path())
        if name == "bf16":
            tensors = {
                k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in base.items()
            }
        else:
            factors = np.random.default_rng(24).uniform(0.5, 2.0, 24)
            tensors = {
                f"copy{i}.{k}": (v * float(f)).to(torch.bfloat16)
                for i, f in enumerate(factors)
                for k, v in base.items()
                if v.is_floating_point()
            }
    tmp = path.with_suffix(".part")
    st.save_file(tensors, tmp, metadata={"format": "pt"})
    tmp.rename(path)
    return path


def header(path: Path) -> tuple[int, int]:
    """(tensor count, largest tensor's bytes) from a safetensors header."""
    with open(path, "rb") as f:
        head = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    sizes = [
        e["data_offsets"][1] - e["data_offsets"][0] for k, e in head.items() if k != "__metadata__"
    ]
    return len(sizes), max(sizes)


# -- in-process paths ---------------------------------------------------------------


def per_row_scaled(mib: int, seed: int = 0) -> Any:
    """A bf16 (rows, 8192) array of ``mib`` MiB: normal rows times per-row scale factors."""
    import ml_dtypes
    import numpy as np

    rows = max(ZARR_CHUNKS[0], mib * MIB // (2 * ZARR_COLS))
    rng = np.random.default_rng(seed)
    scales = (rng.lognormal(0, 0.5, rows) * 0.02).astype(np.float32)
    x = np.empty((rows, ZARR_COLS), dtype=ml_dtypes.bfloat16)
    for i in range(0, rows, 1024):
        block = rng.standard_normal((min(1024, rows - i), ZARR_COLS), dtype=np.float32)
        x[i : i + len(block)] = (block * scales[i : i + len(block), None]).astype(x.dtype)
    return x


def best_of(repeat: int, fn: Any, fresh: Any = None) -> tuple[float, Any]:
    """Best wall time of ``fn(fresh())`` (``fresh`` runs outside the timed region)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        arg = fresh() if fresh else None
        t = time.perf_counter()
        out = fn(arg)
        best = min(best, time.perf_counter() - t)
    return best, out


def zarr_path(mib: int, threads: int, work: Path, repeat: int = 3) -> dict[str, Any]:
    """Write and read one array through Zarr (LocalStore), and ZipNN on the same bytes."""
    import numpy as np
    import zarr
    from zarr.storage import LocalStore

    import nncodecs

    nncodecs.set_threads(threads)
    x = per_row_scaled(mib)
    nbytes = x.nbytes
    root = work / "zarr-path"
    a = zarr.create_array(
        LocalStore(root),
        shape=x.shape,
        dtype=x.dtype,
        chunks=ZARR_CHUNKS,
        serializer=nncodecs.Weights(),
        compressors=None,
        overwrite=True,
    )

    write_s, _ = best_of(repeat, lambda arr: a.__setitem__(Ellipsis, arr), lambda: x)
    read_s, back = best_of(repeat, lambda _: a[...])
    stored = sum(f.stat().st_size for f in (root / "c").rglob("*") if f.is_file())
    exact = bool(np.array_equal(back.view(np.uint16), x.view(np.uint16)))
    del back
    data = x.tobytes()
    z = zipnn_codec("bfloat16", threads)
    # ZipNN 0.5.4 may write into its input: a fresh copy per pass, outside the timed region
    zc_s, packed = best_of(repeat, lambda b: bytes(z.compress(b)), lambda: bytearray(data))
    zd_s, restored = best_of(repeat, lambda b: z.decompress(b), lambda: bytes(packed))
    exact_z = bytes(restored) == data
    return {
        "shape": list(a.shape),
        "chunks": list(ZARR_CHUNKS),
        "bytes": nbytes,
        "nncodecs": {
            "write_s": write_s,
            "read_s": read_s,
            "ratio": stored / nbytes,
            "exact": exact,
        },
        "zipnn": {"write_s": zc_s, "read_s": zd_s, "ratio": len(packed) / nbytes, "exact": exact_z},
    }


def small_tensors(work: Path, count: int = 5000) -> dict[str, Any]:
    """``count`` float32 tensors of 1 KiB: Writer write + close, Reader open (warm)."""
    import shutil

    import numpy as np

    import nncodecs

    tensors = [
        np.random.default_rng(i).standard_normal(256).astype(np.float32) for i in range(count)
    ]
    warm = work / "warm.zarr"  # imports and first-use setup, outside the timed region
    with nncodecs.Writer(warm, overwrite=True) as w:
        w.add_tensor("t", tensors[0])
    nncodecs.Reader(warm).close()
    out: dict[str, Any] = {"count": count}
    kinds = [("zarr", work / "small.zarr"), ("zarr.zip", work / "small.zarr.zip")]
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        # The same directory write on tmpfs: what the file system adds (a journal-less ext4
        # scans recently deleted inodes on every inode it allocates) against nncodecs' own.
        kinds.append(("zarr on tmpfs", shm / f"nncodecs-e2e-small-{os.getpid()}.zarr"))
    for kind, path in kinds:
        if path.is_dir():
            shutil.rmtree(path)
        path.unlink(missing_ok=True)
        t = time.perf_counter()
        with nncodecs.Writer(path) as w:
            for i, arr in enumerate(tensors):
                w.add_tensor(f"t{i}", arr)
        write_s = time.perf_counter() - t

        open_s = float("inf")
        for _ in range(2):
            t = time.perf_counter()
            r = nncodecs.Reader(path)
            open_s = min(open_s, time.perf_counter() - t)
            n = len(r)
            r.close()
        out[kind] = {"write_close_s": write_s, "open_s": open_s, "tensors": n}
        if path.is_relative_to(shm):
            shutil.rmtree(path)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    worker(*sys.argv[1:6])
