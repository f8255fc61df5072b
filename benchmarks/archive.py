"""Archiving throughput with dask: 1 and 2 workers (threads, processes, a
dask.distributed cluster) against ``nncodecs compress`` in one process.

The same set of models every time: all-MiniLM-L6-v2 in float32, bfloat16,
float16 and float8_e4m3fn, ``--copies`` times each (as many checkpoints of
one model would be), written as safetensors files first. Each run writes
them all into fresh containers in a local directory; MB/s are of input bytes
over the whole run's wall time (best of ``--repeat``), every container
checked afterwards. The one-process baseline is ``nncodecs compress`` (the
Writer, streaming one tensor at a time) run model after model.

``codec threads`` is what each worker's encoder may use: in the dask runs
every worker gets an equal share of the cores, so that 1 and 2 workers are
compared on the same machine budget; the baseline uses every core.

Usage: ``python benchmarks/archive.py [--copies 2] [--repeat 2]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import nncodecs
from nncodecs.datasets import minilm_weights
from nncodecs.formats.safetensors import write_safetensors

DTYPES = ["float32", "bfloat16", "float16", "float8_e4m3fn"]


def models(directory: Path, copies: int) -> tuple[list[Path], int]:
    files, total = [], 0
    for dtype in DTYPES:
        weights = minilm_weights(dtype)
        for c in range(copies):
            path = directory / f"minilm-{dtype}-{c}.safetensors"
            write_safetensors(path, weights.items())
            files.append(path)
            total += sum(v.nbytes for v in weights.values())
    return files, total


def check(targets: list[str], files: list[Path]) -> None:
    from nncodecs.formats.safetensors import read_safetensors

    for target, file in zip(targets, files, strict=True):
        original = read_safetensors(file)
        with nncodecs.Reader(target) as r:
            assert r.keys() == list(original), target
            for k, v in original.items():
                assert r.read_tensor(k).tobytes() == v.tobytes(), (target, k)


def run(label: str, fn, out: Path, files: list[Path], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        t = time.perf_counter()
        targets = fn(out)
        best = min(best, time.perf_counter() - t)
    check(targets, files)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    import dask
    from distributed import Client, LocalCluster

    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="nncodecs-archive-"))
    files, total = models(work, args.copies)
    out = work / "out"
    names = {f.name.removesuffix(".safetensors"): f for f in files}
    rows = []

    def baseline(directory: Path) -> list[str]:
        from nncodecs.formats import compress

        targets = []
        for name, f in names.items():
            compress(f, directory / f"{name}.zarr")
            targets.append(str(directory / f"{name}.zarr"))
        return targets

    def with_dask(scheduler):
        def fn(directory: Path) -> list[str]:
            result = nncodecs.archive(names, directory, scheduler=scheduler, progress=False)
            return [result.targets[n] for n in names]

        return fn

    def add(how: str, workers: int, share: int, fn) -> None:
        rows.append((how, workers, share, run(how, fn, out, files, args.repeat)))

    nncodecs.set_threads(None)
    add("nncodecs compress, one process", 1, cores, baseline)
    for workers in (1, 2):
        share = max(1, cores // workers)
        nncodecs.set_threads(share)
        with dask.config.set(num_workers=workers):
            add("archive, threads", workers, share, with_dask("threads"))
            add("archive, processes", workers, share, with_dask("processes"))
        with (
            LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                         dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):  # fmt: skip
            client.run(nncodecs.set_threads, share)
            add("archive, distributed", workers, share, with_dask(client))
    nncodecs.set_threads(None)

    print(f"{len(files)} models, {total / 1e6:.0f} MB in all, {cores} cores; "
          f"best of {args.repeat}, every container checked")  # fmt: skip
    head = (f"{'how':34s}{'workers':>8}{'codec threads':>15}{'seconds':>9}{'MB/s':>8}"
            f"{'vs compress':>13}")  # fmt: skip
    print(head)
    print("-" * len(head))
    base = rows[0][3]
    for how, workers, share, seconds in rows:
        print(f"{how:34s}{workers:>8}{share:>15}{seconds:>9.2f}{total / seconds / 1e6:>8.0f}"
              f"{base / seconds:>12.2f}x")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
