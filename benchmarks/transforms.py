"""Throughput of the transform kernels against NumPy and memcpy, in one run.

Prints, for a buffer of --mib MiB (default 256) of each dtype: the fused
reorder+split and its inverse (merge+unreorder), the reorder and split
alone, a NumPy implementation of the same transform, and ``memcpy`` of the
same buffer (``numpy.copyto``, one thread). GB/s is buffer bytes per second,
best of --repeat runs after one warm-up run (first-touch page faults excluded).

Usage: ``python benchmarks/transforms.py [--mib 256] [--repeat 5] [--dtypes ...]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import ml_dtypes
import numpy as np

from nncodecs import _core

WIDTH_MANT = {"float32": (4, 23), "bfloat16": (2, 7), "float16": (2, 10),
              "float8_e4m3fn": (1, 3), "float64": (8, 52)}  # fmt: skip


def best_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up: page faults, pool start-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def numpy_fused_split(bits: np.ndarray, m: int) -> np.ndarray:
    """The reorder and the plane split written in NumPy, as a user would."""
    width = bits.dtype.itemsize * 8
    t = bits.dtype.type
    mant = t((1 << m) - 1)
    exp_hi = t(((1 << width) - 1) & ~((1 << (m + 1)) - 1))
    r = (bits & mant) | ((bits << t(1)) & exp_hi) | ((bits >> t(width - 1)) << t(m))
    return r.view(np.uint8).reshape(-1, bits.dtype.itemsize).T.copy()


def numpy_fused_merge(planes: np.ndarray, m: int, dtype: np.dtype) -> np.ndarray:
    width = dtype.itemsize * 8
    bits = planes.reshape(dtype.itemsize, -1).T.copy().reshape(-1).view(dtype)
    t = dtype.type
    mant = t((1 << m) - 1)
    exp_lo = t(((1 << (width - 1)) - 1) & ~((1 << m) - 1))
    return (bits & mant) | ((bits >> t(1)) & exp_lo) | (((bits >> t(m)) & t(1)) << t(width - 1))


def bench_dtype(name: str, nbytes: int, repeat: int) -> list[tuple[str, int, float]]:
    """(operation, threads, GB/s) rows for one dtype; memcpy first."""
    width, m = WIDTH_MANT[name]
    rng = np.random.default_rng(0)
    values = (rng.standard_normal(nbytes // width // 16) * 0.02).astype(np.float32)
    src = np.resize(values.astype(getattr(ml_dtypes, name, name)), nbytes // width)
    src_bytes = src.view(np.uint8)
    bits = src.view(f"<u{width}")
    dst = np.empty_like(src_bytes)
    back = np.empty_like(src_bytes)

    def gbs(fn: Callable[[], object], runs: int = repeat) -> float:
        return nbytes / best_seconds(fn, runs) / 1e9

    rows = [("memcpy (numpy.copyto)", 1, gbs(lambda: np.copyto(back, src_bytes)))]
    for t in (1, 2):
        ops = {
            "fused reorder+split": lambda t=t: _core.planes_split(
                dst, src_bytes, width, name, "auto", t
            ),
            "fused merge+unreorder": lambda t=t: _core.planes_merge(
                back, dst, width, name, "auto", t
            ),
            "reorder alone": lambda t=t: _core.reorder_encode(back, src_bytes, name, "auto", t),
            "split alone": lambda t=t: _core.planes_split(
                back, src_bytes, width, "none", "auto", t
            ),
        }
        rows += [(label, t, gbs(fn)) for label, fn in ops.items()]
    scalar = lambda: _core.planes_split(dst, src_bytes, width, name, "scalar", 1)  # noqa: E731
    rows.append(("fused reorder+split, scalar", 1, gbs(scalar)))
    few = max(1, repeat // 2)
    rows.append(("numpy reorder+split", 1, gbs(lambda: numpy_fused_split(bits, m), few)))
    numpy_merge = lambda: numpy_fused_merge(dst, m, bits.dtype)  # noqa: E731
    rows.append(("numpy merge+unreorder", 1, gbs(numpy_merge, few)))
    # Every timed path computed the same bytes.
    _core.planes_split(dst, src_bytes, width, name)
    assert (numpy_fused_split(bits, m).reshape(-1) == dst).all()
    assert (numpy_merge().view(np.uint8) == src_bytes).all()
    _core.planes_merge(back, dst, width, name)
    assert (back == src_bytes).all()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32", "float8_e4m3fn"])
    args = parser.parse_args()
    print(
        f"buffer: {args.mib} MiB; kernels: {_core.variants()} (auto = {_core.best_variant()}); "
        f"dispatch level {_core.dispatch_level()} of this CPU's {_core.cpu_dispatch_level()} "
        f"(NNCODECS_DISPATCH caps it); hardware threads: {_core.hardware_threads()}\n"
    )
    header = f"{'dtype':<14}{'operation':<30}{'threads':>8}{'GB/s':>9}{'x memcpy':>10}"
    print(header)
    print("-" * len(header))
    verdicts = []
    for name in args.dtypes:
        rows = bench_dtype(name, args.mib << 20, args.repeat)
        memcpy = rows[0][2]
        for label, threads, gbs in rows:
            print(f"{name:<14}{label:<30}{threads:>8}{gbs:>9.2f}{gbs / memcpy:>10.2f}")
            if label.startswith("fused") and "scalar" not in label:
                verdicts.append((gbs / memcpy, name, label, threads))
        print()
    ratio, name, label, threads = min(verdicts)
    verdict = "MET" if ratio >= 0.5 else "NOT MET"
    print(
        f"target: fused kernels >= 0.5 x memcpy. Worst: {name} {label} with {threads} "
        f"thread(s) at {ratio:.2f} x memcpy -> {verdict}"
    )


if __name__ == "__main__":
    main()
