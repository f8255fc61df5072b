"""The real model (all-MiniLM-L6-v2) through the transforms and through Zarr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from harness import np_dtype, same_bits
from zarr.codecs import ZstdCodec
from zarr.storage import MemoryStore

from nncodecs import BitReorder, NumcodecsBitReorder, NumcodecsPlanes, Planes
from nncodecs.codecs.planes import split_array

DTYPES = ["float32", "bfloat16", "float16", "float8_e4m3fn"]
ROOT = Path(__file__).parent.parent.parent


def entropy_bits(plane: np.ndarray) -> float:
    counts = np.bincount(plane, minlength=256).astype(np.float64)
    p = counts[counts > 0] / plane.size
    return float(-(p * np.log2(p)).sum())


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_tensor_round_trips_through_zarr(real_weights: dict[str, Any], dtype: str) -> None:
    group = zarr.open_group(MemoryStore(), mode="w")
    cast = {name: arr.astype(np_dtype(dtype)) for name, arr in real_weights.items()}
    for name, arr in cast.items():
        z = group.create_array(
            name,
            shape=arr.shape,
            dtype=arr.dtype,
            filters=[BitReorder()],
            serializer=Planes(),
            compressors=[ZstdCodec()],
        )
        z[...] = arr
    assert len(cast) == 104
    for name, arr in cast.items():
        assert same_bits(group[name][...], arr), name
        if arr.ndim == 2 and arr.shape[0] > 10:
            assert same_bits(group[name][3:9, 1:-1], arr[3:9, 1:-1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_numcodecs_chain_on_every_tensor(real_weights: dict[str, Any], dtype: str) -> None:
    for arr in real_weights.values():
        a = arr.astype(np_dtype(dtype))
        reorder, planes = NumcodecsBitReorder(dtype=dtype), NumcodecsPlanes(a.dtype.itemsize)
        enc = planes.encode(reorder.encode(a))
        dec = reorder.decode(planes.decode(enc)).reshape(a.shape)
        assert same_bits(dec, a)


def test_exponent_plane_carries_the_structure(real_weights: dict[str, Any]) -> None:
    # The mission's premise, on real weights: after the reorder the bfloat16
    # exponent byte has about 2.6 bits of entropy, the mantissa byte is near random.
    flat = np.concatenate([a.reshape(-1) for a in real_weights.values()])
    planes = split_array(flat.astype(np_dtype("bfloat16")), reorder=True).reshape(2, -1)
    exponent, mantissa = entropy_bits(planes[1]), entropy_bits(planes[0])
    assert 2.3 < exponent < 3.0, exponent
    assert mantissa > 7.5, mantissa
    # Without the reorder the high byte holds the sign and 7 of the 8 exponent
    # bits: measured 2.73 bits against 2.66 for the whole exponent.
    raw = split_array(flat.astype(np_dtype("bfloat16"))).reshape(2, -1)
    assert entropy_bits(raw[1]) > exponent + 0.04


def test_demo_prints_its_table_and_leaves_nothing_behind(tmp_path: Path) -> None:
    # As `make demo` runs it: no --out, so the stores go to a temporary
    # directory (here under tmp_path, through TMPDIR) that is gone at the end.
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--level", "1"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    assert f"stores: {tmp_path}/nncodecs-demo-" in result.stdout
    assert list(tmp_path.iterdir()) == []
    rows = [line for line in result.stdout.splitlines() if line.split()[:1] and
            line.split()[0] in DTYPES]  # fmt: skip
    assert [row.split()[0] for row in rows] == DTYPES
    assert all(row.rstrip().endswith("yes") for row in rows)
    for row in rows:  # (dtype, tensors, original, stored, ratio "1.22x", kept "82.1%", ...)
        cells = row.split()
        ratio, kept = float(cells[6].removesuffix("x")), float(cells[7].removesuffix("%"))
        assert ratio > 1.1 and abs(100 / ratio - kept) < 1
    # the model file as the command stores it, in the words the command and info use
    said = [line for line in result.stdout.splitlines() if "as `nncodecs compress`" in line]
    assert len(said) == 1 and said[0].endswith("x smaller, 81.9% of 86.7 MiB")
