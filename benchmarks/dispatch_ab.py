"""nncodecs at several dispatch levels (and builds) against ZipNN: best of many interleaved rounds.

On a shared machine one ``compare.py`` run is a lottery: whichever system ran
while the machine was busy loses. This runs ``compare.py``'s own worker (the
same timing, the same checks) for every system in turn, round after round,
and keeps each system's best, with the load average of every round.

A system is ``zipnn``, or ``NAME@LEVEL``: NAME ``nncodecs`` (the installed
package) or a directory holding another build (``pip install --target DIR
--no-deps --no-build-isolation .`` of another commit), run with
``NNCODECS_DISPATCH=LEVEL``.

Usage: ``python benchmarks/dispatch_ab.py [--rounds 10] [--threads 2]
nncodecs@avx2 nncodecs@avx512 zipnn``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import compare


def run(label: str, dtype: str, data: Path, threads: int) -> dict[str, Any]:
    env = {**os.environ, **compare.thread_env(threads)}
    env.pop("NNCODECS_DISPATCH", None)
    system, _, level = label.partition("@")
    if level:
        env["NNCODECS_DISPATCH"] = level
    if system not in ("nncodecs", "zipnn"):  # another build of nncodecs
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [system, env.get("PYTHONPATH")]))
        system = "nncodecs"
    spec = {"task": "tensors", "system": system, "threads": threads, "repeat": 3,
            "data": str(data / f"minilm-{dtype}"), "workdir": str(data)}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, compare.__file__, "--worker", json.dumps(spec)],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
            if not result["exact"]:
                raise SystemExit(f"{label} {dtype}: the round trip is not exact")
            return result
    raise SystemExit(f"{label} {dtype}: {proc.stderr.strip()[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("systems", nargs="+", help="zipnn, nncodecs@LEVEL or BUILD_DIR@LEVEL")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtypes", nargs="+", default=compare.DTYPES)
    args = parser.parse_args()
    from nncodecs.datasets import minilm_weights
    from nncodecs.sizes import times_smaller

    best: dict[tuple[str, str], list[float]] = {}
    loads = []
    with tempfile.TemporaryDirectory(prefix="nnc-dispatch-ab-") as tmp:
        data = Path(tmp)
        for dtype in args.dtypes:
            tensors = {k: v for k, v in minilm_weights(dtype).items() if v.dtype.kind != "i"}
            compare.save_dataset(data / f"minilm-{dtype}", tensors, dtype)
        for _ in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for dtype in args.dtypes:
                for label in args.systems:
                    r = run(label, dtype, data, args.threads)
                    b = best.setdefault((dtype, label), [0.0, 0.0, r["stored"] / r["original"]])
                    b[0] = max(b[0], r["compress_MBps"])
                    b[1] = max(b[1], r["decompress_MBps"])
        loads.append(os.getloadavg()[0])
    print(
        f"{args.threads} threads, best of {args.rounds} rounds of 3 passes; 1-minute load "
        f"average at each round and at the end: {' '.join(f'{x:.1f}' for x in loads)}"
    )
    print("ratio = original / stored (x smaller, larger is better); comp x, decomp x: MB/s "
          "over ZipNN's")  # fmt: skip
    print(f"{'dtype':<15}{'system':<24}{'ratio':>8}{'comp MB/s':>11}{'decomp MB/s':>13}"
          f"{'comp x':>8}{'decomp x':>10}")  # fmt: skip
    for dtype in args.dtypes:
        z = best.get((dtype, "zipnn"))
        for label in args.systems:
            c, d, ratio = best[(dtype, label)]
            xs = f"{c / z[0]:>8.2f}{d / z[1]:>10.2f}" if z else ""
            shown = times_smaller(1, ratio, 3)
            print(f"{dtype:<15}{label:<24}{shown:>8}{c:>11.0f}{d:>13.0f}{xs}")


if __name__ == "__main__":
    main()
