"""Sizes for people, and the one way nncodecs states how much it saved.

Everywhere nncodecs reports a ratio (the command line, ``info``, ``make demo``, the
notebooks, the benchmark tables) it is *original over stored*, "times smaller", and a
sentence also gives the share kept and the original's size:

>>> ratio_text(90_866_000, 74_411_000)
'1.22x smaller, 81.9% of 86.7 MiB'
>>> ratio_text(139, 3_686)
'26.52x larger, 2651.8% of 139 B'
>>> times_smaller(90_866_000, 74_411_000), times_smaller(90_866_000, 74_411_000, 3)
('1.22x', '1.221x')
>>> human(1536)
'1.5 KiB'

The sizes are bytes of files: every file of the input (an ONNX model's external data
included) against every file of the container (its chunks and its metadata).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["count", "human", "path_bytes", "ratio_text", "times_smaller"]


def count(n: int, word: str) -> str:
    """``count(1, "tensor")`` -> ``'1 tensor'``, ``count(3, "kept file")`` -> ``'3 kept
    files'``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def path_bytes(path: Path) -> int:
    """A file's bytes, or every file's under a folder (a directory container, a snapshot)."""
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def human(n: float) -> str:
    """Bytes for people, in powers of 1024: 1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # (not reached: the loop ends on TiB)


def times_smaller(original: float, stored: float, digits: int = 2) -> str:
    """``original / stored`` as a factor, ``'1.22x'`` (below 1 where it grew); a table's
    column of ratios (a benchmark's, with 3 digits: ``times_smaller(1, stored_share, 3)``).
    ``'-'`` where either size is zero (nothing to compare)."""
    if original <= 0 or stored <= 0:
        return "-"
    return f"{original / stored:.{digits}f}x"


def ratio_text(original: int, stored: int) -> str:
    """The sentence: ``'1.22x smaller, 81.9% of 86.7 MiB'`` (``larger`` where the stored
    bytes outweigh the original's, as a tiny file's container does)."""
    if original <= 0:
        return f"{human(stored)} stored for an empty input"
    if stored <= 0:
        return f"nothing stored of {human(original)}"
    share = f"{100 * stored / original:.1f}% of {human(original)}"
    if stored > original:
        return f"{stored / original:.2f}x larger, {share}"
    return f"{original / stored:.2f}x smaller, {share}"
