"""The CLI's default container, ``.zarr.zip``, opened where users open Zarr: zarr, xarray and
dask through fsspec's ``zip::`` URL (a plain path string makes zarr look for a directory)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nncodecs.formats.safetensors import write_safetensors

pytest.importorskip("fsspec")


def bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.itemsize in (1, 2, 4, 8) else a


@pytest.fixture(params=["float32", "bfloat16"])
def cli_zip(real_weights: dict, tmp_path: Path, request: pytest.FixtureRequest) -> tuple:
    from nncodecs.datasets import minilm_weights

    weights = real_weights if request.param == "float32" else minilm_weights(request.param)
    src = tmp_path / "model.safetensors"
    write_safetensors(src, weights.items())
    r = subprocess.run(
        [sys.executable, "-m", "nncodecs", "compress", str(src)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    path = tmp_path / "model.safetensors.zarr.zip"
    assert path.is_file()
    return path, weights


def test_zarr_open_group(cli_zip: tuple) -> None:
    import zarr

    path, weights = cli_zip
    g = zarr.open_group(f"zip::{path}", mode="r")
    assert set(g.array_keys()) == set(weights)
    for name, want in weights.items():
        got = g[name][...]
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(bits(got), bits(want)), name
    big = "embeddings.word_embeddings.weight"
    assert np.array_equal(bits(g[big][1000:1010, 5:9]), bits(weights[big][1000:1010, 5:9]))


def test_xarray_open_zarr(cli_zip: tuple) -> None:
    xr = pytest.importorskip("xarray")

    path, weights = cli_zip
    ds = xr.open_zarr(f"zip::{path}", consolidated=True)
    assert set(ds.data_vars) == set(weights)
    name = "encoder.layer.3.attention.self.query.weight"
    assert np.array_equal(bits(ds[name].values), bits(weights[name]))
    assert np.array_equal(bits(ds[name][7].values), bits(weights[name][7]))  # lazy selection


def test_dask_from_zarr(cli_zip: tuple) -> None:
    da = pytest.importorskip("dask.array")

    path, weights = cli_zip
    name = "embeddings.word_embeddings.weight"
    lazy = da.from_zarr(f"zip::{path}", component=name)
    assert lazy.shape == weights[name].shape and len(lazy.chunks[0]) > 1
    got = lazy[20000:20100].compute(scheduler="threads")
    assert np.array_equal(bits(got), bits(weights[name][20000:20100]))
    total = lazy.astype("float64").sum().compute(scheduler="threads")
    assert np.isclose(total, weights[name].astype(np.float64).sum())


def test_a_plain_path_is_a_directory_to_zarr(cli_zip: tuple) -> None:
    """Why the docs say ``zip::``: zarr opens a plain path string as a directory store."""
    import zarr
    from zarr.errors import GroupNotFoundError

    path, _ = cli_zip
    with pytest.raises(GroupNotFoundError):
        zarr.open_group(str(path), mode="r")


def test_interleaved_seeks_in_stored_entries_read_the_right_bytes(tmp_path: Path) -> None:
    """CPython gh-127847 (3.12.0-3.12.8, 3.13.0-3.13.1): a forward seek in a stored entry
    moved the shared file from where another entry left it. nncodecs, once imported, patches
    it there; the same checks hold on every version, patched (``force``) or not."""
    import io
    import threading
    import zipfile

    from nncodecs import _zipfile_fix

    assert _zipfile_fix.apply(force=True) and _zipfile_fix.apply(force=True)  # idempotent
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("a.txt", b"123")
        z.writestr("b.txt", b"456")
    with zipfile.ZipFile(buf) as z, z.open("a.txt") as a, z.open("b.txt") as b:
        assert a.read(1) == b"1"
        b.seek(1)
        assert b.read(1) == b"5"  # b"K" (from b.txt's local header) without the fix
        a.seek(1, 1)
        assert a.read() == b"3"

    rng = np.random.default_rng(0)
    blobs = {f"e{i}": rng.integers(0, 256, 1 << 16, dtype=np.uint8).tobytes() for i in range(8)}
    path = tmp_path / "stored.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name, blob in blobs.items():
            z.writestr(name, blob)
    wrong: list[str] = []

    def reader(name: str, seed: int) -> None:
        r = np.random.default_rng(seed)
        blob = blobs[name]
        for _ in range(200):
            with shared.open(name) as f:
                at = int(r.integers(1, len(blob) - 100))
                f.seek(at)
                if f.read(64) != blob[at : at + 64]:
                    wrong.append(name)

    with zipfile.ZipFile(path) as shared:
        threads = [threading.Thread(target=reader, args=(n, i)) for i, n in enumerate(blobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not wrong
