"""How much ratio is left beyond order-0 byte planes: entropies under richer models.

For all-MiniLM-L6-v2 as float32 / bfloat16 / float16 / float8_e4m3fn and a
generated bfloat16 model (``benchmarks/compare.py``'s generator), it prints,
as a fraction of the original size, the empirical entropy of the
exponent-first byte planes (the reorder nncodecs applies) under each model:

* ``planes/tensor``: order-0 per plane and tensor (the bound the coders
  chase; no table counted);
* ``planes/256K``, ``planes/64K``: one table per 256 KiB chunk (today's
  scope) or per 64 KiB sub-block (a smaller table scope);
* ``exp|lane prev``: the exponent plane given the same lane's previous symbol
  (symbol i - 32: what a 32-lane interleaved decoder has at hand), one table
  per context and tensor;
* ``exp-row med``: the exponent plane minus its row's median exponent (a
  reversible per-row shift, for 2-D tensors), plus one byte per row;
* ``joint 16-bit``: one symbol per 2-byte element (bfloat16, float16), one
  table of present 16-bit symbols (2 + 2 bytes each) per tensor;
* ``mant|exp``: the byte planes with the mantissa-top byte coded given its
  element's exponent byte, one table per exponent value and tensor.

Every column but the first counts its tables as nncodecs stores them (a
32-byte presence map plus 11 bits per present symbol), so the columns are
what a static-table coder of that model could reach, before lane states and
sub-block headers (the same for every model). ``docs/entropy.md`` holds a
run's table and what follows from it.

Usage: ``python benchmarks/entropy_study.py [--model-mib 64]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from nncodecs.codecs.planes import split_array
from nncodecs.datasets import minilm_weights
from nncodecs.dtypes import normalize_dtype

sys.path.insert(0, str(Path(__file__).parent))
from compare import synthetic_model

COLUMNS = ["planes/tensor", "planes/256K", "planes/64K", "exp|lane prev", "exp-row med",
           "joint 16-bit", "mant|exp"]  # fmt: skip
TABLE_BITS = 11  # bits per present symbol in a stored table, plus a 32-byte map


def h0(counts: np.ndarray) -> float:
    """Bits to code the counted symbols with their own order-0 model."""
    counts = counts[counts > 0].astype(np.float64)
    n = counts.sum()
    return float(-(counts * np.log2(counts / n)).sum())


def table(counts: np.ndarray) -> float:
    """Bits of a stored table for these counts (none for a constant)."""
    present = int((counts > 0).sum())
    return 0.0 if present < 2 else 256 + present * TABLE_BITS


def h_bytes(x: np.ndarray, tables: bool = False) -> float:
    counts = np.bincount(x, minlength=256)
    return h0(counts) + (table(counts) if tables else 0.0)


def h_scoped(x: np.ndarray, scope: int) -> float:
    return sum(h_bytes(x[i : i + scope], tables=True) for i in range(0, x.size, scope))


def h_conditional(context: np.ndarray, symbol: np.ndarray, contexts: int = 256) -> float:
    """Bits of ``symbol`` given ``context`` (both uint8), one table per context."""
    joint = np.bincount(context.astype(np.int64) * 256 + symbol, minlength=contexts * 256)
    joint = joint.reshape(contexts, 256)
    return sum(h0(row) + table(row) for row in joint if row.any())


def study(tensors: list[np.ndarray]) -> dict[str, float]:
    bits = dict.fromkeys(COLUMNS, 0.0)
    total = 0
    for arr in tensors:
        total += arr.nbytes
        k = arr.dtype.itemsize
        planes = split_array(arr, reorder=True).reshape(k, -1)
        exp = planes[k - 1] if k > 1 else planes[0]  # exponent-first: the top byte
        others = [planes[j] for j in range(k - 1)] if k > 1 else []
        rest = sum(h_bytes(p, tables=True) for p in others)
        bits["planes/tensor"] += h_bytes(exp) + sum(h_bytes(p) for p in others)
        bits["planes/256K"] += sum(h_scoped(p, 1 << 18) for p in planes)
        bits["planes/64K"] += sum(h_scoped(p, 1 << 16) for p in planes)
        plain = h_bytes(exp, tables=True)
        lane = plain
        if exp.size > 32:
            lane = h_bytes(exp[:32]) + h_conditional(exp[:-32], exp[32:])
        bits["exp|lane prev"] += min(lane, plain) + rest
        if arr.ndim == 2 and arr.shape[1] >= 64:
            rows = exp.reshape(arr.shape[0], -1).astype(np.int16)
            median = np.median(rows, axis=1).astype(np.int16)[:, None]
            shifted = ((rows - median) % 256).astype(np.uint8).reshape(-1)
            bits["exp-row med"] += min(h_bytes(shifted, True) + 8 * rows.shape[0], plain) + rest
        else:
            bits["exp-row med"] += plain + rest
        if k > 1:
            top = planes[k - 2]  # sign + top mantissa bits
            lower = sum(h_bytes(p, tables=True) for p in planes[: k - 2])
            joint = plain + h_conditional(exp, top) + lower
        else:
            joint = plain
        bits["mant|exp"] += min(joint, plain + rest)
        if k == 2:
            word = np.ascontiguousarray(arr).reshape(-1).view(np.uint16)
            counts = np.bincount(word, minlength=1 << 16)
            bits["joint 16-bit"] += h0(counts) + 32 * int((counts > 0).sum())
        else:
            bits["joint 16-bit"] = float("nan")
    return {c: v / 8 / total for c, v in bits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-mib", type=int, default=64)
    args = parser.parse_args()
    sets = []
    for dtype in ("float32", "bfloat16", "float16", "float8_e4m3fn"):
        ws = [v for v in minilm_weights(dtype).values() if v.dtype.kind != "i"]
        sets.append((f"MiniLM {dtype}", ws))
    bf16 = normalize_dtype("bfloat16")
    model = synthetic_model(args.model_mib)
    sets.append((f"generated {args.model_mib} MiB bf16", [v.view(bf16) for v in model.values()]))
    print("| data | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---|" * len(COLUMNS))
    for label, tensors in sets:
        r = study(tensors)
        base = r["planes/tensor"]
        # (a size as a share of the original, the second half of the project's ratio
        # sentence, "81.9% of 86.7 MiB": shares add up where factors would not)
        cells = [f"{100 * r[c]:.2f}% ({(r[c] / base - 1) * 100:+.2f}%)" if r[c] == r[c]
                 else "n/a" for c in COLUMNS]  # fmt: skip
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
