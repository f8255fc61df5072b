"""Slices of a delta tensor check every chunk they decode (issue 36; delta_slices.py).

A reference whose chunks were swapped by a rename decodes frame by frame intact, so
slices of a tensor stored against it once came back wrong while whole reads refused
it. Each chunk's CRC32C is now recorded and checked by any read that decodes it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from nncodecs import CorruptDataError, Reader, ReferenceProblemError, Writer
from nncodecs.formats import compress

ROWS = 64


def _series(tmp_path: Path) -> tuple[np.ndarray, Path, Path]:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 64)).astype("f4")
    step = w + rng.standard_normal(w.shape).astype("f4") * np.float32(1e-3)
    save_file({"w": w}, str(tmp_path / "base.safetensors"))
    save_file({"w": step}, str(tmp_path / "step1.safetensors"))
    chunk = ROWS * 64 * 4  # (four chunks of 64 rows)
    # (a base that records its tensors' hashes: a reference trusted by its hash is not
    # read whole before a slice, which is how a swapped chunk once went unseen)
    with Writer(tmp_path / "base.zarr", hashes=True, chunk_bytes=chunk) as wr:
        wr.add_tensor("w", w)
    compress(
        tmp_path / "step1.safetensors",
        tmp_path / "step1.zarr",
        chunk_bytes=chunk,
        reference=tmp_path / "base.zarr",
    )
    return step, tmp_path / "base.zarr", tmp_path / "step1.zarr"


def test_slices_of_every_kind_read_right_and_are_checked(tmp_path: Path) -> None:
    step, _, step1 = _series(tmp_path)
    with Reader(step1) as r:
        assert r.references()
        doc = json.loads((step1 / "w" / "zarr.json").read_text())
        assert len(doc["attributes"]["nncodecs"]["chunk_crc32c"]) == 4
        a = r["w"]
        for index in (
            slice(0, 10),
            slice(60, 70),
            slice(None, None, -3),
            5,
            -1,
            (slice(3, 200, 7), 2),
            [3, 130, 255],
            np.arange(256) % 2 == 0,
            (Ellipsis, 1),
            ...,
            (slice(10, 0, -1),),
        ):
            assert np.array_equal(a[index], step[index]), index


def test_a_swapped_reference_chunk_is_refused_by_a_slice(tmp_path: Path) -> None:
    step, base, step1 = _series(tmp_path)
    chunks = base / "w" / "c"
    first, second = chunks / "0" / "0", chunks / "1" / "0"
    assert first.is_file() and second.is_file()
    tmp = chunks / "swap"
    os.rename(first, tmp)
    os.rename(second, first)
    os.rename(tmp, second)
    with Reader(step1) as r:
        with pytest.raises((CorruptDataError, ReferenceProblemError), match="chunk 0"):
            r["w"][0:10]
        with pytest.raises((CorruptDataError, ReferenceProblemError)):
            r.read_tensor("w")
        # an index whose rows cannot be told (a mask of the whole array) checks every chunk
        mask = np.zeros(step.shape, bool)
        mask[20:30] = True
        with pytest.raises((CorruptDataError, ReferenceProblemError), match="chunk 0"):
            r["w"][mask]
        with pytest.raises((CorruptDataError, ReferenceProblemError), match="chunk 0"):
            r["w"][None, 0:3]
        # chunks the swap did not touch still read, and right
        assert np.array_equal(r["w"][130:140], step[130:140])


def test_reads_of_no_rows_and_new_axes_decode_only_what_they_need(tmp_path: Path) -> None:
    """Empty selections and indices past the end answer as NumPy does without decoding
    a chunk; a new axis first checks only the chunks of the rows after it."""
    step, base, step1 = _series(tmp_path)
    chunks = base / "w" / "c"
    first, second = chunks / "0" / "0", chunks / "1" / "0"
    os.rename(first, chunks / "swap")
    os.rename(second, first)
    os.rename(chunks / "swap", second)
    with Reader(step1) as r:
        a = r["w"]
        assert a[5:5].shape == (0, 64) and a[[]].shape == (0, 64)
        assert a[np.zeros(256, bool)].shape == (0, 64)
        with pytest.raises(IndexError):
            a[256]
        with pytest.raises(IndexError):
            a[-257]
        assert np.array_equal(a[None, 130:140], step[None, 130:140])
        with pytest.raises((CorruptDataError, ReferenceProblemError), match="chunk 0"):
            a[None, 0:3]
